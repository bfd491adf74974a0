"""The ``quorum-state`` file of the metadata log directory behind the Raft core's
:class:`~rillet.raft.store.QuorumStateStore` Protocol.

It is Kafka's JSON file (``leaderId``, ``leaderEpoch``, ``votedId``, ...), replaced
atomically (tmp, fsync, rename, fsync dir) before a vote or epoch is acknowledged, so a
crash leaves either the old state or the new one, never a torn file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from rillet.errors import KafkaStorageError
from rillet.raft.store import ElectionState

__all__ = ["QUORUM_STATE_FILE", "FileQuorumStateStore"]

QUORUM_STATE_FILE = "quorum-state"


class FileQuorumStateStore:
    """The ``quorum-state`` file of the metadata log directory."""

    def __init__(self, metadata_log_dir: Path, voters: Sequence[int] = ()) -> None:
        self.dir = Path(metadata_log_dir)
        self.path = self.dir / QUORUM_STATE_FILE
        self.voters = sorted(voters)

    def load(self) -> ElectionState | None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise KafkaStorageError(f"cannot read {self.path}: {e}") from None
        try:
            epoch = int(raw["leaderEpoch"])
            voted = int(raw.get("votedId", -1))
            leader = int(raw.get("leaderId", -1))
        except (KeyError, TypeError, ValueError) as e:
            raise KafkaStorageError(f"{self.path} is malformed: {e}") from None
        return ElectionState(epoch, None if voted < 0 else voted, None if leader < 0 else leader)

    def persist(self, epoch: int, voted_id: int | None, leader_id: int | None) -> None:
        body = {
            "clusterId": "",
            "leaderId": -1 if leader_id is None else leader_id,
            "leaderEpoch": epoch,
            "votedId": -1 if voted_id is None else voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in self.voters],
            "data_version": 0,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
