"""The control batch that ends a transaction on a partition: Kafka's COMMIT or ABORT marker
(``EndTransactionMarker``), written by a partition's leader when the transaction coordinator
asks (WriteTxnMarkers), and by the group coordinator on ``__consumer_offsets``.

A marker batch is transactional and a control batch (attributes bits 4 and 5), carries the
producer's id and epoch, no sequence, and one control record::

    key    version int16 = 0, type int16 (0 ABORT, 1 COMMIT)
    value  version int16 = 0, coordinator_epoch int32

The Rust log parses it back (``rust/core/src/record/control.rs``).
"""

from __future__ import annotations

import struct

from rillet._core import BatchBuilder

__all__ = ["ABORT", "COMMIT", "end_txn_marker_batch"]

ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def end_txn_marker_batch(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool, now_ms: int
) -> bytes:
    """One COMMIT (``committed``) or ABORT marker batch, ready to append as a leader."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        now_ms,
        _KEY.pack(0, COMMIT if committed else ABORT),
        _VALUE.pack(0, coordinator_epoch),
    )
    return builder.build()
