"""Kafka's broker keys (KafkaConfig) with Kafka's types, defaults and validators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rillet.config.authorizer_keys import AUTHORIZER_CONFIGS, QUOTA_CONFIGS
from rillet.config.keys import (
    HOUR_MS,
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    Validator,
    at_least,
    between,
    one_of,
)
from rillet.config.listeners import (
    DEFAULT_LISTENERS,
    DEFAULT_SECURITY_PROTOCOL_MAP,
    PROCESS_ROLES,
    SECURITY_PROTOCOLS,
    parse_listener,
    parse_quorum_voters,
    parse_security_protocol_map,
)
from rillet.config.sasl_keys import SASL_CONFIGS
from rillet.config.ssl_keys import SSL_CONFIGS
from rillet.config.topic import valid_cleanup_policy
from rillet.errors import InvalidConfigurationError

__all__ = ["BROKER_CONFIGS", "INERT_KEYS"]


def _checked(parse: Callable[[Sequence[str]], object]) -> Validator:
    def check(key: str, value: Any) -> None:
        try:
            parse(value)
        except ValueError as e:
            raise InvalidConfigurationError(
                f"Invalid value {','.join(value)} for configuration {key}: {e}"
            ) from None

    return check


def _listeners_validator(key: str, value: Any) -> None:
    _checked(lambda entries: [parse_listener(e) for e in entries])(key, value)


def _k(
    name: str, type_: str, default: Any, doc: str, validator: Validator | None = None
) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator)


# Kafka's broker keys (KafkaConfig), with Kafka's types, defaults and validators. A default of
# None is Kafka's null: unset, with a fallback described in the doc.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        # -- KRaft ---------------------------------------------------------------------------
        _k("process.roles", "list", [], "broker, controller, or both", one_of(*PROCESS_ROLES)),
        _k("node.id", "int", -1, "This node's id in the quorum and cluster", at_least(0)),
        _k("broker.id", "int", -1, "Alias of node.id", at_least(0)),
        _k(
            "controller.quorum.voters",
            "list",
            [],
            "The voters, id@host:port,...",
            _checked(parse_quorum_voters),
        ),
        _k("controller.listener.names", "list", ["CONTROLLER"], "Listeners of the controller"),
        _k("controller.quorum.election.timeout.ms", "int", 1000, "Raft election timeout"),
        _k("controller.quorum.fetch.timeout.ms", "int", 2000, "Raft leader fetch timeout"),
        _k("controller.quorum.election.backoff.max.ms", "int", 1000, "Raft election backoff"),
        _k("controller.quorum.request.timeout.ms", "int", 2000, "Raft request timeout"),
        _k("controller.quorum.retry.backoff.ms", "int", 20, "Raft retry backoff"),
        _k("controller.quorum.append.linger.ms", "int", 25, "Raft append linger"),
        _k("metadata.log.dir", "string", None, "Metadata log dir (default: first of log.dirs)"),
        _k("metadata.log.segment.bytes", "int", 1 << 30, "Metadata log segment size", at_least(12)),
        _k(
            "metadata.log.segment.ms",
            "long",
            7 * 24 * HOUR_MS,
            "Metadata log segment roll time",
            at_least(1),
        ),
        _k("metadata.max.retention.bytes", "long", 100 << 20, "Metadata log retention size"),
        _k("metadata.max.retention.ms", "long", 7 * 24 * HOUR_MS, "Metadata log retention time"),
        _k(
            "metadata.log.max.record.bytes.between.snapshots",
            "long",
            20 << 20,
            "Snapshot after this many new metadata bytes",
            at_least(1),
        ),
        _k(
            "metadata.log.max.snapshot.interval.ms",
            "long",
            HOUR_MS,
            "Snapshot at least this often (0: never by time)",
            at_least(0),
        ),
        _k("metadata.max.idle.interval.ms", "int", 500, "No-op record interval", at_least(0)),
        _k(
            "broker.session.timeout.ms",
            "int",
            9000,
            "Fence a broker without heartbeats this long",
            at_least(1),
        ),
        _k("broker.heartbeat.interval.ms", "int", 2000, "Broker heartbeat interval", at_least(1)),
        _k(
            "initial.broker.registration.timeout.ms",
            "int",
            60_000,
            "Give up registering after this long",
        ),
        _k("broker.rack", "string", None, "Rack of this broker"),
        # -- listeners -----------------------------------------------------------------------
        _k(
            "listeners",
            "list",
            DEFAULT_LISTENERS.split(","),
            "NAME://host:port,...",
            _listeners_validator,
        ),
        _k(
            "advertised.listeners",
            "list",
            None,
            "Listeners given to clients (default: listeners without controller listeners)",
            _listeners_validator,
        ),
        _k(
            "listener.security.protocol.map",
            "list",
            DEFAULT_SECURITY_PROTOCOL_MAP.split(","),
            "LISTENER_NAME:PROTOCOL,...",
            _checked(parse_security_protocol_map),
        ),
        _k("inter.broker.listener.name", "string", None, "Listener for replication"),
        _k(
            "grpc.listener.names",
            "list",
            [],
            "Rillet's: the broker listeners that serve the gRPC API; the others serve Kafka's "
            "protocol (empty: every broker listener serves gRPC)",
        ),
        _k(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            "Protocol for replication when inter.broker.listener.name is unset",
            one_of(*SECURITY_PROTOCOLS),
        ),
        _k("num.network.threads", "int", 3, "Network threads", at_least(1)),
        _k("num.io.threads", "int", 8, "Request handler threads", at_least(1)),
        _k("background.threads", "int", 10, "Background task threads", at_least(1)),
        _k("queued.max.requests", "int", 500, "Queued requests before blocking", at_least(1)),
        _k("socket.send.buffer.bytes", "int", 102_400, "SO_SNDBUF (-1: OS default)"),
        _k("socket.receive.buffer.bytes", "int", 102_400, "SO_RCVBUF (-1: OS default)"),
        _k("socket.request.max.bytes", "int", 104_857_600, "Largest request", at_least(1)),
        _k("socket.listen.backlog.size", "int", 50, "Listen backlog", at_least(1)),
        _k("connections.max.idle.ms", "long", 600_000, "Close idle connections after this"),
        _k("request.timeout.ms", "int", 30_000, "Request timeout", at_least(0)),
        # -- log dirs and topics -------------------------------------------------------------
        _k("log.dirs", "list", None, "Log directories (default: log.dir)"),
        _k("log.dir", "string", "/tmp/kafka-logs", "Log directory when log.dirs is unset"),
        _k("num.partitions", "int", 1, "Partitions of a new topic", at_least(1)),
        _k(
            "default.replication.factor", "int", 1, "Replication factor of a new topic", at_least(1)
        ),
        _k("auto.create.topics.enable", "boolean", True, "Create a topic on first use"),
        _k("delete.topic.enable", "boolean", True, "Allow deleting topics"),
        _k(
            "num.recovery.threads.per.data.dir",
            "int",
            1,
            "Threads per log dir for recovery and flush on shutdown",
            at_least(1),
        ),
        _k(
            "log.retention.check.interval.ms",
            "long",
            300_000,
            "How often retention runs",
            at_least(1),
        ),
        _k(
            "log.flush.scheduler.interval.ms",
            "long",
            LONG_MAX,
            "How often the flusher checks logs",
        ),
        _k(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "Recovery-point checkpoint interval",
            at_least(0),
        ),
        _k(
            "log.flush.start.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "Log-start-offset checkpoint interval",
            at_least(0),
        ),
        _k("log.cleaner.enable", "boolean", True, "Run the log cleaner (compaction)"),
        _k("log.cleaner.threads", "int", 1, "Log cleaner threads", at_least(0)),
        _k("log.cleaner.backoff.ms", "long", 15_000, "Cleaner idle backoff", at_least(0)),
        _k(
            "log.cleaner.min.cleanable.ratio",
            "double",
            0.5,
            "Dirty ratio that makes a log cleanable",
            between(0, 1),
        ),
        _k("log.cleaner.dedupe.buffer.size", "long", 128 << 20, "Cleaner dedupe memory"),
        _k(
            "log.cleaner.io.buffer.load.factor",
            "double",
            0.9,
            "How full the cleaner's offset map may get",
            between(0, 1),
        ),
        _k("log.cleaner.io.buffer.size", "int", 512 << 10, "Cleaner I/O buffers", at_least(0)),
        _k("log.cleaner.min.compaction.lag.ms", "long", 0, "Min age to compact", at_least(0)),
        _k(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "Max age before compaction",
            at_least(1),
        ),
        # -- broker synonyms of topic configs (see TOPIC_CONFIGS) ----------------------------
        _k("log.segment.bytes", "int", 1 << 30, "Segment file size", at_least(14)),
        _k("log.roll.ms", "long", None, "Segment roll time (default: log.roll.hours)", at_least(1)),
        _k("log.roll.hours", "int", 168, "Segment roll time in hours", at_least(1)),
        _k("log.roll.jitter.ms", "long", None, "Roll jitter (default: .hours)", at_least(0)),
        _k("log.roll.jitter.hours", "int", 0, "Roll jitter in hours", at_least(0)),
        _k("log.index.size.max.bytes", "int", 10 << 20, "Index size", at_least(4)),
        _k("log.index.interval.bytes", "int", 4096, "Bytes between index entries", at_least(0)),
        _k("message.max.bytes", "int", 1_048_588, "Largest record batch", at_least(0)),
        _k("log.retention.ms", "long", None, "Retention time (default: .minutes)"),
        _k("log.retention.minutes", "int", None, "Retention time (default: .hours)"),
        _k("log.retention.hours", "int", 168, "Retention time in hours"),
        _k("log.retention.bytes", "long", -1, "Retention size per partition"),
        _k(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            "Record timestamp source",
            one_of("CreateTime", "LogAppendTime"),
        ),
        _k(
            "log.cleanup.policy",
            "list",
            ["delete"],
            "delete and/or compact",
            valid_cleanup_policy,
        ),
        _k("log.flush.interval.messages", "long", LONG_MAX, "fsync every N records", at_least(1)),
        _k("log.flush.interval.ms", "long", None, "fsync interval", at_least(0)),
        _k(
            "compression.type",
            "string",
            "producer",
            "Compression the broker stores",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _k("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all", at_least(1)),
        _k("unclean.leader.election.enable", "boolean", False, "Allow out-of-sync leaders"),
        _k(
            "log.cleaner.delete.retention.ms",
            "long",
            86_400_000,
            "Keep tombstones this long",
            at_least(0),
        ),
        _k("log.segment.delete.delay.ms", "long", 60_000, "Delay before deleting", at_least(0)),
        _k("log.preallocate", "boolean", False, "Preallocate segment files"),
        # -- replication ---------------------------------------------------------------------
        _k("replica.lag.time.max.ms", "long", 30_000, "Drop a lagging follower from the ISR"),
        _k("replica.fetch.max.bytes", "int", 1 << 20, "Follower fetch size", at_least(0)),
        _k("replica.fetch.min.bytes", "int", 1, "Follower fetch min bytes"),
        _k("replica.fetch.wait.max.ms", "int", 500, "Follower fetch max wait"),
        _k(
            "replica.fetch.response.max.bytes",
            "int",
            10 << 20,
            "Follower fetch response size",
            at_least(0),
        ),
        _k("replica.fetch.backoff.ms", "int", 1000, "Follower backoff", at_least(0)),
        _k("replica.socket.timeout.ms", "int", 30_000, "Follower request timeout"),
        _k("num.replica.fetchers", "int", 1, "Follower fetcher threads"),
        _k(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            5000,
            "High watermark checkpoint interval",
        ),
        _k("fetch.max.bytes", "int", 55 << 20, "Largest fetch response", at_least(1024)),
        _k(
            "max.incremental.fetch.session.cache.slots",
            "int",
            1000,
            "Incremental fetch sessions (KIP-227) kept; a client refused one fetches sessionless",
            at_least(0),
        ),
        _k("auto.leader.rebalance.enable", "boolean", True, "Move leaders to preferred replicas"),
        _k(
            "leader.imbalance.check.interval.seconds",
            "long",
            300,
            "Leader balance check interval",
            at_least(1),
        ),
        _k(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "Tolerated leader imbalance",
            at_least(0),
        ),
        _k(
            "unclean.leader.election.interval.ms",
            "long",
            300_000,
            "How often the controller retries unclean elections for leaderless partitions",
            at_least(1),
        ),
        _k("controlled.shutdown.enable", "boolean", True, "Move leaders away on shutdown"),
        # -- groups and offsets --------------------------------------------------------------
        _k(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "Wait for more members before the first rebalance",
        ),
        _k("group.min.session.timeout.ms", "int", 6000, "Smallest consumer session timeout"),
        _k("group.max.session.timeout.ms", "int", 1_800_000, "Largest consumer session timeout"),
        _k("group.max.size", "int", INT_MAX, "Members per group", at_least(1)),
        _k(
            "group.consumer.session.timeout.ms",
            "int",
            45_000,
            "A KIP-848 member that has not heartbeated for this long is removed",
            at_least(1),
        ),
        _k(
            "group.consumer.heartbeat.interval.ms",
            "int",
            5000,
            "How often KIP-848 members heartbeat",
            at_least(1),
        ),
        _k("group.consumer.max.size", "int", INT_MAX, "Members per KIP-848 group", at_least(1)),
        _k(
            "group.consumer.assignors",
            "list",
            ["uniform", "range"],
            "Server-side assignors (the first is the default)",
            one_of("uniform", "range"),
        ),
        _k("offset.metadata.max.bytes", "int", 4096, "Largest commit metadata", at_least(0)),
        _k(
            "offsets.topic.num.partitions",
            "int",
            50,
            "Partitions of __consumer_offsets",
            at_least(1),
        ),
        _k(
            "offsets.topic.replication.factor",
            "short",
            3,
            "Replication factor of __consumer_offsets",
            at_least(1),
        ),
        _k(
            "offsets.topic.segment.bytes",
            "int",
            100 << 20,
            "Segment size of __consumer_offsets",
            at_least(1),
        ),
        _k("offsets.retention.minutes", "int", 10_080, "Keep committed offsets", at_least(1)),
        _k(
            "offsets.retention.check.interval.ms",
            "long",
            600_000,
            "Offset expiry check interval",
            at_least(1),
        ),
        _k("offsets.commit.timeout.ms", "int", 5000, "Offset commit timeout", at_least(1)),
        _k("offsets.load.buffer.size", "int", 5 << 20, "Offset load buffer", at_least(1)),
        # -- transactions and producer ids ---------------------------------------------------
        _k(
            "transaction.state.log.num.partitions",
            "int",
            50,
            "Partitions of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.replication.factor",
            "short",
            3,
            "Replication factor of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.min.isr",
            "int",
            2,
            "min.insync.replicas of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.segment.bytes",
            "int",
            100 << 20,
            "Segment size of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.max.timeout.ms", "int", 900_000, "Largest transaction timeout", at_least(1)
        ),
        _k(
            "transactional.id.expiration.ms",
            "int",
            7 * 24 * HOUR_MS,
            "Expire idle transactional ids",
            at_least(1),
        ),
        _k(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            10_000,
            "How often transactions past their timeout are aborted",
            at_least(1),
        ),
        _k(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            HOUR_MS,
            "How often expired transactional ids are removed",
            at_least(1),
        ),
        _k(
            "transaction.partition.verification.enable",
            "boolean",
            True,
            "Partition leaders verify a transaction's partition before its first write (KIP-890)",
        ),
        _k(
            "producer.id.expiration.ms",
            "int",
            86_400_000,
            "Expire idle producer ids",
            at_least(1),
        ),
        _k(
            "producer.id.expiration.check.interval.ms",
            "int",
            600_000,
            "How often expired producer ids are removed",
            at_least(1),
        ),
    ]
}

BROKER_CONFIGS.update(
    {
        k.name: k
        for k in [
            _k(
                "metrics.port",
                "int",
                -1,
                "The port of the node's Prometheus endpoint (GET /metrics); -1: none, 0: any free",
                at_least(-1),
            ),
            _k("metrics.host", "string", "", "The address it binds; empty: every interface"),
        ]
    }
)
BROKER_CONFIGS.update(SSL_CONFIGS)
BROKER_CONFIGS.update(SASL_CONFIGS)
BROKER_CONFIGS.update(AUTHORIZER_CONFIGS)
BROKER_CONFIGS.update(QUOTA_CONFIGS)

# Keys that name behaviour Rillet does not have yet, with what they wait for. They are
# accepted (a Kafka server.properties must load) but change nothing, so setting one is
# warned about once at start-up (BrokerConfig.inert_settings_warning). Keys whose feature
# would be unsafe to fake are refused instead (TLS and SASL listeners). Performance knobs of
# Kafka's own design (network and I/O threads, socket buffers) have no counterpart in Rillet
# and are not listed.
INERT_KEYS: dict[str, str] = {
    "controlled.shutdown.enable": "turning controlled shutdown off",
}
