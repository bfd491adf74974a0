"""``rillet reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh``. Moves partitions
between brokers (KIP-455): the new replicas are added and catch up, then the old ones are
dropped, without a pause in reads or writes.

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3`` prints the current
  assignment of the topics in F and a proposal that spreads them over the listed brokers
  (rack-aware unless ``--disable-rack-aware``); nothing changes.
* ``--execute --reassignment-json-file F`` prints the current assignment (to keep for a
  rollback) and starts the moves; ``--additional`` allows it while other moves run.
* ``--verify --reassignment-json-file F`` says, per partition, whether its move is done.
* ``--cancel --reassignment-json-file F`` stops the moves of F's partitions, which go back
  to their original replicas.
* ``--list`` shows the moves in progress.

The JSON files are Kafka's: ``{"version":1,"topics":[{"topic":"foo"}]}`` to generate from,
``{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}`` to execute.
Throttles (``--throttle``) need replication quotas, which Rillet does not have yet: the flag
is refused.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.client.admin import AdminClient
from rillet.controller.placement import place_replicas
from rillet.errors import InvalidConfigurationError, InvalidRequestError, KafkaError
from rillet.types import TopicPartition

HELP = "Move partitions between brokers (kafka-reassign-partitions.sh)"

Assignment = dict[TopicPartition, list[int]]

ACTIONS = ("generate", "execute", "verify", "cancel", "list")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    actions = p.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} reassignments")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="topics to move (generate)")
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to move them to (generate)")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="the partitions' targets")
    p.add_argument(
        "--disable-rack-aware", action="store_true", help="generate without rack awareness"
    )
    p.add_argument(
        "--additional", action="store_true", help="execute while other reassignments run"
    )
    p.add_argument("--throttle", type=int, help="not supported: Rillet has no quotas yet")
    p.add_argument(
        "--replica-alter-log-dirs-throttle", type=int, help="not supported (no quotas yet)"
    )


def _load(path: str, flag: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise InvalidConfigurationError(f"{flag}: cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise InvalidConfigurationError(f"{flag}: {path} is not JSON: {e}") from None


def parse_reassignment(data: Any) -> Assignment:
    """Kafka's reassignment JSON: partitions with their target replicas; a partition named
    twice, or a replica list naming a broker twice, is refused."""
    try:
        entries = data["partitions"]
        parsed = [
            (TopicPartition(str(e["topic"]), int(e["partition"])), [int(b) for b in e["replicas"]])
            for e in entries
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidRequestError(
            'Expected {"version":1,"partitions":[{"topic":"...","partition":N,'
            f'"replicas":[...]}}]}}: {e!r}'
        ) from None
    if not parsed:
        raise InvalidRequestError("The reassignment JSON names no partitions.")
    twice = sorted(tp for tp, n in Counter(tp for tp, _ in parsed).items() if n > 1)
    if twice:
        raise InvalidRequestError(
            "--reassignment-json-file contains multiple entries for "
            + ", ".join(_name(tp) for tp in twice)
        )
    dup = [f"{_name(tp)}: {r}" for tp, r in parsed if len(set(r)) != len(r)]
    if dup:
        raise InvalidRequestError(
            "Partition replica lists may not contain duplicate entries: " + ", ".join(dup)
        )
    return dict(parsed)


def parse_topics(data: Any) -> list[str]:
    """Kafka's topics-to-move JSON: ``{"topics":[{"topic":"foo"}],"version":1}``."""
    try:
        topics = [str(t["topic"]) for t in data["topics"]]
    except (KeyError, TypeError) as e:
        raise InvalidRequestError(
            f'Expected {{"version":1,"topics":[{{"topic":"..."}}]}}: {e!r}'
        ) from None
    twice = sorted(t for t, n in Counter(topics).items() if n > 1)
    if twice:
        raise InvalidRequestError(
            f"List of topics to reassign contains duplicate entries: {', '.join(twice)}"
        )
    return topics


def as_json(assignment: Assignment) -> str:
    """Kafka's reassignment JSON, compact, partitions in order."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": replicas,
                    "log_dirs": ["any"] * len(replicas),
                }
                for tp, replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _current(admin: AdminClient, topics: list[str]) -> Assignment:
    return {
        TopicPartition(t.name, p.partition): list(p.replicas)
        for t in admin.describe_topics(topics)
        for p in t.partitions
    }


def _brokers(admin: AdminClient) -> dict[int, str | None]:
    return {b["node_id"]: b["rack"] for b in admin.describe_cluster()["brokers"]}


def generate(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        raise InvalidRequestError("--generate needs --topics-to-move-json-file and --broker-list")
    topics = parse_topics(_load(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise InvalidRequestError(f"--broker-list takes broker ids: {args.broker_list}") from None
    twice = sorted(b for b, n in Counter(brokers).items() if n > 1)
    if twice:
        raise InvalidRequestError(f"Broker list contains duplicate entries: {twice}")
    racks = _brokers(admin)
    unknown = [b for b in brokers if b not in racks]
    if unknown:
        raise InvalidRequestError(f"Unknown broker id {unknown[0]}")
    current = _current(admin, topics)
    proposed: Assignment = {}
    rng = random.Random()
    for topic in topics:
        parts = sorted(tp for tp in current if tp.topic == topic)
        rf = len(current[parts[0]]) if parts else 0
        if rf > len(brokers):
            raise InvalidRequestError(
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}."
            )
        placed = place_replicas(
            brokers,
            len(parts),
            rf,
            rng,
            racks=None if args.disable_rack_aware else {b: racks[b] for b in brokers},
        )
        proposed.update({TopicPartition(topic, p): list(r) for p, r in placed.items()})
    print(f"Current partition replica assignment\n{as_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{as_json(proposed)}")
    return 0


def execute(admin: AdminClient, args: argparse.Namespace) -> int:
    targets = _targets(args)
    if not args.additional and admin.list_partition_reassignments():
        raise InvalidRequestError(
            "Cannot execute because there is an existing partition assignment.  Use "
            "--additional to override this and create a new partition assignment in "
            "addition to the existing one. The --additional flag can also be used to change "
            "the throttle by resubmitting the current reassignment."
        )
    known = _brokers(admin)
    unknown = sorted({b for r in targets.values() for b in r if b not in known})
    if unknown:
        raise InvalidRequestError(f"Unknown broker id {unknown[0]}")
    current = _current(admin, sorted({tp.topic for tp in targets}))
    print(
        "Current partition replica assignment\n\n"
        f"{as_json({tp: r for tp, r in current.items() if tp in targets})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if _failed(
        "Error reassigning partition(s)", admin.alter_partition_reassignments(dict(targets))
    ):
        return 1
    names = ",".join(_name(tp) for tp in sorted(targets))
    print(f"Successfully started partition reassignment{'' if len(targets) == 1 else 's'} for "
          f"{names}")  # fmt: skip
    return 0


def verify(admin: AdminClient, args: argparse.Namespace) -> int:
    targets = _targets(args)
    ongoing = admin.list_partition_reassignments(sorted(targets))
    current = _current(admin, sorted({tp.topic for tp in targets}))
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current.get(tp) == targets[tp]:
            lines.append(f"Reassignment of partition {_name(tp)} is completed.")
        else:
            now = ",".join(map(str, current.get(tp, [])))
            want = ",".join(map(str, targets[tp]))
            lines.append(
                f"There is no active reassignment of partition {_name(tp)}, but replica set "
                f"is {now} rather than {want}."
            )
    print("\n".join(lines))
    return 0


def cancel(admin: AdminClient, args: argparse.Namespace) -> int:
    targets = _targets(args)
    ongoing = admin.list_partition_reassignments(sorted(targets))
    active = sorted(tp for tp in targets if tp in ongoing)
    if not active:
        print("None of the specified partition reassignments are active.")
        return 0
    if _failed(
        "Error cancelling partition reassignment(s)",
        admin.alter_partition_reassignments(dict.fromkeys(active)),
    ):
        return 1
    print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
          f"{','.join(_name(tp) for tp in active)}")  # fmt: skip
    return 0


def list_ongoing(admin: AdminClient, args: argparse.Namespace) -> int:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items()):
        line = f"{_name(tp)}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    print("\n".join(lines))
    return 0


def _failed(what: str, results: dict[TopicPartition, KafkaError | None]) -> bool:
    """Print the partitions the controller refused, if any."""
    failed = sorted((tp, err) for tp, err in results.items() if err is not None)
    if failed:
        print(
            f"{what}:\n" + "\n".join(f"{_name(tp)}: {err}" for tp, err in failed),
            file=sys.stderr,
        )
    return bool(failed)


def _targets(args: argparse.Namespace) -> Assignment:
    if not args.reassignment_json_file:
        raise InvalidRequestError("This action needs --reassignment-json-file")
    return parse_reassignment(_load(args.reassignment_json_file, "--reassignment-json-file"))


def run(args: argparse.Namespace) -> int:
    if args.throttle is not None or args.replica_alter_log_dirs_throttle is not None:
        raise InvalidConfigurationError(
            "--throttle and --replica-alter-log-dirs-throttle are not supported: Rillet has "
            "no replication quotas yet, so a reassignment copies at full speed."
        )
    action = next(a for a in ACTIONS if getattr(args, a))
    handler = {
        "generate": generate,
        "execute": execute,
        "verify": verify,
        "cancel": cancel,
        "list": list_ongoing,
    }[action]
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        return handler(admin, args)
