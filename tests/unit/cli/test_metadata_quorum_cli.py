"""``rillet metadata-quorum describe``: Kafka's labels, columns and lag arithmetic."""

from __future__ import annotations

from rillet.cli.metadata_quorum import format_replication, format_status
from rillet.raft.node import QuorumInfo
from rillet.raft.state import ReplicaState

INFO = QuorumInfo(
    leader_id=2,
    leader_epoch=5,
    high_watermark=118,
    voters=(
        ReplicaState(1, 110, 1_700_000_000_900, 1_700_000_000_500),
        ReplicaState(2, 120, 1_700_000_001_000, 1_700_000_001_000),
        ReplicaState(3, 120, 1_700_000_000_990, 1_700_000_000_990),
    ),
    observers=(ReplicaState(4, 118, 1_700_000_000_950, None),),
)


def test_status_has_kafkas_labels_and_the_largest_lag() -> None:
    lines = format_status("abc", INFO).splitlines()
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in lines)}
    assert list(fields) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert fields["LeaderId"] == "2" and fields["LeaderEpoch"] == "5"
    assert fields["HighWatermark"] == "118"
    assert fields["MaxFollowerLag"] == "10"  # voter 1: 120 - 110
    assert fields["MaxFollowerLagTimeMs"] == "500"  # caught up 500 ms before the leader
    assert fields["CurrentVoters"] == "[1,2,3]"
    assert fields["CurrentObservers"] == "[4]"
    # Values start in one column, as Kafka's tool prints them.
    assert len({line.index(v) for line, v in zip(lines, fields.values(), strict=True)}) == 1


def test_status_of_a_lone_leader_has_no_lag() -> None:
    alone = QuorumInfo(1, 1, 3, (ReplicaState(1, 3, None, None),), ())
    fields = dict(line.split(":", 1) for line in format_status("c", alone).splitlines())
    assert fields["MaxFollowerLag"].strip() == "0"
    assert fields["MaxFollowerLagTimeMs"].strip() == "0"
    assert fields["CurrentObservers"].strip() == "[]"


def test_replication_lists_the_leader_then_followers_then_observers() -> None:
    rows = [line.split() for line in format_replication(INFO).splitlines()]
    assert rows[0] == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert rows[1:] == [
        ["2", "120", "0", "1700000001000", "1700000001000", "Leader"],
        ["1", "110", "10", "1700000000900", "1700000000500", "Follower"],
        ["3", "120", "0", "1700000000990", "1700000000990", "Follower"],
        ["4", "118", "2", "1700000000950", "-1", "Observer"],
    ]


def test_replication_human_readable_prints_ages() -> None:
    out = format_replication(INFO, now_ms=1_700_000_002_000)
    assert "1000 ms ago" in out and "1500 ms ago" in out
