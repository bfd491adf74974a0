"""Producer id blocks in the metadata (KIP-730): ProducerIdsRecord replays into
``image.producer_ids``, only forward, and a snapshot carries where the next block starts."""

from __future__ import annotations

import pytest

from rillet.errors import KafkaStorageError
from rillet.metadata.image import MetadataImage, ProducerIdsImage
from rillet.metadata.records import NoOpRecord, ProducerIdsRecord
from rillet.metadata.snapshot import (
    decode_snapshot,
    encode_snapshot,
    image_from_records,
    image_records,
)


def test_an_empty_image_has_given_no_block() -> None:
    image = MetadataImage()
    assert image.producer_ids == ProducerIdsImage(-1) and image.producer_ids.is_empty
    assert not any(isinstance(r, ProducerIdsRecord) for r in image_records(image))


def test_records_move_the_next_block_start() -> None:
    image = MetadataImage().replay(
        [(0, ProducerIdsRecord(1, 5, 1000)), (1, NoOpRecord()), (2, ProducerIdsRecord(2, 7, 2000))]
    )
    assert image.producer_ids.next_producer_id == 2000
    # A delta that does not touch producer ids keeps the same (immutable) value.
    assert image.replay([(3, NoOpRecord())]).producer_ids is image.producer_ids


@pytest.mark.parametrize("next_id", [1000, 999, 0])
def test_a_record_that_moves_back_is_a_corrupt_log(next_id: int) -> None:
    image = MetadataImage().replay([(0, ProducerIdsRecord(1, 5, 1000))])
    with pytest.raises(KafkaStorageError, match="next producer id back"):
        image.replay([(1, ProducerIdsRecord(1, 5, next_id))])


def test_a_snapshot_carries_the_next_block_start_without_a_broker() -> None:
    image = MetadataImage().replay(
        [(0, ProducerIdsRecord(1, 5, 1000)), (1, ProducerIdsRecord(3, 9, 2000))]
    )
    assert [r for r in image_records(image) if isinstance(r, ProducerIdsRecord)] == [
        ProducerIdsRecord(-1, -1, 2000)
    ]
    data = encode_snapshot(image, now_ms=1)
    rebuilt, _ = image_from_records(decode_snapshot(data), image.offset + 1)
    assert rebuilt == image
    # Replay continues after the snapshot: forward only, from the snapshot's start.
    after = rebuilt.replay([(2, ProducerIdsRecord(1, 5, 3000))])
    assert after.producer_ids.next_producer_id == 3000
    with pytest.raises(KafkaStorageError):
        rebuilt.replay([(2, ProducerIdsRecord(1, 5, 2000))])


def test_a_snapshot_replaces_the_next_block_start() -> None:
    before = MetadataImage().replay([(0, ProducerIdsRecord(1, 5, 5000))])
    # A snapshot (from the leader) is the whole truth: its start replaces the one before.
    image, _ = image_from_records([ProducerIdsRecord(-1, -1, 3000)], 10, before=before)
    assert image.producer_ids.next_producer_id == 3000
    empty, _ = image_from_records([], 10, before=before)
    assert empty.producer_ids.is_empty
