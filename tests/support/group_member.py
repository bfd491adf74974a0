"""A consumer-group member as its own process, for tests that kill it: consumes a topic in a
group and writes its own log as JSON lines, flushed at once: ``assigned`` / ``revoked``
(with the partitions and a CLOCK_MONOTONIC time, shared by every process of the machine) and
``record`` (partition, offset, value). SIGTERM closes the consumer (leaving the group).

    python -m tests.support.group_member BOOTSTRAP GROUP TOPIC LOGFILE
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from rillet import Consumer, TopicPartition
from rillet.client.consumer.listener import ConsumerRebalanceListener


class _Log(ConsumerRebalanceListener):
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, **entry: object) -> None:
        self.out.write(json.dumps({"t": time.monotonic_ns(), **entry}) + "\n")
        self.out.flush()

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self.write(event="assigned", partitions=[tp.partition for tp in assigned])

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self.write(event="revoked", partitions=[tp.partition for tp in revoked])

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        self.write(event="revoked", partitions=[tp.partition for tp in lost], lost=True)


def main(argv: Sequence[str]) -> int:
    bootstrap, group, topic, path = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(path, "a") as out:
        log = _Log(out)
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=path.rsplit("/", 1)[-1],
            auto_offset_reset="earliest",
            auto_commit_interval_ms=200,
        )
        consumer.subscribe([topic], listener=log)
        log.write(event="started")
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=100).items():
                for r in records:
                    log.write(
                        event="record", p=tp.partition, o=r.offset, v=(r.value or b"").decode()
                    )
        consumer.close()
        log.write(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
