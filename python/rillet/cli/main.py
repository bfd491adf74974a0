"""Entry point of the ``rillet`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rillet.cli import (
    acls,
    certs,
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    consumer_perf_test,
    dump_log,
    leader_election,
    log_dirs,
    metadata_quorum,
    producer_perf_test,
    reassign_partitions,
    server,
    storage,
    topics,
    transactions,
)
from rillet.errors import KafkaError
from rillet.tuning import tune_malloc

SUBCOMMANDS = {
    "acls": acls,
    "certs": certs,
    "configs": configs,
    "console-consumer": console_consumer,
    "console-producer": console_producer,
    "consumer-groups": consumer_groups,
    "consumer-perf-test": consumer_perf_test,
    "dump-log": dump_log,
    "leader-election": leader_election,
    "log-dirs": log_dirs,
    "metadata-quorum": metadata_quorum,
    "producer-perf-test": producer_perf_test,
    "reassign-partitions": reassign_partitions,
    "server": server,
    "storage": storage,
    "topics": topics,
    "transactions": transactions,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rillet",
        description="Rillet: Kafka's tools as subcommands (bin/kafka-X.sh becomes rillet X).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in SUBCOMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    tune_malloc()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(SUBCOMMANDS[args.command].run(args) or 0)
    except KafkaError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
