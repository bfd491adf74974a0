"""A transactional producer whose batch fails for good mid-transaction, against an
in-process broker: the transaction's other batches fail at once instead of being retried
(their sequences can never follow the failed one), commit raises at once, and after the
abort the next transaction commits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from rillet import decode_batches
from rillet.broker.replica_manager import ProducedPartition
from rillet.client.producer import Producer
from rillet.errors import InvalidTxnStateError, KafkaError, OutOfOrderSequenceNumberError
from rillet.types import TopicPartition
from tests.support.mini_broker import MiniBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 1})
    yield b
    b.close()


def refuse_first_for_good(broker: MiniBroker) -> list[int]:
    """The broker refuses the first produce request for good, slowly enough that later
    requests arrive meanwhile, and answers those OUT_OF_ORDER_SEQUENCE_NUMBER, as a leader
    does for batches after a gap."""
    replicas = broker.server.replicas
    assert replicas is not None
    calls: list[int] = []

    async def append(
        entries: Mapping[TopicPartition, Any], required_acks: int, timeout_ms: int
    ) -> dict[TopicPartition, Any]:
        calls.append(len(entries))
        err: KafkaError = OutOfOrderSequenceNumberError("a gap before this batch")
        if len(calls) == 1:
            await asyncio.sleep(0.3)
            err = InvalidTxnStateError("refused for good")
        return {tp: ProducedPartition(err) for tp in entries}

    replicas.append_records = append  # type: ignore[method-assign]
    return calls


def test_a_batch_failing_for_good_fails_the_transaction_at_once(broker: MiniBroker) -> None:
    p = Producer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="tx",
        batch_size=2048,
        delivery_timeout_ms=600_000,  # a retried batch would hold commit for ten minutes
    )
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"first", partition=0).get(timeout=30)
        calls = refuse_first_for_good(broker)
        futures = [p.send("t", b"x" * 1000, partition=0) for _ in range(10)]
        while not calls:  # the first request is on the wire: the rest go in later ones
            time.sleep(0.01)
        futures += [p.send("t", b"x" * 1000, partition=0) for _ in range(40)]
        raised: list[BaseException] = []

        def commit() -> None:
            try:
                p.commit_transaction()
            except BaseException as e:
                raised.append(e)

        t = threading.Thread(target=commit)
        t.start()
        t.join(120)
        assert not t.is_alive(), "commit_transaction waited for batches that cannot succeed"
        assert len(calls) >= 2
        assert raised and isinstance(raised[0], InvalidTxnStateError)
        for f in futures:
            with pytest.raises(KafkaError):
                f.get(timeout=0)
        sent = len(calls)
        p.abort_transaction()
        replicas = broker.server.replicas
        assert replicas is not None
        del replicas.append_records  # the real method again
        assert len(calls) == sent  # nothing was retried after the transaction failed
        p.begin_transaction()
        p.send("t", b"second", partition=0)
        p.commit_transaction()
    finally:
        p.close(10)
    # commit_transaction returns once PrepareCommit is written; the coordinator writes the
    # markers after it, as Kafka's does: wait for the commit's (it came late under load).
    deadline = time.monotonic() + 30
    while True:
        batches = decode_batches(broker.log("t", 0).read(0, 1 << 30).read_all())
        if sum(b.is_control for b in batches) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    data = [r.value for b in batches if not b.is_control for r in b.records]
    markers = [b for b in batches if b.is_control]
    assert data == [b"first", b"second"]
    assert len(markers) == 2  # the abort's, then the commit's
