"""A real ``rillet server start`` process answers InitProducerId (KIP-730) with distinct
producer ids, and never hands one out twice across restarts: a clean one, a kill -9, each
starting from a metadata snapshot (written after every record, with no metadata log kept
behind it), so the next block's start must come from the snapshot."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from rillet.errors import KafkaError
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc, transaction_pb2_grpc
from rillet.protocol.transaction import init_producer_id_request, read_init_producer_id_response
from rillet.raft.metadata_log import METADATA_TOPIC, parse_snapshot_name
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow

SNAPSHOT_ALWAYS = {
    "metadata.log.max.record.bytes.between.snapshots": "1",
    "metadata.max.retention.bytes": "0",
    "metadata.log.segment.bytes": "2048",
    # Fifty partitions of __transaction_state would not fit one metadata segment this small.
    "transaction.state.log.num.partitions": "1",
}


class SnapshottingServer(ServerProcess):
    def argv(self) -> list[str]:
        extra = [a for k, v in SNAPSHOT_ALWAYS.items() for a in ("--override", f"{k}={v}")]
        return [*super().argv(), *extra]


def init_producer_id(bootstrap: str, transactional_id: str | None = None) -> tuple[int, int]:
    """InitProducerId as a producer sends it, retrying what is retriable (the first block
    may still be on its way)."""
    deadline = time.monotonic() + 30
    with grpc.insecure_channel(bootstrap) as ch:
        stub = transaction_pb2_grpc.TransactionServiceStub(ch)
        while True:
            response = stub.InitProducerId(init_producer_id_request(transactional_id), timeout=30)
            try:
                return read_init_producer_id_response(response)
            except KafkaError as e:
                if not e.retriable or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SnapshottingServer]:
    s = SnapshottingServer(tmp_path / "data")
    s.start()
    yield s
    s.kill()


def _ids(server: ServerProcess, n: int) -> list[int]:
    answers = [init_producer_id(server.bootstrap) for _ in range(n)]
    assert all(epoch == 0 for _, epoch in answers)
    return [pid for pid, _ in answers]


def test_ids_are_distinct_and_never_reused_after_restarts(server: SnapshottingServer) -> None:
    first = _ids(server, 20)
    assert first == list(range(20))
    metadata_dir = server.data_dir / "kraft-combined-logs" / f"{METADATA_TOPIC}-0"
    assert any(parse_snapshot_name(f.name) for f in metadata_dir.iterdir())

    assert server.stop() == 0
    since = len(server.output())
    server.start()
    assert "loaded metadata snapshot" in server.output()[since:]
    second = _ids(server, 20)
    # The rest of the first block went with the old process; the new one gets the next.
    assert second == list(range(1000, 1020))

    server.kill()
    since = len(server.output())
    server.start()
    assert "loaded metadata snapshot" in server.output()[since:]
    third = _ids(server, 20)
    assert third == list(range(2000, 2020))
    assert len(set(first + second + third)) == 60


def find_transaction_coordinator(bootstrap: str, transactional_id: str) -> int:
    """FindCoordinator(TRANSACTION) until it names a broker (the first creates the topic)."""
    deadline = time.monotonic() + 30
    with grpc.insecure_channel(bootstrap) as ch:
        stub = group_pb2_grpc.GroupServiceStub(ch)
        while True:
            request = group_pb2.FindCoordinatorRequest(
                key_type=1, coordinator_keys=[transactional_id]
            )
            (found,) = stub.FindCoordinator(request, timeout=30).coordinators
            if found.error_code == 0:
                return found.node_id
            assert time.monotonic() < deadline, found.error_message
            time.sleep(0.05)


def test_transactional_producers_get_ids_from_the_same_blocks(server: SnapshottingServer) -> None:
    assert find_transaction_coordinator(server.bootstrap, "tx-1") == 1
    tx_pid, tx_epoch = init_producer_id(server.bootstrap, "tx-1")
    assert tx_epoch == 0
    pid, epoch = init_producer_id(server.bootstrap)
    assert epoch == 0 and pid != tx_pid and {pid, tx_pid} <= set(range(1000))
    # The same transactional id again: its producer id, the next epoch (fencing the first).
    assert init_producer_id(server.bootstrap, "tx-1") == (tx_pid, 1)
