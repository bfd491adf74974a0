"""Kafka's JSON schemas of the ``__consumer_offsets`` records
(``group-coordinator/src/main/resources/common/message/`` in apache/kafka, Apache License
2.0), read by kafka-python's schema codec to check Rillet's encoding independently."""
