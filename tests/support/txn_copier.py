"""A consume-transform-produce loop with transactions, run as its own process by the
exactly-once tests (Kafka's ``TransactionalMessageCopier`` in miniature).

    python -m tests.support.txn_copier BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [HOLD_MS]

It reads ``INPUT`` in group ``GROUP`` (read_committed, no auto-commit), and for each poll
begins a transaction, writes every record's value to the same partition of ``OUTPUT``,
commits the consumer's positions inside the transaction (``send_offsets_to_transaction``)
and commits. Killed at any point and started again, it fences its previous instance
(``init_transactions`` with the same transactional id aborts the open transaction) and goes
on from the committed positions: each input record reaches a read_committed reader of the
output exactly once. It prints ``copied N`` after each commit.

``HOLD_MS`` (0 by default) keeps each transaction open that long once its records are written
(a transform that takes time), after printing ``open N``: a test that kills the copier then
knows the kill lands inside a transaction with data in the output.
"""

from __future__ import annotations

import logging
import sys
import time

from rillet import Consumer, OffsetAndMetadata, Producer


def main(
    bootstrap: str, source: str, sink: str, group: str, transactional_id: str, hold_ms: str = "0"
) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    consumer = Consumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        # A static member of a classic group (KIP-345): the copier started after a kill
        # takes its partitions over at once instead of waiting for the killed one's session
        # to time out. (A KIP-848 group answers UNRELEASED_INSTANCE_ID until then.)
        group_protocol="classic",
        group_instance_id=transactional_id,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    producer = Producer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        linger_ms=5,
        transaction_timeout_ms=10_000,
    )
    producer.init_transactions()
    print("initialized", flush=True)
    copied = 0
    while True:
        polled = consumer.poll(timeout_ms=500)
        if not polled:
            continue
        producer.begin_transaction()
        for tp, records in polled.items():
            for r in records:
                producer.send(sink, r.value, key=r.key, partition=tp.partition)
        positions = {tp: OffsetAndMetadata(consumer.position(tp)) for tp in polled}
        producer.send_offsets_to_transaction(positions, consumer.group_metadata())
        producer.flush()
        copied += sum(len(rs) for rs in polled.values())
        print(f"open {copied}", flush=True)
        time.sleep(int(hold_ms) / 1000)
        producer.commit_transaction()
        print(f"copied {copied}", flush=True)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
