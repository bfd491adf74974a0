"""``partition.metadata``: the topic id a partition's log belongs to, as Kafka keeps it in
each partition directory (KIP-516)::

    version: 0
    topic_id: <the id, base64url without padding>

A topic deleted and recreated under the same name has a new id, so a log left behind by the
old topic (on a broker that was down through both) is told apart from the new one's.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid
from pathlib import Path

__all__ = ["PARTITION_METADATA_FILE", "read_topic_id", "write_topic_id"]

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0


def _encode(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def _decode(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16 or _encode(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)


def write_topic_id(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """Write the file durably: to a temporary name, fsynced, then renamed over the old one."""
    path = partition_dir / PARTITION_METADATA_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"version: {_VERSION}\ntopic_id: {_encode(topic_id)}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_topic_id(partition_dir: Path) -> uuid.UUID | None:
    """The topic id recorded in ``partition_dir``; None when there is no file. Raises
    ValueError, naming the file, when the file is not one this version can read."""
    path = partition_dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: {e}") from e
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != str(_VERSION) or "topic_id" not in fields:
        raise ValueError(f"{path}: expected 'version: 0' and a topic_id, found {text[:200]!r}")
    try:
        return _decode(fields["topic_id"])
    except (ValueError, binascii.Error) as e:
        raise ValueError(f"{path}: {e}") from e
