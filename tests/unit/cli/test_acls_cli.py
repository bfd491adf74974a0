"""``rillet acls`` (Kafka's kafka-acls.sh) without a broker: its flag checks, the ACLs it
builds from principals, hosts, operations and the --producer/--consumer roles, Kafka's output,
and the add/list/remove flows against an in-memory admin client; and the SCRAM credential
parsing of ``rillet configs --entity-type users`` (rillet.cli.acls, rillet.cli.configs,
rillet.client.security_admin)."""

from __future__ import annotations

import argparse
import hashlib
import io
from collections.abc import Iterator, Sequence
from types import TracebackType

import pytest

from rillet.cli import acls, configs
from rillet.cli.acls import (
    CLUSTER_PATTERN,
    Entry,
    Pattern,
    UsageError,
    add_entries,
    check_args,
    filter_entries,
    format_adding,
    format_current,
    format_remove_prompt,
    group_by_pattern,
    pattern_type,
    resource_patterns,
)
from rillet.cli.main import main
from rillet.client.security_admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from rillet.errors import KafkaError, SecurityDisabledError
from rillet.security.acls import (
    ANY_FILTER,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from rillet.security.scram import ScramMechanism, salted_password

OP = AclOperation
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
LITERAL = PatternType.LITERAL


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    acls.add_arguments(p)
    return p.parse_args(["--bootstrap-server", "localhost:9092", *argv])


def topic(name: str, kind: PatternType = LITERAL) -> Pattern:
    return Pattern(ResourceType.TOPIC, name, kind)


def group(name: str, kind: PatternType = LITERAL) -> Pattern:
    return Pattern(ResourceType.GROUP, name, kind)


def txn(name: str) -> Pattern:
    return Pattern(ResourceType.TRANSACTIONAL_ID, name, LITERAL)


def allow(principal: str, op: AclOperation, host: str = "*") -> Entry:
    return Entry(principal, host, op, ALLOW)


def binding(pattern: Pattern, entry: Entry) -> AclBinding:
    return entry.binding(pattern)


# -- flag checks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Command must include exactly one action: --list, --add, --remove."),
        (["--add", "--list"], "Command must include exactly one action"),
        (["--list", "--producer"], 'Option "[list]" can\'t be used with option "[producer]"'),
        (
            ["--list", "--allow-principal", "User:a"],
            'Option "[list]" can\'t be used with option "[allow-principal]"',
        ),
        (
            ["--add", "--producer", "--topic", "t", "--operation", "Read"],
            'Option "[producer]" can\'t be used with option "[operation]"',
        ),
        (
            ["--add", "--consumer", "--topic", "t", "--group", "g", "--deny-principal", "User:a"],
            'Option "[consumer]" can\'t be used with option "[deny-principal]"',
        ),
        (["--add", "--principal", "User:a"], "The --principal option is only available if --list"),
        (["--add", "--producer"], "With --producer you must specify a --topic"),
        (["--add", "--idempotent"], "The --idempotent option is only available if --producer"),
        (
            ["--add", "--consumer", "--topic", "t"],
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified.",
        ),
        (["--add", "--consumer", "--topic", "t", "--group", "g", "--cluster"], "--consumer"),
    ],
)
def test_flag_combinations_refused_as_kafka_refuses_them(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_args(args(*argv))


def test_producer_and_consumer_together_may_name_a_cluster() -> None:
    check_args(
        args("--add", "--producer", "--consumer", "--topic", "t", "--group", "g", "--cluster")
    )


def test_pattern_type_defaults_and_names() -> None:
    assert pattern_type(args("--add")) == PatternType.LITERAL
    assert pattern_type(args("--remove")) == PatternType.LITERAL
    assert pattern_type(args("--list")) == PatternType.ANY
    for text, kind in [
        ("literal", LITERAL),
        ("PREFIXED", PatternType.PREFIXED),
        ("match", PatternType.MATCH),
        ("Any", PatternType.ANY),
    ]:
        assert pattern_type(args("--list", "--resource-pattern-type", text)) == kind
    with pytest.raises(UsageError, match="Unknown resource-pattern-type: glob"):
        pattern_type(args("--list", "--resource-pattern-type", "glob"))


def test_resources_in_kafkas_order_and_the_cluster_only_literal() -> None:
    a = args("--add", "--topic", "b", "--group", "g", "--topic", " a ", "--cluster",
             "--transactional-id", "tx")  # fmt: skip
    assert resource_patterns(a, die_if_none=True) == [
        topic("b"),
        topic("a"),
        CLUSTER_PATTERN,
        group("g"),
        txn("tx"),
    ]
    prefixed = args("--add", "--cluster", "--topic", "a", "--resource-pattern-type", "prefixed")
    assert resource_patterns(prefixed, die_if_none=False) == [topic("a", PatternType.PREFIXED)]
    # Listing with the default (any) still lists the cluster's ACLs.
    assert resource_patterns(args("--list", "--cluster"), die_if_none=False) == [CLUSTER_PATTERN]
    assert resource_patterns(args("--list"), die_if_none=False) == []
    with pytest.raises(UsageError, match="You must provide at least one resource: --topic"):
        resource_patterns(args("--add"), die_if_none=True)


# -- the ACLs built -----------------------------------------------------------------------------


def test_every_principal_operation_and_host() -> None:
    a = args("--add", "--topic", "t", "--allow-principal", "User:a", "--allow-principal",
             "User:b", "--operation", "Read", "--operation", "describe-configs",
             "--allow-host", "10.0.0.1", "--deny-principal", "User:c")  # fmt: skip
    assert add_entries(a) == {
        topic("t"): [
            allow("User:a", OP.READ, "10.0.0.1"),
            allow("User:a", OP.DESCRIBE_CONFIGS, "10.0.0.1"),
            allow("User:b", OP.READ, "10.0.0.1"),
            allow("User:b", OP.DESCRIBE_CONFIGS, "10.0.0.1"),
            Entry("User:c", "*", OP.READ, DENY),
            Entry("User:c", "*", OP.DESCRIBE_CONFIGS, DENY),
        ]
    }


def test_operation_defaults_to_all_and_hosts_to_any() -> None:
    a = args("--add", "--group", "g", "--allow-principal", "User:a")
    assert add_entries(a) == {group("g"): [allow("User:a", OP.ALL)]}


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("Read", OP.READ),
        ("ClusterAction", OP.CLUSTER_ACTION),
        ("CLUSTER_ACTION", OP.CLUSTER_ACTION),
        ("IdempotentWrite", OP.IDEMPOTENT_WRITE),
        ("AlterConfigs", OP.ALTER_CONFIGS),
        ("All", OP.ALL),
    ],
)
def test_kafkas_operation_names(name: str, op: AclOperation) -> None:
    a = args("--add", "--cluster", "--allow-principal", "User:a", "--operation", name)
    if op == OP.READ:
        with pytest.raises(UsageError):
            add_entries(a)
    else:
        assert add_entries(a)[CLUSTER_PATTERN] == [allow("User:a", op)]


@pytest.mark.parametrize("name", ["Fly", "Any", "Unknown"])
def test_unknown_operations_refused(name: str) -> None:
    a = args("--add", "--topic", "t", "--allow-principal", "User:a", "--operation", name)
    with pytest.raises(UsageError, match=f"Invalid operation '{name}'; valid operations: All,"):
        add_entries(a)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--cluster", "--operation", "Read"],
            "ResourceType CLUSTER only supports operations [ALL, CREATE, CLUSTER_ACTION, "
            "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE]",
        ),
        (
            ["--group", "g", "--operation", "Write"],
            "ResourceType GROUP only supports operations [ALL, READ, DESCRIBE, DELETE, "
            "DESCRIBE_CONFIGS, ALTER_CONFIGS]",
        ),
        (
            ["--transactional-id", "x", "--operation", "Read"],
            "ResourceType TRANSACTIONAL_ID only supports operations [ALL, DESCRIBE, WRITE]",
        ),
        (
            ["--topic", "t", "--operation", "ClusterAction"],
            "ResourceType TOPIC only supports operations [ALL, READ, WRITE, CREATE, DESCRIBE, "
            "DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS]",
        ),
    ],
)
def test_operations_a_resource_type_lacks_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as e:
        add_entries(args("--add", "--allow-principal", "User:a", *argv))
    assert str(e.value) == message


def test_adding_needs_a_principal_and_a_specific_pattern_type() -> None:
    with pytest.raises(UsageError, match="You must specify one of: --allow-principal, --deny"):
        add_entries(args("--add", "--topic", "t", "--operation", "Read"))
    with pytest.raises(
        UsageError, match="A '--resource-pattern-type' value of 'MATCH' is not valid when adding"
    ):
        add_entries(args("--add", "--topic", "t", "--allow-principal", "User:a",
                         "--resource-pattern-type", "match"))  # fmt: skip


@pytest.mark.parametrize("principal", ["alice", ":alice", ""])
def test_principals_need_a_type(principal: str) -> None:
    with pytest.raises(UsageError, match="expected a string in format principalType:principal"):
        add_entries(args("--add", "--topic", "t", "--allow-principal", principal))


def test_producer_role() -> None:
    a = args("--add", "--producer", "--topic", "t", "--transactional-id", "tx", "--idempotent",
             "--allow-principal", "User:p")  # fmt: skip
    write, describe = allow("User:p", OP.WRITE), allow("User:p", OP.DESCRIBE)
    assert add_entries(a) == {
        topic("t"): [write, describe, allow("User:p", OP.CREATE)],
        txn("tx"): [write, describe],
        CLUSTER_PATTERN: [allow("User:p", OP.IDEMPOTENT_WRITE)],
    }


def test_consumer_role_and_both_roles_merge_per_topic() -> None:
    a = args("--add", "--consumer", "--topic", "t", "--group", "g", "--allow-principal", "User:c")
    assert add_entries(a) == {
        topic("t"): [allow("User:c", OP.READ), allow("User:c", OP.DESCRIBE)],
        group("g"): [allow("User:c", OP.READ)],
    }
    both = args("--add", "--producer", "--consumer", "--topic", "t", "--group", "g",
                "--allow-principal", "User:x")  # fmt: skip
    assert add_entries(both)[topic("t")] == [
        allow("User:x", OP.WRITE),
        allow("User:x", OP.DESCRIBE),
        allow("User:x", OP.CREATE),
        allow("User:x", OP.READ),
    ]


def test_remove_without_principals_names_the_whole_resource() -> None:
    assert filter_entries(args("--remove", "--topic", "t")) == {topic("t"): []}


# -- output -------------------------------------------------------------------------------------


def test_kafkas_blocks() -> None:
    entries = [allow("User:alice", OP.READ), Entry("User:bob", "h", OP.WRITE, DENY)]
    assert format_adding(topic("orders"), entries) == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=h, operation=WRITE, permissionType=DENY)\n"
    )
    assert format_current(group("g", PatternType.PREFIXED), entries[:1]) == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
        "patternType=PREFIXED)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
    )
    assert format_remove_prompt(topic("t"), []) == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePatternFilter(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)"
    )
    assert format_remove_prompt(topic("t"), entries[:1]) == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        " from resource filter "
        "`ResourcePatternFilter(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)"
    )


def test_listing_groups_by_pattern_without_duplicates() -> None:
    a, b = allow("User:a", OP.READ), allow("User:b", OP.WRITE)
    t, g = topic("t"), group("g")
    grouped = group_by_pattern([binding(t, a), binding(g, a), binding(t, b), binding(t, a)])
    assert grouped == {t: [a, b], g: [a]}


# -- the flows, against an in-memory admin client -----------------------------------------------


class FakeAdmin:
    """The AdminClient's ACL calls over a list, with Kafka's filter semantics."""

    def __init__(self, existing: Sequence[AclBinding] = (), error: KafkaError | None = None):
        self.acls = list(existing)
        self.error = error
        self.deleted: list[AclBinding] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def describe_acls(self, acl_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        self._check()
        return [a for a in self.acls if acl_filter.matches(a)]

    def create_acls(self, new: Sequence[AclBinding]) -> None:
        self._check()
        self.acls += [a for a in new if a not in self.acls]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        self._check()
        out = [[a for a in self.acls if f.matches(a)] for f in filters]
        gone = [a for matched in out for a in matched]
        self.deleted += gone
        self.acls = [a for a in self.acls if a not in gone]
        return out


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAdmin]:
    admin = FakeAdmin()
    monkeypatch.setattr(acls, "admin_client", lambda server, config: admin)
    yield admin


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["acls", "--bootstrap-server", "localhost:1", *argv])
    out, err = capsys.readouterr()
    return code, out, err


ORDERS = "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`"


def test_add_prints_kafkas_block_and_skips_existing(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--add", "--allow-principal", "User:alice", "--operation",
                         "Read", "--topic", "orders")  # fmt: skip
    assert (code, err) == (0, "")
    assert out == (
        f"Adding ACLs for resource {ORDERS}: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
    )
    assert fake.acls == [binding(topic("orders"), allow("User:alice", OP.READ))]
    code, out, _ = run(capsys, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                       "--operation", "Write", "--topic", "orders")  # fmt: skip
    assert code == 0
    assert out.splitlines() == [
        "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), "
        "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) "
        "already exists.",
        f"Adding ACLs for resource {ORDERS}: ",
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
        "",
    ]


def test_list_every_acl_a_pattern_or_a_principal(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.acls = [
        binding(topic("orders"), allow("User:alice", OP.READ)),
        binding(topic("ord", PatternType.PREFIXED), allow("User:bob", OP.WRITE)),
        binding(topic("*"), allow("User:carol", OP.DESCRIBE)),
        binding(group("g"), allow("User:alice", OP.READ)),
    ]
    code, out, _ = run(capsys, "--list")
    assert code == 0
    assert out.count("Current ACLs for resource") == 4
    # Default pattern type any: the name exactly, literal or prefixed.
    code, out, _ = run(capsys, "--list", "--topic", "orders")
    assert out == (
        f"Current ACLs for resource {ORDERS}:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
    )
    code, out, _ = run(capsys, "--list", "--topic", "orders", "--resource-pattern-type", "match")
    assert [line for line in out.splitlines() if line.startswith("Current")] == [
        f"Current ACLs for resource {ORDERS}:",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, "
        "patternType=PREFIXED)`:",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=*, "
        "patternType=LITERAL)`:",
    ]
    code, out, _ = run(capsys, "--list", "--principal", "User:alice")
    assert out.splitlines() == [
        "ACLs for principal `User:alice`",
        f"Current ACLs for resource {ORDERS}:",
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
        "patternType=LITERAL)`:",
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "",
    ]


def test_remove_with_force_and_with_a_prompt(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    read = binding(topic("orders"), allow("User:alice", OP.READ))
    write = binding(topic("orders"), allow("User:alice", OP.WRITE))
    other = binding(topic("other"), allow("User:alice", OP.READ))
    fake.acls = [read, write, other]
    code, out, err = run(capsys, "--remove", "--force", "--topic", "orders", "--allow-principal",
                         "User:alice", "--operation", "Read")  # fmt: skip
    assert (code, out, err) == (0, "", "")
    assert fake.acls == [write, other]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    code, out, _ = run(capsys, "--remove", "--topic", "orders")
    assert code == 0 and fake.acls == [write, other]
    assert out == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePatternFilter(resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)\n"
    )
    monkeypatch.setattr("sys.stdin", Tty("Y\n"))
    assert run(capsys, "--remove", "--topic", "orders")[0] == 0
    assert fake.acls == [other]


def test_remove_without_a_terminal_needs_force(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.acls = [binding(topic("orders"), allow("User:alice", OP.READ))]
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = run(capsys, "--remove", "--topic", "orders")
    assert code == 1 and out == ""
    assert "standard input is not a terminal" in err and "--force" in err
    assert len(fake.acls) == 1


def test_broker_errors_print_kafkas_name_and_exit_1(
    fake: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.error = SecurityDisabledError("No Authorizer is configured.")
    code, out, err = run(capsys, "--list")
    assert code == 1 and out == ""
    assert err == (
        "Error while executing ACL command: [SECURITY_DISABLED] No Authorizer is configured.\n"
    )


def test_usage_errors_exit_1_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1: nothing listens there; these must fail before any request.
    code, out, err = run(capsys, "--add", "--topic", "t", "--cluster", "--operation", "Read",
                         "--allow-principal", "User:a")  # fmt: skip
    assert code == 1 and out == ""
    assert err.startswith("Error: ResourceType CLUSTER only supports operations [ALL, CREATE,")
    code, _, err = run(capsys, "--list", "--add")
    assert code == 1 and "exactly one action" in err


# -- rillet configs --entity-type users ---------------------------------------------------------


def configs_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configs.add_arguments(p)
    return p.parse_args(["--bootstrap-server", "localhost:9092", *argv])


def test_users_entity_flags() -> None:
    assert configs.resolve_entities(configs_args("--describe", "--user", "alice")) == [
        ("users", "alice")
    ]
    assert configs.resolve_entities(configs_args("--describe", "--entity-type", "users")) == [
        ("users", None)
    ]
    # The default user has quotas, never SCRAM credentials.
    assert configs.resolve_entities(
        configs_args("--alter", "--entity-type", "users", "--entity-default")
    ) == [("users", "")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("iterations=8192,password=alice-secret", (8192, "alice-secret")),
        ("password=alice-secret", (4096, "alice-secret")),
        ("iterations=-1,password=p=w,x", (4096, "p=w,x")),
        ("password=", (4096, "")),
    ],
)
def test_scram_credential_values(text: str, expected: tuple[int, str]) -> None:
    assert configs.parse_scram_credential("SCRAM-SHA-256", text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("secret", "Invalid credential property SCRAM-SHA-512"),
        ("iterations=8192", "Invalid credential property SCRAM-SHA-512"),
        ("iterations=,password=x", "Invalid iterations for SCRAM-SHA-512"),
        ("iterations=1000,password=x", "Iterations 1000 is less than the minimum 4096 required"),
    ],
)
def test_scram_credential_values_refused(text: str, message: str) -> None:
    with pytest.raises(configs.UsageError, match=message):
        configs.parse_scram_credential("SCRAM-SHA-512", text)


def test_user_alterations() -> None:
    to_add = configs.parse_add_config(
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=pw]"
    )
    assert configs.user_alterations("alice", to_add, ["SCRAM-SHA-512"]) == [
        UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512),
        UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, "alice-secret", 8192),
        UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_512, "pw", 4096),
    ]
    with pytest.raises(
        configs.UsageError,
        match=r"Only SCRAM credential configs .* can be deleted for 'users'.*: SCRAM-SHA-1",
    ):
        configs.user_alterations("alice", {}, ["SCRAM-SHA-1"])


def test_scram_describe_line() -> None:
    assert configs.format_scram_credentials(
        "alice", [(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    ) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )


def test_configs_users_usage_errors_exit_1_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["configs", "--bootstrap-server", "localhost:1", "--alter", "--user", "alice",
                 "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]"])  # fmt: skip
    assert code == 1
    assert "Iterations 10 is less than the minimum" in capsys.readouterr().err


class FakeScramAdmin:
    def __init__(self) -> None:
        self.altered: list[UserScramCredentialUpsertion | UserScramCredentialDeletion] = []

    def __enter__(self) -> FakeScramAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def alter_user_scram_credentials(
        self, alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion]
    ) -> None:
        self.altered += alterations

    def describe_client_quotas(
        self, components: Sequence[object], strict: bool = False
    ) -> list[tuple[object, dict[str, float]]]:
        return []  # no user has quotas: only the SCRAM lines are printed

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
        from rillet.errors import ResourceNotFoundError

        return {
            "alice": [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)],
            "bob": ResourceNotFoundError("no credentials"),
        }


def test_configs_users_alter_and_describe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = FakeScramAdmin()
    monkeypatch.setattr(configs, "admin_client", lambda server, config: admin)
    b = ["configs", "--bootstrap-server", "localhost:1"]
    assert main([*b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                 "--add-config", "SCRAM-SHA-256=[password=s]"]) == 0  # fmt: skip
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"
    assert admin.altered == [
        UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, "s", 4096)
    ]
    assert main([*b, "--describe", "--entity-type", "users"]) == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
        "Error retrieving SCRAM credential configs for user-principal 'bob': "
        "[RESOURCE_NOT_FOUND] no credentials\n"
    )


# -- the client's salting -----------------------------------------------------------------------


def test_salted_password_is_pbkdf2_of_the_mechanisms_hash() -> None:
    """What the AdminClient sends for an upsertion: Kafka's client salts the same way."""
    salt = b"s" * 32
    assert salted_password(ScramMechanism.SCRAM_SHA_256, "pw", salt, 4096) == (
        hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    )
    assert salted_password(ScramMechanism.SCRAM_SHA_512, "pw", salt, 4096) == (
        hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    )
