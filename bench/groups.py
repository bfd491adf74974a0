#!/usr/bin/env python3
"""Consumer-group benchmark: one Rillet node on this machine, a 12-partition topic with a
backlog, member processes of one group (KIP-848, the consumer's default protocol).

* Rebalance: three members consume at full speed; a fourth joins. Reported: the time from its
  start to its first record (target: at most two heartbeat intervals), and the other members'
  consumption rate from the join to that moment against their rate in the two seconds before
  it (target: at least 0.9; members whose partitions stay are never stopped).
* A member is killed (kill -9): the time until one of its partitions is consumed again by
  another member (about the session timeout).
* ``rillet consumer-perf-test --group`` (auto-commit on) against the same tool without a
  group, on the same topic in the same run (target: at least 0.9).
* Compaction: ``bench/compaction.py``'s cleaning rate against a raw write of the same bytes,
  measured by that script in this run (target: at least 0.3).

Settings: ``group.consumer.heartbeat.interval.ms`` 500 and ``group.consumer.session.timeout.ms``
6000 (Kafka's defaults are 5000 and 45000: every time here scales with them; the join is
measured once more on a node with Kafka's defaults); everything else Kafka's defaults.
Members are processes, so on a 2-core machine a joining member competes for CPU with the
others; the rate ratio includes that.

    python bench/groups.py                       # the reported run
    python bench/groups.py --records 2000000 --perf-records 1000000 --rounds 1 --skip-compaction
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rillet import Consumer
from rillet.client.admin import NewTopic
from tests.support.cluster import Cluster, eventually

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 12
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",  # one node (Kafka's config/server.properties too)
}
WINDOW_S = 0.1


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- a member process ----------------------------------------------------------------------------


def member_main(bootstrap: str, group: str, topic: str) -> int:
    """Consume as fast as possible; every WINDOW_S print ``rate <monotonic ns> <partitions
    owned> <partition>:<records read>,...``; print ``first <ns> <partition>`` at the first
    record."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                        auto_offset_reset="earliest", max_poll_records=2000)  # fmt: skip
    consumer.subscribe([topic])
    print(f"joined {time.monotonic_ns()}", flush=True)
    counts: dict[int, int] = {}
    first, next_report = True, time.monotonic() + WINDOW_S
    while not stop.is_set():
        for tp, records in consumer.poll(timeout_ms=50).items():
            if first:
                print(f"first {time.monotonic_ns()} {tp.partition}", flush=True)
                first = False
            counts[tp.partition] = counts.get(tp.partition, 0) + len(records)
        if time.monotonic() >= next_report:
            owned = ",".join(str(tp.partition) for tp in sorted(consumer.assignment())) or "-"
            read = ",".join(f"{p}:{n}" for p, n in sorted(counts.items())) or "-"
            print(f"rate {time.monotonic_ns()} {owned} {read}", flush=True)
            counts, next_report = {}, time.monotonic() + WINDOW_S
    consumer.close()
    return 0


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.started_ns = time.monotonic_ns()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--member", bootstrap, group, topic],
            stdout=subprocess.PIPE,
            text=True,
        )
        # (ns, owned, records read per partition) every WINDOW_S
        self.windows: list[tuple[int, set[int], dict[int, int]]] = []
        self.first_ns: int | None = None
        self.joined_ns: int | None = None
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, out: IO[str]) -> None:
        for line in out:
            parts = line.split()
            if parts[0] == "first" and self.first_ns is None:
                self.first_ns = int(parts[1])
            elif parts[0] == "joined":
                self.joined_ns = int(parts[1])
            elif parts[0] == "rate":
                owned = set() if parts[2] == "-" else {int(p) for p in parts[2].split(",")}
                read = {}
                if parts[3] != "-":
                    for item in parts[3].split(","):
                        p, n = item.split(":")
                        read[int(p)] = int(n)
                self.windows.append((int(parts[1]), owned, read))

    def owned(self) -> set[int]:
        return self.windows[-1][1] if self.windows else set()

    def rate(self, start_ns: int, end_ns: int, partitions: set[int] | None = None) -> float:
        """Records per second (of ``partitions`` only, if given) over the windows that
        ended in (start, end]."""
        n = sum(
            c
            for t, _, read in self.windows
            if start_ns < t <= end_ns
            for p, c in read.items()
            if partitions is None or p in partitions
        )
        return n / max((end_ns - start_ns) / 1e9, 1e-9)

    def owned_throughout(self, start_ns: int, end_ns: int) -> set[int]:
        """The partitions this member owned in every window of (start, end]."""
        sets = [owned for t, owned, _ in self.windows if start_ns < t <= end_ns]
        return set.intersection(*sets) if sets else set()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# -- the measurements ----------------------------------------------------------------------------


def create(c: Cluster, topic: str) -> None:
    with c.admin() as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


def produce(c: Cluster, topic: str, records: int, size: int, rate: int) -> subprocess.Popen[str]:
    """``producer-perf-test`` writing ``records`` at ``rate`` records/s (-1: at once)."""
    return subprocess.Popen(
        [sys.executable, "-m", "rillet.cli.main", "producer-perf-test", "--topic", topic,
         "--num-records", str(records), "--record-size", str(size), "--throughput", str(rate),
         "--bootstrap-server", c.bootstrap(), "--producer-props", "linger.ms=5",
         "batch.size=262144"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def rebalance_and_kill(
    c: Cluster, topic: str, rate: int, size: int, *, kill: bool = True
) -> dict[str, Any]:
    """Members keep up with a producer writing ``rate`` records/s to every partition; the
    rate of a partition that stays with its member is compared before and during the
    rebalance a new member causes. Then (``kill``) one member is killed with kill -9."""
    producer = produce(c, topic, rate * 600, size, rate)
    members = [Member(c.bootstrap(), "bench", topic, f"m{i}") for i in range(3)]
    try:
        eventually(lambda: sorted(len(m.owned()) for m in members) == [4, 4, 4] or None, 60)
        time.sleep(3)  # a steady rate to compare with
        join_ns = time.monotonic_ns()
        joiner = Member(c.bootstrap(), "bench", topic, "m3")
        eventually(lambda: joiner.first_ns is not None or None, 60)
        assert joiner.first_ns is not None and joiner.joined_ns is not None
        # From its subscribe() (its JoinGroup) to its first record; the process start-up
        # before it (Python importing the client) is reported apart.
        join_to_records = (joiner.first_ns - joiner.joined_ns) / 1e9
        startup = (joiner.joined_ns - join_ns) / 1e9
        end_ns = joiner.first_ns + int(WINDOW_S * 1e9)
        before_ns = join_ns - 2_000_000_000
        stayed = {m.name: m.owned_throughout(before_ns, end_ns) for m in members}
        before = sum(m.rate(before_ns, join_ns, stayed[m.name]) for m in members)
        during = sum(m.rate(join_ns, end_ns, stayed[m.name]) for m in members)
        kept = sum(len(p) for p in stayed.values())
        log(f"  join: first record {join_to_records:.3f} s after the new member subscribed "
            f"({startup:.3f} s of process start-up before that); "
            f"the {kept} partitions that stayed: {before:,.0f} rec/s before, "
            f"{during:,.0f} rec/s during")  # fmt: skip
        members.append(joiner)
        joined = {
            "produce_rate": rate,
            "join_to_records_s": join_to_records,
            "member_process_startup_s": startup,
            "partitions_that_stayed": kept,
            "others_rate_before": before,
            "others_rate_during": during,
            "others_rate_during_rebalance_ratio": during / before if before else None,
        }
        if not kill:
            return joined
        eventually(lambda: sorted(len(m.owned()) for m in members) == [3, 3, 3, 3] or None, 60)
        time.sleep(1)
        victim = members[1]
        orphans = victim.owned()
        killed_ns = time.monotonic_ns()
        victim.kill()

        def reconsumed() -> int | None:
            for m in members:
                if m is victim:
                    continue
                for t, _, read in m.windows:
                    if t > killed_ns and any(read.get(p) for p in orphans):
                        return t
            return None

        back_ns = eventually(reconsumed, 120)
        kill_to_reconsumed = (back_ns - killed_ns) / 1e9
        log(f"  kill -9: its partitions {sorted(orphans)} consumed again after "
            f"{kill_to_reconsumed:.3f} s")  # fmt: skip
        return {**joined, "kill_to_reconsumed_s": kill_to_reconsumed}
    finally:
        for m in members:
            m.stop()
        producer.kill()
        producer.wait()


def perf_test(c: Cluster, topic: str, records: int, group: str | None) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [sys.executable, "-m", "rillet.cli.main", "consumer-perf-test", "--topic", topic,
                "--messages", str(records), "--bootstrap-server", c.bootstrap(),
                "--json", out.name]  # fmt: skip
        if group:
            argv += ["--group", group]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        result: dict[str, Any] = json.loads(Path(out.name).read_text())
    result["output"] = done.stdout.strip().splitlines()[-1]
    result["command"] = " ".join(["rillet", *argv[3:]])
    log(f"  $ {result['command']}\n    {result['output']}")
    return result


def compaction() -> dict[str, Any] | None:
    script = Path(__file__).resolve().parent / "compaction.py"
    if not script.exists():
        return None
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        log(f"  compaction benchmark failed:\n{done.stderr[-2000:]}")
        return None
    log(done.stdout.rstrip())
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--member", nargs=3, metavar=("BOOTSTRAP", "GROUP", "TOPIC"),
                    help=argparse.SUPPRESS)  # fmt: skip
    ap.add_argument("--records", type=int, default=6_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--produce-rate", type=int, default=50_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--perf-records", type=int, default=5_000_000)
    ap.add_argument("--skip-compaction", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "groups.json")
    args = ap.parse_args(argv)
    if args.member:
        return member_main(*args.member)
    work = Path(tempfile.mkdtemp(prefix="rillet-bench-groups-"))
    result: dict[str, Any] = {
        "settings": SETTINGS,
        "partitions": PARTITIONS,
        "records": args.records,
        "record_size": args.record_size,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "heartbeat_interval_s": int(SETTINGS["group.consumer.heartbeat.interval.ms"]) / 1000,
        "session_timeout_s": int(SETTINGS["group.consumer.session.timeout.ms"]) / 1000,
    }
    c = Cluster(work, voters=1)
    for n in c.nodes.values():
        n.extra.update(SETTINGS)
    c.start()
    try:
        log("rebalance and kill, members keeping up with a producer")
        create(c, "live")
        result.update(rebalance_and_kill(c, "live", args.produce_rate, args.record_size))
        log("filling the backlog")
        create(c, "backlog")
        if produce(c, "backlog", args.records, args.record_size, -1).wait() != 0:
            raise SystemExit("producer-perf-test failed to fill the backlog")
        log("consumer-perf-test with and without a group")
        nogroup, group = [], []
        for i in range(args.rounds):  # interleaved, so drift hits both alike
            nogroup.append(perf_test(c, "backlog", args.perf_records, None))
            group.append(perf_test(c, "backlog", args.perf_records, f"perf-{i}"))
        result["perf_nogroup"] = nogroup
        result["perf_group"] = group
        median_no = statistics.median(r["mb_per_sec"] for r in nogroup)
        median_group = statistics.median(r["mb_per_sec"] for r in group)
        result["group_vs_nogroup"] = median_group / median_no
        result["rebalance_time_ms"] = statistics.median(r["rebalance_time_ms"] for r in group)
    finally:
        c.stop()
    log("join with Kafka's default group settings (heartbeat 5 s, session 45 s)")
    (work / "defaults").mkdir()
    d = Cluster(work / "defaults", voters=1)
    for n in d.nodes.values():
        n.extra["offsets.topic.replication.factor"] = "1"
    d.start()
    try:
        create(d, "live")
        defaults = rebalance_and_kill(d, "live", args.produce_rate, args.record_size, kill=False)
        result["kafka_defaults"] = {**defaults, "heartbeat_interval_s": 5.0}
    finally:
        d.stop()
    if not args.skip_compaction:
        log("compaction (bench/compaction.py)")
        comp = compaction()
        result["compaction"] = comp
        result["compaction_vs_raw_write"] = comp.get("compaction_vs_raw_write") if comp else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    hb = result["heartbeat_interval_s"]
    session = result["session_timeout_s"]
    print(f"Rillet consumer groups, {PARTITIONS} partitions, {args.records:,} x "
          f"{args.record_size} B backlog, heartbeat {hb} s, session {session} s")  # fmt: skip
    print(f"  join -> first record: {result['join_to_records_s']:.2f} s "
          f"({result['join_to_records_s'] / hb:.1f} heartbeat intervals; target <= 2)")  # fmt: skip
    ratio = result["others_rate_during_rebalance_ratio"]
    print(f"  partitions that stayed, rate during the rebalance: {ratio:.2f}x of before "
          f"(target >= 0.9)")  # fmt: skip
    kd = result["kafka_defaults"]
    print(f"  with Kafka's defaults (heartbeat 5 s): join -> first record "
          f"{kd['join_to_records_s']:.2f} s, partitions that stayed "
          f"{kd['others_rate_during_rebalance_ratio']:.2f}x")  # fmt: skip
    print(f"  kill -9 -> partitions consumed again: {result['kill_to_reconsumed_s']:.2f} s "
          f"(session timeout {result['session_timeout_s']} s)")  # fmt: skip
    print(f"  consumer-perf-test --group vs no group: {result['group_vs_nogroup']:.2f}x "
          f"(target >= 0.9)")  # fmt: skip
    if result.get("compaction_vs_raw_write") is not None:
        print(
            f"  compaction vs raw write: {result['compaction_vs_raw_write']:.2f}x (target >= 0.3)"
        )
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
