"""``rillet leader-election`` (kafka-leader-election.sh): its flags, its JSON file, Kafka's
summary lines and exit codes, against a one-node broker (elections across brokers are in
tests/cluster/test_leadership.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.cli.leader_election import partitions_from_json, summarize
from rillet.cli.main import main
from rillet.errors import (
    ElectionNotNeededError,
    InvalidRequestError,
    PreferredLeaderNotAvailableError,
)
from rillet.types import TopicPartition
from tests.support.mini_broker import MiniBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path_factory.mktemp("election"), {"a": 2, "b": 1})
    try:
        yield b
    finally:
        b.close()


def test_the_json_file_names_partitions() -> None:
    text = json.dumps(
        {"partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}]}
    )
    assert partitions_from_json(text) == [TopicPartition("a", 1), TopicPartition("b", 0)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"partitions": [{"topic": "a"}]}', "Expected"),
        ("[1, 2]", "Expected"),
        ("not json", "Expected"),
        (
            '{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
            "duplicate partitions: a-0",
        ),
    ],
)
def test_a_bad_json_file_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        partitions_from_json(text)


def test_the_summary_has_kafkas_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code = summarize(
        "PREFERRED",
        {
            TopicPartition("b", 0): None,
            TopicPartition("a", 1): None,
            TopicPartition("a", 0): ElectionNotNeededError("already"),
            TopicPartition("c", 2): PreferredLeaderNotAvailableError("broker 3 is fenced"),
        },
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions a-1, b-0",
        "Valid replica already elected for partitions a-0",
        "Error completing leader election (PREFERRED) for partition: c-2: "
        "[PREFERRED_LEADER_NOT_AVAILABLE] broker 3 is fenced",
    ]
    assert err == "Error: 1 replica(s) could not be elected\n"


def test_a_partition_led_by_its_preferred_replica_needs_no_election(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["leader-election", "--bootstrap-server", broker.bootstrap]
    assert main([*args, "--election-type", "preferred", "--topic", "a", "--partition", "1"]) == 0
    assert capsys.readouterr().out == "Valid replica already elected for partitions a-1\n"
    # Unclean elections only give leaderless partitions a leader.
    assert main([*args, "--election-type", "UNCLEAN", "--topic", "b", "--partition", "0"]) == 0
    assert capsys.readouterr().out == "Valid replica already elected for partitions b-0\n"


def test_all_partitions_leaves_out_those_that_need_nothing(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["leader-election", "--bootstrap-server", broker.bootstrap]
    assert main([*argv, "--election-type", "preferred", "--all-topic-partitions"]) == 0
    assert capsys.readouterr().out == ""


def test_an_unknown_partition_fails_the_command(
    broker: MiniBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "election.json"
    path.write_text(
        json.dumps({"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 9}]})
    )
    argv = ["leader-election", "--bootstrap-server", broker.bootstrap, "--election-type"]
    assert main([*argv, "preferred", "--path-to-json-file", str(path)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "Valid replica already elected for partitions a-0"
    assert lines[1].startswith(
        "Error completing leader election (PREFERRED) for partition: a-9: "
        "[UNKNOWN_TOPIC_OR_PARTITION] "
    )
    assert len(lines) == 2
    assert "1 replica(s) could not be elected" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--topic", "a"], "--topic needs --partition"),
        (["--all-topic-partitions", "--partition", "0"], "--partition goes with --topic"),
    ],
)
def test_flags_that_do_not_go_together_are_refused(
    broker: MiniBroker, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["leader-election", "--bootstrap-server", broker.bootstrap]
    assert main([*argv, "--election-type", "preferred", *extra]) == 1
    assert message in capsys.readouterr().err


def test_an_unknown_election_type_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(
            [
                "leader-election",
                "--bootstrap-server",
                "x:1",
                "--election-type",
                "dirty",
                "--all-topic-partitions",
            ]
        )
    assert e.value.code == 2
    assert "invalid choice: 'DIRTY'" in capsys.readouterr().err
