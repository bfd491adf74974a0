"""``rillet acls`` and ``rillet configs --entity-type users`` against real ``rillet server
start`` processes: ACLs added, listed (exact names, ``--resource-pattern-type match``, by
principal), refused and removed through the CLI on a broker with Kafka's StandardAuthorizer
(the CLI connects over plaintext gRPC as ANONYMOUS, a super user); SECURITY_DISABLED from a
broker without an authorizer; and SCRAM credentials set, described and deleted."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.timeout(300)

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(
        tmp_path_factory.mktemp("acls-cli") / "data",
        overrides={"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"},
    )
    s.start()
    yield s
    s.stop()
    assert "Traceback" not in s.output(), s.output()[-5000:]


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("acls-cli-open") / "data")
    s.start()
    yield s
    s.stop()


def rillet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def acls(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return rillet("acls", "--bootstrap-server", server.bootstrap, *args)


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stderr == ""
    return r.stdout


def pattern(kind: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={pattern_type})"


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return (
        f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"
    )


def blocks(out: str) -> dict[str, set[str]]:
    """The "Current ACLs for resource `P`:" blocks of ``--list``: pattern -> entries."""
    found: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in out.splitlines():
        if line.startswith("Current ACLs for resource `"):
            assert line.endswith("`:"), line
            current = found.setdefault(line[len("Current ACLs for resource `") : -2], set())
        elif line.startswith("\t"):
            assert current is not None, out
            current.add(line[1:])
        else:
            assert line == "", out
            current = None
    return found


def test_add_list_match_and_remove(secured: ServerProcess) -> None:
    out = ok(acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                  "--topic", "orders"))  # fmt: skip
    assert out == (
        f"Adding ACLs for resource `{pattern('TOPIC', 'orders')}`: \n"
        f" \t{entry('User:alice', 'READ')}\n\n"
    )
    again = ok(acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                    "--topic", "orders"))  # fmt: skip
    assert again == (
        f"Acl (pattern={pattern('TOPIC', 'orders')}, entry={entry('User:alice', 'READ')}) "
        "already exists.\n"
    )
    ok(acls(secured, "--add", "--allow-principal", "User:bob", "--operation", "Write",
            "--resource-pattern-type", "prefixed", "--topic", "ord"))  # fmt: skip
    ok(acls(secured, "--add", "--deny-principal", "User:carol", "--deny-host", "10.0.0.9",
            "--operation", "Describe", "--topic", "*"))  # fmt: skip
    ok(acls(secured, "--add", "--consumer", "--allow-principal", "User:alice", "--topic",
            "orders", "--group", "billing"))  # fmt: skip

    orders = {entry("User:alice", "READ"), entry("User:alice", "DESCRIBE")}
    everything = blocks(ok(acls(secured, "--list")))
    assert everything == {
        pattern("TOPIC", "orders"): orders,
        pattern("TOPIC", "ord", "PREFIXED"): {entry("User:bob", "WRITE")},
        pattern("TOPIC", "*"): {entry("User:carol", "DESCRIBE", "DENY", "10.0.0.9")},
        pattern("GROUP", "billing"): {entry("User:alice", "READ")},
    }
    # The default pattern type for --list is any: the name exactly, literal or prefixed.
    assert blocks(ok(acls(secured, "--list", "--topic", "orders"))) == {
        pattern("TOPIC", "orders"): orders
    }
    # match: every ACL that applies to the topic orders.
    matched = blocks(
        ok(acls(secured, "--list", "--topic", "orders", "--resource-pattern-type", "match"))
    )
    assert matched == {
        pattern("TOPIC", "orders"): orders,
        pattern("TOPIC", "ord", "PREFIXED"): {entry("User:bob", "WRITE")},
        pattern("TOPIC", "*"): {entry("User:carol", "DESCRIBE", "DENY", "10.0.0.9")},
    }
    by_principal = ok(acls(secured, "--list", "--principal", "User:bob"))
    assert by_principal.startswith("ACLs for principal `User:bob`\n")
    assert blocks(by_principal.split("\n", 1)[1]) == {
        pattern("TOPIC", "ord", "PREFIXED"): {entry("User:bob", "WRITE")}
    }

    # Removing one entry, then everything left on a resource.
    ok(acls(secured, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
            "Describe", "--topic", "orders"))  # fmt: skip
    assert blocks(ok(acls(secured, "--list", "--topic", "orders"))) == {
        pattern("TOPIC", "orders"): {entry("User:alice", "READ")}
    }
    assert ok(acls(secured, "--remove", "--force", "--topic", "orders", "--group", "billing")) == ""
    ok(
        acls(
            secured, "--remove", "--force", "--topic", "ord", "--resource-pattern-type", "prefixed"
        )
    )
    ok(acls(secured, "--remove", "--force", "--topic", "*"))
    assert ok(acls(secured, "--list")) == ""


def test_cluster_and_producer_acls(secured: ServerProcess) -> None:
    out = ok(acls(secured, "--add", "--producer", "--idempotent", "--allow-principal",
                  "User:p", "--topic", "events", "--transactional-id", "tx-1"))  # fmt: skip
    assert f"Adding ACLs for resource `{pattern('CLUSTER', 'kafka-cluster')}`: \n" in out
    listed = blocks(ok(acls(secured, "--list", "--cluster", "--transactional-id", "tx-1")))
    writes = {entry("User:p", "WRITE"), entry("User:p", "DESCRIBE")}
    assert listed == {
        pattern("CLUSTER", "kafka-cluster"): {entry("User:p", "IDEMPOTENT_WRITE")},
        pattern("TRANSACTIONAL_ID", "tx-1"): writes,
    }
    assert blocks(ok(acls(secured, "--list", "--topic", "events"))) == {
        pattern("TOPIC", "events"): {
            entry("User:p", "WRITE"),
            entry("User:p", "DESCRIBE"),
            entry("User:p", "CREATE"),
        }
    }
    ok(acls(secured, "--remove", "--force", "--producer", "--idempotent", "--allow-principal",
            "User:p", "--topic", "events", "--transactional-id", "tx-1"))  # fmt: skip
    assert ok(acls(secured, "--list")) == ""


def test_refusals(secured: ServerProcess) -> None:
    r = acls(secured, "--add", "--cluster", "--operation", "Read", "--allow-principal", "User:a")
    assert r.returncode == 1 and r.stdout == ""
    assert "ResourceType CLUSTER only supports operations" in r.stderr
    # No terminal to confirm on: --remove needs --force, and nothing is removed.
    ok(acls(secured, "--add", "--allow-principal", "User:a", "--topic", "kept"))
    r = acls(secured, "--remove", "--topic", "kept")
    assert r.returncode == 1 and "--force" in r.stderr
    assert pattern("TOPIC", "kept") in ok(acls(secured, "--list"))
    ok(acls(secured, "--remove", "--force", "--topic", "kept"))
    # The broker refuses what the CLI cannot check: an empty resource name.
    r = acls(secured, "--add", "--allow-principal", "User:a", "--topic", "")
    assert r.returncode == 1 and "INVALID_REQUEST" in r.stderr, r.stderr
    assert r.stderr.startswith("Error while executing ACL command: ")


def test_security_disabled_without_an_authorizer(open_server: ServerProcess) -> None:
    for argv in (
        ["--list"],
        ["--add", "--allow-principal", "User:a", "--topic", "t"],
        ["--remove", "--force", "--topic", "t"],
    ):
        r = acls(open_server, *argv)
        assert r.returncode == 1, r
        assert r.stderr == (
            "Error while executing ACL command: [SECURITY_DISABLED] No Authorizer is configured.\n"
        )


def test_scram_credentials_with_configs(secured: ServerProcess) -> None:
    b = ["configs", "--bootstrap-server", secured.bootstrap]
    out = ok(rillet(*b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                    "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                    "SCRAM-SHA-512=[password=alice-secret]"))  # fmt: skip
    assert out == "Completed updating config for user alice.\n"
    ok(rillet(*b, "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-512=[password=b]"))
    described = ok(rillet(*b, "--describe", "--entity-type", "users", "--entity-name", "alice"))
    assert described == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    everyone = ok(rillet(*b, "--describe", "--entity-type", "users")).splitlines()
    assert sorted(everyone) == [
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096",
    ]
    out = ok(rillet(*b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                    "--delete-config", "SCRAM-SHA-512"))  # fmt: skip
    assert out == "Completed updating config for user alice.\n"
    assert ok(rillet(*b, "--describe", "--user", "alice")) == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
    )
    ok(rillet(*b, "--alter", "--user", "bob", "--delete-config", "SCRAM-SHA-512"))
    missing = ok(rillet(*b, "--describe", "--user", "bob"))
    assert missing.startswith(
        "Error retrieving SCRAM credential configs for user-principal 'bob': [RESOURCE_NOT_FOUND]"
    )
    # Refused: more iterations than Kafka's maximum (by the broker), SCRAM and quota configs
    # together (by the CLI).
    r = rillet(*b, "--alter", "--user", "alice", "--add-config",
               "SCRAM-SHA-256=[iterations=100000,password=x]")  # fmt: skip
    assert r.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in r.stderr, r.stderr
    r = rillet(*b, "--alter", "--user", "alice", "--add-config",
               "SCRAM-SHA-256=[password=x],producer_byte_rate=1024")  # fmt: skip
    assert r.returncode == 1 and "not together with quota configs" in r.stderr, r.stderr
