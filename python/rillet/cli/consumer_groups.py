"""``rillet consumer-groups``: Kafka's ``kafka-consumer-groups.sh``. Lists groups, describes
their offsets and lag (``--offsets``, the default), members (``--members [--verbose]``) or
state (``--state``); resets offsets of inactive groups (``--reset-offsets`` with a scope, a
spec and ``--dry-run``/``--execute``); deletes groups (``--delete``) and offsets
(``--delete-offsets``). Output, flags and messages are Kafka's."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client, print_table
from rillet.client.admin import AdminClient
from rillet.client.consumer import Consumer
from rillet.client.group_admin import GroupDescription
from rillet.errors import GroupIdNotFoundError, InvalidRequestError, KafkaError
from rillet.types import OffsetAndMetadata, TopicPartition

HELP = "List, describe, reset and delete consumer groups (kafka-consumer-groups.sh)"

_ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")
_SPECS = (
    "to_earliest",
    "to_latest",
    "to_current",
    "to_offset",
    "shift_by",
    "to_datetime",
    "by_duration",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    p.add_argument("--list", action="store_true", help="list every consumer group")
    p.add_argument("--describe", action="store_true", help="describe groups")
    p.add_argument("--reset-offsets", action="store_true", help="reset an inactive group")
    p.add_argument("--delete", action="store_true", help="delete groups and their offsets")
    p.add_argument("--delete-offsets", action="store_true", help="delete a group's offsets")
    p.add_argument("--group", action="append", default=[], help="the group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--topic", action="append", default=[], help="topic or topic:0,1,2")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has")
    p.add_argument("--offsets", action="store_true", help="describe offsets and lag (default)")
    p.add_argument("--members", action="store_true", help="describe members")
    p.add_argument("--verbose", action="store_true", help="with --members: assignments")
    p.add_argument("--state", nargs="?", const="", default=None, help="describe state / filter")
    p.add_argument("--type", nargs="?", const="", default=None, help="list with group types")
    p.add_argument("--dry-run", action="store_true", help="show the reset, change nothing")
    p.add_argument("--execute", action="store_true", help="do the reset")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--shift-by", type=int)
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS")


def run(args: argparse.Namespace) -> int:
    chosen = [a for a in _ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise InvalidRequestError(
            "Command must include exactly one action: --list, --describe, --delete, "
            "--reset-offsets, --delete-offsets"
        )
    action = chosen[0]
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        if action == "list":
            return _list(admin, args)
        groups = _groups(admin, args)
        if action == "describe":
            return _describe(admin, args, groups)
        if action == "reset_offsets":
            return _reset(admin, args, groups)
        if action == "delete":
            return _delete(admin, groups)
        return _delete_offsets(admin, args, groups)


def _groups(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise InvalidRequestError("Option [--group] or [--all-groups] is required")
    return list(args.group)


def _consumer(admin: AdminClient) -> Consumer:
    """A consumer without a group, for log offsets (ListOffsets)."""
    return Consumer(bootstrap_servers=admin.config["bootstrap_servers"])


# -- --list ----------------------------------------------------------------------------------


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    states = [s.strip() for s in (args.state or "").split(",") if s.strip()]
    types = [t.strip().lower() for t in (args.type or "").split(",") if t.strip()]
    listed = admin.list_consumer_groups(states, types)
    if args.state is None and args.type is None:
        for g in listed:
            print(g.group_id)
        return 0
    header: list[object] = ["GROUP"]
    if args.state is not None:
        header.append("STATE")
    if args.type is not None:
        header.append("TYPE")
    rows: list[list[object]] = [header]
    for g in listed:
        row: list[object] = [g.group_id]
        if args.state is not None:
            row.append(g.state)
        if args.type is not None:
            row.append(g.type.capitalize())
        rows.append(row)
    print_table(rows)
    return 0


# -- --describe ------------------------------------------------------------------------------


def _end_offsets(
    admin: AdminClient, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    with _consumer(admin) as c:
        return c.end_offsets(partitions)


def _describe(admin: AdminClient, args: argparse.Namespace, groups: list[str]) -> int:
    described = admin.describe_consumer_groups(groups)
    brokers = {
        b["node_id"]: f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"]
    }
    status = 0
    for d in described:
        print()
        if d.state == "Dead" and d.error is not None and isinstance(d.error, GroupIdNotFoundError):
            committed = {}
        else:
            committed = admin.list_consumer_group_offsets(d.group_id)
        if d.state == "Dead" and not committed:
            print(f"Error: Consumer group '{d.group_id}' does not exist.", file=sys.stderr)
            status = 1
            continue
        if args.state is not None:
            print_table([
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [d.group_id, f"{brokers.get(d.coordinator, '?')} ({d.coordinator})",
                 d.assignor or "", d.state, len(d.members)],
            ])  # fmt: skip
            continue
        if not d.members and d.state in ("Empty", "Dead"):
            print(f"Consumer group '{d.group_id}' has no active members.")
        if args.members:
            _describe_members(d, args.verbose)
        else:
            _describe_offsets(admin, d, committed)
    return status


def _describe_members(d: GroupDescription, verbose: bool) -> None:
    header: list[object] = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header += ["CURRENT-EPOCH", "ASSIGNMENT"]
    rows: list[list[object]] = [header]
    for m in d.members:
        row: list[object] = [d.group_id, m.member_id, m.host, m.client_id, len(m.assignment)]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in m.assignment:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            text = ",".join(
                f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())
            )
            row += [m.member_epoch, text or "-"]
        rows.append(row)
    print_table(rows)


def _describe_offsets(
    admin: AdminClient, d: GroupDescription, committed: dict[TopicPartition, OffsetAndMetadata]
) -> None:
    owner = {tp: m for m in d.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owner))
    ends = _end_offsets(admin, partitions)
    rows: list[list[object]] = [[
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]]  # fmt: skip
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current.offset if current is not None and end is not None else None
        m = owner.get(tp)
        rows.append([
            d.group_id, tp.topic, tp.partition,
            "-" if current is None else current.offset,
            "-" if end is None else end,
            "-" if lag is None else max(lag, 0),
            m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-",
        ])  # fmt: skip
    print_table(rows)


# -- --reset-offsets -------------------------------------------------------------------------


def _scope(admin: AdminClient, args: argparse.Namespace, group: str) -> list[TopicPartition]:
    if args.all_topics == bool(args.topic):
        raise InvalidRequestError("Option [--reset-offsets] takes one of [--all-topics, --topic]")
    if args.all_topics:
        return sorted(admin.list_consumer_group_offsets(group))
    out: list[TopicPartition] = []
    with _consumer(admin) as c:
        for spec in args.topic:
            topic, _, parts = spec.partition(":")
            if parts:
                out += [TopicPartition(topic, int(p)) for p in parts.split(",") if p]
            else:
                found = c.partitions_for_topic(topic)
                if found is None:
                    raise InvalidRequestError(f"Topic {topic} does not exist")
                out += [TopicPartition(topic, p) for p in sorted(found)]
    return out


def _parse_duration(text: str) -> timedelta:
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text)
    if m is None or text in ("P", "PT"):
        raise InvalidRequestError(f"Error parsing duration {text!r}: use ISO-8601 PnDTnHnMnS")
    d, h, mi, s = m.groups()
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0),
                     seconds=float(s or 0))  # fmt: skip


def _parse_datetime(text: str) -> int:
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            parsed = datetime.strptime(text.replace("Z", "+0000"), fmt)
        except ValueError:
            continue
        if parsed.tzinfo is None:
            parsed = parsed.astimezone()  # Kafka reads a zone-less time as local
        return int(parsed.timestamp() * 1000)
    raise InvalidRequestError(f"Error parsing datetime {text!r}: use YYYY-MM-DDTHH:mm:SS.sss")


def _targets(
    admin: AdminClient, args: argparse.Namespace, group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    specs = [s for s in _SPECS if getattr(args, s) not in (None, False)]
    if len(specs) != 1:
        raise InvalidRequestError(
            "Option [--reset-offsets] takes exactly one of: --to-earliest, --to-latest, "
            "--to-current, --to-offset, --shift-by, --to-datetime, --by-duration"
        )
    spec = specs[0]
    with _consumer(admin) as c:
        earliest = c.beginning_offsets(partitions)
        latest = c.end_offsets(partitions)

        def clamp(tp: TopicPartition, offset: int) -> int:
            return min(max(offset, earliest[tp]), latest[tp])

        if spec == "to_earliest":
            return dict(earliest)
        if spec == "to_latest":
            return dict(latest)
        if spec == "to_offset":
            return {tp: clamp(tp, args.to_offset) for tp in partitions}
        committed = admin.list_consumer_group_offsets(group, partitions)
        if spec == "to_current":
            return {
                tp: committed[tp].offset if tp in committed else latest[tp] for tp in partitions
            }
        if spec == "shift_by":
            return {
                tp: clamp(
                    tp, (committed[tp].offset if tp in committed else latest[tp]) + args.shift_by
                )
                for tp in partitions
            }
        if spec == "to_datetime":
            when = _parse_datetime(args.to_datetime)
        else:
            now = datetime.now(UTC)
            when = int((now - _parse_duration(args.by_duration)).timestamp() * 1000)
        found = c.offsets_for_times({tp: when for tp in partitions})
        out = {}
        for tp in partitions:
            hit = found[tp]  # None: every record is older; the end then
            out[tp] = latest[tp] if hit is None else hit.offset
        return out


def _reset(admin: AdminClient, args: argparse.Namespace, groups: list[str]) -> int:
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.")  # fmt: skip
    for d in admin.describe_consumer_groups(groups):
        if d.state not in ("Empty", "Dead"):
            print(
                f"Error: Assignments can only be reset if the group '{d.group_id}' is "
                f"inactive, but the current state is {d.state}.",
                file=sys.stderr,
            )
            return 1
        targets = _targets(admin, args, d.group_id, _scope(admin, args, d.group_id))
        if args.execute:
            admin.alter_consumer_group_offsets(
                d.group_id, {tp: OffsetAndMetadata(o) for tp, o in targets.items()}
            )
        print()
        rows: list[list[object]] = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[d.group_id, tp.topic, tp.partition, o] for tp, o in sorted(targets.items())]
        print_table(rows)
    return 0


# -- --delete, --delete-offsets --------------------------------------------------------------


def _delete(admin: AdminClient, groups: list[str]) -> int:
    results = admin.delete_consumer_groups(groups)
    failed = {g: e for g, e in results.items() if e is not None}
    ok = [g for g, e in results.items() if e is None]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
        for g, e in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {type(e).__name__}: {e}",
                  file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _delete_offsets(admin: AdminClient, args: argparse.Namespace, groups: list[str]) -> int:
    if len(groups) != 1 or not args.topic:
        raise InvalidRequestError("Option [--delete-offsets] takes one --group and --topic")
    group = groups[0]
    partitions = _scope(admin, args, group)
    try:
        results = admin.delete_consumer_group_offsets(group, partitions)
    except KafkaError as e:
        print(f"Error: Encounter some unknown error: {e}", file=sys.stderr)
        return 1
    failed = any(e is not None for e in results.values())
    topics = ", ".join(sorted({tp.topic for tp in partitions}))
    if failed:
        print(f"Request failed for deleting offsets with topic {topics} group {group}")
    else:
        print(f"Request succeed for deleting offsets with topic {topics} group {group}")
    rows: list[list[object]] = [["TOPIC", "PARTITION", "STATUS"]]
    for tp, err in sorted(results.items()):
        rows.append([tp.topic, tp.partition, "Successful" if err is None else f"Error: {err}"])
    print_table(rows)
    return 1 if failed else 0
