"""The COMMIT/ABORT marker batch as Kafka lays it out."""

from __future__ import annotations

import struct

import pytest

from rillet import decode_batches
from rillet.coordinator.end_txn_marker import ABORT, COMMIT, end_txn_marker_batch


@pytest.mark.parametrize(("committed", "kind"), [(True, COMMIT), (False, ABORT)])
def test_a_marker_is_one_transactional_control_record(committed: bool, kind: int) -> None:
    (batch,) = decode_batches(end_txn_marker_batch(42, 3, 9, committed, 1_234))
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, -1)
    (record,) = batch.records
    assert record.key == struct.pack(">hh", 0, kind)
    assert record.value == struct.pack(">hi", 0, 9)
    assert record.timestamp == 1_234
