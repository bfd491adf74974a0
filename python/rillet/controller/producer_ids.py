"""Producer id blocks (Kafka's ProducerIdControlManager, KIP-730): the active controller gives
each broker that asks a block of :data:`PRODUCER_ID_BLOCK_SIZE` producer ids, and the broker
hands them out to idempotent and transactional producers without a metadata write each.

Blocks are contiguous and never overlap: a block starts where the image's
``producer_ids.next_producer_id`` says (0 for the first), and the
:class:`~rillet.metadata.records.ProducerIdsRecord` that gives it moves that start past it.
Because the start lives in the metadata image, a controller that restarts (replaying the log
or a snapshot, which carries the start) or takes over from another one continues after every
committed block. A block whose record did not commit was never answered to its broker, so a
new active controller handing out the same ids again is safe.

Only a broker registered with the epoch it gives may ask (STALE_BROKER_EPOCH otherwise, as
Kafka's ClusterControlManager.checkBrokerEpoch). Pure functions over a
:class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rillet import errors
from rillet.controller.results import ControllerResult
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ProducerIdsRecord

__all__ = [
    "INT64_MAX",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdsBlock",
    "generate_next_producer_id",
]

PRODUCER_ID_BLOCK_SIZE = 1000
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class ProducerIdsBlock:
    """Producer ids ``first_producer_id`` to :attr:`last_producer_id`, both inclusive, given to
    ``assigned_broker_id`` (Kafka's ProducerIdsBlock)."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def generate_next_producer_id(
    image: MetadataImage, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """The next block for ``broker_id`` and the record that gives it. Raises
    STALE_BROKER_EPOCH for a broker not registered with ``broker_epoch``, and
    UNKNOWN_SERVER_ERROR once the next block would pass the largest int64."""
    b = image.brokers.get(broker_id)
    if b is None:
        raise errors.StaleBrokerEpochError(
            f"No broker registration found for broker id {broker_id}"
        )
    if b.broker_epoch != broker_epoch:
        raise errors.StaleBrokerEpochError(
            f"Expected broker epoch {b.broker_epoch}, but got broker epoch {broker_epoch}"
        )
    first = max(image.producer_ids.next_producer_id, 0)
    if first > INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise errors.UnknownServerError(
            "Exhausted all producerIds as the next block's end producerId has exceeded the "
            "int64 type limit"
        )
    block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
    record = ProducerIdsRecord(broker_id, broker_epoch, block.next_block_first_id)
    return ControllerResult([record], block)
