"""Kafka's binary protocol as a transport: :mod:`listener` frames requests off the socket,
:mod:`apis` decodes them with the schema-driven codec (``rillet._core.kafka_*``), calls the
transport-agnostic handlers (:class:`~rillet.broker.apis.BrokerApis`) and encodes the
answers."""
