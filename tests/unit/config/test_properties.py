"""Java properties files (rillet.config.properties), and loading a broker config from one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.config import (
    BrokerConfig,
    format_properties,
    load_properties,
    parse_properties,
)
from rillet.errors import InvalidConfigurationError

# ---------------------------------------------------------------------------------------------
# Java properties syntax


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a:1", {"a": "1"}),
        ("a : 1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t1", {"a": "1"}),
        ("a\f1", {"a": "1"}),
        ("a   =   1", {"a": "1"}),
        ("a:=1", {"a": "=1"}),  # only the first separator counts
        ("a==1", {"a": "=1"}),
        ("a=b=c", {"a": "b=c"}),
        ("a=http://x:1", {"a": "http://x:1"}),
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("a:", {"a": ""}),
        ("   a=1", {"a": "1"}),  # leading blanks are dropped
        ("a=1   ", {"a": "1   "}),  # trailing blanks are kept (Kafka trims when parsing)
        ("# comment\na=1", {"a": "1"}),
        ("! comment\na=1", {"a": "1"}),
        ("   # indented comment\na=1", {"a": "1"}),
        ("a=1 # not a comment", {"a": "1 # not a comment"}),
        ("\n\n   \n\ta=1\n\n", {"a": "1"}),
        ("a=1\na=2", {"a": "2"}),  # the last duplicate wins
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        # line continuations
        ("a=1,\\\n   2,\\\n\t3", {"a": "1,2,3"}),
        ("a\\\n  b=1", {"ab": "1"}),
        ("a=1\\\n", {"a": "1"}),
        ("a=1\\", {"a": "1"}),  # a continuation at the end of the text
        ("a=x\\\\\nb=2", {"a": "x\\", "b": "2"}),  # an escaped backslash does not continue
        ("a=x\\\\\\\ny", {"a": "x\\y"}),  # three backslashes: one escaped, one continues
        ("# comment \\\na=1", {"a": "1"}),  # a comment is never continued
        ("a=1\\\n# not a comment", {"a": "1# not a comment"}),
        ("a=1\\\n\\\n   2", {"a": "12"}),
        # escapes
        ("a=tab\\there", {"a": "tab\there"}),
        ("a=\\n\\r\\f", {"a": "\n\r\f"}),
        ("a=\\u0041\\u00e9", {"a": "Aé"}),
        ("a=\\uD83D\\uDE00", {"a": "\U0001f600"}),  # a UTF-16 surrogate pair
        ("a=\\q\\:\\=\\#\\!", {"a": "q:=#!"}),
        ("my\\ key=v", {"my key": "v"}),
        ("k\\:x=v", {"k:x": "v"}),
        ("k\\=x=v", {"k=x": "v"}),
        ("a=\\ leading", {"a": " leading"}),
        ("a=é", {"a": "é"}),
    ],
)
def test_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["a=\\u00", "a=\\uXYZW", "x=1\nb\\u12=2"])
def test_malformed_unicode_escape_names_the_line(text: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"my\.properties, line \d: Malformed"):
        parse_properties(text, "my.properties")


@pytest.mark.parametrize(
    "props",
    [
        {"a": "1"},
        {"key with spaces": " value with spaces "},
        {"k=:#!": "v=:#!\\"},
        {"tabs\t": "\t\n\r\f"},
        {"unicode": "héllo 世界 \U0001f600"},
        {"": ""},
        {"#comment": "!bang"},
        {"a": "trailing\\"},
    ],
)
def test_format_properties_round_trips(props: dict[str, str]) -> None:
    text = format_properties(props, comments=("a comment",))
    assert text.startswith("#a comment\n")
    assert text.isascii()
    assert parse_properties(text) == props


def test_load_properties_reads_utf8_bom_and_latin1(tmp_path: Path) -> None:
    p = tmp_path / "x.properties"
    p.write_bytes(b"\xef\xbb\xbfa=\xc3\xa9\n")
    assert load_properties(p) == {"a": "é"}
    p.write_bytes(b"a=\xe9\n")  # not UTF-8: read as Latin-1, as Java does
    assert load_properties(p) == {"a": "é"}


def test_load_properties_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"Cannot read properties file .*nope"):
        load_properties(tmp_path / "nope")


def test_from_file_parses_a_server_properties(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text(
        "# a broker\n"
        "process.roles = broker, controller\n"
        "node.id: 7\n"
        "controller.quorum.voters=7@localhost:9093\n"
        "log.dirs=/data/a,\\\n"
        "         /data/b\n"
        "num.partitions 3\n"
        "log.retention.hours=  24  \n"
    )
    c = BrokerConfig.from_file(p)
    assert c.source_path == p
    assert c.node_id == 7
    assert c.process_roles == {"broker", "controller"}
    assert c.log_dirs == (Path("/data/a"), Path("/data/b"))
    assert c.num_partitions == 3
    assert c["log.retention.hours"] == 24
    assert c.topic_config()["retention.ms"] == 24 * 3_600_000


def test_from_properties_text() -> None:
    c = BrokerConfig.from_properties(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@h:9093\n"
    )
    assert c.node_id == 1
