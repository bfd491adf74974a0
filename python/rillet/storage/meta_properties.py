"""Kafka's ``meta.properties``: which cluster and node a log directory belongs to.

``rillet storage format -t CLUSTER_ID -c server.properties`` writes, in every directory of
``log.dirs`` and in ``metadata.log.dir``::

    #
    #<date>
    cluster.id=<22-character base64url UUID>
    directory.id=<22-character base64url UUID, one per directory>
    node.id=<node.id>
    version=1

Before start a server runs :func:`check_log_dirs`, which refuses an unformatted directory, a
directory of another cluster and a directory of another node. The embedded start
(``rillet server start`` with no arguments) runs :func:`ensure_formatted` instead, which formats
what is not yet formatted and then checks.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rillet.config import BrokerConfig, format_properties, load_properties
from rillet.errors import KafkaError, KafkaStorageError

__all__ = [
    "LATEST_METADATA_VERSION",
    "META_PROPERTIES_FILE",
    "AlreadyFormattedError",
    "CheckedLogDirs",
    "InconsistentClusterIdError",
    "InconsistentNodeIdError",
    "MetaProperties",
    "MetaPropertiesError",
    "UnformattedLogDirError",
    "check_log_dirs",
    "ensure_formatted",
    "format_log_dirs",
    "random_uuid",
    "read_meta_properties",
    "validate_uuid",
    "write_meta_properties",
]

META_PROPERTIES_FILE = "meta.properties"
META_PROPERTIES_VERSION = 1
# The metadata.version a freshly formatted cluster starts at (Kafka: "3.7-IV4"); Rillet's
# releases and their metadata record versions follow the same <release>-IV<n> scheme.
LATEST_METADATA_VERSION = "0.1-IV0"

_RESERVED_UUIDS = 100  # Kafka reserves the UUIDs 0..99 (ZERO_UUID, ..., LOST_DIR, ...)


class MetaPropertiesError(KafkaStorageError):
    """A log directory is not formatted as this node and cluster need (not retriable)."""

    retriable: ClassVar[bool] = False


class UnformattedLogDirError(MetaPropertiesError):
    """A log directory has no ``meta.properties``."""


class AlreadyFormattedError(MetaPropertiesError):
    """``storage format`` found a formatted directory and was not told to ignore it."""


class InconsistentClusterIdError(MetaPropertiesError):
    """A log directory belongs to another cluster."""


class InconsistentNodeIdError(MetaPropertiesError):
    """A log directory belongs to another node."""


# -- UUIDs ------------------------------------------------------------------------------------


def random_uuid() -> str:
    """A random UUID as Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes (a version 4
    UUID) in base64url without padding, 22 characters, never starting with ``-`` and never one
    of Kafka's reserved UUIDs."""
    while True:
        raw = uuid.uuid4().bytes
        s = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not s.startswith("-") and int.from_bytes(raw, "big") >= _RESERVED_UUIDS:
            return s


def validate_uuid(s: str, what: str = "Cluster ID") -> str:
    """``s`` if it is a Kafka UUID string (22 base64url characters encoding 16 bytes, not a
    reserved one), else raise :class:`MetaPropertiesError` with Kafka's message."""

    def refuse(reason: str) -> MetaPropertiesError:
        return MetaPropertiesError(
            f"{what} string {s} does not appear to be a valid UUID: {reason}"
        )

    if len(s) != 22:
        raise refuse(f"expected 22 base64url characters, got {len(s)}")
    if any(c not in _BASE64URL for c in s):
        raise refuse("it is not base64url (A-Z, a-z, 0-9, '-' and '_')")
    raw = base64.urlsafe_b64decode(s + "==")
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != s:
        raise refuse("it is not the canonical encoding of 16 bytes")
    if int.from_bytes(raw, "big") < _RESERVED_UUIDS:
        raise refuse("it is a reserved UUID")
    return s


_BASE64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


# -- one file ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    """The contents of one ``meta.properties`` (version 1, KRaft)."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = META_PROPERTIES_VERSION

    def to_properties(self) -> dict[str, str]:
        props = {"cluster.id": self.cluster_id}
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        props["node.id"] = str(self.node_id)
        props["version"] = str(self.version)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], path: Path | str) -> MetaProperties:
        """Parse and check the keys of a ``meta.properties`` read from ``path``."""

        def bad(reason: str) -> MetaPropertiesError:
            return MetaPropertiesError(f"Invalid {path}: {reason}")

        version = props.get("version", "").strip()
        if version == "0":
            raise bad("version 0 is a ZooKeeper-mode directory; Rillet runs KRaft only (version 1)")
        if version != "1":
            raise bad(f"unsupported version {version or '(none)'}; expected version=1")
        cluster_id = props.get("cluster.id", "").strip()
        if not cluster_id:
            raise bad("no cluster.id")
        try:
            node_id = int(props.get("node.id", "").strip())
        except ValueError:
            raise bad(f"node.id {props.get('node.id')!r} is not an integer") from None
        if node_id < 0:
            raise bad(f"node.id {node_id} is negative")
        directory_id = props.get("directory.id", "").strip() or None
        return cls(cluster_id, node_id, directory_id, int(version))

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(self.to_properties().items())) + "}"


def read_meta_properties(log_dir: str | os.PathLike[str]) -> MetaProperties | None:
    """The ``meta.properties`` of ``log_dir``, or ``None`` when the directory or the file does
    not exist. A file that cannot be read or parsed raises :class:`MetaPropertiesError`."""
    d = Path(log_dir)
    path = d / META_PROPERTIES_FILE
    if d.exists() and not d.is_dir():
        raise MetaPropertiesError(f"{d} is not a directory")
    if not path.exists():
        return None
    try:
        props = load_properties(path)
    except KafkaError as e:
        raise MetaPropertiesError(f"Cannot read {path}: {e.message}") from None
    return MetaProperties.from_properties(props, path)


def write_meta_properties(log_dir: str | os.PathLike[str], meta: MetaProperties) -> Path:
    """Write ``log_dir/meta.properties`` atomically (a temporary file, fsync, rename, fsync
    of the directory), creating ``log_dir`` if needed. Returns the file's path."""
    d = Path(log_dir)
    path = d / META_PROPERTIES_FILE
    tmp = d / (META_PROPERTIES_FILE + ".tmp")
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    text = format_properties(meta.to_properties(), comments=("", stamp))
    try:
        d.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="ascii") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise MetaPropertiesError(f"Cannot write {path}: {e.strerror or e}") from None
    return path


# -- the log dirs of one node -----------------------------------------------------------------


@dataclass(frozen=True)
class CheckedLogDirs:
    """The outcome of :func:`check_log_dirs`: every dir belongs to ``cluster_id`` and
    ``node_id``; ``dirs`` maps each (as the config names it) to its ``meta.properties``."""

    cluster_id: str
    node_id: int
    dirs: Mapping[Path, MetaProperties]


def _unformatted_message(d: Path) -> str:
    return (
        f"No meta.properties found in {d}; run rillet storage format to format it "
        "(rillet storage format -t <cluster id> -c <server.properties>; "
        "rillet storage random-uuid makes a cluster id)"
    )


def _node_mismatch_message(path: Path, stored: int, configured: int) -> str:
    return (
        f"Stored node id {stored} in {path} doesn't match the configured node.id {configured}. "
        "If you moved your data, make sure your configured node id matches. If you intend to "
        "create a new node, you should remove all data in your data directories."
    )


def _cluster_mismatch_message(path: Path, expected: str, found: str) -> str:
    return (
        f"Invalid cluster.id in: {path}. Expected {expected}, but read {found}: the directory "
        "belongs to another cluster."
    )


def check_log_dirs(config: BrokerConfig, cluster_id: str | None = None) -> CheckedLogDirs:
    """Check that every log dir and the metadata log dir (``config.all_log_dirs``) is
    formatted, for one cluster (``cluster_id`` if given, else the one the dirs agree on) and
    for ``config.node_id``, with distinct directory ids. Raise :class:`UnformattedLogDirError`,
    :class:`InconsistentClusterIdError`, :class:`InconsistentNodeIdError` or
    :class:`MetaPropertiesError` with a message naming the directory."""
    found: dict[Path, MetaProperties] = {}
    for d in config.all_log_dirs:
        meta = read_meta_properties(d)
        if meta is None:
            raise UnformattedLogDirError(_unformatted_message(d))
        found[d] = meta
    expected = cluster_id
    directory_ids: dict[str, Path] = {}
    for d, meta in found.items():
        path = d / META_PROPERTIES_FILE
        if expected is None:
            expected = meta.cluster_id
        elif meta.cluster_id != expected:
            raise InconsistentClusterIdError(
                _cluster_mismatch_message(path, expected, meta.cluster_id)
            )
        if meta.node_id != config.node_id:
            raise InconsistentNodeIdError(
                _node_mismatch_message(path, meta.node_id, config.node_id)
            )
        if meta.directory_id is not None:
            other = directory_ids.setdefault(meta.directory_id, d)
            if other != d:
                raise MetaPropertiesError(
                    f"Duplicate directory.id {meta.directory_id} in {other} and {d}"
                )
    assert expected is not None  # all_log_dirs is never empty
    return CheckedLogDirs(expected, config.node_id, found)


def format_log_dirs(
    config: BrokerConfig,
    cluster_id: str,
    *,
    ignore_formatted: bool = False,
    metadata_version: str = LATEST_METADATA_VERSION,
    out: Callable[[str], None] | None = None,
) -> list[Path]:
    """``kafka-storage.sh format``: write ``meta.properties`` (cluster id, node id, a fresh
    directory id each) to every unformatted dir of ``config.all_log_dirs``; return them.

    Every dir is checked before anything is written. A formatted dir is refused
    (:class:`AlreadyFormattedError`) unless ``ignore_formatted``; one formatted for another
    cluster or node is refused always. ``out`` receives Kafka's progress lines
    ("Formatting /x with metadata.version ...")."""
    validate_uuid(cluster_id)
    emit = out or (lambda _line: None)
    existing = {d: read_meta_properties(d) for d in config.all_log_dirs}
    used_ids: set[str] = set()
    for d, meta in existing.items():
        if meta is None:
            continue
        path = d / META_PROPERTIES_FILE
        if meta.cluster_id != cluster_id:
            raise InconsistentClusterIdError(
                f"Log directory {d} is already formatted for cluster {meta.cluster_id}, not "
                f"{cluster_id} ({path}). Formatting never changes a directory's cluster: use "
                f"-t {meta.cluster_id}, or remove the directory's data to start a new cluster."
            )
        if meta.node_id != config.node_id:
            raise InconsistentNodeIdError(
                _node_mismatch_message(path, meta.node_id, config.node_id)
            )
        if not ignore_formatted:
            raise AlreadyFormattedError(
                f"Log directory {d} is already formatted. Use --ignore-formatted to ignore "
                "this directory and format the others."
            )
        if meta.directory_id is not None:
            used_ids.add(meta.directory_id)
    todo = [d for d, meta in existing.items() if meta is None]
    if not todo:
        emit("All of the log directories are already formatted.")
        return []
    for d in todo:
        directory_id = random_uuid()
        while directory_id in used_ids:
            directory_id = random_uuid()
        used_ids.add(directory_id)
        emit(f"Formatting {d} with metadata.version {metadata_version}.")
        write_meta_properties(d, MetaProperties(cluster_id, config.node_id, directory_id))
    return todo


def ensure_formatted(
    config: BrokerConfig, *, out: Callable[[str], None] | None = None
) -> CheckedLogDirs:
    """For the embedded start: format every unformatted dir (with the cluster id of the dirs
    already formatted, else a new random one), then :func:`check_log_dirs`."""
    cluster_ids = []
    for d in config.all_log_dirs:
        meta = read_meta_properties(d)
        if meta is not None and meta.cluster_id not in cluster_ids:
            cluster_ids.append(meta.cluster_id)
    if len(cluster_ids) > 1:
        return check_log_dirs(config)  # raises InconsistentClusterIdError naming the dir
    if not cluster_ids or any(read_meta_properties(d) is None for d in config.all_log_dirs):
        cluster_id = cluster_ids[0] if cluster_ids else random_uuid()
        format_log_dirs(config, cluster_id, ignore_formatted=True, out=out)
    return check_log_dirs(config)
