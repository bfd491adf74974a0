"""``rillet leader-election``: Kafka's ``kafka-leader-election.sh``. Elects each named
partition's preferred replica (``--election-type preferred``), or gives a partition without a
leader any live replica even outside the ISR (``--election-type unclean``, which may lose
records), and prints Kafka's summary lines. Exits 1 when some partition could not be
elected."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.errors import ElectionNotNeededError, InvalidRequestError, KafkaError
from rillet.types import TopicPartition

HELP = "Elect preferred or unclean partition leaders (kafka-leader-election.sh)"

_TYPES = ("PREFERRED", "UNCLEAN")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p, "--admin.config")
    p.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=_TYPES,
        metavar="{preferred,unclean}",
        help="PREFERRED elects the first live in-sync replica of the assignment; UNCLEAN "
        "gives a leaderless partition any live replica, in the ISR or not",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    which.add_argument("--topic", help="a topic (with --partition)")
    which.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='the partitions as JSON: {"partitions": [{"topic": "foo", "partition": 1}]}',
    )
    p.add_argument("--partition", type=int, help="the partition of --topic")


def partitions_from_json(text: str) -> list[TopicPartition]:
    """Kafka's election JSON: ``{"partitions": [{"topic": ..., "partition": ...}, ...]}``;
    a partition named twice is refused."""
    try:
        data = json.loads(text)
        entries = data["partitions"]
        parsed = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidRequestError(
            'Expected {"partitions": [{"topic": "...", "partition": N}, ...]}: ' + str(e)
        ) from None
    duplicates = sorted(tp for tp, n in Counter(parsed).items() if n > 1)
    if duplicates:
        raise InvalidRequestError(
            "Replica election data contains duplicate partitions: "
            + ", ".join(_name(tp) for tp in duplicates)
        )
    return parsed


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    if args.all_topic_partitions:
        if args.partition is not None:
            raise InvalidRequestError("--partition goes with --topic")
        return None
    if args.topic is not None:
        if args.partition is None:
            raise InvalidRequestError("--topic needs --partition")
        return [TopicPartition(args.topic, args.partition)]
    if args.partition is not None:
        raise InvalidRequestError("--partition goes with --topic")
    return partitions_from_json(Path(args.path_to_json_file).read_text())


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def summarize(election_type: str, results: dict[TopicPartition, KafkaError | None]) -> int:
    """Print Kafka's lines for the outcomes; 1 when some partition could not be elected."""
    ordered = sorted(results.items())
    done = [_name(tp) for tp, err in ordered if err is None]
    noop = [_name(tp) for tp, err in ordered if isinstance(err, ElectionNotNeededError)]
    failed = [
        (_name(tp), err)
        for tp, err in ordered
        if err is not None and not isinstance(err, ElectionNotNeededError)
    ]
    if done:
        print(
            f"Successfully completed leader election ({election_type}) for partitions "
            + ", ".join(done)
        )
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(noop))
    if failed:
        for tp, err in failed:
            print(f"Error completing leader election ({election_type}) for partition: {tp}: {err}")
        print(f"Error: {len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    partitions = _partitions(args)
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        results = admin.perform_leader_election(args.election_type, partitions)
    return summarize(args.election_type, results)
