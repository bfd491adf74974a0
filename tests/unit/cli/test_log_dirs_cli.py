"""``rillet log-dirs --describe`` (kafka-log-dirs.sh) against a one-node broker: Kafka's two
progress lines and its JSON, sizes that grow with what was written, and the filters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Producer
from rillet.cli.main import main
from tests.support.mini_broker import MiniBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path_factory.mktemp("logdirs"), {"a": 2, "b": 1})
    try:
        with Producer(bootstrap_servers=b.bootstrap) as producer:
            for _ in range(10):
                producer.send("a", b"x" * 100, partition=1)
            producer.flush()
        yield b
    finally:
        b.close()


def _describe(broker: MiniBroker, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:  # type: ignore[type-arg]
    code = main(["log-dirs", "--describe", "--bootstrap-server", broker.bootstrap, *extra])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0] == "Querying brokers for log directories information"
    assert out[1] == "Received log directory information from brokers 1"
    return json.loads(out[2])  # type: ignore[no-any-return]


def test_every_replica_of_every_log_dir(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _describe(broker, capsys)
    assert got["version"] == 1
    [b] = got["brokers"]
    assert b["broker"] == 1
    [d] = b["logDirs"]
    assert Path(d["logDir"]).is_dir() and d["error"] is None
    sizes = {p["partition"]: p["size"] for p in d["partitions"]}
    assert sorted(sizes) == ["a-0", "a-1", "b-0"]
    assert sizes["a-1"] > 1000 and sizes["a-0"] == 0 == sizes["b-0"]
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in d["partitions"])


def test_the_topic_list_filters_replicas(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _describe(broker, capsys, "--topic-list", "b,nope")
    assert [p["partition"] for p in got["brokers"][0]["logDirs"][0]["partitions"]] == ["b-0"]


def test_a_broker_that_does_not_exist_is_refused(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["log-dirs", "--describe", "--bootstrap-server", broker.bootstrap]
    assert main([*argv, "--broker-list", "1,7"]) == 1
    assert capsys.readouterr().err.strip() == (
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 1"
    )
    assert main([*argv, "--broker-list", "x"]) == 1
    assert "--broker-list takes broker ids" in capsys.readouterr().err
