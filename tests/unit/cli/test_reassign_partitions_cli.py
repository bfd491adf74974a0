"""``rillet reassign-partitions``: Kafka's JSON files in and out, and what it refuses before
asking a broker anything (moves across brokers are in tests/cluster/test_leadership.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.cli.main import main
from rillet.cli.reassign_partitions import as_json, parse_reassignment, parse_topics
from rillet.errors import InvalidRequestError
from rillet.types import TopicPartition
from tests.support.mini_broker import MiniBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path_factory.mktemp("reassign"), {"a": 2})
    try:
        yield b
    finally:
        b.close()


def test_the_reassignment_json_round_trips() -> None:
    plan = {TopicPartition("b", 0): [2, 1], TopicPartition("a", 1): [1]}
    text = as_json(plan)
    assert text == (
        '{"version":1,"partitions":[{"topic":"a","partition":1,"replicas":[1],"log_dirs":["any"]},'
        '{"topic":"b","partition":0,"replicas":[2,1],"log_dirs":["any","any"]}]}'
    )
    assert parse_reassignment(json.loads(text)) == plan


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"partitions": [{"topic": "a", "partition": 0}]}, "Expected"),
        ({"partitions": []}, "names no partitions"),
        (
            {"partitions": [{"topic": "a", "partition": 0, "replicas": [1]}] * 2},
            "multiple entries for a-0",
        ),
        (
            {"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]},
            "may not contain duplicate entries: a-0",
        ),
    ],
)
def test_bad_reassignment_files_are_refused(data: object, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse_reassignment(data)


def test_the_topics_file() -> None:
    assert parse_topics({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]}) == ["a", "b"]
    with pytest.raises(InvalidRequestError, match="duplicate entries: a"):
        parse_topics({"topics": [{"topic": "a"}, {"topic": "a"}]})
    with pytest.raises(InvalidRequestError, match="Expected"):
        parse_topics({"topic": "a"})


def _run(broker: MiniBroker, *args: str) -> int:
    return main(["reassign-partitions", "--bootstrap-server", broker.bootstrap, *args])


def test_on_one_broker(
    broker: MiniBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(broker, "--list") == 0
    assert capsys.readouterr().out == "No partition reassignments found.\n"
    plan = tmp_path / "plan.json"
    plan.write_text(as_json({TopicPartition("a", 0): [1]}))
    # Already there: nothing moves, the partition is reported done.
    assert _run(broker, "--execute", "--reassignment-json-file", str(plan)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Successfully started partition reassignment for a-0"
    )
    assert _run(broker, "--verify", "--reassignment-json-file", str(plan)) == 0
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\nReassignment of partition a-0 is completed.\n"
    )
    # A broker that does not exist, an unknown partition, a throttle: refused.
    plan.write_text(as_json({TopicPartition("a", 0): [1, 3]}))
    assert _run(broker, "--execute", "--reassignment-json-file", str(plan)) == 1
    assert "Unknown broker id 3" in capsys.readouterr().err
    plan.write_text(as_json({TopicPartition("a", 7): [1]}))
    assert _run(broker, "--execute", "--reassignment-json-file", str(plan)) == 1
    assert "a-7: [UNKNOWN_TOPIC_OR_PARTITION]" in capsys.readouterr().err
    assert _run(broker, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1") == 1
    assert "no replication quotas" in capsys.readouterr().err
    assert _run(broker, "--verify") == 1
    assert "needs --reassignment-json-file" in capsys.readouterr().err


def test_generate_proposes_the_listed_brokers(
    broker: MiniBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"a"}]}')
    argv = ["--generate", "--topics-to-move-json-file", str(topics)]
    assert _run(broker, *argv, "--broker-list", "1") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert out[3] == "Proposed partition reassignment configuration"
    assert json.loads(out[1]) == json.loads(out[4])
    assert _run(broker, *argv, "--broker-list", "1,2") == 1
    assert "Unknown broker id 2" in capsys.readouterr().err
