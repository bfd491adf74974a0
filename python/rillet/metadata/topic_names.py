"""Kafka's rules for topic names, which also keep every partition directory inside its log
directory: only ``[a-zA-Z0-9._-]``, at most 249 characters, never ``.`` or ``..``."""

from __future__ import annotations

import re

from rillet.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
# The KRaft metadata log's topic: its one partition's directory sits among the brokers' logs,
# but it is the quorum's, and no client may create a topic by that name.
METADATA_TOPIC = "__cluster_metadata"
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: object) -> str:
    """Return ``name`` if it is a legal topic name, else raise :class:`InvalidTopicError`."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name[:40]}..."
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    return name


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, after validating both."""
    validate_topic_name(topic)
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise InvalidTopicError(f"partition must be a non-negative integer, got {partition!r}")
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``("my-topic", 3)`` for ``"my-topic-3"``; None if the name is not a partition dir."""
    topic, sep, part = name.rpartition("-")
    if not sep or not (part.isascii() and part.isdigit()) or not topic:
        return None
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return topic, int(part)
