#!/usr/bin/env python3
"""Security benchmark: what TLS costs, measured against plaintext on the same broker in the
same run.

One Rillet node serves Kafka's protocol on two listeners: PLAIN (PLAINTEXT) and SECURE (SSL,
a PEM keystore made by ``rillet certs``'s library; TLS 1.3, the server's default suite).
``rillet producer-perf-test`` runs with Kafka's default producer settings (no
``--producer-props`` but the TLS client's: ``security.protocol=SSL`` and a PEM truststore,
as a Kafka ``client.properties`` has them) against each listener in turn, and
``rillet consumer-perf-test`` (Kafka's consumer defaults) reads each topic back through the
listener it was written through. Topics have one partition (Kafka's ``num.partitions``) and,
beside them, ``--partitions`` (6): a fetch then carries a megabyte of each partition, so one
response is encrypted while the last is decrypted. Each of ``--rounds`` rounds runs every
phase once (the order alternating between rounds), and the best run of each is compared:

* ``tls_produce_vs_plain``: produce records/s over TLS / over plaintext (target >= 0.7);
* ``tls_consume_vs_plain``: consume records/s over TLS / over plaintext (target >= 0.7).
  Plaintext fetches go from the page cache to the socket with ``sendfile``; TLS encrypts in
  user space, as Kafka's does;
* the same two with ``--partitions`` partitions (``..._partitioned``);
* p99 latency of each listener with the producer held at half the plaintext peak (the
  rate-limited runs of ``--throughput``).

* ``acl_10k_vs_none`` (target >= 0.95): records/s with Kafka's StandardAuthorizer checking
  every request against 10,000 ACLs / records/s of a node without an authorizer, both over
  plaintext, the lower of the produce and consume ratios (``bench/acl_phase.py`` says how).

Output: a human summary on stdout, then one JSON line with every figure (also written to
``bench/results/security.json``).

    python bench/security.py                                # 1,000,000 records, 3 rounds
    python bench/security.py --records 200000 --rounds 1    # quick
    python bench/security.py --only acl                     # the ACL phase alone
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acl_phase import acl_node, authorize_ns
from pagecache import warm_page_cache
from perftools import log, rillet, run_tool

from rillet.security.certs import make_ca, make_cert
from tests.support.server_process import ServerProcess, free_port

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1e6
# Before each produce phase, this many times its payload is written and deleted, so the
# phase writes into recycled page-cache pages (bench/pagecache.py).
WARM_FACTOR = 1.5


class Listeners:
    """The node's two Kafka-protocol listeners and the client settings of each."""

    def __init__(self, work: Path) -> None:
        certs = work / "certs"
        ca = make_ca(certs)
        self.node = make_cert(ca, certs, f"node-{work.name}")
        self.plain_port, self.secure_port = free_port(), free_port()
        self.client_props = [
            "security.protocol=SSL",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.node.ca}",
        ]
        self.client_config = work / "client-ssl.properties"
        self.client_config.write_text("".join(p + "\n" for p in self.client_props))

    def overrides(self, grpc_port: int, controller_port: int) -> dict[str, str]:
        listeners = [
            f"GRPC://localhost:{grpc_port}",
            f"PLAIN://localhost:{self.plain_port}",
            f"SECURE://localhost:{self.secure_port}",
        ]
        return {
            "listeners": ",".join([*listeners, f"CONTROLLER://localhost:{controller_port}"]),
            "advertised.listeners": ",".join(listeners),
            "listener.security.protocol.map": (
                "GRPC:PLAINTEXT,PLAIN:PLAINTEXT,SECURE:SSL,CONTROLLER:PLAINTEXT"
            ),
            "grpc.listener.names": "GRPC",
            "inter.broker.listener.name": "GRPC",
            "listener.name.secure.ssl.keystore.type": "PEM",
            "listener.name.secure.ssl.keystore.location": str(self.node.keystore),
        }

    def bootstrap(self, tls: bool) -> str:
        return f"localhost:{self.secure_port if tls else self.plain_port}"


def produce(
    listeners: Listeners, tls: bool, topic: str, records: int, size: int, work: Path,
    throughput: float = -1,
) -> dict[str, Any]:  # fmt: skip
    """``producer-perf-test`` with Kafka's default producer settings (only TLS's)."""
    out = work / f"produce-{topic}.json"
    warm_page_cache(work, int(records * size * WARM_FACTOR))
    argv = rillet("producer-perf-test", "--topic", topic, "--num-records", str(records),
                  "--record-size", str(size), "--throughput", str(throughput),
                  "--bootstrap-server", listeners.bootstrap(tls), "--json", str(out))  # fmt: skip
    if tls:
        argv += ["--producer-props", *listeners.client_props]
    r = run_tool(argv, out)
    if r.get("transport") != "kafka":
        raise RuntimeError(f"producer-perf-test spoke {r.get('transport')}, not Kafka's protocol")
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    return r


def consume(listeners: Listeners, tls: bool, topic: str, records: int, size: int,
            work: Path) -> dict[str, Any]:  # fmt: skip
    out = work / f"consume-{topic}.json"
    argv = rillet("consumer-perf-test", "--topic", topic, "--messages", str(records),
                  "--bootstrap-server", listeners.bootstrap(tls), "--json", str(out),
                  "--timeout", "30000")  # fmt: skip
    if tls:
        argv += ["--consumer.config", str(listeners.client_config)]
    r = run_tool(argv, out)
    if r["records"] != records:
        raise RuntimeError(f"consumer-perf-test read {r['records']} of {records} records")
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    return r


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return max(runs, key=lambda r: r["records_per_sec"])


def tls_phase(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """TLS against plaintext on one node (the module doc)."""
    listeners = Listeners(work)
    node = ServerProcess(work / "data")
    node.overrides = listeners.overrides(node.port, node.cport)
    node.start()
    try:
        runs: dict[str, list[dict[str, Any]]] = {
            f"{name}_{phase}{suffix}": []
            for name in ("plain", "tls")
            for phase in ("produce", "consume")
            for suffix in ("", "_partitioned")
        }
        for round_no in range(args.rounds):
            order = [False, True] if round_no % 2 == 0 else [True, False]
            for tls, suffix in [(t, x) for x in ("", "_partitioned") for t in order]:
                name = "tls" if tls else "plain"
                log(f"round {round_no + 1}: {name}{suffix}")
                topic = f"{name}{suffix}-{round_no}"
                if suffix:
                    node.create_topic(topic, args.partitions)
                runs[f"{name}_produce{suffix}"].append(
                    produce(listeners, tls, topic, args.records, args.record_size, work)
                )
                runs[f"{name}_consume{suffix}"].append(
                    consume(listeners, tls, topic, args.records, args.record_size, work)
                )
        # Latency at half the plaintext peak, each listener in turn.
        rate = best(runs["plain_produce"])["records_per_sec"] / 2
        latency = {}
        for tls in (False, True):
            name = "tls" if tls else "plain"
            log(f"latency at {rate:.0f} records/s: {name}")
            latency[name] = produce(listeners, tls, f"{name}-latency", args.records,
                                    args.record_size, work, throughput=rate)  # fmt: skip
    finally:
        node.stop()
    result: dict[str, Any] = {
        "runs": runs,
        "best": {k: best(v) for k, v in runs.items()},
        "latency_half_peak": latency,
        "half_peak_records_per_sec": rate,
    }
    b = result["best"]
    for phase in ("produce", "consume"):
        for suffix in ("", "_partitioned"):
            result[f"tls_{phase}_vs_plain{suffix}"] = (
                b[f"tls_{phase}{suffix}"]["records_per_sec"]
                / b[f"plain_{phase}{suffix}"]["records_per_sec"]
            )
    result["plain_p99_half_peak_ms"] = latency["plain"]["p99_ms"]
    result["tls_p99_half_peak_ms"] = latency["tls"]["p99_ms"]
    return result


def acl_phase(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """No authorizer against 10,000 ACLs, two nodes side by side (bench/acl_phase.py)."""
    nodes: dict[str, tuple[ServerProcess, Listeners]] = {}
    try:
        for name in ("none", "acl"):
            listeners = Listeners(work / name)
            data = work / name / "data"
            if name == "none":
                node = ServerProcess(data)
                node.overrides = listeners.overrides(node.port, node.cport)
                node.start()
            else:
                node = acl_node(
                    data, lambda n, ls=listeners: ls.overrides(n.port, n.cport), args.acls
                )
            nodes[name] = node, listeners
        runs: dict[str, list[dict[str, Any]]] = {
            f"{name}_{phase}": [] for name in nodes for phase in ("produce", "consume")
        }
        for round_no in range(args.rounds):
            order = ["none", "acl"] if round_no % 2 == 0 else ["acl", "none"]
            for name in order:
                node, listeners = nodes[name]
                log(f"round {round_no + 1}: {name}")
                topic = f"bench-{name}-{round_no}"
                runs[f"{name}_produce"].append(
                    produce(listeners, False, topic, args.records, args.record_size, work)
                )
                runs[f"{name}_consume"].append(
                    consume(listeners, False, topic, args.records, args.record_size, work)
                )
    finally:
        for node, _ in nodes.values():
            node.stop()
    b = {k: best(v) for k, v in runs.items()}
    ratios = {
        phase: b[f"acl_{phase}"]["records_per_sec"] / b[f"none_{phase}"]["records_per_sec"]
        for phase in ("produce", "consume")
    }
    # The medians beside the best runs: on a noisy machine one lucky run moves a best.
    medians = {
        phase: statistics.median(r["records_per_sec"] for r in runs[f"acl_{phase}"])
        / statistics.median(r["records_per_sec"] for r in runs[f"none_{phase}"])
        for phase in ("produce", "consume")
    }
    return {
        "acl_runs": runs,
        "acl_best": b,
        "acl_median_produce_vs_none": medians["produce"],
        "acl_median_consume_vs_none": medians["consume"],
        "acl_count": args.acls,
        "acl_produce_vs_none": ratios["produce"],
        "acl_consume_vs_none": ratios["consume"],
        "acl_10k_vs_none": min(ratios.values()),
        "authorize_in_process": authorize_ns(args.acls),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000, help="records per phase")
    p.add_argument("--record-size", type=int, default=1000, help="bytes per record")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every phase")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the second topics")
    p.add_argument("--acls", type=int, default=10_000, help="ACLs of the ACL phase")
    p.add_argument("--only", choices=("tls", "acl"), help="run one phase only")
    p.add_argument("--out", type=Path, default=RESULTS / "security.json")
    args = p.parse_args(argv)

    result: dict[str, Any] = {
        "bench": "security",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "records": args.records,
        "record_size": args.record_size,
        "rounds": args.rounds,
        "partitions": args.partitions,
    }
    with tempfile.TemporaryDirectory(prefix="rillet-bench-security-") as tmp:
        if args.only != "acl":
            result.update(tls_phase(args, Path(tmp) / "tls"))
        if args.only != "tls":
            result.update(acl_phase(args, Path(tmp) / "acl"))
    summary(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


def summary(r: dict[str, Any]) -> None:
    if "best" in r:
        tls_summary(r)
    if "acl_best" in r:
        acl_summary(r)


def acl_summary(r: dict[str, Any]) -> None:
    b = r["acl_best"]
    print(f"{r['acl_count']:,} ACLs against no authorizer, plaintext, {r['records']:,} records "
          f"of {r['record_size']} B, best of {r['rounds']} rounds")  # fmt: skip
    for phase in ("produce", "consume"):
        none, acl = b[f"none_{phase}"], b[f"acl_{phase}"]
        print(
            f"  {phase:8} no authorizer {none['records_per_sec']:>10,.0f} rec/s   ACLs "
            f"{acl['records_per_sec']:>10,.0f} rec/s   {r[f'acl_{phase}_vs_none']:.3f}x"
        )
    print(
        f"  medians: produce {r['acl_median_produce_vs_none']:.3f}x, consume "
        f"{r['acl_median_consume_vs_none']:.3f}x"
    )
    a = r["authorize_in_process"]
    print(
        f"  acl_10k_vs_none {r['acl_10k_vs_none']:.3f}x (target >= 0.95); one authorization "
        f"with {a['acls']:,} ACLs: {a['hit_ns']:.0f} ns allowed, {a['miss_ns']:.0f} ns denied"
    )


def tls_summary(r: dict[str, Any]) -> None:
    b = r["best"]
    print(f"TLS against plaintext, one node, Kafka's protocol, {r['records']:,} records of "
          f"{r['record_size']} B, best of {r['rounds']} rounds")  # fmt: skip
    for phase, suffix in [(p, x) for x in ("", "_partitioned") for p in ("produce", "consume")]:
        plain, tls = b[f"plain_{phase}{suffix}"], b[f"tls_{phase}{suffix}"]
        parts = r["partitions"] if suffix else 1
        ratio = r[f"tls_{phase}_vs_plain{suffix}"]
        print(
            f"  {phase:8} {parts} part.  plaintext {plain['records_per_sec']:>10,.0f} rec/s "
            f"({plain['mb_per_sec_1e6']:.0f} MB/s)   TLS {tls['records_per_sec']:>10,.0f} rec/s "
            f"({tls['mb_per_sec_1e6']:.0f} MB/s)   TLS/plain {ratio:.2f}x "
            "(target >= 0.7)"
        )
    print(
        f"  p99 at {r['half_peak_records_per_sec']:,.0f} rec/s (half the plaintext peak): "
        f"plaintext {r['plain_p99_half_peak_ms']} ms, TLS {r['tls_p99_half_peak_ms']} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
