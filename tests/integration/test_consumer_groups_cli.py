"""``rillet consumer-groups`` against an in-process broker: Kafka's columns, lag seen from
outside the consumer, resets refused on an active group and applied on an inactive one,
deletions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.cli.main import main
from tests.support.mini_broker import MiniBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(
        tmp_path / "data",
        {"t": 3},
        {"group.consumer.heartbeat.interval.ms": "200", "offsets.topic.num.partitions": "3"},
    )
    yield b
    b.close()


def cli(broker: MiniBroker, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["consumer-groups", "--bootstrap-server", broker.bootstrap, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_list_describe_reset_and_delete(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as p:
        for i in range(30):
            p.send("t", value=b"%d" % i, partition=i % 3)
    c = Consumer("t", bootstrap_servers=broker.bootstrap, group_id="g1", client_id="tool-test",
                 auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    read = 0
    while read < 30:
        read += sum(len(r) for r in c.poll(timeout_ms=200).values())
    c.commit({TopicPartition("t", 0): 4, TopicPartition("t", 1): 10, TopicPartition("t", 2): 10})

    assert cli(broker, capsys, "--list")[1].split() == ["g1"]
    assert rows(cli(broker, capsys, "--list", "--state")[1]) == [
        ["GROUP", "STATE"],
        ["g1", "Stable"],
    ]
    rc, out, _ = cli(broker, capsys, "--describe", "--group", "g1")
    table = rows(out)
    assert rc == 0 and table[0] == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    lag = {r[2]: (r[3], r[4], r[5], r[8]) for r in table[1:]}
    assert lag == {"0": ("4", "10", "6", "tool-test"), "1": ("10", "10", "0", "tool-test"),
                   "2": ("10", "10", "0", "tool-test")}  # fmt: skip
    members = rows(cli(broker, capsys, "--describe", "--group", "g1", "--members", "--verbose")[1])
    assert members[1][0] == "g1" and members[1][4] == "3" and members[1][-1] == "t:0,1,2"
    state = rows(cli(broker, capsys, "--describe", "--group", "g1", "--state")[1])
    assert state[1][-2:] == ["Stable", "1"] and state[1][-3] == "uniform"

    # An active group's offsets are not reset, nor is it deleted.
    rc, _, err = cli(broker, capsys, "--reset-offsets", "--group", "g1", "--all-topics",
                     "--to-earliest", "--execute")  # fmt: skip
    assert rc == 1 and "can only be reset if the group 'g1' is inactive" in err
    rc, _, err = cli(broker, capsys, "--delete", "--group", "g1")
    assert rc == 1 and "NON_EMPTY_GROUP" in err
    c.close()

    rc, out, _ = cli(broker, capsys, "--describe", "--group", "g1")
    assert "Consumer group 'g1' has no active members." in out
    rc, out, _ = cli(broker, capsys, "--reset-offsets", "--group", "g1", "--topic", "t:0",
                     "--shift-by", "-3", "--dry-run")  # fmt: skip
    assert rows(out)[1] == ["g1", "t", "0", "1"]
    assert rows(cli(broker, capsys, "--describe", "--group", "g1")[1])[2][3] == "4"  # dry run
    rc, out, _ = cli(broker, capsys, "--reset-offsets", "--group", "g1", "--all-topics",
                     "--to-earliest", "--execute")  # fmt: skip
    assert rc == 0 and [r[3] for r in rows(out)[1:]] == ["0", "0", "0"]
    rc, out, _ = cli(broker, capsys, "--reset-offsets", "--group", "g1", "--topic", "t",
                     "--to-offset", "7", "--execute")  # fmt: skip
    assert [r[3] for r in rows(out)[1:]] == ["7", "7", "7"]
    rc, out, _ = cli(broker, capsys, "--delete-offsets", "--group", "g1", "--topic", "t:2")
    assert rc == 0 and "Request succeed for deleting offsets with topic t group g1" in out
    assert [r[2] for r in rows(cli(broker, capsys, "--describe", "--group", "g1")[1])[2:]] == [
        "0", "1"
    ]  # fmt: skip
    rc, out, _ = cli(broker, capsys, "--delete", "--group", "g1")
    assert rc == 0 and "Deletion of requested consumer groups ('g1') was successful." in out
    rc, _, err = cli(broker, capsys, "--describe", "--group", "g1")
    assert rc == 1 and "Consumer group 'g1' does not exist." in err


def test_bad_invocations_say_what_is_wrong(
    broker: MiniBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = cli(broker, capsys, "--describe")
    assert rc == 1 and "--group" in err
    rc, _, err = cli(broker, capsys, "--list", "--delete")
    assert rc == 1 and "exactly one action" in err
    rc, _, err = cli(broker, capsys, "--reset-offsets", "--group", "x", "--all-topics")
    assert rc == 1 and "exactly one of" in err
