"""Topic-name rules (rillet.metadata.topic_names)."""

from __future__ import annotations

import pytest

from rillet.errors import InvalidTopicError, KafkaError
from rillet.metadata.topic_names import (
    MAX_TOPIC_NAME_LENGTH,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)

# ---------------------------------------------------------------------------------------------
# topic names


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "my-topic",
        "My_Topic.v2",
        "__consumer_offsets",
        "0",
        "...",
        ".hidden",
        "a..b",
        "x" * MAX_TOPIC_NAME_LENGTH,
        "-",
        "_",
    ],
)
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("", "empty"),
        (".", "'.'"),
        ("..", "'..'"),
        ("x" * (MAX_TOPIC_NAME_LENGTH + 1), "249"),
        ("a/b", "illegal"),
        ("/", "illegal"),
        ("../x", "illegal"),
        ("..\\x", "illegal"),
        ("a b", "illegal"),
        ("tópico", "illegal"),
        ("主题", "illegal"),
        ("topic\n", "illegal"),
        ("topic\x00", "illegal"),
        ("a:b", "illegal"),
        ("a*", "illegal"),
        ("\uff46\uff55\uff4c\uff4c", "illegal"),  # fullwidth letters are not ASCII
        ("٣", "illegal"),  # an Arabic-Indic digit is not ASCII
    ],
)
def test_illegal_topic_names(name: str, match: str) -> None:
    with pytest.raises(InvalidTopicError, match=match) as e:
        validate_topic_name(name)
    assert e.value.code == 17
    assert isinstance(e.value, KafkaError)


@pytest.mark.parametrize("name", [None, 5, b"topic", ["t"]])
def test_topic_name_must_be_a_string(name: object) -> None:
    with pytest.raises(InvalidTopicError, match="string"):
        validate_topic_name(name)


def test_partition_dir_name() -> None:
    assert partition_dir_name("my-topic", 0) == "my-topic-0"
    assert partition_dir_name("t", 12) == "t-12"
    for bad in (-1, True, "1", 1.0):
        with pytest.raises(InvalidTopicError):
            partition_dir_name("t", bad)  # type: ignore[arg-type]
    for bad_topic in ("", "..", "a/b"):
        with pytest.raises(InvalidTopicError):
            partition_dir_name(bad_topic, 0)


@pytest.mark.parametrize(
    ("dirname", "expected"),
    [
        ("my-topic-3", ("my-topic", 3)),
        ("t-0", ("t", 0)),
        ("a.b_c-12345", ("a.b_c", 12345)),
        ("topic--1", ("topic-", 1)),
        ("...-2", ("...", 2)),
        ("x" * MAX_TOPIC_NAME_LENGTH + "-7", ("x" * MAX_TOPIC_NAME_LENGTH, 7)),
        ("topic", None),
        ("topic-", None),
        ("-3", None),
        ("topic-x", None),
        ("topic-1.5", None),
        ("topic-+1", None),
        ("topic- 1", None),
        ("topic--", None),
        ("..-1", None),
        (".-1", None),
        ("a/b-1", None),
        ("tópico-1", None),
        ("x" * (MAX_TOPIC_NAME_LENGTH + 1) + "-0", None),
        ("topic-3.abc123-delete", None),
        ("topic-3.abc123-future", None),
        ("", None),
        ("-", None),
    ],
)
def test_parse_partition_dir_name(dirname: str, expected: tuple[str, int] | None) -> None:
    assert parse_partition_dir_name(dirname) == expected


@pytest.mark.parametrize("topic", ["t", "my-topic", "a.b", "x" * MAX_TOPIC_NAME_LENGTH])
@pytest.mark.parametrize("partition", [0, 1, 99, 2**31 - 1])
def test_partition_dir_name_round_trips(topic: str, partition: int) -> None:
    assert parse_partition_dir_name(partition_dir_name(topic, partition)) == (topic, partition)


@pytest.mark.parametrize("dirname", ["topic-²", "topic-①"])
def test_parse_partition_dir_name_with_unicode_digits_is_not_a_partition(dirname: str) -> None:
    assert parse_partition_dir_name(dirname) is None
