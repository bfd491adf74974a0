"""ACLs and the authorizer: Kafka's StandardAuthorizer semantics."""

from __future__ import annotations

import pytest

from rillet.errors import InvalidRequestError
from rillet.security.acls import (
    ANY_FILTER,
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
Op = AclOperation


def acl(
    name: str,
    operation: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = WILDCARD,
    pattern: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def can(
    authorizer: Authorizer,
    operation: AclOperation,
    name: str,
    *,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    resource_type: ResourceType = TOPIC,
) -> bool:
    return authorizer.authorize(principal, host, operation, resource_type, name)


# --- enums ------------------------------------------------------------------------------


def test_wire_codes() -> None:
    assert [int(t) for t in ResourceType] == list(range(8))
    assert ResourceType.TRANSACTIONAL_ID.value == 5 and ResourceType.USER.value == 7
    assert PatternType.MATCH.value == 2 and PatternType.PREFIXED.value == 4
    assert Op.ALL.value == 2 and Op.IDEMPOTENT_WRITE.value == 12
    assert Op.DESCRIBE_TOKENS.value == 14
    assert AclPermissionType.DENY.value == 2 and AclPermissionType.ALLOW.value == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Read", Op.READ),
        ("READ", Op.READ),
        ("DescribeConfigs", Op.DESCRIBE_CONFIGS),
        ("describe-configs", Op.DESCRIBE_CONFIGS),
        ("DESCRIBE_CONFIGS", Op.DESCRIBE_CONFIGS),
        ("IdempotentWrite", Op.IDEMPOTENT_WRITE),
        ("ClusterAction", Op.CLUSTER_ACTION),
        ("All", Op.ALL),
        ("any", Op.ANY),
    ],
)
def test_parse_operation(text: str, expected: AclOperation) -> None:
    assert AclOperation.parse(text) is expected


def test_parse_other_enums() -> None:
    assert ResourceType.parse("Topic") is TOPIC
    assert ResourceType.parse("Group") is GROUP
    assert ResourceType.parse("Cluster") is ResourceType.CLUSTER
    assert ResourceType.parse("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.parse("delegation-token") is ResourceType.DELEGATION_TOKEN
    assert PatternType.parse("literal") is LITERAL
    assert PatternType.parse("prefixed") is PREFIXED
    assert PatternType.parse("match") is PatternType.MATCH
    assert PatternType.parse("any") is PatternType.ANY
    assert AclPermissionType.parse("Allow") is ALLOW
    assert AclPermissionType.parse("deny") is DENY


def test_parse_refuses_bad_names_listing_the_valid_ones() -> None:
    with pytest.raises(InvalidRequestError, match="DESCRIBE_CONFIGS") as info:
        AclOperation.parse("Reed")
    assert "Reed" in str(info.value) and "operation" in str(info.value)
    with pytest.raises(InvalidRequestError, match="TRANSACTIONAL_ID"):
        ResourceType.parse("Topics")
    with pytest.raises(InvalidRequestError, match="PREFIXED"):
        PatternType.parse("regex")
    with pytest.raises(InvalidRequestError):
        AclPermissionType.parse("unknown")


def test_from_code_maps_undefined_codes_to_unknown() -> None:
    assert ResourceType.from_code(2) is TOPIC
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    assert AclOperation.from_code(-1) is Op.UNKNOWN


def test_bindings_turn_codes_into_enums() -> None:
    binding = AclBinding(2, "t", 3, "User:a", "*", 3, 3)  # type: ignore[arg-type]
    assert binding.resource_type is TOPIC and binding.operation is Op.READ
    assert binding == acl("t", principal="User:a")
    assert AclBinding(99, "t", 3, "User:a", "*", 3, 3).resource_type is ResourceType.UNKNOWN  # type: ignore[arg-type]


# --- bindings: validation and text -----------------------------------------------------


def test_valid_bindings_pass_validation() -> None:
    acl("orders").validate()
    acl("orders-", pattern=PREFIXED).validate()
    acl(WILDCARD, principal=WILDCARD_PRINCIPAL).validate()
    acl(CLUSTER_NAME, Op.ALTER, resource_type=ResourceType.CLUSTER).validate()


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl("t", resource_type=ResourceType.ANY), "Invalid resource type ANY"),
        (acl("t", resource_type=ResourceType.UNKNOWN), "Invalid resource type UNKNOWN"),
        (acl("t", pattern=PatternType.MATCH), "Invalid pattern type MATCH"),
        (acl("t", pattern=PatternType.ANY), "Invalid pattern type ANY"),
        (acl("t", pattern=PatternType.UNKNOWN), "Invalid pattern type UNKNOWN"),
        (acl("t", Op.ANY), "Invalid operation ANY"),
        (acl("t", Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl("t", permission=AclPermissionType.ANY), "Invalid permission type ANY"),
        (acl("t", permission=AclPermissionType.UNKNOWN), "Invalid permission type UNKNOWN"),
        (acl(""), "empty resource name"),
        (acl("c", resource_type=ResourceType.CLUSTER), "only valid name for the CLUSTER"),
        (acl("", pattern=PREFIXED), "empty resource name"),
        (acl(WILDCARD, pattern=PREFIXED), "PREFIXED"),
        (acl("t", principal="alice"), "no colon"),
        (acl("t", principal=""), "no colon"),
        (acl("t", principal="User:"), "principalType:principalName"),
        (acl("t", principal=":alice"), "principalType:principalName"),
        (acl("t", host=""), "empty host"),
    ],
)
def test_invalid_bindings(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        binding.validate()


def test_authorizer_refuses_invalid_bindings() -> None:
    with pytest.raises(InvalidRequestError, match="MATCH"):
        Authorizer([acl("t"), acl("t", pattern=PatternType.MATCH)])


def test_binding_text_as_kafka_prints_it() -> None:
    binding = acl("orders")
    assert binding.pattern_str() == (
        "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    )
    assert binding.entry_str() == (
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    )
    assert str(binding) == f"(pattern={binding.pattern_str()}, entry={binding.entry_str()})"
    listing = f"Current ACLs for resource `{binding.pattern_str()}`: \n\t{binding.entry_str()}\n"
    assert listing == (
        "Current ACLs for resource "
        "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
    )
    text = acl("g-", Op.DESCRIBE_CONFIGS, DENY, pattern=PREFIXED, resource_type=GROUP)
    assert "resourceType=GROUP, name=g-, patternType=PREFIXED" in text.pattern_str()
    assert "operation=DESCRIBE_CONFIGS, permissionType=DENY" in text.entry_str()


def test_filter_text() -> None:
    assert str(ANY_FILTER) == (
        "(patternFilter=ResourcePatternFilter(resourceType=ANY, name=<any>, patternType=ANY), "
        "entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))"
    )


# --- filters ---------------------------------------------------------------------------

BINDINGS = [
    acl("orders"),
    acl("orders", Op.WRITE, principal="User:bob"),
    acl(WILDCARD, Op.DESCRIBE, principal=WILDCARD_PRINCIPAL),
    acl("ord", pattern=PREFIXED),
    acl("orders-eu", pattern=PREFIXED, host="10.0.0.9"),
    acl("payments", Op.ALL, DENY),
    acl("orders", resource_type=GROUP),
]


def names(bindings: list[AclBinding]) -> list[tuple[str, str, PatternType, ResourceType]]:
    return [(b.resource_name, b.principal, b.pattern_type, b.resource_type) for b in bindings]


def test_any_filter_matches_everything() -> None:
    assert AclBindingFilter.ANY is ANY_FILTER
    assert all(ANY_FILTER.matches(b) for b in BINDINGS)
    assert Authorizer(BINDINGS).acls(ANY_FILTER) == BINDINGS


def test_literal_filter_matches_exact_name_and_pattern_type() -> None:
    authorizer = Authorizer(BINDINGS)
    found = authorizer.acls(AclBindingFilter(TOPIC, "orders", LITERAL))
    assert found == [BINDINGS[0], BINDINGS[1]]
    # "*" in a LITERAL filter is the wildcard binding itself, not every name.
    assert authorizer.acls(AclBindingFilter(TOPIC, WILDCARD, LITERAL)) == [BINDINGS[2]]
    assert authorizer.acls(AclBindingFilter(TOPIC, "order", LITERAL)) == []


def test_prefixed_filter_matches_exact_prefix_only() -> None:
    authorizer = Authorizer(BINDINGS)
    assert authorizer.acls(AclBindingFilter(TOPIC, "ord", PREFIXED)) == [BINDINGS[3]]
    assert authorizer.acls(AclBindingFilter(TOPIC, "orders", PREFIXED)) == []
    assert authorizer.acls(AclBindingFilter(TOPIC, None, PREFIXED)) == [BINDINGS[3], BINDINGS[4]]


def test_any_pattern_filter_matches_exact_name_of_any_pattern_type() -> None:
    authorizer = Authorizer(BINDINGS)
    found = authorizer.acls(AclBindingFilter(ResourceType.ANY, "orders", PatternType.ANY))
    assert found == [BINDINGS[0], BINDINGS[1], BINDINGS[6]]
    assert authorizer.acls(AclBindingFilter(TOPIC, "ord", PatternType.ANY)) == [BINDINGS[3]]


def test_match_filter_finds_the_acls_that_apply_to_a_resource() -> None:
    authorizer = Authorizer(BINDINGS)
    found = authorizer.acls(AclBindingFilter(TOPIC, "orders-eu-1", PatternType.MATCH))
    # The LITERAL "*", and the PREFIXED "ord" and "orders-eu"; not LITERAL "orders".
    assert found == [BINDINGS[2], BINDINGS[3], BINDINGS[4]]
    found = authorizer.acls(AclBindingFilter(TOPIC, "orders", PatternType.MATCH))
    assert found == [BINDINGS[0], BINDINGS[1], BINDINGS[2], BINDINGS[3]]
    # Without a name MATCH is every pattern type.
    assert len(authorizer.acls(AclBindingFilter(TOPIC, None, PatternType.MATCH))) == 6


def test_entry_filter_fields() -> None:
    authorizer = Authorizer(BINDINGS)
    assert authorizer.acls(AclBindingFilter(principal="User:bob")) == [BINDINGS[1]]
    assert authorizer.acls(AclBindingFilter(host="10.0.0.9")) == [BINDINGS[4]]
    assert authorizer.acls(AclBindingFilter(operation=Op.ALL)) == [BINDINGS[5]]
    assert authorizer.acls(AclBindingFilter(permission_type=DENY)) == [BINDINGS[5]]
    # A filter's "*" principal or host is that exact value, not "any".
    assert authorizer.acls(AclBindingFilter(principal=WILDCARD_PRINCIPAL)) == [BINDINGS[2]]
    assert len(authorizer.acls(AclBindingFilter(host=WILDCARD))) == 6
    assert authorizer.acls(AclBindingFilter(resource_type=GROUP)) == [BINDINGS[6]]


def test_binding_to_filter_matches_only_itself() -> None:
    for binding in BINDINGS:
        assert Authorizer(BINDINGS).acls(binding.to_filter()) == [binding]


def test_filter_validation_refuses_unknown() -> None:
    ANY_FILTER.validate()
    AclBindingFilter(TOPIC, "t", PatternType.MATCH, "User:a", "h", Op.READ, ALLOW).validate()
    for flt, message in [
        (AclBindingFilter(resource_type=ResourceType.UNKNOWN), "resource type"),
        (AclBindingFilter(pattern_type=PatternType.UNKNOWN), "pattern type"),
        (AclBindingFilter(operation=Op.UNKNOWN), "operation"),
        (AclBindingFilter(permission_type=AclPermissionType.UNKNOWN), "permission type"),
    ]:
        with pytest.raises(InvalidRequestError, match=message):
            flt.validate()


# --- authorize -------------------------------------------------------------------------


def test_literal_acl() -> None:
    authorizer = Authorizer([acl("orders")])
    assert can(authorizer, Op.READ, "orders")
    assert not can(authorizer, Op.WRITE, "orders")
    assert not can(authorizer, Op.READ, "orders2")
    assert not can(authorizer, Op.READ, "order")
    assert not can(authorizer, Op.READ, "orders", resource_type=GROUP)


def test_prefixed_acl() -> None:
    authorizer = Authorizer([acl("orders-", Op.WRITE, pattern=PREFIXED)])
    assert can(authorizer, Op.WRITE, "orders-")
    assert can(authorizer, Op.WRITE, "orders-eu")
    assert not can(authorizer, Op.WRITE, "orders")
    assert not can(authorizer, Op.WRITE, "xorders-eu")
    assert not can(authorizer, Op.READ, "orders-eu")


def test_wildcard_resource_acl() -> None:
    authorizer = Authorizer([acl(WILDCARD, Op.DESCRIBE)])
    assert can(authorizer, Op.DESCRIBE, "anything")
    assert can(authorizer, Op.DESCRIBE, WILDCARD)
    assert not can(authorizer, Op.READ, "anything")
    assert not can(authorizer, Op.DESCRIBE, "anything", resource_type=GROUP)


def test_all_operation_allows_and_denies_everything() -> None:
    authorizer = Authorizer([acl("t", Op.ALL), acl("u", Op.ALL, DENY), acl("u", Op.READ)])
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DELETE):
        assert can(authorizer, op, "t")
        assert not can(authorizer, op, "u")


def test_deny_takes_precedence() -> None:
    authorizer = Authorizer([acl("t", Op.READ), acl("t", Op.READ, DENY)])
    assert not can(authorizer, Op.READ, "t")


def test_prefixed_deny_beats_literal_allow() -> None:
    authorizer = Authorizer(
        [acl("orders-eu", Op.WRITE), acl("orders-", Op.WRITE, DENY, pattern=PREFIXED)]
    )
    assert not can(authorizer, Op.WRITE, "orders-eu")


def test_wildcard_deny_beats_every_allow() -> None:
    authorizer = Authorizer(
        [
            acl("t"),
            acl("t", pattern=PREFIXED),
            acl(WILDCARD, Op.READ, DENY, principal=WILDCARD_PRINCIPAL),
        ]
    )
    assert not can(authorizer, Op.READ, "t")
    assert not can(authorizer, Op.READ, "tx")


def test_deny_of_another_operation_does_not_deny() -> None:
    authorizer = Authorizer([acl("t", Op.READ), acl("t", Op.WRITE, DENY)])
    assert can(authorizer, Op.READ, "t")
    assert not can(authorizer, Op.WRITE, "t")


def test_implied_describe() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        authorizer = Authorizer([acl("t", op)])
        assert can(authorizer, Op.DESCRIBE, "t"), op
        assert not can(authorizer, Op.DESCRIBE_CONFIGS, "t"), op
    for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        assert not can(Authorizer([acl("t", op)]), Op.DESCRIBE, "t"), op
    # An implication goes one way: DESCRIBE does not allow READ.
    assert not can(Authorizer([acl("t", Op.DESCRIBE)]), Op.READ, "t")


def test_implied_describe_configs() -> None:
    authorizer = Authorizer([acl("t", Op.ALTER_CONFIGS)])
    assert can(authorizer, Op.DESCRIBE_CONFIGS, "t")
    assert can(authorizer, Op.ALTER_CONFIGS, "t")
    assert not can(authorizer, Op.ALTER, "t")
    assert not can(Authorizer([acl("t", Op.DESCRIBE_CONFIGS)]), Op.ALTER_CONFIGS, "t")


def test_deny_implies_nothing() -> None:
    # A DENY of READ does not deny DESCRIBE, which an ALLOW of WRITE implies.
    authorizer = Authorizer([acl("t", Op.WRITE), acl("t", Op.READ, DENY)])
    assert can(authorizer, Op.DESCRIBE, "t")
    # And a DENY of ALTER_CONFIGS leaves an ALLOWed DESCRIBE_CONFIGS alone.
    authorizer = Authorizer([acl("t", Op.DESCRIBE_CONFIGS), acl("t", Op.ALTER_CONFIGS, DENY)])
    assert can(authorizer, Op.DESCRIBE_CONFIGS, "t")
    # But a DENY of DESCRIBE beats an implied DESCRIBE.
    authorizer = Authorizer([acl("t", Op.READ), acl("t", Op.DESCRIBE, DENY)])
    assert not can(authorizer, Op.DESCRIBE, "t")
    assert can(authorizer, Op.READ, "t")


def test_super_users_are_always_allowed() -> None:
    authorizer = Authorizer(
        [acl(WILDCARD, Op.ALL, DENY, principal=WILDCARD_PRINCIPAL)],
        super_users=["User:admin"],
    )
    assert can(authorizer, Op.ALTER, "t", principal="User:admin")
    assert can(authorizer, Op.READ, "g", principal="User:admin", resource_type=GROUP)
    assert not can(authorizer, Op.READ, "t")
    assert authorizer.super_users == frozenset({"User:admin"})


def test_no_acl_found_denies_by_default() -> None:
    assert not can(Authorizer(), Op.READ, "t")
    assert not can(Authorizer([acl("other")]), Op.READ, "t")
    assert not can(Authorizer([acl("g", resource_type=GROUP)]), Op.READ, "g")


def test_allow_everyone_if_no_acl_found() -> None:
    authorizer = Authorizer(
        [
            acl("guarded", principal="User:bob"),
            acl("team-", pattern=PREFIXED, principal="User:bob"),
        ],
        allow_everyone_if_no_acl_found=True,
    )
    # No ACL covers these resources: everyone may.
    assert can(authorizer, Op.WRITE, "open")
    assert can(authorizer, Op.READ, "g", resource_type=GROUP)
    assert can(Authorizer(allow_everyone_if_no_acl_found=True), Op.ALTER, "t")
    # An ACL for another principal covers the resource: the ACLs decide.
    assert not can(authorizer, Op.READ, "guarded")
    assert not can(authorizer, Op.READ, "team-a")
    assert can(authorizer, Op.READ, "guarded", principal="User:bob")
    # An ACL for another operation or host covers it too.
    authorizer = Authorizer(
        [acl("t", Op.WRITE, host="10.9.9.9")], allow_everyone_if_no_acl_found=True
    )
    assert not can(authorizer, Op.READ, "t")


def test_host_matching() -> None:
    authorizer = Authorizer(
        [acl("t", host="10.0.0.1"), acl("t", Op.WRITE, DENY, host="10.0.0.2"), acl("t", Op.WRITE)]
    )
    assert can(authorizer, Op.READ, "t", host="10.0.0.1")
    assert not can(authorizer, Op.READ, "t", host="10.0.0.3")
    assert can(authorizer, Op.WRITE, "t", host="10.0.0.1")
    assert not can(authorizer, Op.WRITE, "t", host="10.0.0.2")


def test_wildcard_principal() -> None:
    authorizer = Authorizer(
        [acl("t", principal=WILDCARD_PRINCIPAL), acl("t", Op.READ, DENY, principal="User:eve")]
    )
    assert can(authorizer, Op.READ, "t", principal="User:alice")
    assert can(authorizer, Op.READ, "t", principal="User:bob")
    assert not can(authorizer, Op.READ, "t", principal="User:eve")
    # A wildcard DENY applies to everyone.
    authorizer = Authorizer(
        [acl("t", Op.READ), acl("t", Op.READ, DENY, principal=WILDCARD_PRINCIPAL)]
    )
    assert not can(authorizer, Op.READ, "t")


def test_principals_are_exact() -> None:
    authorizer = Authorizer([acl("t", principal="User:alice")])
    assert not can(authorizer, Op.READ, "t", principal="User:Alice")
    assert not can(authorizer, Op.READ, "t", principal="Group:alice")


def test_combined_patterns_allow_from_any_of_them() -> None:
    authorizer = Authorizer(
        [
            acl("orders", Op.READ),
            acl("ord", Op.WRITE, pattern=PREFIXED),
            acl(WILDCARD, Op.DESCRIBE),
            acl("o", Op.DELETE, pattern=PREFIXED),
        ]
    )
    assert can(authorizer, Op.READ, "orders")
    assert can(authorizer, Op.WRITE, "orders")
    assert can(authorizer, Op.DELETE, "orders")
    assert can(authorizer, Op.DESCRIBE, "zzz")
    assert not can(authorizer, Op.READ, "ordinal")
    assert can(authorizer, Op.WRITE, "ordinal")


def test_duplicates_count_once_and_mappings_are_accepted() -> None:
    authorizer = Authorizer([acl("t"), acl("t"), acl("u")])
    assert authorizer.count == 2
    assert authorizer.bindings == (acl("t"), acl("u"))
    keyed = Authorizer({1: acl("t"), 2: acl("u", Op.WRITE)})
    assert keyed.count == 2
    assert can(keyed, Op.WRITE, "u")


def test_ten_thousand_acls() -> None:
    bindings = [acl(f"topic-{i}", principal=f"User:u{i % 100}") for i in range(10_000)]
    bindings += [
        acl(f"team{i}-", Op.WRITE, pattern=PREFIXED, principal=f"User:u{i}") for i in range(100)
    ]
    bindings += [
        acl("topic-77", Op.READ, DENY, principal="User:u77"),
        acl("team9-secret", Op.WRITE, DENY, pattern=PREFIXED, principal="User:u9"),
    ]
    authorizer = Authorizer(bindings)
    assert authorizer.count == 10_102
    assert can(authorizer, Op.READ, "topic-105", principal="User:u5")
    assert can(authorizer, Op.DESCRIBE, "topic-9999", principal="User:u99")
    assert not can(authorizer, Op.READ, "topic-105", principal="User:u6")
    assert not can(authorizer, Op.READ, "topic-77", principal="User:u77")
    assert can(authorizer, Op.WRITE, "team9-orders", principal="User:u9")
    assert not can(authorizer, Op.WRITE, "team9-secret-x", principal="User:u9")
    assert not can(authorizer, Op.WRITE, "team10-orders", principal="User:u9")
    assert can(authorizer, Op.WRITE, "team10-orders", principal="User:u10")
    assert not can(authorizer, Op.READ, "topic-10000", principal="User:u0")
    match = AclBindingFilter(TOPIC, "team9-secret-x", PatternType.MATCH)
    assert names(authorizer.acls(match)) == [
        ("team9-", "User:u9", PREFIXED, TOPIC),
        ("team9-secret", "User:u9", PREFIXED, TOPIC),
    ]
    assert len(authorizer.acls(AclBindingFilter(principal="User:u3"))) == 101
    assert authorizer.authorize_any("User:u42", "h", Op.WRITE, TOPIC)
    assert not authorizer.authorize_any("User:u420", "h", Op.WRITE, TOPIC)


# --- authorize_any ---------------------------------------------------------------------


def any_(authorizer: Authorizer, operation: AclOperation = Op.WRITE, **kw: str) -> bool:
    principal = kw.get("principal", "User:alice")
    return authorizer.authorize_any(principal, kw.get("host", "10.0.0.1"), operation, TOPIC)


def test_authorize_any_needs_an_allow() -> None:
    assert not any_(Authorizer())
    assert any_(Authorizer([acl("t", Op.WRITE)]))
    assert any_(Authorizer([acl("t-", Op.WRITE, pattern=PREFIXED)]))
    assert any_(Authorizer([acl(WILDCARD, Op.ALL)]))
    assert any_(Authorizer([acl("t", Op.WRITE, principal=WILDCARD_PRINCIPAL)]))
    assert not any_(Authorizer([acl("t", Op.WRITE, principal="User:bob")]))
    assert not any_(Authorizer([acl("t", Op.READ)]))
    assert not any_(Authorizer([acl("t", Op.WRITE, resource_type=GROUP)]))
    assert not any_(Authorizer([acl("t", Op.WRITE, host="10.0.0.2")]))
    assert any_(Authorizer([acl("t", Op.WRITE, host="10.0.0.1")]))
    # No implied operations: WRITE does not make DESCRIBE possible here (as Kafka).
    assert not any_(Authorizer([acl("t", Op.WRITE)]), Op.DESCRIBE)


def test_authorize_any_denies_covered_allows() -> None:
    # The same literal denied.
    assert not any_(Authorizer([acl("t", Op.WRITE), acl("t", Op.WRITE, DENY)]))
    # A literal DENY of another name leaves the ALLOW.
    assert any_(Authorizer([acl("t", Op.WRITE), acl("u", Op.WRITE, DENY)]))
    # A prefixed DENY covers the literal and prefixed ALLOWs it prefixes.
    deny_prefix = acl("t", Op.WRITE, DENY, pattern=PREFIXED)
    assert not any_(Authorizer([acl("tx", Op.WRITE), deny_prefix]))
    assert not any_(Authorizer([acl("tx", Op.WRITE, pattern=PREFIXED), deny_prefix]))
    assert any_(Authorizer([acl("ux", Op.WRITE), deny_prefix]))
    # A literal DENY does not cover a prefixed ALLOW of the same name.
    assert any_(Authorizer([acl("t", Op.WRITE, pattern=PREFIXED), acl("t", Op.WRITE, DENY)]))
    # A longer prefixed DENY does not cover a shorter prefixed ALLOW.
    assert any_(
        Authorizer(
            [acl("t", Op.WRITE, pattern=PREFIXED), acl("tx", Op.WRITE, DENY, pattern=PREFIXED)]
        )
    )
    # A wildcard DENY refuses, even with a wildcard ALLOW.
    wildcard_deny = acl(WILDCARD, Op.ALL, DENY, principal=WILDCARD_PRINCIPAL)
    assert not any_(Authorizer([acl(WILDCARD, Op.WRITE), wildcard_deny]))
    # A wildcard ALLOW is not covered by other DENYs.
    assert any_(Authorizer([acl(WILDCARD, Op.WRITE), deny_prefix]))
    # DENYs of another principal, host or operation do not count.
    assert any_(Authorizer([acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, principal="User:b")]))
    assert any_(Authorizer([acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, host="10.0.0.2")]))
    assert any_(Authorizer([acl("t", Op.WRITE), acl("t", Op.READ, DENY)]))
    # One uncovered ALLOW among covered ones suffices.
    assert any_(Authorizer([acl("tx", Op.WRITE), deny_prefix, acl("ok", Op.WRITE)]))


def test_authorize_any_super_users_and_allow_everyone() -> None:
    wildcard_deny = acl(WILDCARD, Op.WRITE, DENY, principal=WILDCARD_PRINCIPAL)
    authorizer = Authorizer([wildcard_deny], super_users=["User:admin"])
    assert any_(authorizer, principal="User:admin")
    assert not any_(authorizer)
    assert any_(Authorizer(allow_everyone_if_no_acl_found=True))
    assert any_(Authorizer([acl("t", Op.WRITE, DENY)], allow_everyone_if_no_acl_found=True))
    assert not any_(Authorizer([wildcard_deny], allow_everyone_if_no_acl_found=True))


def test_authorize_any_refuses_filter_values() -> None:
    authorizer = Authorizer()
    with pytest.raises(InvalidRequestError, match="operation"):
        authorizer.authorize_any("User:a", "h", Op.ANY, TOPIC)
    with pytest.raises(InvalidRequestError, match="resource type"):
        authorizer.authorize_any("User:a", "h", Op.READ, ResourceType.ANY)
