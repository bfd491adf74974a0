#!/usr/bin/env python3
"""Cluster benchmark: a 3-node Rillet cluster (three combined broker+controller processes on
loopback, data in a temp dir), topics with replication factor 3.

* Throughput: ``rillet producer-perf-test`` with 1 KiB records on a 6-partition RF=3 topic
  (``min.insync.replicas=2``), acks=1 against acks=all on the same cluster in the same run
  (the baseline), with the producer's defaults (Kafka's: 16 KiB batches, no linger) and
  with throughput settings beside them; each run on a fresh topic, the best of
  ``--rounds`` kept, every round reported.
* Latency: p99 of acks=all produce throttled (``--throughput``) to half of the acks=all
  peak (tuned settings) of this run.
* Failover: kill -9 the leader of a partition while an acks=all producer is warmed up on
  it; the time from the kill to the first acknowledged record on the new leader, over
  ``--kills`` kills (the killed node restarts and rejoins the ISR before the next). Run
  with ``broker.session.timeout.ms=1000`` (``broker.heartbeat.interval.ms=250``), the
  setting this figure is for, and with Kafka's default 9000 (heartbeat 2000) for
  ``--default-kills`` kills.
* Controller failover: kill -9 the active controller; the time to the next committed
  metadata record (a CreateTopics acknowledged through any live broker).

Output: a human summary on stderr/stdout, ``bench/results/cluster.json`` and a chart
(``bench/results/cluster.png``), and one JSON line last with ``acks_all_vs_acks1``,
``failover_median_s``, ``failover_max_s`` (and split: ``failover_median_s_leader_only``,
``failover_median_s_leader_and_controller``) and ``controller_failover_median_s``.

    pip install -e '.[bench]'
    python bench/cluster.py                                   # the reported run
    python bench/cluster.py --records 50000 --rounds 1 --kills 3 --default-kills 1   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rillet import Producer
from rillet.client.admin import AdminClient, NewTopic
from rillet.errors import KafkaError
from tests.support.cluster import Cluster, eventually

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1e6

DEFAULT_PROPS: list[str] = []  # the producer's defaults (Kafka's)
TUNED_PROPS = [
    "batch.size=262144",
    "linger.ms=5",
    "buffer.memory=67108864",
    "max.request.size=4194304",
]

# Failure detection for the failover figure; Kafka's defaults beside it.
FAST_FAILOVER = {
    "broker.session.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "replica.lag.time.max.ms": "5000",
}
KAFKA_DEFAULTS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "replica.lag.time.max.ms": "30000",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def start_cluster(root: Path, settings: dict[str, str]) -> Cluster:
    root.mkdir(parents=True)
    c = Cluster(root, voters=3)
    for n in c.nodes.values():
        n.extra.update(settings)
    c.start()
    eventually(lambda: _all_unfenced(c), timeout=60)
    return c


def _all_unfenced(c: Cluster) -> bool:
    with c.admin() as admin:
        brokers = admin.describe_cluster()["brokers"]
    return len([b for b in brokers if not b["is_fenced"]]) == len(c.nodes)


def create_topic(c: Cluster, name: str, partitions: int) -> None:
    with c.admin() as admin:
        admin.create_topics(
            [NewTopic(name, partitions, 3, topic_configs={"min.insync.replicas": "2"})]
        )
        eventually(
            lambda: (
                all(
                    p.leader >= 0 and len(p.isr) == 3
                    for p in admin.describe_topics([name])[0].partitions
                )
                or None
            ),
            timeout=60,
        )


def perf_test(
    c: Cluster, topic: str, records: int, size: int, props: list[str], work: Path,
    throughput: float = -1, extra: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    out = work / f"{topic}.json"
    argv = [sys.executable, "-m", "rillet.cli.main", "producer-perf-test", "--topic", topic,
            "--num-records", str(records), "--record-size", str(size),
            "--throughput", str(throughput), "--bootstrap-server", c.bootstrap(),
            "--json", str(out), *(extra or []), "--producer-props", *props]  # fmt: skip
    log("  $ rillet " + " ".join(argv[3:]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"producer-perf-test failed:\n{done.stdout}\n{done.stderr}")
    line = done.stdout.strip().splitlines()[-1]
    log("    " + line)
    r: dict[str, Any] = json.loads(out.read_text())
    r["output"] = line
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


def throughput_runs(c: Cluster, records: int, size: int, rounds: int, work: Path) -> dict[str, Any]:
    """acks=1 and acks=all, with default and tuned producer settings, interleaved per round."""
    runs: dict[str, list[dict[str, Any]]] = {}
    n = 0
    for round_no in range(1, rounds + 1):
        for settings, props in (("default", DEFAULT_PROPS), ("tuned", TUNED_PROPS)):
            for acks in ("1", "all"):
                n += 1
                topic = f"tp-{n}-{settings}-acks{acks}"
                create_topic(c, topic, 6)
                log(f"round {round_no}: {settings} producer settings, acks={acks}")
                runs.setdefault(f"{settings}_acks{acks}", []).append(
                    perf_test(c, topic, records, size, [f"acks={acks}", *props], work)
                )
    best = {
        k: {
            **max(v, key=lambda r: r["records_per_sec"]),
            "records_per_sec_by_round": [r["records_per_sec"] for r in v],
        }
        for k, v in runs.items()
    }
    return best


def latency_at_half(
    c: Cluster, peak: float, records: int, size: int, rounds: int, work: Path
) -> dict[str, Any]:
    samples = []
    for i in range(rounds):
        topic = f"latency-{i}"
        create_topic(c, topic, 6)
        log(f"latency: acks=all at half the acks=all peak ({peak / 2:.0f} records/s)")
        samples.append(
            perf_test(c, topic, records // 2, size, ["acks=all", *TUNED_PROPS], work, peak / 2)
        )
    median = sorted(samples, key=lambda s: s["p99_ms"])[len(samples) // 2]
    return {
        "target_records_per_sec": peak / 2,
        **median,
        "p99_ms_by_run": [s["p99_ms"] for s in samples],
    }


def _leader(c: Cluster, topic: str) -> int | None:
    with c.admin() as admin:
        p = admin.describe_topics([topic])[0].partitions[0]
    return p.leader if p.leader >= 0 else None


def _isr(c: Cluster, topic: str) -> int:
    with c.admin() as admin:
        return len(admin.describe_topics([topic])[0].partitions[0].isr)


def partition_failover(c: Cluster, kills: int, topic: str) -> list[tuple[float, bool]]:
    """Seconds from kill -9 of the partition leader to the first acknowledged acks=all
    record on the new leader, per kill, and whether the killed node was the active
    controller too (the nodes are combined: then a new controller is elected first)."""
    create_topic(c, topic, 1)
    times: list[tuple[float, bool]] = []
    for k in range(kills):
        producer = Producer(
            bootstrap_servers=c.bootstrap(),
            acks="all",
            retry_backoff_ms=50,
            request_timeout_ms=2000,
            max_in_flight_requests_per_connection=1,
        )
        try:
            for i in range(20):  # warm: the producer knows the leader and is connected
                producer.send(topic, f"warm-{k}-{i}".encode()).get(timeout=30)
            leader = _leader(c, topic)
            assert leader is not None
            was_controller = leader == c.controller_id()
            killed_at = time.monotonic()
            c.nodes[leader].kill()
            producer.send(topic, f"after-kill-{k}".encode()).get(timeout=120)
            elapsed = time.monotonic() - killed_at
        finally:
            producer.close()
        new = _leader(c, topic)
        role = "leader and active controller" if was_controller else "leader"
        log(f"  kill {k + 1}: {role} {leader} killed, acks=all on leader {new} "
            f"after {elapsed:.3f} s")  # fmt: skip
        times.append((elapsed, was_controller))
        c.restart(leader)
        eventually(lambda: _isr(c, topic) == 3 or None, timeout=120)
    return times


def controller_failover(c: Cluster, kills: int) -> list[float]:
    """Seconds from kill -9 of the active controller to the next committed metadata record
    (a CreateTopics answered through a live broker)."""
    times: list[float] = []
    for k in range(kills):
        old = c.controller_id()
        killed_at = time.monotonic()
        c.nodes[old].kill()
        admins = [
            AdminClient(bootstrap_servers=n.bootstrap, request_timeout_ms=2000)
            for n in c.nodes.values()
            if n.alive
        ]
        try:
            while True:
                try:
                    admins[0].create_topics([NewTopic(f"after-controller-kill-{k}", 1, 1)])
                    break
                except KafkaError:
                    admins.append(admins.pop(0))
                    time.sleep(0.01)
        finally:
            for a in admins:
                a.close()
        elapsed = time.monotonic() - killed_at
        log(f"  controller kill {k + 1}: controller {old} killed, metadata committed after "
            f"{elapsed:.3f} s")  # fmt: skip
        times.append(elapsed)
        c.restart(old)
        eventually(lambda: _all_unfenced(c), timeout=60)
    return times


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    t = result["throughput"]
    labels = ["default\nacks=1", "default\nacks=all", "tuned\nacks=1", "tuned\nacks=all"]
    keys = ["default_acks1", "default_acksall", "tuned_acks1", "tuned_acksall"]
    ax1.bar(labels, [t[k]["mb_per_sec_1e6"] for k in keys], color=["C0", "C1", "C0", "C1"])
    ax1.set_ylabel("produce MB/s (1 MB = 1e6 B), 1 KiB records, RF=3")
    ax1.set_title("3-node cluster: acks=1 vs acks=all")
    fast = result["failover"]["fast_detection"]["seconds"]
    slow = result["failover"]["kafka_default_session"]["seconds"]
    ctrl = result["controller_failover"]["seconds"]
    ax2.plot(range(1, len(fast) + 1), fast, "o-", label="partition, session 1 s")
    ax2.plot(range(1, len(slow) + 1), slow, "s-", label="partition, session 9 s (Kafka's)")
    ax2.plot(range(1, len(ctrl) + 1), ctrl, "^-", label="controller")
    ax2.set_xlabel("kill")
    ax2.set_ylabel("seconds to the next acknowledged write")
    ax2.set_title("Failover after kill -9")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summarize(times: list[float]) -> dict[str, Any]:
    if not times:
        return {"seconds": [], "median_s": None, "max_s": None, "min_s": None}
    return {
        "seconds": times,
        "median_s": statistics.median(times),
        "max_s": max(times),
        "min_s": min(times),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--default-kills", type=int, default=3)
    ap.add_argument("--controller-kills", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS / "cluster.json")
    ap.add_argument("--chart", type=Path, default=RESULTS / "cluster.png")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rillet-bench-cluster-"))
    result: dict[str, Any] = {
        "records": args.records,
        "record_size": args.record_size,
        "nodes": 3,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "producer_props": {"default": DEFAULT_PROPS, "tuned": TUNED_PROPS},
        "failover_settings": FAST_FAILOVER,
        "kafka_default_settings": KAFKA_DEFAULTS,
    }
    try:
        c = start_cluster(work / "fast", FAST_FAILOVER)
        try:
            log("throughput")
            result["throughput"] = throughput_runs(
                c, args.records, args.record_size, args.rounds, work
            )
            peak = result["throughput"]["tuned_acksall"]["records_per_sec"]
            result["latency_at_half_acks_all_peak"] = latency_at_half(
                c, peak, args.records, args.record_size, args.rounds, work
            )
            session = FAST_FAILOVER["broker.session.timeout.ms"]
            log(f"partition failover, session timeout {session} ms")
            fast = partition_failover(c, args.kills, "failover-fast")
            log("controller failover")
            ctrl = controller_failover(c, args.controller_kills)
        finally:
            c.stop()
        c = start_cluster(work / "default", KAFKA_DEFAULTS)
        try:
            log("partition failover, Kafka's default session timeout (9000 ms)")
            slow = partition_failover(c, args.default_kills, "failover-default")
        finally:
            c.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["failover"] = {
        "fast_detection": summarize([t for t, _ in fast]),
        "fast_detection_leader_only": summarize([t for t, ctl in fast if not ctl]),
        "fast_detection_leader_and_controller": summarize([t for t, ctl in fast if ctl]),
        "kafka_default_session": summarize([t for t, _ in slow]),
    }
    result["controller_failover"] = summarize(ctrl)
    t = result["throughput"]
    result["acks_all_vs_acks1"] = (
        t["default_acksall"]["records_per_sec"] / t["default_acks1"]["records_per_sec"]
    )
    result["acks_all_vs_acks1_tuned"] = (
        t["tuned_acksall"]["records_per_sec"] / t["tuned_acks1"]["records_per_sec"]
    )
    result["failover_median_s"] = result["failover"]["fast_detection"]["median_s"]
    result["failover_max_s"] = result["failover"]["fast_detection"]["max_s"]
    for part in ("leader_only", "leader_and_controller"):
        result[f"failover_median_s_{part}"] = result["failover"][f"fast_detection_{part}"][
            "median_s"
        ]
    slow_median = result["failover"]["kafka_default_session"]["median_s"]
    result["failover_median_s_kafka_default_session"] = slow_median
    result["controller_failover_median_s"] = result["controller_failover"]["median_s"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    try:
        chart(result, args.chart)
        result["chart"] = str(args.chart)
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no chart")
    summary(result)
    print(json.dumps(result))
    return 0


def summary(r: dict[str, Any]) -> None:
    t = r["throughput"]
    print(f"Rillet 3-node cluster, RF=3, min.insync.replicas=2, {r['records']:,} x "
          f"{r['record_size']} B records")  # fmt: skip
    for k in ("default_acks1", "default_acksall", "tuned_acks1", "tuned_acksall"):
        x = t[k]
        print(f"  {k:16} {x['records_per_sec']:>10,.0f} records/s {x['mb_per_sec_1e6']:>7.1f} MB/s"
              f"  p99 {x['p99_ms']:.0f} ms")  # fmt: skip
    print(f"  acks=all / acks=1: {r['acks_all_vs_acks1']:.2f} (producer defaults), "
          f"{r['acks_all_vs_acks1_tuned']:.2f} (tuned)")  # fmt: skip
    lat = r["latency_at_half_acks_all_peak"]
    print(f"  acks=all at half its peak ({lat['target_records_per_sec']:,.0f} records/s): "
          f"p99 {lat['p99_ms']:.0f} ms (runs {lat['p99_ms_by_run']})")  # fmt: skip
    fast = r["failover"]["fast_detection"]
    print(f"  partition failover (session 1 s): median {fast['median_s']:.2f} s, "
          f"max {fast['max_s']:.2f} s over {len(fast['seconds'])} kills")  # fmt: skip
    f = r["failover"]
    for key, what in (
        ("fast_detection_leader_only", "a leader that was not the active controller"),
        ("fast_detection_leader_and_controller", "a leader that was the active controller"),
    ):
        if f[key]["seconds"]:
            print(f"    {what}: median {f[key]['median_s']:.2f} s over "
                  f"{len(f[key]['seconds'])} kills")  # fmt: skip
    print(f"  partition failover (session 9 s, Kafka's default): median "
          f"{f['kafka_default_session']['median_s']:.2f} s over "
          f"{len(f['kafka_default_session']['seconds'])} kills")  # fmt: skip
    cf = r["controller_failover"]
    print(f"  controller failover: median {cf['median_s']:.2f} s, max {cf['max_s']:.2f} s over "
          f"{len(cf['seconds'])} kills")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
