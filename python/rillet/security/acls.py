"""Access control lists: Kafka's ACL types and an in-memory authorizer with the semantics of
Kafka's ``StandardAuthorizer`` (KIP-801; the same rules as the older ``AclAuthorizer``).

An ACL (:class:`AclBinding`) is a resource pattern -- resource type, name and pattern type --
and an entry -- principal (``User:alice``), host (``*`` for any), operation and permission
(``ALLOW`` or ``DENY``). The enums hold Kafka's wire codes.

:meth:`Authorizer.authorize` decides whether a principal connected from a host may perform an
operation on one named resource:

* a super user (``super.users``, e.g. ``User:admin``) is always allowed;
* the ACLs that apply to the resource are those whose pattern covers it -- ``LITERAL`` with
  the same name, ``LITERAL`` named ``*`` (every resource of the type), ``PREFIXED`` whose name
  starts the resource's name -- and whose entry names the principal (or ``User:*``, anyone)
  and the host (or ``*``);
* a matching ``DENY`` for the operation (or ``ALL``) wins over any ``ALLOW``;
* a matching ``ALLOW`` for the operation or ``ALL`` allows; an ``ALLOW`` of ``READ``,
  ``WRITE``, ``DELETE`` or ``ALTER`` also allows ``DESCRIBE``, and one of ``ALTER_CONFIGS``
  also allows ``DESCRIBE_CONFIGS`` (the implication holds for ``ALLOW`` only, never ``DENY``);
* a resource no ACL pattern covers at all (whoever the ACLs are for) gets
  ``allow.everyone.if.no.acl.found``; otherwise what is not allowed is denied.

:meth:`Authorizer.authorize_any` is Kafka's ``authorizeByResourceType`` (KIP-679): could the
principal be allowed the operation on at least one resource of a type.

:class:`AclBindingFilter` selects ACLs for DescribeAcls and DeleteAcls with the semantics of
Kafka's ``AclBindingFilter`` (``ResourcePatternFilter`` and ``AccessControlEntryFilter``).

An :class:`Authorizer` is immutable: a change to the ACLs builds a new one. Everything here is
pure: no I/O, no threads, no clocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Self

from rillet.errors import InvalidRequestError

__all__ = [
    "ANY_FILTER",
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Authorizer",
    "PatternType",
    "ResourceType",
]

# The only name a CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"
# A LITERAL resource name, or an ACL's host, that stands for every resource or host.
WILDCARD = "*"
# An ACL's principal that stands for every principal.
WILDCARD_PRINCIPAL = "User:*"


class _KafkaEnum(IntEnum):
    """An enum of Kafka's wire codes, 0 being UNKNOWN."""

    @classmethod
    def _kind(cls) -> str:
        return cls.__name__

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with wire code ``code``; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def parse(cls, text: str) -> Self:
        """The member named ``text``, case-insensitively, with or without ``_`` or ``-``
        between words (``DESCRIBE_CONFIGS``, ``DescribeConfigs``, ``describe-configs``).
        UNKNOWN is not a name one can give."""
        key = text.strip().replace("-", "").replace("_", "").replace(" ", "").upper()
        for member in cls:
            if member.value != 0 and member.name.replace("_", "") == key:
                return member
        valid = ", ".join(m.name for m in cls if m.value != 0)
        raise InvalidRequestError(f"Invalid {cls._kind()} {text!r}; valid names: {valid}")


class ResourceType(_KafkaEnum):
    """Kafka's ``ResourceType``."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @classmethod
    def _kind(cls) -> str:
        return "resource type"


class PatternType(_KafkaEnum):
    """Kafka's ``PatternType``. ``ANY`` and ``MATCH`` are for filters only."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @classmethod
    def _kind(cls) -> str:
        return "pattern type"


class AclOperation(_KafkaEnum):
    """Kafka's ``AclOperation``. ``ANY`` is for filters only."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @classmethod
    def _kind(cls) -> str:
        return "operation"


class AclPermissionType(_KafkaEnum):
    """Kafka's ``AclPermissionType``. ``ANY`` is for filters only."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @classmethod
    def _kind(cls) -> str:
        return "permission type"


def _coerce_enums(obj: AclBinding | AclBindingFilter) -> None:
    for attr, enum in (
        ("resource_type", ResourceType),
        ("pattern_type", PatternType),
        ("operation", AclOperation),
        ("permission_type", AclPermissionType),
    ):
        value = getattr(obj, attr)
        if type(value) is not enum:
            object.__setattr__(obj, attr, enum.from_code(value))


def _or_any(value: str | None) -> str:
    return "<any>" if value is None else value


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an entry. Codes given as plain ints are turned into
    the enums (an undefined code into UNKNOWN, which :meth:`validate` refuses)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        _coerce_enums(self)

    def validate(self) -> None:
        """Raise :class:`InvalidRequestError` unless this is an ACL one may create."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidRequestError(f"Invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequestError(f"Invalid pattern type {self.pattern_type.name}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidRequestError(f"Invalid operation {self.operation.name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidRequestError(f"Invalid permission type {self.permission_type.name}")
        if not self.resource_name:
            raise InvalidRequestError("Invalid empty resource name")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidRequestError(
                f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            raise InvalidRequestError(
                f"Invalid PREFIXED resource name {WILDCARD!r}: "
                f"a LITERAL {WILDCARD!r} names every resource"
            )
        kind, colon, name = self.principal.partition(":")
        if not colon:
            raise InvalidRequestError(
                f"Could not parse principal from `{self.principal}` (no colon is present "
                "separating the principal type from the principal name)"
            )
        if not kind or not name:
            raise InvalidRequestError(
                f"Invalid principal `{self.principal}`: expected principalType:principalName"
            )
        if not self.host:
            raise InvalidRequestError(f"Invalid empty host (use {WILDCARD!r} for any host)")

    def pattern_str(self) -> str:
        """Kafka's ``ResourcePattern.toString``."""
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, "
            f"name={self.resource_name}, patternType={self.pattern_type.name})"
        )

    def entry_str(self) -> str:
        """Kafka's ``AccessControlEntry.toString``."""
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name})"
        )

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )

    def __str__(self) -> str:
        return f"(pattern={self.pattern_str()}, entry={self.entry_str()})"


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs a DescribeAcls or DeleteAcls names. ``None`` for a name, principal or host,
    and ``ANY`` for an enum, match every value. ``pattern_type`` ``LITERAL`` or ``PREFIXED``
    matches that pattern type with exactly the name; ``ANY`` any pattern type with exactly
    the name; ``MATCH`` the ACLs that apply to the named resource (LITERAL of the name,
    LITERAL ``*``, PREFIXED of a prefix of the name)."""

    ANY: ClassVar[AclBindingFilter]

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        _coerce_enums(self)

    def validate(self) -> None:
        """Raise :class:`InvalidRequestError` if a field is UNKNOWN (Kafka refuses such a
        filter in DeleteAcls: it could match nothing definite)."""
        if self.resource_type == ResourceType.UNKNOWN:
            raise InvalidRequestError("Invalid resource type UNKNOWN")
        if self.pattern_type == PatternType.UNKNOWN:
            raise InvalidRequestError("Invalid pattern type UNKNOWN")
        if self.operation == AclOperation.UNKNOWN:
            raise InvalidRequestError("Invalid operation UNKNOWN")
        if self.permission_type == AclPermissionType.UNKNOWN:
            raise InvalidRequestError("Invalid permission type UNKNOWN")

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` is one this filter selects."""
        return self.matches_pattern(binding) and self.matches_entry(binding)

    def matches_pattern(self, binding: AclBinding) -> bool:
        """Whether the resource pattern part of this filter selects ``binding``'s pattern
        (Kafka's ``ResourcePatternFilter.matches``)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        kind = self.pattern_type
        if kind not in (PatternType.ANY, PatternType.MATCH) and kind != binding.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if kind == PatternType.ANY or kind == binding.pattern_type:
            return name == binding.resource_name
        # MATCH: the binding applies to the resource named.
        if binding.pattern_type == PatternType.LITERAL:
            return binding.resource_name in (name, WILDCARD)
        if binding.pattern_type == PatternType.PREFIXED:
            return name.startswith(binding.resource_name)
        return False

    def matches_entry(self, binding: AclBinding) -> bool:
        """Whether the entry part of this filter selects ``binding``'s entry (Kafka's
        ``AccessControlEntryFilter.matches``)."""
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        return (
            self.permission_type == AclPermissionType.ANY
            or self.permission_type == binding.permission_type
        )

    def pattern_str(self) -> str:
        """Kafka's ``ResourcePatternFilter.toString``."""
        return (
            f"ResourcePatternFilter(resourceType={self.resource_type.name}, "
            f"name={_or_any(self.resource_name)}, patternType={self.pattern_type.name})"
        )

    def entry_str(self) -> str:
        """Kafka's ``AccessControlEntryFilter.toString``."""
        return (
            f"(principal={_or_any(self.principal)}, host={_or_any(self.host)}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name})"
        )

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_str()}, entryFilter={self.entry_str()})"


AclBindingFilter.ANY = AclBindingFilter()
# The filter that matches every ACL.
ANY_FILTER = AclBindingFilter.ANY


# Bit masks of operations (bit ``1 << code``).
_ALL_OPERATIONS = sum(1 << op for op in AclOperation)
# What an ALLOW of an operation grants: the operation itself, and what it implies.
_ALLOW_GRANTS: dict[int, int] = {int(op): 1 << op for op in AclOperation}
_ALLOW_GRANTS[AclOperation.ALL] = _ALL_OPERATIONS
for _op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER):
    _ALLOW_GRANTS[_op] |= 1 << AclOperation.DESCRIBE
_ALLOW_GRANTS[AclOperation.ALTER_CONFIGS] |= 1 << AclOperation.DESCRIBE_CONFIGS
# What a DENY of an operation refuses: only the operation (or everything, for ALL).
_DENY_REFUSES: dict[int, int] = {int(op): 1 << op for op in AclOperation}
_DENY_REFUSES[AclOperation.ALL] = _ALL_OPERATIONS
del _op

_DENY = int(AclPermissionType.DENY)

# The entries of one resource pattern: principal -> host -> (denied mask, allowed mask).
_Grants = dict[str, dict[str, tuple[int, int]]]


class _TypeIndex:
    """The ACLs of one resource type, indexed for lookup."""

    __slots__ = ("by_principal", "literal", "prefix_lengths", "prefixed", "wildcard")

    def __init__(self) -> None:
        self.literal: dict[str, _Grants] = {}
        self.wildcard: _Grants = {}
        self.prefixed: dict[str, _Grants] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self.by_principal: dict[str, list[AclBinding]] = {}

    def add(self, binding: AclBinding) -> None:
        name = binding.resource_name
        if binding.pattern_type == PatternType.PREFIXED:
            grants = self.prefixed.setdefault(name, {})
        elif name == WILDCARD:
            grants = self.wildcard
        else:
            grants = self.literal.setdefault(name, {})
        hosts = grants.setdefault(binding.principal, {})
        denied, allowed = hosts.get(binding.host, (0, 0))
        if binding.permission_type == _DENY:
            denied |= _DENY_REFUSES[binding.operation]
        else:
            allowed |= _ALLOW_GRANTS[binding.operation]
        hosts[binding.host] = (denied, allowed)
        self.by_principal.setdefault(binding.principal, []).append(binding)

    def seal(self) -> None:
        self.prefix_lengths = tuple(sorted({len(prefix) for prefix in self.prefixed}))


class Authorizer:
    """Decides who may do what, from a fixed set of ACLs (see the module's docstring).

    ``acls`` are bindings, or a mapping (e.g. by ACL id) whose values are bindings; each is
    validated, and duplicates count once. ``super_users`` are principals such as
    ``User:admin``.
    """

    __slots__ = ("_allow_everyone", "_bindings", "_index", "_super_users")

    def __init__(
        self,
        acls: Iterable[AclBinding] | Mapping[Any, AclBinding] = (),
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        values: Iterable[AclBinding] = acls.values() if isinstance(acls, Mapping) else acls
        bindings = tuple(dict.fromkeys(values))
        index: dict[int, _TypeIndex] = {}
        for binding in bindings:
            binding.validate()
            type_index = index.get(binding.resource_type)
            if type_index is None:
                type_index = index[int(binding.resource_type)] = _TypeIndex()
            type_index.add(binding)
        for type_index in index.values():
            type_index.seal()
        self._bindings = bindings
        self._index = index
        self._super_users = frozenset(super_users)
        self._allow_everyone = allow_everyone_if_no_acl_found

    @property
    def count(self) -> int:
        """How many ACLs there are."""
        return len(self._bindings)

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        """Every ACL, in the order given (without duplicates)."""
        return self._bindings

    @property
    def super_users(self) -> frozenset[str]:
        return self._super_users

    @property
    def allow_everyone_if_no_acl_found(self) -> bool:
        return self._allow_everyone

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``flt`` matches, in the order given (DescribeAcls)."""
        return [binding for binding in self._bindings if flt.matches(binding)]

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may perform ``operation`` on the
        resource ``resource_name`` of type ``resource_type``."""
        if principal in self._super_users:
            return True
        type_index = self._index.get(resource_type)
        if type_index is None:
            return self._allow_everyone
        bit = 1 << operation
        found = False
        allowed = False
        grants = type_index.literal.get(resource_name)
        if grants is not None:
            found = True
            result = _check(grants, principal, host, bit)
            if result < 0:
                return False
            allowed = result > 0
        grants = type_index.wildcard
        if grants:
            found = True
            result = _check(grants, principal, host, bit)
            if result < 0:
                return False
            allowed = allowed or result > 0
        if type_index.prefix_lengths:
            prefixed = type_index.prefixed
            size = len(resource_name)
            for length in type_index.prefix_lengths:
                if length > size:
                    break
                grants = prefixed.get(resource_name[:length])
                if grants is not None:
                    found = True
                    result = _check(grants, principal, host, bit)
                    if result < 0:
                        return False
                    allowed = allowed or result > 0
        if not found:
            return self._allow_everyone
        return allowed

    def authorize_any(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` could be allowed ``operation`` on at
        least one resource of ``resource_type`` (Kafka's ``authorizeByResourceType``).

        A super user is. Otherwise the ALLOWs and DENYs considered are those for the principal
        (or ``User:*``) and host (or ``*``) of exactly the operation or ALL (no implied
        operations). A DENY of LITERAL ``*`` refuses; else ``allow_everyone_if_no_acl_found``
        allows (as Kafka's AclAuthorizer: some resource surely has no ACL); else an ALLOW of
        LITERAL ``*`` allows, and so does any other ALLOW that no DENY covers (a LITERAL DENY
        covers the LITERAL ALLOW of the same name, a PREFIXED DENY every ALLOW whose name it
        prefixes).
        """
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidRequestError(f"Invalid operation {AclOperation(operation).name}")
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidRequestError(f"Invalid resource type {ResourceType(resource_type).name}")
        if principal in self._super_users:
            return True
        type_index = self._index.get(resource_type)
        if type_index is None:
            return self._allow_everyone
        candidates = list(type_index.by_principal.get(principal, ()))
        if principal != WILDCARD_PRINCIPAL:
            candidates.extend(type_index.by_principal.get(WILDCARD_PRINCIPAL, ()))
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: list[str] = []
        allow_prefixed: list[str] = []
        wildcard_allow = False
        for binding in candidates:
            if binding.host != WILDCARD and binding.host != host:
                continue
            if binding.operation != operation and binding.operation != AclOperation.ALL:
                continue
            name = binding.resource_name
            literal = binding.pattern_type == PatternType.LITERAL
            if binding.permission_type == AclPermissionType.DENY:
                if literal and name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(name)
            elif literal and name == WILDCARD:
                wildcard_allow = True
            else:
                (allow_literal if literal else allow_prefixed).append(name)
        if self._allow_everyone or wildcard_allow:
            return True
        deny_lengths = sorted({len(prefix) for prefix in deny_prefixed})

        def dominated(name: str) -> bool:
            for length in deny_lengths:
                if length > len(name):
                    return False
                if name[:length] in deny_prefixed:
                    return True
            return False

        if any(name not in deny_literal and not dominated(name) for name in allow_literal):
            return True
        return any(not dominated(name) for name in allow_prefixed)

    def __repr__(self) -> str:
        return (
            f"Authorizer(count={self.count}, super_users={sorted(self._super_users)}, "
            f"allow_everyone_if_no_acl_found={self._allow_everyone})"
        )


def _check(grants: _Grants, principal: str, host: str, bit: int) -> int:
    """-1 if an entry of ``grants`` for the principal and host denies the operation ``bit``,
    1 if one allows it, else 0."""
    allowed = False
    for who in (principal, WILDCARD_PRINCIPAL):
        hosts = grants.get(who)
        if hosts is None:
            continue
        for where in (host, WILDCARD):
            masks = hosts.get(where)
            if masks is None:
                continue
            if masks[0] & bit:
                return -1
            if masks[1] & bit:
                allowed = True
    return 1 if allowed else 0
