#!/bin/sh
# A Rillet node in a container. Configuration, in this order:
#  - a properties file mounted at $RILLET_CONFIG (default /etc/rillet/server.properties);
#  - else environment variables as Kafka's images take them: RILLET_NODE_ID=1 is node.id=1,
#    RILLET_CONTROLLER_QUORUM_VOTERS is controller.quorum.voters ("_" is ".", "__" is "_");
#  - else the embedded default: a one-node broker, Kafka's protocol on :9092 and gRPC on
#    :9094 (advertised as ADVERTISED_HOST, default localhost).
# A configured node is formatted for $CLUSTER_ID on first start (rillet storage format
# --ignore-formatted), then started; SIGTERM reaches the server (a controlled shutdown).
set -e
config=${RILLET_CONFIG:-/etc/rillet/server.properties}
if [ ! -f "$config" ] && env | grep -q '^RILLET_NODE_ID='; then
    config=/tmp/server.properties
    env | grep '^RILLET_' | grep -v '^RILLET_CONFIG=' | while IFS= read -r line; do
        key=$(printf '%s' "${line%%=*}" | sed -e 's/^RILLET_//' -e 's/__/\x01/g' -e 's/_/./g' \
            -e 's/\x01/_/g' | tr 'A-Z' 'a-z')
        printf '%s=%s\n' "$key" "${line#*=}"
    done > "$config"
fi
if [ ! -f "$config" ]; then
    host=${ADVERTISED_HOST:-localhost}
    exec rillet server start --data-dir /var/lib/rillet \
        --override listeners=PLAINTEXT://0.0.0.0:9092,GRPC://0.0.0.0:9094,CONTROLLER://0.0.0.0:9093 \
        --override "advertised.listeners=PLAINTEXT://$host:9092,GRPC://$host:9094" \
        --override grpc.listener.names=GRPC --override inter.broker.listener.name=GRPC
fi
: "${CLUSTER_ID:?set CLUSTER_ID (rillet storage random-uuid) to format the node}"
rillet storage format --ignore-formatted -c "$config" -t "$CLUSTER_ID"
exec rillet server start "$config"
