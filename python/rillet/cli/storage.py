"""``rillet storage``: Kafka's StorageTool (``kafka-storage.sh``).

``random-uuid`` prints a new cluster id; ``format -t CLUSTER_ID -c server.properties`` writes
``meta.properties`` to every log dir and the metadata log dir; ``info -c server.properties``
shows what is in them and any problem.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from rillet.config import BrokerConfig
from rillet.errors import KafkaError
from rillet.storage.meta_properties import (
    LATEST_METADATA_VERSION,
    META_PROPERTIES_FILE,
    MetaProperties,
    format_log_dirs,
    random_uuid,
    read_meta_properties,
)

HELP = "Format and inspect log directories like kafka-storage.sh"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="storage_command", metavar="COMMAND", required=True)
    sub.add_parser(
        "random-uuid",
        help="print a random UUID to use as a cluster id",
        description="Print a random UUID to use as a cluster id.",
    )
    fmt = sub.add_parser(
        "format",
        help="format the log directories of a node",
        description="Write meta.properties (cluster id, node id, directory id) to every "
        "directory of log.dirs and to metadata.log.dir.",
    )
    fmt.add_argument("-c", "--config", required=True, help="the server.properties file")
    fmt.add_argument(
        "-t", "--cluster-id", required=True, help="the cluster id (rillet storage random-uuid)"
    )
    fmt.add_argument(
        "-g",
        "--ignore-formatted",
        action="store_true",
        help="skip directories that are already formatted (for this cluster and node)",
    )
    fmt.add_argument(
        "-r",
        "--release-version",
        default=LATEST_METADATA_VERSION,
        choices=[LATEST_METADATA_VERSION],
        help=f"the metadata.version to start at (default {LATEST_METADATA_VERSION})",
    )
    info = sub.add_parser(
        "info",
        help="show the meta.properties of the log directories",
        description="Show the meta.properties of every log directory and any problem.",
    )
    info.add_argument("-c", "--config", required=True, help="the server.properties file")


def run(args: argparse.Namespace) -> int:
    try:
        if args.storage_command == "random-uuid":
            print(random_uuid())
            return 0
        config = BrokerConfig.from_file(args.config)
        if args.storage_command == "format":
            format_log_dirs(
                config,
                args.cluster_id,
                ignore_formatted=args.ignore_formatted,
                metadata_version=args.release_version,
                out=print,
            )
            return 0
        return info(config, sys.stdout)
    except KafkaError as e:
        print(f"Error: {e.message or e}", file=sys.stderr)
        return 1


def info(config: BrokerConfig, out: TextIO) -> int:
    """Kafka's ``storage info``: the directories found, their metadata and any problems;
    1 when there are problems."""
    found: list[Path] = []
    problems: list[str] = []
    metas: dict[Path, MetaProperties] = {}
    for d in config.all_log_dirs:
        if not d.exists():
            problems.append(f"{d} does not exist")
            continue
        if not d.is_dir():
            problems.append(f"{d} is not a directory")
            continue
        found.append(d)
        try:
            meta = read_meta_properties(d)
        except KafkaError as e:
            problems.append(e.message)
            continue
        if meta is None:
            problems.append(f"{d} is not formatted.")
        else:
            metas[d] = meta
    first: MetaProperties | None = None
    for d, meta in metas.items():
        if first is None:
            first = meta
        elif meta.cluster_id != first.cluster_id:
            problems.append(
                f"Metadata for {d / META_PROPERTIES_FILE} was {meta}, but other directories "
                f"featured {first}"
            )
        if meta.node_id != config.node_id:
            problems.append(
                f"{d / META_PROPERTIES_FILE} has node.id {meta.node_id}, but the configuration "
                f"has node.id {config.node_id}"
            )
    if found:
        print("Found log director" + ("y:" if len(found) == 1 else "ies:"), file=out)
        for d in found:
            print(f"  {d}", file=out)
        print(file=out)
    if first is not None:
        print(f"Found metadata: {first}", file=out)
        print(file=out)
    if problems:
        print("Found problem" + (":" if len(problems) == 1 else "s:"), file=out)
        for p in problems:
            print(f"  {p}", file=out)
        print(file=out)
        return 1
    return 0
