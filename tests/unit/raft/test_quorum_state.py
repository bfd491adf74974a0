"""The quorum-state file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.errors import KafkaStorageError
from rillet.raft.quorum_state import FileQuorumStateStore


def test_quorum_state_file(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path, voters=[3, 1, 2])
    assert store.load() is None
    store.persist(5, 2, None)
    assert FileQuorumStateStore(tmp_path).load() == (5, 2, None)
    store.persist(6, None, 3)
    assert store.load() == (6, None, 3)
    text = (tmp_path / "quorum-state").read_text()
    assert '"leaderEpoch": 6' in text and '"voterId": 1' in text
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(KafkaStorageError):
        store.load()
