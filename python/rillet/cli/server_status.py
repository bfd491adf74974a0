"""``rillet server status [CONFIG] [--metrics-url URL] [--bootstrap-server HOST:PORT]``: one
screen of a node's health, read from its Prometheus endpoint (``metrics.port``).

The node is the one CONFIG (its server.properties) names with ``metrics.host`` and
``metrics.port``, or the one serving ``--metrics-url``. Two scrapes ``--interval-ms`` apart
give the rates. With ``--bootstrap-server`` the metadata quorum's leader is asked
(DescribeQuorum, as ``metadata-quorum describe --replication`` does) how far this node's
metadata log is behind its own.

Exit status: 0 when healthy; 1 when something is not, each problem printed (a broker not
RUNNING, no quorum leader known, under-replicated, under-min-ISR or offline partitions); 2
when the endpoint cannot be read.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from rillet.cli.common import add_admin_config, admin_client
from rillet.config import parse_properties
from rillet.errors import KafkaError

__all__ = ["NodeHealth", "Scrape", "add_arguments", "run"]

# Kafka's BrokerState numbers (kafka_server_kafkaserver_brokerstate).
_BROKER_STATES = {
    0: "NOT_RUNNING",
    1: "STARTING",
    2: "RECOVERY",
    3: "RUNNING",
    6: "PENDING_CONTROLLED_SHUTDOWN",
    7: "SHUTTING_DOWN",
}
_TOP = 4  # requests named on a rate line, the busiest first


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "config", nargs="?", help="the node's server.properties (its metrics.host/metrics.port)"
    )
    p.add_argument(
        "--metrics-url",
        metavar="URL",
        help="the node's Prometheus endpoint: http://HOST:PORT/metrics, or HOST:PORT",
    )
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="a broker to ask the metadata quorum for this node's metadata lag",
    )
    add_admin_config(p)
    p.add_argument(
        "--interval-ms",
        type=int,
        default=1000,
        metavar="MS",
        help="time between the two scrapes the rates come from (default 1000; 0: one scrape, "
        "no rates)",
    )


class Scrape:
    """The samples of one scrape: ``value(name, **labels)`` sums the samples of ``name``
    whose labels include ``labels``; ``by(name, label)`` sums them by one label."""

    def __init__(self, text: str, at: float) -> None:
        self.at = at
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                self.samples.setdefault(s.name, []).append((s.labels, float(s.value)))

    def has(self, name: str) -> bool:
        return name in self.samples

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for have, v in self.samples.get(name, ())
            if all(have.get(k) == want for k, want in labels.items())
        )

    def by(self, name: str, label: str, **where: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for have, v in self.samples.get(name, ()):
            if all(have.get(k) == want for k, want in where.items()):
                out[have.get(label, "")] = out.get(have.get(label, ""), 0.0) + v
        return out

    def label(self, name: str, label: str) -> str | None:
        """``label`` of the first sample of ``name`` whose value is 1 (an info or state set)."""
        return next((have.get(label) for have, v in self.samples.get(name, ()) if v == 1), None)


@dataclass(frozen=True)
class MetadataLag:
    """This node's metadata log end offset as the quorum leader last saw it, and the
    leader's."""

    leader_id: int
    leader_log_end_offset: int
    log_end_offset: int | None  # None: the leader does not know this node

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None:
            return None
        return max(self.leader_log_end_offset - self.log_end_offset, 0)


class NodeHealth:
    """A node's health from a scrape (``now``) and, for rates, an earlier one."""

    def __init__(
        self, now: Scrape, before: Scrape | None = None, metadata: MetadataLag | None = None
    ) -> None:
        self.now = now
        self.before = before
        self.metadata = metadata
        roles = now.label("rillet_node_info", "process_roles") or ""
        self.roles = [r for r in roles.split(",") if r]
        node_id = now.label("rillet_node_info", "node_id")
        self.node_id = int(node_id) if node_id is not None else None

    # -- what the node says ------------------------------------------------------------------

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def broker_state(self) -> str | None:
        if not self.now.has("kafka_server_kafkaserver_brokerstate"):
            return None
        number = int(self.now.value("kafka_server_kafkaserver_brokerstate"))
        return _BROKER_STATES.get(number, f"UNKNOWN ({number})")

    @property
    def active_controller(self) -> bool:
        return self.now.value("kafka_controller_kafkacontroller_activecontrollercount") == 1

    @property
    def quorum_leader(self) -> int | None:
        if not self.now.has("kafka_server_raft_metrics_current_leader"):
            return None
        return int(self.now.value("kafka_server_raft_metrics_current_leader"))

    def count(self, name: str) -> int:
        return int(self.now.value(name))

    def rate(self, name: str, **labels: str) -> float | None:
        """Per second between the two scrapes (None with one scrape)."""
        if self.before is None or self.now.at <= self.before.at:
            return None
        delta = self.now.value(name, **labels) - self.before.value(name, **labels)
        return max(delta, 0.0) / (self.now.at - self.before.at)

    def rates_by(self, name: str, label: str, **where: str) -> dict[str, float]:
        if self.before is None or self.now.at <= self.before.at:
            return {}
        seconds = self.now.at - self.before.at
        old = self.before.by(name, label, **where)
        return {
            k: (v - old.get(k, 0.0)) / seconds
            for k, v in self.now.by(name, label, **where).items()
            if v > old.get(k, 0.0)
        }

    # -- verdict -----------------------------------------------------------------------------

    def problems(self) -> list[str]:
        found = []
        state = self.broker_state
        if self.is_broker and state is not None and state != "RUNNING":
            found.append(f"the broker is {state}, not RUNNING" + _FENCED.get(state, ""))
        if self.quorum_leader == -1:
            found.append("no metadata quorum leader is known (no active controller)")
        for name, what in [
            ("kafka_server_replicamanager_underreplicatedpartitions", "under-replicated"),
            ("kafka_server_replicamanager_underminisrpartitioncount", "under min ISR"),
            ("kafka_controller_kafkacontroller_offlinepartitionscount", "offline (no leader)"),
        ]:
            n = self.count(name)
            if n:
                found.append(f"{n} partition{'s' if n != 1 else ''} {what}")
        return found

    # -- the screen --------------------------------------------------------------------------

    def lines(self, url: str) -> list[str]:
        n = self.now
        rows: list[tuple[str, str]] = []
        if self.is_broker:
            rows.append(("Broker state", self.broker_state or "-"))
        rows.append(("Controller", self._controller()))
        rows.append(("Metadata", self._metadata()))
        if self.is_broker:
            rows += [
                (
                    "Partitions",
                    f"{self.count('kafka_server_replicamanager_partitioncount')} held, "
                    f"{self.count('kafka_server_replicamanager_leadercount')} led",
                ),
                (
                    "Under-replicated",
                    str(self.count("kafka_server_replicamanager_underreplicatedpartitions")),
                ),
                (
                    "Under min ISR",
                    str(self.count("kafka_server_replicamanager_underminisrpartitioncount")),
                ),
            ]
        offline = self.count("kafka_controller_kafkacontroller_offlinepartitionscount")
        rows.append(
            ("Offline", str(offline) if self.active_controller else "- (the active controller's)")
        )
        if self.is_broker:
            waiting = n.by(
                "kafka_server_delayedoperationpurgatory_numdelayedoperations", "delayedOperation"
            )
            rows.append(
                (
                    "Purgatory",
                    ", ".join(f"{k} {int(waiting.get(k, 0))}" for k in ("Produce", "Fetch"))
                    + " waiting",
                )
            )
            rows.append(("Throughput", self._throughput()))
            rows.append(
                (
                    "Kafka requests",
                    self._rates(
                        "kafka_network_requestmetrics_requests_total",
                        "request",
                        "kafka_network_requestmetrics_errors_total",
                    ),
                )
            )
        rows.append(("gRPC calls", self._grpc()))
        rows.append(("Raft commit latency", self._commit_latency()))
        if self.is_broker:
            flushes = self.rate("kafka_log_logflushstats_logflushrateandtimems_count")
            rows.append(("Log flushes", "-" if flushes is None else f"{flushes:.1f}/s"))
        width = max(len(k) for k, _ in rows) + 2
        roles = ",".join(self.roles) or "?"
        head = f"Node {self.node_id if self.node_id is not None else '?'} ({roles}) at {url}"
        if self.before is not None:
            head += f", rates over {self.now.at - self.before.at:.1f} s"
        out = [head] + [f"  {k:<{width}}{v}" for k, v in rows]
        problems = self.problems()
        if problems:
            out.append("Status: UNHEALTHY")
            out += [f"  - {p}" for p in problems]
        else:
            out.append("Status: healthy")
        return out

    def _controller(self) -> str:
        state = self.now.label("kafka_server_raft_metrics_current_state", "state") or "?"
        epoch = int(self.now.value("kafka_server_raft_metrics_current_epoch"))
        leader = self.quorum_leader
        if self.active_controller:
            return f"active controller (quorum {state}, epoch {epoch})"
        knows = "no leader" if leader in (None, -1) else f"leader {leader}"
        if "controller" in self.roles:
            return f"standby (quorum {state}, {knows}, epoch {epoch})"
        return f"none here (quorum {state}, {knows}, epoch {epoch})"

    def _metadata(self) -> str:
        n = self.now
        text = (
            f"high watermark {int(n.value('kafka_server_raft_metrics_high_watermark'))}, "
            f"log end offset {int(n.value('kafka_server_raft_metrics_log_end_offset'))}"
        )
        m = self.metadata
        if m is None:
            return text + ", lag - (needs --bootstrap-server)"
        if m.lag is None:
            return text + f", not known to quorum leader {m.leader_id}"
        return text + f", lag {m.lag} behind quorum leader {m.leader_id}"

    def _throughput(self) -> str:
        bytes_in = self.rate("kafka_server_brokertopicmetrics_bytesin_total", topic="")
        if bytes_in is None:
            return "- (one scrape)"
        bytes_out = self.rate("kafka_server_brokertopicmetrics_bytesout_total", topic="") or 0.0
        messages = self.rate("kafka_server_brokertopicmetrics_messagesin_total", topic="") or 0.0
        return f"in {_bytes(bytes_in)}/s, out {_bytes(bytes_out)}/s, messages in {messages:.1f}/s"

    def _rates(self, requests: str, label: str, errors: str) -> str:
        total = self.rate(requests)
        if total is None:
            return f"{int(self.now.value(requests))} answered (one scrape: no rates)"
        busiest = _busiest(self.rates_by(requests, label))
        return f"{total:.1f}/s{busiest}, errors {self.rate(errors) or 0.0:.1f}/s"

    def _grpc(self) -> str:
        handled = "grpc_server_handled_total"
        total = self.rate(handled)
        if total is None:
            return f"{int(self.now.value(handled))} answered (one scrape: no rates)"
        busiest = _busiest(self.rates_by(handled, "grpc_method"))
        errors = total - (self.rate(handled, grpc_code="OK") or 0.0)
        return f"{total:.1f}/s{busiest}, not OK {errors:.1f}/s"

    def _commit_latency(self) -> str:
        """The average over the interval, or since the start when none committed in it."""
        count, total = (
            "kafka_server_raft_metrics_commit_latency_ms_count",
            "kafka_server_raft_metrics_commit_latency_ms_sum",
        )
        n_now = self.now.value(count)
        if n_now == 0:
            return "- (this node has not led a commit)"
        if self.before is not None:
            n = n_now - self.before.value(count)
            if n > 0:
                ms = self.now.value(total) - self.before.value(total)
                return f"avg {ms / n:.1f} ms over {int(n)} commits"
        return f"avg {self.now.value(total) / n_now:.1f} ms over {int(n_now)} commits since start"


_FENCED = {"RECOVERY": " (fenced: catching up with the metadata log, or refused by the controller)"}


def _busiest(rates: Mapping[str, float]) -> str:
    top = sorted(((v, k) for k, v in rates.items() if v > 0), reverse=True)[:_TOP]
    return " (" + ", ".join(f"{k} {v:.1f}" for v, k in top) + ")" if top else ""


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def metrics_url(args: argparse.Namespace) -> str:
    """The endpoint to read: ``--metrics-url`` (a bare HOST:PORT gets http:// and
    /metrics), else metrics.host and metrics.port of CONFIG."""
    if args.metrics_url:
        url = str(args.metrics_url)
        if "://" not in url:
            url = f"http://{url}"
        if url.count("/") == 2:
            url += "/metrics"
        return url
    if not args.config:
        raise SystemExit("Error: give the node's server.properties or --metrics-url")
    props = parse_properties(Path(args.config).read_text())
    port = int(props.get("metrics.port", "-1"))
    if port <= 0:
        raise SystemExit(
            f"Error: {args.config} sets no metrics.port: the node serves no metrics "
            "(set metrics.port, or give --metrics-url)"
        )
    host = props.get("metrics.host", "").strip() or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{port}/metrics"


def scrape(url: str, timeout_s: float = 10) -> Scrape:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return Scrape(r.read().decode(), time.monotonic())


def metadata_lag(args: argparse.Namespace, node_id: int | None) -> MetadataLag | None:
    if not args.bootstrap_server or node_id is None:
        return None
    with admin_client(args.bootstrap_server, args.admin_config) as admin:
        info = admin.describe_metadata_quorum()
    replicas = [*info.voters, *info.observers]
    leader = next((r for r in replicas if r.replica_id == info.leader_id), None)
    mine = next((r for r in replicas if r.replica_id == node_id), None)
    return MetadataLag(
        info.leader_id,
        leader.log_end_offset if leader is not None else info.high_watermark,
        None if mine is None else mine.log_end_offset,
    )


def run(args: argparse.Namespace) -> int:
    url = metrics_url(args)
    try:
        first = scrape(url)
        second: Scrape | None = None
        if args.interval_ms > 0:
            time.sleep(args.interval_ms / 1000)
            second = scrape(url)
    except (OSError, urllib.error.URLError) as e:
        print(f"Error: cannot read the node's metrics at {url}: {e}", file=sys.stderr)
        return 2
    health = NodeHealth(second, first) if second is not None else NodeHealth(first)
    try:
        health.metadata = metadata_lag(args, health.node_id)
    except KafkaError as e:
        print(f"Warning: the metadata quorum could not be asked: {e}", file=sys.stderr)
    _print(health.lines(url))
    return 1 if health.problems() else 0


def _print(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)
