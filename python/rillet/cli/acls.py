"""``rillet acls``: Kafka's ``kafka-acls.sh`` (AclCommand) over the AdminService.

One action: ``--add``, ``--remove`` or ``--list``. Resources are ``--topic``, ``--group``,
``--transactional-id``, ``--delegation-token``, ``--user-principal`` (each repeatable) and
``--cluster``, named literally or, with ``--resource-pattern-type prefixed``, by prefix. Entries
are built as Kafka builds them: every ``--allow-principal`` with every ``--operation`` (``All``
by default) from every ``--allow-host`` (``*`` by default), then the same for
``--deny-principal`` and ``--deny-host``. ``--producer`` and ``--consumer`` stand for the
operations those roles need (WRITE, DESCRIBE, CREATE on topics, WRITE and DESCRIBE on
transactional ids, IDEMPOTENT_WRITE on the cluster with ``--idempotent``; READ and DESCRIBE on
topics and READ on groups). An operation a resource type does not have is refused with Kafka's
"ResourceType X only supports operations [...]".

The output is Kafka's (4.x) AclCommand's (``<TAB>`` stands for a tab)::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
     <TAB>(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
    <TAB>(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

``--add`` skips, with "Acl ... already exists.", an ACL that is there already; ``--remove``
asks "Are you sure ...? (y/n)" per resource filter unless ``--force``, and, as there is no
answer to read when standard input is not a terminal, then requires ``--force``.

Differences from Kafka's tool: ``--list`` defaults to ``--resource-pattern-type any`` (every
ACL named exactly as given, literal or prefixed; Kafka's default there is ``literal``), and
``--cluster`` is kept with ``any`` and ``match`` (Kafka drops it unless ``literal``). Patterns
and entries print in the order given or returned (Kafka's follow hash order). Broker errors
print as ``Error while executing ACL command: [NAME] message`` on standard error, exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.client.admin import AdminClient
from rillet.errors import KafkaError
from rillet.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

HELP = "Add, remove and list ACLs (kafka-acls.sh)"

WILDCARD_HOST = "*"

_O = AclOperation
# Kafka's AclEntry.supportedOperations: what each resource type's ACLs may name (and ALL).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ,
        _O.WRITE,
        _O.CREATE,
        _O.DESCRIBE,
        _O.DELETE,
        _O.ALTER,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}

PRODUCER_TOPIC_OPERATIONS = (_O.WRITE, _O.DESCRIBE, _O.CREATE)
PRODUCER_TRANSACTIONAL_ID_OPERATIONS = (_O.WRITE, _O.DESCRIBE)
CONSUMER_TOPIC_OPERATIONS = (_O.READ, _O.DESCRIBE)
CONSUMER_GROUP_OPERATIONS = (_O.READ,)


def _operation_name(op: AclOperation) -> str:
    """Kafka's ``SecurityUtils.operationName``: ``ClusterAction`` for CLUSTER_ACTION."""
    return "".join(word.capitalize() for word in op.name.split("_"))


class UsageError(Exception):
    """A bad combination of flags (Kafka's tool prints it with its usage): exit 1."""


@dataclass(frozen=True)
class Pattern:
    """A resource pattern (``--add``) or resource pattern filter (``--list``, ``--remove``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        """Kafka's ``ResourcePattern.toString``."""
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def filter_str(self) -> str:
        """Kafka's ``ResourcePatternFilter.toString``."""
        return (
            f"ResourcePatternFilter(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True)
class Entry:
    """An access control entry: who, from where, what, allow or deny."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        """Kafka's ``AccessControlEntry.toString``."""
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )

    def binding(self, pattern: Pattern) -> AclBinding:
        return AclBinding(
            pattern.resource_type,
            pattern.name,
            pattern.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )

    def binding_filter(self, pattern: Pattern) -> AclBindingFilter:
        return self.binding(pattern).to_filter()


CLUSTER_PATTERN = Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)

PatternEntries = dict[Pattern, list[Entry]]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    p.add_argument("--add", action="store_true", help="add ACLs")
    p.add_argument("--remove", action="store_true", help="remove ACLs")
    p.add_argument(
        "--list",
        action="store_true",
        help="list ACLs (of the resources given with --topic, --group, --cluster, ...; else all)",
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="a topic the ACLs are for ('*': every topic); repeatable",
    )
    p.add_argument(
        "--group",
        action="append",
        metavar="GROUP",
        help="a consumer group the ACLs are for ('*': every group); repeatable",
    )
    p.add_argument("--cluster", action="store_true", help="ACLs for the cluster")
    p.add_argument(
        "--transactional-id",
        action="append",
        metavar="ID",
        help="a transactional id the ACLs are for ('*': every one); repeatable",
    )
    p.add_argument(
        "--delegation-token",
        action="append",
        metavar="TOKEN",
        help="a delegation token id the ACLs are for ('*': every one); repeatable",
    )
    p.add_argument(
        "--user-principal",
        action="append",
        metavar="USER",
        help="a user principal the ACLs are for (CreateTokens, DescribeTokens); repeatable",
    )
    p.add_argument(
        "--resource-pattern-type",
        metavar="TYPE",
        help="literal or prefixed (the resource names are prefixes); with --list and "
        "--remove also any (literal or prefixed, the name exactly) or match (every ACL that "
        "applies to the named resource: literal, '*' and prefixes of it). Default: literal; "
        "any with --list",
    )
    p.add_argument(
        "--allow-principal",
        action="append",
        metavar="PRINCIPAL",
        help="a principal (principalType:name, e.g. User:alice; User:* for every user) to "
        "allow; repeatable",
    )
    p.add_argument(
        "--deny-principal",
        action="append",
        metavar="PRINCIPAL",
        help="a principal to deny (DENY wins over ALLOW); repeatable",
    )
    p.add_argument(
        "--principal",
        action="append",
        metavar="PRINCIPAL",
        help="with --list: only the ACLs of this principal; repeatable",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="HOST",
        help="a host the allowed principals may connect from (default with --allow-principal: "
        "'*', any); repeatable",
    )
    p.add_argument(
        "--deny-host",
        action="append",
        metavar="HOST",
        help="a host the denied principals are denied from (default with --deny-principal: "
        "'*', any); repeatable",
    )
    p.add_argument(
        "--operation",
        action="append",
        metavar="OPERATION",
        help="an operation to allow or deny (default All): "
        + ", ".join(
            _operation_name(op)
            for op in AclOperation
            if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
        )
        + "; repeatable",
    )
    p.add_argument(
        "--producer",
        action="store_true",
        help="the producer role: WRITE, DESCRIBE, CREATE on the topics, WRITE and DESCRIBE on "
        "the transactional ids",
    )
    p.add_argument(
        "--idempotent",
        action="store_true",
        help="with --producer: IDEMPOTENT_WRITE on the cluster too",
    )
    p.add_argument(
        "--consumer",
        action="store_true",
        help="the consumer role: READ, DESCRIBE on the topics, READ on the groups (needs --group)",
    )
    p.add_argument("--force", action="store_true", help="remove without asking for confirmation")


# -- checks and parsing ---------------------------------------------------------------------------


def _invalid_with(args: argparse.Namespace, used: str, invalid: Sequence[str]) -> None:
    """Kafka's ``CommandLineUtils.checkInvalidArgs``."""
    if not getattr(args, used.replace("-", "_")):
        return
    for name in invalid:
        if getattr(args, name.replace("-", "_")):
            raise UsageError(f'Option "[{used}]" can\'t be used with option "[{name}]"')


def check_args(args: argparse.Namespace) -> None:
    """Kafka's ``AclCommandOptions.checkArgs``: the flags that cannot go together."""
    if sum(bool(a) for a in (args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove.")
    _invalid_with(
        args,
        "list",
        ["producer", "consumer", "allow-host", "allow-principal", "deny-host", "deny-principal"],
    )
    for role in ("producer", "consumer"):
        _invalid_with(args, role, ["operation", "deny-principal", "deny-host"])
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )


def pattern_type(args: argparse.Namespace) -> PatternType:
    """``--resource-pattern-type``, or its default (literal; any for --list)."""
    text = args.resource_pattern_type
    if text is None:
        return PatternType.ANY if args.list else PatternType.LITERAL
    try:
        return PatternType.parse(text)
    except KafkaError:
        raise UsageError(f"Unknown resource-pattern-type: {text}") from None


def parse_principal(text: str) -> str:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``principalType:name``."""
    kind, colon, name = text.strip().partition(":")
    if not colon or not kind:
        raise UsageError(
            f"expected a string in format principalType:principalName but got {text.strip()}"
        )
    return f"{kind}:{name}"


def parse_operation(text: str) -> AclOperation:
    """Kafka's operation names (``Read``, ``ClusterAction``, ``describe-configs``, ...)."""
    try:
        op = AclOperation.parse(text)
    except KafkaError:
        op = AclOperation.UNKNOWN
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        valid = ", ".join(
            _operation_name(o)
            for o in AclOperation
            if o not in (AclOperation.UNKNOWN, AclOperation.ANY)
        )
        raise UsageError(f"Invalid operation {text.strip()!r}; valid operations: {valid}")
    return op


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def resource_patterns(args: argparse.Namespace, die_if_none: bool) -> list[Pattern]:
    """Kafka's ``getResourceFilter``: the resources named, in the order topics, cluster,
    groups, transactional ids, delegation tokens, user principals."""
    kind = pattern_type(args)
    out: list[Pattern] = []
    out += [Pattern(ResourceType.TOPIC, t.strip(), kind) for t in args.topic or []]
    if (args.cluster or args.idempotent) and kind != PatternType.PREFIXED:
        out.append(CLUSTER_PATTERN)
    out += [Pattern(ResourceType.GROUP, g.strip(), kind) for g in args.group or []]
    out += [Pattern(ResourceType.TRANSACTIONAL_ID, t, kind) for t in args.transactional_id or []]
    out += [
        Pattern(ResourceType.DELEGATION_TOKEN, t.strip(), kind) for t in args.delegation_token or []
    ]
    out += [Pattern(ResourceType.USER, u.strip(), kind) for u in args.user_principal or []]
    if not out and die_if_none:
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or "
            "--group <group> or --delegation-token <Delegation Token ID>"
        )
    return list(dict.fromkeys(out))


def _hosts(hosts: Sequence[str] | None, principals: Sequence[str] | None) -> list[str]:
    if hosts:
        return _unique(h.strip() for h in hosts)
    return [WILDCARD_HOST] if principals else []


def entries(args: argparse.Namespace, operations: Sequence[AclOperation]) -> list[Entry]:
    """Kafka's ``getAcl``: every allowed principal x operation x allowed host (ALLOW), then
    every denied principal x operation x denied host (DENY)."""
    out: list[Entry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        names = _unique(parse_principal(p) for p in principals or [])
        for principal in names:
            for op in operations:
                for host in _hosts(hosts, principals):
                    out.append(Entry(principal, host, op, permission))
    return list(dict.fromkeys(out))


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    return list(dict.fromkeys(parse_operation(o) for o in args.operation or ["All"]))


def validate_operations(patterns: PatternEntries) -> None:
    """Kafka's ``validateOperation``: each entry's operation must be one its resource type
    has (or ALL)."""
    for pattern, acls in patterns.items():
        valid = (_O.ALL, *SUPPORTED_OPERATIONS[pattern.resource_type])
        if any(e.operation not in valid for e in acls):
            raise UsageError(
                f"ResourceType {pattern.resource_type.name} only supports operations "
                f"[{', '.join(op.name for op in valid)}]"
            )


def filter_entries(args: argparse.Namespace) -> PatternEntries:
    """Kafka's ``getResourceFilterToAcls``: the entries for each resource, from --operation,
    or from the --producer and --consumer roles."""
    out: PatternEntries = {}
    if not args.producer and not args.consumer:
        acls = entries(args, _operations(args))
        for pattern in resource_patterns(args, die_if_none=True):
            out[pattern] = list(acls)
    if args.producer:
        for pattern in resource_patterns(args, die_if_none=True):
            if pattern.resource_type == ResourceType.TOPIC:
                out[pattern] = entries(args, PRODUCER_TOPIC_OPERATIONS)
            elif pattern.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[pattern] = entries(args, PRODUCER_TRANSACTIONAL_ID_OPERATIONS)
        if args.idempotent:
            out[CLUSTER_PATTERN] = entries(args, (_O.IDEMPOTENT_WRITE,))
    if args.consumer:
        for pattern in resource_patterns(args, die_if_none=True):
            if pattern.resource_type == ResourceType.TOPIC:
                role = entries(args, CONSUMER_TOPIC_OPERATIONS)
            elif pattern.resource_type == ResourceType.GROUP:
                role = entries(args, CONSUMER_GROUP_OPERATIONS)
            else:
                continue
            out[pattern] = list(dict.fromkeys([*out.get(pattern, []), *role]))
    validate_operations(out)
    return out


def add_entries(args: argparse.Namespace) -> PatternEntries:
    """Kafka's ``getResourceToAcls``: what ``--add`` creates, each resource with at least
    one entry, with a specific pattern type."""
    kind = pattern_type(args)
    if kind not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{kind.name}' is not valid when adding acls."
        )
    out = filter_entries(args)
    if any(not acls for acls in out.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return out


# -- output -------------------------------------------------------------------------------------


def _entry_lines(acls: Iterable[object]) -> str:
    return "\n".join(f"\t{a}" for a in acls)


def format_adding(pattern: Pattern, acls: Sequence[Entry]) -> str:
    """Kafka's "Adding ACLs" block (the trailing newline makes, printed, a blank line)."""
    return f"Adding ACLs for resource `{pattern}`: \n {_entry_lines(acls)}\n"


def format_current(pattern: Pattern, acls: Sequence[Entry]) -> str:
    """Kafka's "Current ACLs" block (the trailing newline makes, printed, a blank line)."""
    return f"Current ACLs for resource `{pattern}`:\n{_entry_lines(acls)}\n"


def format_remove_prompt(pattern: Pattern, acls: Sequence[Entry]) -> str:
    """Kafka's confirmation question for ``--remove`` of one resource filter."""
    if not acls:
        return (
            "Are you sure you want to delete all ACLs for resource filter "
            f"`{pattern.filter_str()}`? (y/n)"
        )
    return (
        f"Are you sure you want to remove ACLs: \n {_entry_lines(acls)}\n"
        f" from resource filter `{pattern.filter_str()}`? (y/n)"
    )


def group_by_pattern(bindings: Iterable[AclBinding]) -> PatternEntries:
    """ACLs as resource pattern -> entries, in the order first seen, without duplicates."""
    out: PatternEntries = {}
    for b in bindings:
        pattern = Pattern(b.resource_type, b.resource_name, b.pattern_type)
        entry = Entry(b.principal, b.host, b.operation, b.permission_type)
        acls = out.setdefault(pattern, [])
        if entry not in acls:
            acls.append(entry)
    return out


# -- the command --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        check_args(args)
        if args.add:
            to_add = add_entries(args)
            with admin_client(args.bootstrap_server, args.admin_config) as admin:
                return _add(admin, to_add)
        if args.remove:
            to_remove = filter_entries(args)
            if not args.force and not sys.stdin.isatty():
                raise UsageError(
                    "--remove asks for confirmation, but standard input is not a terminal: "
                    "add --force to remove the ACLs without asking"
                )
            with admin_client(args.bootstrap_server, args.admin_config) as admin:
                return _remove(admin, to_remove, args.force)
        patterns = resource_patterns(args, die_if_none=False)
        principals = _unique(parse_principal(p) for p in args.principal or [])
        with admin_client(args.bootstrap_server, args.admin_config) as admin:
            return _list(admin, patterns, principals)
    except UsageError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:
        print(f"Error while executing ACL command: {e}", file=sys.stderr)
        return 1


def _add(admin: AdminClient, to_add: PatternEntries) -> int:
    for pattern, acls in to_add.items():
        existing = set(
            admin.describe_acls(
                AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type)
            )
        )
        new: list[Entry] = []
        for entry in acls:
            binding = entry.binding(pattern)
            if binding in existing:
                print(f"Acl {binding} already exists.")
            else:
                new.append(entry)
        if new:
            print(format_adding(pattern, new))
            admin.create_acls([e.binding(pattern) for e in new])
    return 0


def _confirm(question: str) -> bool:
    print(question, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def _remove(admin: AdminClient, to_remove: PatternEntries, force: bool) -> int:
    for pattern, acls in to_remove.items():
        if not force and not _confirm(format_remove_prompt(pattern, acls)):
            continue
        if acls:
            admin.delete_acls([e.binding_filter(pattern) for e in acls])
        else:
            admin.delete_acls(
                [AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type)]
            )
    return 0


def _list(admin: AdminClient, patterns: Sequence[Pattern], principals: Sequence[str]) -> int:
    if patterns:
        bindings = [
            b
            for p in patterns
            for b in admin.describe_acls(AclBindingFilter(p.resource_type, p.name, p.pattern_type))
        ]
    else:
        bindings = admin.describe_acls()
    current = group_by_pattern(bindings)
    if not principals:
        for pattern, acls in current.items():
            print(format_current(pattern, acls))
        return 0
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for pattern, acls in current.items():
            mine = [e for e in acls if e.principal == principal]
            if mine:
                print(format_current(pattern, mine))
    return 0
