"""``rillet storage`` (Kafka's kafka-storage.sh) and meta.properties
(rillet.storage.meta_properties)."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rillet.cli.main import main
from rillet.config import BrokerConfig, parse_properties
from rillet.errors import KafkaError, KafkaStorageError
from rillet.storage.meta_properties import (
    LATEST_METADATA_VERSION,
    META_PROPERTIES_FILE,
    AlreadyFormattedError,
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    MetaProperties,
    MetaPropertiesError,
    UnformattedLogDirError,
    check_log_dirs,
    ensure_formatted,
    format_log_dirs,
    random_uuid,
    read_meta_properties,
    validate_uuid,
    write_meta_properties,
)

UUID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{21}$")
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # the cluster id of Kafka's quickstart docs


def node_config(tmp_path: Path, node_id: int = 1, dirs: tuple[str, ...] = ("a", "b")) -> Path:
    """A server.properties for a combined node with two log dirs and a metadata log dir."""
    p = tmp_path / f"server-{node_id}.properties"
    p.write_text(
        "process.roles=broker,controller\n"
        f"node.id={node_id}\n"
        f"controller.quorum.voters={node_id}@localhost:9093\n"
        f"log.dirs={','.join(str(tmp_path / d) for d in dirs)}\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    return p


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------
# UUIDs


def test_random_uuid_is_a_kafka_uuid() -> None:
    ids = {random_uuid() for _ in range(500)}
    assert len(ids) == 500
    for s in ids:
        assert UUID_RE.match(s), s
        raw = base64.urlsafe_b64decode(s + "==")
        assert len(raw) == 16
        assert raw[6] >> 4 == 4  # a version 4 UUID, as Java's UUID.randomUUID
        assert validate_uuid(s) == s


@pytest.mark.parametrize(
    ("s", "reason"),
    [
        ("", "22 base64url characters"),
        ("abc", "22 base64url characters"),
        (CLUSTER + "==", "22 base64url characters"),
        ("MkU3OEVBNTcwNTJENDM2Q+", "not base64url"),
        ("MkU3OEVBNTcwNTJENDM2Qh", "canonical"),  # non-zero padding bits
        ("AAAAAAAAAAAAAAAAAAAAAA", "reserved"),  # Kafka's ZERO_UUID
        ("AAAAAAAAAAAAAAAAAAAAAQ", "reserved"),
    ],
)
def test_validate_uuid_refuses(s: str, reason: str) -> None:
    with pytest.raises(
        MetaPropertiesError, match=f"does not appear to be a valid UUID: .*{reason}"
    ):
        validate_uuid(s)


def test_validate_uuid_accepts_kafkas_quickstart_id() -> None:
    assert validate_uuid(CLUSTER) == CLUSTER


# ---------------------------------------------------------------------------------------------
# meta.properties


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    meta = MetaProperties(CLUSTER, 3, random_uuid())
    path = write_meta_properties(tmp_path / "new" / "dir", meta)
    assert path == tmp_path / "new" / "dir" / META_PROPERTIES_FILE
    assert read_meta_properties(tmp_path / "new" / "dir") == meta
    text = path.read_text()
    assert text.startswith("#\n#")  # Java's Properties.store header: a comment and a date
    assert parse_properties(text) == {
        "version": "1",
        "cluster.id": CLUSTER,
        "node.id": "3",
        "directory.id": meta.directory_id,
    }
    assert not (path.parent / (META_PROPERTIES_FILE + ".tmp")).exists()
    # overwriting replaces the file whole
    other = MetaProperties(CLUSTER, 3, None)
    write_meta_properties(path.parent, other)
    assert read_meta_properties(path.parent) == other
    assert str(other) == f"{{cluster.id={CLUSTER}, node.id=3, version=1}}"


def test_read_meta_properties_of_an_unformatted_dir(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None
    assert read_meta_properties(tmp_path / "missing") is None
    (tmp_path / "file").write_text("")
    with pytest.raises(MetaPropertiesError, match="is not a directory"):
        read_meta_properties(tmp_path / "file")


def test_reads_a_kafka_written_meta_properties(tmp_path: Path) -> None:
    (tmp_path / META_PROPERTIES_FILE).write_text(
        "#\n#Tue Apr 09 10:00:00 UTC 2024\n"
        "node.id=1\ndirectory.id=Uj7t5GKMRm6_cEnRJbX5_w\nversion=1\n"
        f"cluster.id={CLUSTER}\n"
    )
    assert read_meta_properties(tmp_path) == MetaProperties(CLUSTER, 1, "Uj7t5GKMRm6_cEnRJbX5_w")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (f"version=0\nbroker.id=1\ncluster.id={CLUSTER}\n", "ZooKeeper"),
        (f"version=2\nnode.id=1\ncluster.id={CLUSTER}\n", "unsupported version 2"),
        (f"node.id=1\ncluster.id={CLUSTER}\n", r"unsupported version \(none\)"),
        ("version=1\nnode.id=1\n", "no cluster.id"),
        (f"version=1\ncluster.id={CLUSTER}\n", "node.id"),
        (f"version=1\nnode.id=x\ncluster.id={CLUSTER}\n", "node.id 'x' is not an integer"),
        (f"version=1\nnode.id=-1\ncluster.id={CLUSTER}\n", "negative"),
        ("version=1\\u12\n", "Cannot read"),
    ],
)
def test_bad_meta_properties_are_refused(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / META_PROPERTIES_FILE).write_text(text)
    with pytest.raises(MetaPropertiesError, match=match) as e:
        read_meta_properties(tmp_path)
    assert str(tmp_path) in str(e.value)
    assert isinstance(e.value, KafkaStorageError)
    assert not e.value.retriable


# ---------------------------------------------------------------------------------------------
# format and check


def test_format_then_check(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    lines: list[str] = []
    formatted = format_log_dirs(config, CLUSTER, out=lines.append)
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "meta"]
    assert formatted == dirs
    assert lines == [
        f"Formatting {d} with metadata.version {LATEST_METADATA_VERSION}." for d in dirs
    ]
    checked = check_log_dirs(config)
    assert checked.cluster_id == CLUSTER
    assert checked.node_id == 1
    assert list(checked.dirs) == dirs
    directory_ids = {m.directory_id for m in checked.dirs.values()}
    assert len(directory_ids) == 3
    assert all(d is not None and UUID_RE.match(d) for d in directory_ids)
    assert check_log_dirs(config, CLUSTER) == checked


def test_check_refuses_an_unformatted_dir(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    with pytest.raises(UnformattedLogDirError) as e:
        check_log_dirs(config)
    assert str(e.value.message).startswith(
        f"No meta.properties found in {tmp_path / 'a'}; run rillet storage format"
    )
    format_log_dirs(config, CLUSTER)
    (tmp_path / "b" / META_PROPERTIES_FILE).unlink()
    with pytest.raises(UnformattedLogDirError, match=f"No meta.properties found in {tmp_path}/b"):
        check_log_dirs(config)


def test_check_refuses_a_dir_of_another_cluster(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    format_log_dirs(config, CLUSTER)
    other = random_uuid()
    write_meta_properties(tmp_path / "b", MetaProperties(other, 1, random_uuid()))
    with pytest.raises(InconsistentClusterIdError) as e:
        check_log_dirs(config)
    msg = e.value.message
    assert f"Invalid cluster.id in: {tmp_path / 'b' / META_PROPERTIES_FILE}" in msg
    assert f"Expected {CLUSTER}, but read {other}" in msg
    assert "another cluster" in msg
    # and against the cluster id the node learned elsewhere
    write_meta_properties(tmp_path / "b", MetaProperties(CLUSTER, 1, random_uuid()))
    with pytest.raises(InconsistentClusterIdError, match=f"Expected {other}, but read {CLUSTER}"):
        check_log_dirs(config, other)


def test_check_refuses_a_dir_of_another_node(tmp_path: Path) -> None:
    format_log_dirs(BrokerConfig.from_file(node_config(tmp_path, 1)), CLUSTER)
    config2 = BrokerConfig.from_file(node_config(tmp_path, 2))
    with pytest.raises(InconsistentNodeIdError) as e:
        check_log_dirs(config2)
    assert e.value.message.startswith(
        f"Stored node id 1 in {tmp_path / 'a' / META_PROPERTIES_FILE} doesn't match the "
        "configured node.id 2."
    )


def test_check_refuses_duplicate_directory_ids(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    for d in ("a", "b", "meta"):
        write_meta_properties(tmp_path / d, MetaProperties(CLUSTER, 1, "Uj7t5GKMRm6_cEnRJbX5_w"))
    with pytest.raises(MetaPropertiesError, match=r"Duplicate directory\.id"):
        check_log_dirs(config)


def test_format_refuses_formatted_dirs_unless_told(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    format_log_dirs(config, CLUSTER)
    before = (tmp_path / "a" / META_PROPERTIES_FILE).read_text()
    with pytest.raises(AlreadyFormattedError, match="Use --ignore-formatted"):
        format_log_dirs(config, CLUSTER)
    lines: list[str] = []
    assert format_log_dirs(config, CLUSTER, ignore_formatted=True, out=lines.append) == []
    assert lines == ["All of the log directories are already formatted."]
    # a new log dir joins the node: --ignore-formatted formats only it
    config3 = BrokerConfig.from_file(node_config(tmp_path, dirs=("a", "b", "c")))
    assert format_log_dirs(config3, CLUSTER, ignore_formatted=True) == [tmp_path / "c"]
    assert (tmp_path / "a" / META_PROPERTIES_FILE).read_text() == before
    assert len({m.directory_id for m in check_log_dirs(config3).dirs.values()}) == 4


def test_format_refuses_another_cluster_always(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    format_log_dirs(config, CLUSTER)
    for ignore in (False, True):
        with pytest.raises(
            InconsistentClusterIdError, match=f"already formatted for cluster {CLUSTER}"
        ):
            format_log_dirs(config, random_uuid(), ignore_formatted=ignore)
    with pytest.raises(InconsistentNodeIdError):
        format_log_dirs(
            BrokerConfig.from_file(node_config(tmp_path, 2)), CLUSTER, ignore_formatted=True
        )


def test_format_checks_every_dir_before_writing(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    write_meta_properties(tmp_path / "meta", MetaProperties(CLUSTER, 1, random_uuid()))
    with pytest.raises(AlreadyFormattedError):
        format_log_dirs(config, CLUSTER)
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists()


def test_format_refuses_a_bad_cluster_id(tmp_path: Path) -> None:
    config = BrokerConfig.from_file(node_config(tmp_path))
    with pytest.raises(MetaPropertiesError, match="Cluster ID string x does not appear"):
        format_log_dirs(config, "x")
    assert not (tmp_path / "a").exists()


def test_ensure_formatted_for_the_embedded_start(tmp_path: Path) -> None:
    config = BrokerConfig.embedded_default(tmp_path / "data")
    lines: list[str] = []
    first = ensure_formatted(config, out=lines.append)
    assert UUID_RE.match(first.cluster_id)
    assert list(first.dirs) == [tmp_path / "data" / "kraft-combined-logs"]
    assert len(lines) == 1
    # later starts keep the cluster and write nothing
    assert ensure_formatted(config, out=lines.append) == first
    assert len(lines) == 1
    # a new dir joins the existing cluster
    two = BrokerConfig.embedded_default(
        tmp_path / "data", {"log.dirs": f"{tmp_path}/data/kraft-combined-logs,{tmp_path}/more"}
    )
    assert ensure_formatted(two).cluster_id == first.cluster_id
    # dirs of two clusters are refused
    write_meta_properties(tmp_path / "more", MetaProperties(random_uuid(), 1, random_uuid()))
    with pytest.raises(InconsistentClusterIdError):
        ensure_formatted(two)


# ---------------------------------------------------------------------------------------------
# the CLI, end to end


def test_cli_random_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "storage", "random-uuid")
    assert (code, err) == (0, "")
    assert UUID_RE.match(out.strip())
    assert out.endswith("\n") and out.count("\n") == 1
    assert run(capsys, "storage", "random-uuid")[1] != out


def test_cli_format_then_format_again_then_info(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = str(node_config(tmp_path))
    code, cluster, _ = run(capsys, "storage", "random-uuid")
    cluster = cluster.strip()

    code, out, err = run(capsys, "storage", "format", "-t", cluster, "-c", cfg)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"Formatting {tmp_path / d} with metadata.version {LATEST_METADATA_VERSION}."
        for d in ("a", "b", "meta")
    ]
    config = BrokerConfig.from_file(cfg)
    assert check_log_dirs(config).cluster_id == cluster

    # again: refused, nothing changed
    before = (tmp_path / "a" / META_PROPERTIES_FILE).read_bytes()
    code, out, err = run(capsys, "storage", "format", "-t", cluster, "-c", cfg)
    assert code == 1
    assert out == ""
    assert err == (
        f"Error: Log directory {tmp_path / 'a'} is already formatted. Use --ignore-formatted "
        "to ignore this directory and format the others.\n"
    )
    assert (tmp_path / "a" / META_PROPERTIES_FILE).read_bytes() == before

    # --ignore-formatted: nothing to do
    code, out, err = run(
        capsys, "storage", "format", "--cluster-id", cluster, "--config", cfg, "--ignore-formatted"
    )
    assert (code, out, err) == (0, "All of the log directories are already formatted.\n", "")

    # -g formats only what is new
    (tmp_path / "b" / META_PROPERTIES_FILE).unlink()
    code, out, err = run(capsys, "storage", "format", "-t", cluster, "-c", cfg, "-g")
    assert code == 0
    assert out == f"Formatting {tmp_path / 'b'} with metadata.version {LATEST_METADATA_VERSION}.\n"

    # a different cluster id: refused, even with --ignore-formatted
    other = random_uuid()
    for extra in ([], ["--ignore-formatted"]):
        code, out, err = run(capsys, "storage", "format", "-t", other, "-c", cfg, *extra)
        assert code == 1
        assert err.startswith(
            f"Error: Log directory {tmp_path / 'a'} is already formatted for cluster "
            f"{cluster}, not {other}"
        )
    assert check_log_dirs(config).cluster_id == cluster

    # info
    code, out, err = run(capsys, "storage", "info", "-c", cfg)
    assert (code, err) == (0, "")
    meta = read_meta_properties(tmp_path / "a")
    assert out == (
        "Found log directories:\n"
        f"  {tmp_path / 'a'}\n  {tmp_path / 'b'}\n  {tmp_path / 'meta'}\n\n"
        f"Found metadata: {meta}\n\n"
    )


def test_cli_info_reports_problems(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = str(node_config(tmp_path))
    (tmp_path / "a").mkdir()
    code, out, _ = run(capsys, "storage", "info", "-c", cfg)
    assert code == 1
    assert out == (
        f"Found log directory:\n  {tmp_path / 'a'}\n\n"
        "Found problems:\n"
        f"  {tmp_path / 'a'} is not formatted.\n"
        f"  {tmp_path / 'b'} does not exist\n"
        f"  {tmp_path / 'meta'} does not exist\n\n"
    )
    assert main(["storage", "format", "-t", CLUSTER, "-c", cfg]) == 0
    write_meta_properties(tmp_path / "b", MetaProperties(random_uuid(), 2, random_uuid()))
    capsys.readouterr()
    code, out, _ = run(capsys, "storage", "info", "-c", cfg)
    assert code == 1
    assert "Found problems:\n" in out
    assert f"Metadata for {tmp_path / 'b' / META_PROPERTIES_FILE} was " in out
    assert "has node.id 2, but the configuration has node.id 1" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["format", "-t", "not-a-uuid", "-c", "{cfg}"],
            "Cluster ID string not-a-uuid does not appear to be a valid UUID",
        ),
        (
            ["format", "-t", CLUSTER, "-c", "{tmp}/missing.properties"],
            "Cannot read properties file",
        ),
        (["info", "-c", "{tmp}/missing.properties"], "Cannot read properties file"),
        (
            ["format", "-t", CLUSTER, "-c", "{bad}"],
            "Invalid value 0 for configuration num.partitions",
        ),
        (
            ["format", "-t", CLUSTER, "-c", "{broken}"],
            'Missing required configuration "process.roles"',
        ),
    ],
)
def test_cli_errors_are_clear(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    cfg = node_config(tmp_path)
    bad = tmp_path / "bad.properties"
    bad.write_text(cfg.read_text() + "num.partitions=0\n")
    broken = tmp_path / "broken.properties"
    broken.write_text("node.id=1\n")
    subs = {"cfg": str(cfg), "tmp": str(tmp_path), "bad": str(bad), "broken": str(broken)}
    code, out, err = run(capsys, "storage", *(a.format(**subs) for a in argv))
    assert code == 1
    assert out == ""
    assert err.startswith("Error: ")
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "a").exists()


def test_cli_usage_errors_exit_non_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (
        ["storage"],
        ["storage", "format", "-c", "x"],
        ["storage", "info"],
        ["storage", "nope"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    capsys.readouterr()


def test_cli_as_a_process(tmp_path: Path) -> None:
    cfg = node_config(tmp_path)
    uuid_run = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", "storage", "random-uuid"],
        capture_output=True,
        text=True,
        check=True,
    )
    cluster = uuid_run.stdout.strip()
    assert UUID_RE.match(cluster)
    fmt = subprocess.run(
        [
            sys.executable,
            "-m",
            "rillet.cli.main",
            "storage",
            "format",
            "-t",
            cluster,
            "-c",
            str(cfg),
        ],
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stderr
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "rillet.cli.main",
            "storage",
            "format",
            "-t",
            cluster,
            "-c",
            str(cfg),
        ],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 1
    assert "is already formatted" in again.stderr
    assert isinstance(check_log_dirs(BrokerConfig.from_file(cfg)).cluster_id, str)
    assert issubclass(MetaPropertiesError, KafkaError)
