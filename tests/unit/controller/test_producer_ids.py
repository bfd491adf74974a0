"""Producer id blocks (Kafka's ProducerIdControlManager, KIP-730): contiguous, never given
twice, across a controller's failover, a replay of the log and a load of a snapshot; only
for a broker with its current epoch; Kafka's overflow check."""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import replace

import pytest

from rillet import errors
from rillet.controller import (
    PRODUCER_ID_BLOCK_SIZE,
    ControllerConfig,
    ProducerIdsBlock,
    QuorumController,
)
from rillet.controller.producer_ids import INT64_MAX, generate_next_producer_id
from rillet.metadata.image import MetadataImage, ProducerIdsImage
from rillet.metadata.records import MetadataRecord, ProducerIdsRecord
from rillet.metadata.snapshot import decode_snapshot, encode_snapshot, image_from_records
from tests.unit.controller.test_quorum_controller import EP, commit


def cluster(n: int, log: list[MetadataRecord] | None = None) -> QuorumController:
    """``n`` registered, unfenced brokers; every committed record also goes to ``log``."""
    c = QuorumController(ControllerConfig(), random.Random(7))
    for b in range(1, n + 1):
        reg = c.register_broker(b, uuid.UUID(int=b), EP, None, now_ms=0)
        commit(c, reg.records)
        hb = c.broker_heartbeat(b, reg.response, now_ms=0)
        commit(c, hb.records)
        if log is not None:
            log.extend([*reg.records, *hb.records])
    return c


def epoch(c: QuorumController, broker_id: int) -> int:
    return c.image.brokers[broker_id].broker_epoch


def allocate(c: QuorumController, broker_id: int, log: list[MetadataRecord]) -> ProducerIdsBlock:
    """Allocate and commit, keeping the committed records in ``log``."""
    result = c.generate_next_producer_id(broker_id, epoch(c, broker_id))
    commit(c, result.records)
    log.extend(result.records)
    return result.response


def assert_contiguous(blocks: list[ProducerIdsBlock]) -> None:
    assert blocks[0].first_producer_id == 0
    for before, after in itertools.pairwise(blocks):
        assert after.first_producer_id == before.next_block_first_id


def test_blocks_are_contiguous_from_zero_whichever_broker_asks() -> None:
    c = cluster(3)
    blocks = [allocate(c, b, []) for b in (1, 2, 1, 3, 3)]
    assert [b.assigned_broker_id for b in blocks] == [1, 2, 1, 3, 3]
    assert all(b.size == PRODUCER_ID_BLOCK_SIZE == 1000 for b in blocks)
    assert_contiguous(blocks)
    assert blocks[-1].last_producer_id == 4999
    assert c.image.producer_ids.next_producer_id == 5000


def test_the_record_is_kafkas() -> None:
    c = cluster(1)
    result = c.generate_next_producer_id(1, epoch(c, 1))
    assert result.records == [ProducerIdsRecord(1, epoch(c, 1), 1000)]
    assert result.response == ProducerIdsBlock(1, 0, 1000)
    # Nothing changes until the record is appended.
    assert c.image.producer_ids.is_empty


def test_appended_blocks_count_before_they_commit() -> None:
    c = cluster(2)
    first = c.generate_next_producer_id(1, epoch(c, 1))
    c.apply_appended(c.image.offset + 1, first.records)
    second = c.generate_next_producer_id(2, epoch(c, 2))
    assert second.response.first_producer_id == first.response.next_block_first_id


@pytest.mark.parametrize("broker_epoch", [-1, 0, 999])
def test_a_stale_broker_epoch_is_refused(broker_epoch: int) -> None:
    c = cluster(2)
    with pytest.raises(errors.StaleBrokerEpochError, match="Expected broker epoch"):
        c.generate_next_producer_id(1, broker_epoch)


def test_an_unknown_broker_is_a_stale_broker_epoch() -> None:
    # As Kafka's ClusterControlManager.checkBrokerEpoch.
    c = cluster(2)
    with pytest.raises(errors.StaleBrokerEpochError, match="No broker registration"):
        c.generate_next_producer_id(9, 1)


def test_ids_run_out_before_int64_does() -> None:
    image = cluster(1).image
    e = image.brokers[1].broker_epoch
    last = replace(image, producer_ids=ProducerIdsImage(INT64_MAX - PRODUCER_ID_BLOCK_SIZE))
    block = generate_next_producer_id(last, 1, e).response
    assert block.last_producer_id == INT64_MAX - 1
    over = replace(image, producer_ids=ProducerIdsImage(INT64_MAX - PRODUCER_ID_BLOCK_SIZE + 1))
    with pytest.raises(errors.UnknownServerError, match="Exhausted all producerIds"):
        generate_next_producer_id(over, 1, e)


def test_a_new_active_controller_continues_after_the_committed_blocks() -> None:
    log: list[MetadataRecord] = []
    active = cluster(2, log)
    before = [allocate(active, b, log) for b in (1, 2, 1)]
    # A follower replays what the active one committed.
    follower = QuorumController(ControllerConfig(), random.Random(1))
    follower.replay_committed(enumerate(log))
    # An allocation the old controller appended but never committed was never answered:
    # it is forgotten, and the new active controller gives out the same ids again.
    lost = active.generate_next_producer_id(2, epoch(active, 2))
    active.apply_appended(active.image.offset + 1, lost.records)
    active.revert_to_committed()
    follower.activate()
    after = [allocate(follower, b, log) for b in (2, 1)]
    assert_contiguous(before + after)
    assert after[0].first_producer_id == lost.response.first_producer_id


def test_a_controller_replaying_the_log_or_a_snapshot_never_gives_an_id_twice() -> None:
    full_log: list[MetadataRecord] = []
    c = cluster(3, full_log)
    blocks = [allocate(c, b, full_log) for b in (1, 2, 3, 2)]

    # Restarted with the whole log.
    from_log = QuorumController(ControllerConfig(), random.Random(2))
    from_log.replay_committed(enumerate(full_log))
    assert from_log.image.producer_ids == c.image.producer_ids
    assert_contiguous([*blocks, allocate(from_log, 3, [])])

    # Restarted from a snapshot, then the records after it.
    snapshot = encode_snapshot(MetadataImage().replay(enumerate(full_log[:-1])), now_ms=1)
    image, _ = image_from_records(decode_snapshot(snapshot), len(full_log) - 1)
    from_snapshot = QuorumController(ControllerConfig(), random.Random(3))
    from_snapshot.load_snapshot(image)
    assert from_snapshot.image.producer_ids.next_producer_id == blocks[-2].next_block_first_id
    from_snapshot.replay_committed(enumerate(full_log[-1:], len(full_log) - 1))
    assert_contiguous([*blocks, allocate(from_snapshot, 1, [])])
