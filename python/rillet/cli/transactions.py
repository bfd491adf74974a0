"""``rillet transactions``: Kafka's ``kafka-transactions.sh`` (KIP-664). Subcommands:
``list`` (every transactional id, from each broker), ``describe --transactional-id T`` (its
state from its coordinator), ``describe-producers --topic T --partition P`` (the partition
leader's producer state) and ``abort --topic T --partition P`` (an ABORT marker for a
hanging transaction, found by ``--start-offset`` or named by ``--producer-id``,
``--producer-epoch`` and ``--coordinator-epoch``). Output and flags are Kafka's."""

from __future__ import annotations

import argparse
import time

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client, print_table
from rillet.client.admin import AdminClient
from rillet.errors import InvalidRequestError
from rillet.types import TopicPartition

HELP = "List, describe and abort transactions (kafka-transactions.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    sub = p.add_subparsers(dest="txn_command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="list transactions")
    describe = sub.add_parser("describe", help="describe the state of a transactional id")
    describe.add_argument("--transactional-id", required=True, help="the transactional id")
    producers = sub.add_parser("describe-producers", help="describe a partition's producers")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    abort = sub.add_parser("abort", help="abort a hanging transaction (writes an ABORT marker)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the transaction's first offset")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)


def _none(value: int) -> object:
    return "None" if value < 0 else value


def run(args: argparse.Namespace) -> int:
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        if args.txn_command == "list":
            rows: list[list[object]] = [
                ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
            ]
            for t in admin.list_transactions():
                rows.append([t.transactional_id, t.coordinator, t.producer_id, t.state])
            print_table(rows)
            return 0
        if args.txn_command == "describe":
            (d,) = admin.describe_transactions([args.transactional_id])
            now = int(time.time() * 1000)
            started = d.transaction_start_time_ms
            print_table(
                [
                    ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                     "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                     "TransactionDurationMs", "TopicPartitions"],
                    [d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch,
                     d.state, d.transaction_timeout_ms, _none(started),
                     _none(now - started if started >= 0 else -1),
                     ",".join(str(tp) for tp in d.partitions)],
                ]
            )  # fmt: skip
            return 0
        tp = TopicPartition(args.topic, args.partition)
        if args.txn_command == "describe-producers":
            rows = [["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset"]]  # fmt: skip
            for s in admin.describe_producers(tp):
                rows.append([s.producer_id, s.producer_epoch, _none(s.coordinator_epoch),
                             s.last_sequence, s.last_timestamp,
                             _none(s.current_transaction_start_offset)])  # fmt: skip
            print_table(rows)
            return 0
        return _abort(admin, args, tp)


def _abort(admin: AdminClient, args: argparse.Namespace, tp: TopicPartition) -> int:
    if args.start_offset is not None:
        matches = [
            s
            for s in admin.describe_producers(tp)
            if s.current_transaction_start_offset == args.start_offset
        ]
        if not matches:
            raise InvalidRequestError(
                f"Could not find any open transactions starting at offset {args.start_offset} "
                f"on partition {tp}"
            )
        s = matches[0]
        pid, epoch, coordinator_epoch = s.producer_id, s.producer_epoch, s.coordinator_epoch
    else:
        named = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        if any(v is None for v in named):
            raise InvalidRequestError(
                "Either --start-offset or all of --producer-id, --producer-epoch and "
                "--coordinator-epoch must be given"
            )
        pid, epoch, coordinator_epoch = named
    admin.abort_transaction(tp, pid, epoch, max(coordinator_epoch, 0))
    print(f"Aborted the transaction of producer {pid} (epoch {epoch}) on partition {tp}")
    return 0
