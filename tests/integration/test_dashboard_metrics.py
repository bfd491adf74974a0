"""The Grafana dashboard (examples/grafana/rillet-dashboard.json) asks only for series a node
serves: every metric name in its panels' PromQL and its variables' queries is one a real
node's endpoint exports (taken from a scrape of an in-process node after some traffic), and
every panel reads the data source chosen in its ``datasource`` variable."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.types import OffsetAndMetadata
from tests.support.mini_broker import MiniBroker

DASHBOARD = Path(__file__).parents[2] / "examples" / "grafana" / "rillet-dashboard.json"

# The sample names a family of each type has in the text format: a histogram's TYPE line
# names it without its suffixes (a counter's names its ``_total`` sample).
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count")}
# PromQL's functions, aggregations and keywords the dashboard may use: not metric names.
_PROMQL_WORDS = {
    "sum", "count", "max", "min", "avg", "rate", "irate", "increase", "deriv", "delta",
    "histogram_quantile", "scalar", "vector", "abs", "clamp_min", "topk", "bottomk",
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "label_values",
}  # fmt: skip


def exported_names(text: str) -> set[str]:
    """Every series name the exposition ``text`` declares or holds a sample of."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"
            names.update(name + suffix for suffix in _SUFFIXES.get(kind, ("",)))
        elif line and not line.startswith("#"):
            match = re.match(r"[a-zA-Z_:][\w:]*", line)
            assert match is not None, line
            names.add(match.group())
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping labels
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\$\w+|\$\{\w+\}", "", expr)  # dashboard variables
    expr = re.sub(r"label_values\(([^,)]*),[^)]*\)", r"\1", expr)  # a variable's label
    return {w for w in re.findall(r"\b[a-zA-Z_:][\w:]*", expr) if w not in _PROMQL_WORDS}


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']!r}", variable["query"]["query"]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> str:
    broker = MiniBroker(
        tmp_path_factory.mktemp("dashboard"),
        {"watched": 2},
        {"metrics.port": "0", "metrics.host": "127.0.0.1"},
    )
    try:
        producer = Producer(bootstrap_servers=broker.bootstrap, acks="all")
        for i in range(20):
            producer.send("watched", value=b"%d" % i, partition=i % 2)
        producer.flush(30)
        producer.close()
        with Consumer(bootstrap_servers=broker.bootstrap, group_id="dash") as consumer:
            tp = TopicPartition("watched", 0)
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(3)})
        port = broker.server.bound["METRICS"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return str(r.read().decode())
    finally:
        broker.close()


def test_every_metric_the_dashboard_queries_is_exported(scraped: str) -> None:
    exported = exported_names(scraped)
    # The scrape is a real one: counted traffic and a committed group are in it.
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="watched"} 20.0' in scraped
    assert 'kafka_consumergroup_lag{group="dash",partition="0",topic="watched"}' in scraped
    dashboard = json.loads(DASHBOARD.read_text())
    queried: set[str] = set()
    for where, expr in _queries(dashboard):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        missing = names - exported
        assert not missing, f"{where} queries {sorted(missing)}, which no node exports"
        queried |= names
    # The series this issue added are all on the dashboard.
    for name in [
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "kafka_log_logflushstats_logflushrateandtimems_bucket",
        "kafka_server_raft_metrics_commit_latency_ms_bucket",
        "grpc_server_handled_total",
        "grpc_server_handling_seconds_bucket",
        "kafka_consumergroup_lag",
    ]:
        assert name in queried, name


def test_the_parser_finds_metric_names_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, request) (rate(a_bucket{topic!="x y",'
        'instance=~"$instance"}[$__rate_interval]))) / scalar(max(b_total)) - c'
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert metric_names("label_values(rillet_node_info, instance)") == {"rillet_node_info"}
    text = "# TYPE x_total counter\n# TYPE h histogram\n# TYPE g gauge\ng 2.0\n"
    assert exported_names(text) == {"x_total", "h_bucket", "h_sum", "h_count", "g"}


def test_every_panel_reads_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in _panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
