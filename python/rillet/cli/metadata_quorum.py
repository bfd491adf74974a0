"""``rillet metadata-quorum``: Kafka's ``kafka-metadata-quorum.sh describe --status`` and
``describe --replication``, with Kafka's labels and columns."""

from __future__ import annotations

import argparse
import time

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.raft.node import QuorumInfo
from rillet.raft.state import ReplicaState

HELP = "Describe the KRaft metadata quorum (kafka-metadata-quorum.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = sub.add_parser("describe", help="describe the metadata quorum")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="the leader, epoch, HW and lags")
    what.add_argument("--replication", action="store_true", help="each replica's progress")
    describe.add_argument(
        "--human-readable",
        action="store_true",
        help="print timestamps as how long ago they were (with --replication)",
    )


def run(args: argparse.Namespace) -> int:
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        info = admin.describe_metadata_quorum()
        cluster_id = str(admin.describe_cluster()["cluster_id"])
    if args.status:
        print(format_status(cluster_id, info))
    else:
        print(
            format_replication(
                info, now_ms=int(time.time() * 1000) if args.human_readable else None
            )
        )
    return 0


def _leader_state(info: QuorumInfo) -> ReplicaState | None:
    return next((v for v in info.voters if v.replica_id == info.leader_id), None)


def format_status(cluster_id: str, info: QuorumInfo) -> str:
    """Kafka's ``describe --status``: the follower with the largest lag in offsets, and how
    far behind the leader it was last caught up."""
    leader = _leader_state(info)
    max_lag, max_lag_ms = 0, 0
    if leader is not None and info.voters:
        laggard = max(info.voters, key=lambda v: leader.log_end_offset - v.log_end_offset)
        max_lag = leader.log_end_offset - laggard.log_end_offset
        if laggard is not leader:
            if leader.last_caught_up_ms is None or laggard.last_caught_up_ms is None:
                max_lag_ms = -1
            else:
                max_lag_ms = leader.last_caught_up_ms - laggard.last_caught_up_ms
    rows = [
        ("ClusterId", cluster_id),
        ("LeaderId", str(info.leader_id)),
        ("LeaderEpoch", str(info.leader_epoch)),
        ("HighWatermark", str(info.high_watermark)),
        ("MaxFollowerLag", str(max_lag)),
        ("MaxFollowerLagTimeMs", str(max_lag_ms)),
        ("CurrentVoters", _ids(info.voters)),
        ("CurrentObservers", _ids(info.observers)),
    ]
    return "\n".join(f"{label + ':':<24}{value}" for label, value in rows)


def _ids(states: tuple[ReplicaState, ...]) -> str:
    return (
        "[" + ",".join(str(s.replica_id) for s in sorted(states, key=lambda s: s.replica_id)) + "]"
    )


def format_replication(info: QuorumInfo, now_ms: int | None = None) -> str:
    """Kafka's ``describe --replication``: the leader first, then the other voters, then
    the observers. With ``now_ms`` timestamps print as how long ago they were."""
    leader = _leader_state(info)
    leader_end = leader.log_end_offset if leader is not None else 0

    def stamp(ms: int | None) -> str:
        if ms is None:
            return "-1"
        return str(ms) if now_ms is None else f"{max(now_ms - ms, 0)} ms ago"

    ordered: list[tuple[ReplicaState, str]] = []
    if leader is not None:
        ordered.append((leader, "Leader"))
    voters = sorted((v for v in info.voters if v is not leader), key=lambda v: v.replica_id)
    ordered += [(v, "Follower") for v in voters]
    ordered += [(o, "Observer") for o in sorted(info.observers, key=lambda o: o.replica_id)]
    header = (
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    )
    rows = [header] + [
        (
            str(s.replica_id),
            str(s.log_end_offset),
            str(max(leader_end - s.log_end_offset, 0)),
            stamp(s.last_fetch_ms),
            stamp(s.last_caught_up_ms),
            status,
        )
        for s, status in ordered
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
