"""``rillet topics``: Kafka's ``kafka-topics.sh`` (create, list, describe, alter, delete)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from rillet.cli.common import (
    add_admin_config,
    add_bootstrap,
    admin_client,
    parse_key_values,
    topic_id_string,
)
from rillet.client.admin import (
    AdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    PartitionInfo,
)
from rillet.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from rillet.types import TopicPartition

HELP = "Create, list, describe, alter and delete topics (kafka-topics.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    actions = p.add_mutually_exclusive_group(required=True)
    for action in ("create", "list", "describe", "alter", "delete"):
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    p.add_argument("--topic", help="the topic (a name, or a regex with --list/--describe)")
    p.add_argument("--partitions", type=int, help="number of partitions (create, alter)")
    p.add_argument("--replication-factor", type=int, help="replication factor (create)")
    p.add_argument("--replica-assignment", help="p0r0:p0r1,p1r0:p1r1,... broker lists (create)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config")
    p.add_argument("--if-not-exists", action="store_true", help="create only if missing")
    p.add_argument("--if-exists", action="store_true", help="alter/delete only if present")
    p.add_argument("--exclude-internal", action="store_true", help="hide internal topics")
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than their replica set",
    )
    p.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than min.insync.replicas",
    )
    p.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="describe only partitions whose ISR is exactly min.insync.replicas",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="describe only partitions without a leader",
    )


def _assignment(text: str) -> dict[int, list[int]]:
    return {p: [int(b) for b in part.split(":")] for p, part in enumerate(text.split(",")) if part}


def run(args: argparse.Namespace) -> int:
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        if args.create:
            return _create(admin, args)
        if args.list:
            for name in admin.list_topics():
                if args.exclude_internal and name.startswith("__"):
                    continue
                if args.topic is None or name == args.topic:
                    print(name)
            return 0
        if args.describe:
            return _describe(admin, args)
        if args.alter:
            return _alter(admin, args)
        return _delete(admin, args)


def _need_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise SystemExit("Error: --topic is required")
    return str(args.topic)


def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = _need_topic(args)
    configs = parse_key_values(args.config, "--config")
    new = NewTopic(
        topic,
        args.partitions if args.partitions is not None else -1,
        args.replication_factor if args.replication_factor is not None else -1,
        _assignment(args.replica_assignment) if args.replica_assignment else None,
        configs,
    )
    try:
        admin.create_topics([new])
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            return 0
        raise
    print(f"Created topic {topic}.")
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    topics = admin.describe_topics([args.topic] if args.topic else None)
    # As Kafka's tool: partitions being reassigned show the replicas added and removed.
    wanted = [TopicPartition(t.name, p.partition) for t in topics for p in t.partitions]
    reassigning = admin.list_partition_reassignments(wanted) if wanted else {}
    status = 0
    for t in topics:
        if t.error is not None:
            print(f"Error: {t.error}", file=sys.stderr)
            status = 1
            continue
        if args.exclude_internal and t.is_internal:
            continue
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t.name)])
        described = configs.get((ConfigResourceType.TOPIC, t.name), {})
        filtered = _partition_filter(args, described)
        if filtered is None:
            overrides = ",".join(
                f"{k}={v}"
                for k, (v, source) in sorted(described.items())
                if source == "DYNAMIC_TOPIC_CONFIG"
            )
            rf = len(t.partitions[0].replicas) if t.partitions else 0
            print(
                f"Topic: {t.name}\tTopicId: {topic_id_string(t.topic_id)}\t"
                f"PartitionCount: {len(t.partitions)}\tReplicationFactor: {rf}\t"
                f"Configs: {overrides}"
            )
        for p in t.partitions:
            if filtered is not None and not filtered(p):
                continue
            line = (
                f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: "
                f"{p.leader if p.leader >= 0 else 'none'}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
            if p.elr:
                line += f"\tElr: {','.join(map(str, p.elr))}"
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            moving = reassigning.get(TopicPartition(t.name, p.partition))
            if moving is not None:
                line += (
                    f"\tAdding Replicas: {','.join(map(str, moving.adding_replicas))}"
                    f"\tRemoving Replicas: {','.join(map(str, moving.removing_replicas))}"
                )
            print(line)
    return status


def _partition_filter(
    args: argparse.Namespace, configs: dict[str, tuple[str | None, str]]
) -> Callable[[PartitionInfo], bool] | None:
    """The partitions a report flag asks for (None: every partition, with the topic line;
    as in Kafka, a report prints partition lines only)."""
    value = configs.get("min.insync.replicas", ("1", ""))[0]
    min_isr = int(value) if value else 1
    checks: list[Callable[[PartitionInfo], bool]] = []
    if args.under_replicated_partitions:
        checks.append(lambda p: len(p.isr) < len(p.replicas))
    if args.under_min_isr_partitions:
        checks.append(lambda p: len(p.isr) < min_isr)
    if args.at_min_isr_partitions:
        checks.append(lambda p: len(p.isr) == min_isr)
    if args.unavailable_partitions:
        checks.append(lambda p: p.leader < 0)
    if not checks:
        return None
    return lambda p: any(check(p) for check in checks)


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = _need_topic(args)
    try:
        if args.partitions is not None:
            assignments = None
            if args.replica_assignment:
                assignments = list(_assignment(args.replica_assignment).values())
            admin.create_partitions({topic: NewPartitions(args.partitions, assignments)})
        if args.config:
            admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, topic, parse_key_values(args.config, "--config")
                    )
                ]
            )
    except UnknownTopicOrPartitionError:
        if args.if_exists:
            return 0
        raise
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = _need_topic(args)
    try:
        admin.delete_topics([topic])
    except UnknownTopicOrPartitionError:
        if args.if_exists:
            return 0
        raise
    return 0
