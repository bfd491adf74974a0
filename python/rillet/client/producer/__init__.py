"""The producer: :class:`Producer` (the public API, shaped like kafka-python's
``KafkaProducer``), its :mod:`sender` thread, and the idempotent producer's bookkeeping in
:mod:`idempotence`."""

from rillet.client.producer.producer import Producer

__all__ = ["Producer"]
