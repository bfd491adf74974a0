"""The consumer (kafka-python's ``KafkaConsumer`` shape), split as Kafka's is:

consumer.py       Consumer: configs and the public API
fetcher.py        Fetcher: fetch and list-offsets requests, decoding, fetch errors
subscription.py   SubscriptionState: assignment, positions, pauses, buffers
group.py          GroupMember: a KIP-848 group on the consumer's thread (reconcile, commits)
membership.py     ConsumerMembership: the member's state machine (pure)
heartbeat.py      HeartbeatThread: sends its heartbeats in the background
group_client.py   GroupClient: FindCoordinator and requests to the coordinator
offsets.py        OffsetsClient: OffsetCommit and OffsetFetch
listener.py       ConsumerRebalanceListener
assignors/        the classic protocol's client-side assignors and embedded formats
"""

from rillet.client.consumer.consumer import Consumer, ConsumerRecord, OffsetAndTimestamp
from rillet.client.consumer.listener import ConsumerRebalanceListener

__all__ = ["Consumer", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndTimestamp"]
