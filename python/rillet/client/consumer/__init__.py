"""The consumer (kafka-python's ``KafkaConsumer`` shape), split as Kafka's is:

consumer.py       Consumer: configs and the public API
fetcher.py        Fetcher: fetch and list-offsets requests, decoding, fetch errors
subscription.py   SubscriptionState: assignment, positions, pauses, buffers
"""

from rillet.client.consumer.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndTimestamp"]
