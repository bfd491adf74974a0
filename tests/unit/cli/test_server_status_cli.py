"""``rillet server status`` from scrapes made up here: what a node's gauges make healthy or
not, rates from two scrapes, and where the endpoint is found."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rillet.cli.server_status import MetadataLag, NodeHealth, Scrape, metrics_url


def _text(
    *,
    roles: str = "broker,controller",
    state: int = 3,
    active: int = 1,
    leader: int = 1,
    urp: int = 0,
    min_isr: int = 0,
    offline: int = 0,
    produced: int = 0,
    produce_calls: int = 0,
    denied: int = 0,
    commits: int = 0,
    commit_ms: float = 0,
) -> str:
    lines = [
        f'rillet_node_info{{node_id="1",process_roles="{roles}"}} 1.0',
        f"kafka_controller_kafkacontroller_activecontrollercount {active}",
        f"kafka_controller_kafkacontroller_offlinepartitionscount {offline}",
        'kafka_server_raft_metrics_current_state{state="leader"} 1.0',
        f"kafka_server_raft_metrics_current_leader {leader}",
        "kafka_server_raft_metrics_current_epoch 4",
        "kafka_server_raft_metrics_high_watermark 50",
        "kafka_server_raft_metrics_log_end_offset 51",
        f"kafka_server_raft_metrics_commit_latency_ms_count {commits}",
        f"kafka_server_raft_metrics_commit_latency_ms_sum {commit_ms}",
        "# TYPE grpc_server_handled_total counter",
        'grpc_server_handled_total{grpc_code="OK",grpc_method="Produce",'
        f'grpc_service="rillet.v1.ProduceService",grpc_type="unary"}} {produce_calls}',
        'grpc_server_handled_total{grpc_code="PERMISSION_DENIED",grpc_method="Fetch",'
        f'grpc_service="rillet.v1.FetchService",grpc_type="unary"}} {denied}',
    ]
    if "broker" in roles:
        lines += [
            f"kafka_server_kafkaserver_brokerstate {state}",
            "kafka_server_replicamanager_partitioncount 6",
            "kafka_server_replicamanager_leadercount 2",
            f"kafka_server_replicamanager_underreplicatedpartitions {urp}",
            f"kafka_server_replicamanager_underminisrpartitioncount {min_isr}",
            "kafka_server_delayedoperationpurgatory_numdelayedoperations"
            '{delayedOperation="Fetch"} 3',
            "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter",
            f'kafka_server_brokertopicmetrics_bytesin_total{{topic=""}} {produced * 100}',
            "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter",
            f'kafka_server_brokertopicmetrics_messagesin_total{{topic=""}} {produced}',
        ]
    return "\n".join(lines) + "\n"


def test_a_healthy_node_and_its_rates() -> None:
    before = Scrape(_text(produced=100, produce_calls=10, commits=2, commit_ms=6), at=10.0)
    now = Scrape(_text(produced=300, produce_calls=30, denied=4, commits=6, commit_ms=14), 12.0)
    health = NodeHealth(now, before, MetadataLag(1, 51, 51))
    assert health.problems() == []
    screen = "\n".join(health.lines("http://n1:9404/metrics"))
    assert screen.splitlines()[0] == (
        "Node 1 (broker,controller) at http://n1:9404/metrics, rates over 2.0 s"
    )
    assert "Broker state         RUNNING" in screen
    assert "active controller (quorum leader, epoch 4)" in screen
    assert "high watermark 50, log end offset 51, lag 0 behind quorum leader 1" in screen
    assert "6 held, 2 led" in screen
    assert "Produce 0, Fetch 3 waiting" in screen
    assert "in 9.8 KiB/s, out 0 B/s, messages in 100.0/s" in screen
    assert "12.0/s (Produce 10.0, Fetch 2.0), not OK 2.0/s" in screen
    assert "avg 2.0 ms over 4 commits" in screen  # (14 - 6) / (6 - 2), this interval's
    assert screen.endswith("Status: healthy")


@pytest.mark.parametrize(
    ("gauges", "problem"),
    [
        ({"state": 2}, "the broker is RECOVERY, not RUNNING (fenced"),
        ({"leader": -1, "active": 0}, "no metadata quorum leader is known"),
        ({"urp": 2}, "2 partitions under-replicated"),
        ({"min_isr": 1}, "1 partition under min ISR"),
        ({"offline": 3}, "3 partitions offline (no leader)"),
    ],
)
def test_what_makes_a_node_unhealthy(gauges: dict[str, int], problem: str) -> None:
    health = NodeHealth(Scrape(_text(**gauges), at=0.0))
    assert len(health.problems()) == 1 and health.problems()[0].startswith(problem)
    screen = health.lines("u")
    assert screen[-2] == "Status: UNHEALTHY"
    assert screen[-1].startswith(f"  - {problem}")


def test_one_scrape_and_a_controller_only_node() -> None:
    health = NodeHealth(Scrape(_text(roles="controller", active=0, leader=2), at=0.0))
    screen = "\n".join(health.lines("u"))
    assert "Broker state" not in screen and "Partitions" not in screen
    assert "standby (quorum leader, leader 2, epoch 4)" in screen
    assert "Offline              - (the active controller's)" in screen
    assert "gRPC calls           0 answered (one scrape: no rates)" in screen
    assert "lag - (needs --bootstrap-server)" in screen
    assert health.problems() == []


def test_the_endpoint_comes_from_the_flag_or_the_node_s_properties(tmp_path: Path) -> None:
    def url(config: str | None = None, flag: str | None = None) -> str:
        return metrics_url(argparse.Namespace(config=config, metrics_url=flag))

    assert url(flag="n1:9404") == "http://n1:9404/metrics"
    assert url(flag="https://n1:9404/custom") == "https://n1:9404/custom"
    props = tmp_path / "server.properties"
    props.write_text("node.id=1\nmetrics.port=9404\nmetrics.host=0.0.0.0\n")
    assert url(str(props)) == "http://127.0.0.1:9404/metrics"
    props.write_text("node.id=1\n")
    with pytest.raises(SystemExit, match=r"sets no metrics\.port"):
        url(str(props))
    with pytest.raises(SystemExit, match=r"server\.properties or --metrics-url"):
        url()
