"""``rillet configs``: Kafka's ``kafka-configs.sh`` for topics, brokers, users' SCRAM
credentials and client quotas.

``--describe`` prints what Kafka's ConfigCommand prints::

    Dynamic configs for topic events are:
      retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}

(``All configs ...`` with ``--all``, which lists every key, not only the dynamic ones).
``--alter`` applies ``--add-config k1=v1,k2=[a,b]`` and ``--delete-config k1,k2`` as one
incremental change (deletes, then sets) and prints ``Completed updating config for topic
events.``; deleting a key that has no dynamic value is refused as Kafka refuses it
("Invalid config(s): k1"). A bad value comes back from the broker as INVALID_CONFIG naming
the key.

The AdminService does not return synonyms, so the ``synonyms={...}`` list is built here the
way Kafka's broker builds it: the topic's own value, then the broker keys the topic key falls
back to (``log.retention.ms``, ...) at each level (dynamic broker, static, default), from a
description of the broker's configs and Kafka's defaults, starting at the first broker key
of the group (Kafka drops the levels before it). Rillet has no password configs, so
``sensitive`` is always false.

Users (``--entity-type users --entity-name alice``, or ``--user alice``) have SCRAM
credentials, as in Kafka: ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'``
(iterations default to 4096, Kafka's) salts and hashes the password here and sends only the
result (AlterUserScramCredentials); ``--delete-config SCRAM-SHA-512`` deletes one;
``--describe`` prints ``SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192`` for the user, or for every user with a credential. Users and
client ids (``--entity-type clients``, ``--client``), alone or together, and their defaults
have client quotas (:mod:`rillet.cli.quota_configs`).

Only topics, brokers, users and clients have configs here. For brokers,
``--entity-default``/``--broker-defaults`` (the cluster-wide broker default) are refused: the
AdminService reports cluster-default values as if they were the broker's own (no
DYNAMIC_DEFAULT_BROKER_CONFIG), so they could not be shown truthfully; users have no default
SCRAM credentials (Kafka refuses them too). Describing every broker prints one section per
broker and no default section.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence

from rillet.cli.common import add_admin_config, add_bootstrap, admin_client
from rillet.cli.quota_configs import (
    CLIENTS,
    QUOTA_KEYS,
    QuotaUsageError,
    alter_quotas,
    describe_quotas,
    quota_alteration,
)
from rillet.client.admin import AdminClient, ConfigResource, ConfigResourceType
from rillet.client.security_admin import (
    DEFAULT_SCRAM_ITERATIONS,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from rillet.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    config_value_to_string,
    load_properties,
)
from rillet.errors import InvalidConfigurationError, KafkaError
from rillet.metadata.topic_names import validate_topic_name
from rillet.security.scram import MIN_ITERATIONS, ScramMechanism

HELP = (
    "Describe and alter the configs of topics and brokers, users' SCRAM credentials and "
    "client quotas "
    "(kafka-configs.sh)"
)

TOPICS = "topics"
BROKERS = "brokers"
USERS = "users"
SUPPORTED_TYPES = (TOPICS, BROKERS, USERS, CLIENTS)
# Kafka's other entity types: known, but they have no configs in Rillet.
KAFKA_ONLY_TYPES = ("broker-loggers", "ips", "client-metrics", "groups")

# The SCRAM mechanisms by the config names kafka-configs.sh gives them for users.
SCRAM_CONFIGS: Mapping[str, ScramMechanism] = {
    m.mechanism_name: m for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
}

# Where a value comes from, in the order Kafka lists a key's synonyms.
BROKER_LEVELS = (
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
)
DEFAULT_LEVEL = "DEFAULT_CONFIG"

Described = Mapping[str, tuple[str | None, str]]
# An entity as given: (entity type, name; None for every one, "" for the default).
Entity = tuple[str, str | None]
Synonym = tuple[str, str, str | None]  # (source, name, value)


class UsageError(Exception):
    """A bad combination of flags (Kafka's IllegalArgumentException): printed, exit 1."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    add_admin_config(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list configs of the entity")
    actions.add_argument("--alter", action="store_true", help="alter configs of the entity")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --describe: every config, including static ones and defaults",
    )
    p.add_argument(
        "--entity-type",
        action="append",
        metavar="TYPE",
        help="topics, brokers, users or clients (users and clients may be given together)",
    )
    p.add_argument(
        "--entity-name",
        dest="entity_names",
        action="append",
        metavar="NAME",
        help="a topic name, a broker id, a user name or a client id, for the --entity-type "
        "before it",
    )
    p.add_argument(
        "--entity-default",
        dest="entity_names",
        action="append_const",
        const="",
        help="the default user or client id (quotas); the cluster-wide broker default is not "
        "supported by Rillet",
    )
    p.add_argument("--topic", metavar="NAME", help="the topic (= --entity-type topics ...)")
    p.add_argument("--broker", metavar="ID", help="the broker (= --entity-type brokers ...)")
    p.add_argument("--user", metavar="NAME", help="the user (= --entity-type users ...)")
    p.add_argument("--client", metavar="ID", help="the client id (= --entity-type clients ...)")
    p.add_argument(
        "--broker-defaults",
        action="store_true",
        help="the cluster-wide broker default (not supported by Rillet)",
    )
    p.add_argument("--user-defaults", action="store_true", help="the default user (quotas)")
    p.add_argument("--client-defaults", action="store_true", help="the default client id (quotas)")
    p.add_argument(
        "--add-config",
        metavar="K=V,...",
        help="configs to set: 'k1=v1,k2=[v1,v2,v2],k3=v3' (square brackets group values "
        "that contain commas); for users 'SCRAM-SHA-256=[iterations=8192,password=secret]'",
    )
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument(
        "--delete-config",
        action="append",
        metavar="K1,K2",
        help="config keys to remove: 'k1,k2'",
    )


# -- parsing ------------------------------------------------------------------------------------

# Kafka's ConfigCommand: split at commas (and '=') that are not inside square brackets.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_KEY_CHARS = re.compile(r"[$a-zA-Z0-9._-]*")


def parse_add_config(text: str) -> dict[str, str]:
    """``--add-config`` as Kafka parses it: ``k1=v1,k2=[a,b]`` → ``{"k1": "v1", "k2": "a,b"}``.
    Keys and values are trimmed, every ``[`` and ``]`` is removed from values, an empty value
    is allowed (``k=``), and a later duplicate wins."""
    out: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise UsageError(
                'Invalid entity config: all configs to be added must be in the format "key=val" '
                'or  "key=[val1,val2]" to group values which contain commas.'
            )
        out[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return out


def parse_delete_config(values: Sequence[str] | None) -> list[str]:
    """``--delete-config k1,k2`` (repeatable) → ``["k1", "k2"]``, trimmed, in order."""
    out: list[str] = []
    for value in values or []:
        for name in value.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def validate_keys(names: Sequence[str]) -> None:
    for name in names:
        if not _KEY_CHARS.fullmatch(name):
            raise UsageError(f"Invalid character found for config key: {name}")


def resolve_entities(args: argparse.Namespace) -> list[Entity]:
    """The entities named, as ``(entity type, name)``: a name of None means every entity of
    the type, "" the type's default. From ``--entity-type``/``--entity-name``/
    ``--entity-default`` (in the order given) or the shortcuts (``--topic``, ``--broker``,
    ``--user``, ``--client``, ``--broker-defaults``, ``--user-defaults``,
    ``--client-defaults``); refuses what Kafka refuses, and what Rillet lacks. Only a user
    and a client id name one entity together (a client quota entity), users first."""
    shortcuts = [
        (TOPICS, args.topic),
        (BROKERS, args.broker),
        (USERS, "" if args.user_defaults else args.user),
        (CLIENTS, "" if args.client_defaults else args.client),
    ]
    given: list[Entity] = [(t, n) for t, n in shortcuts if n is not None]
    if args.broker_defaults:
        given.append((BROKERS, ""))
    if args.user_defaults and args.user is not None:
        raise UsageError("Only one of --user or --user-defaults may be specified")
    if args.client_defaults and args.client is not None:
        raise UsageError("Only one of --client or --client-defaults may be specified")
    types, names = args.entity_type or [], args.entity_names or []
    if (types or names) and given:
        raise UsageError(
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags"
        )
    if not given:
        if not types:
            raise UsageError("At least one entity type must be specified")
        if len(names) > len(types):
            raise UsageError("Each --entity-name or --entity-default must follow an --entity-type")
        given = [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]
    kinds = [t for t, _ in given]
    if len(set(kinds)) < len(kinds):
        duplicated = next(t for t in kinds if kinds.count(t) > 1)
        raise UsageError(f"Duplicate entity type(s) specified: {duplicated}")
    if len(given) > 1 and set(kinds) != {USERS, CLIENTS}:
        raise UsageError("Only 'users' and 'clients' entity types may be specified together")
    for entity_type, _ in given:
        if entity_type in KAFKA_ONLY_TYPES:
            raise UsageError(
                f"--entity-type {entity_type} is not supported: Rillet has configs only for "
                f"{', '.join(SUPPORTED_TYPES)}"
            )
        if entity_type not in SUPPORTED_TYPES:
            raise UsageError(
                f"Invalid entity type {entity_type}, the entity type must be one of "
                f"{', '.join(SUPPORTED_TYPES)} with a --bootstrap-server argument"
            )
    given.sort(key=lambda e: e[0] == CLIENTS)
    entity_type, name = given[0]
    if name == "" and entity_type == TOPICS:
        raise UsageError(
            "--entity-default must not be specified with "
            f"{'--describe' if args.describe else '--alter'} of topics"
        )
    if name == "" and entity_type == BROKERS:
        raise UsageError(
            "--entity-default (the cluster-wide default broker config) is not supported: "
            "Rillet's AdminService does not report DYNAMIC_DEFAULT_BROKER_CONFIG values "
            "separately. Use --entity-name <broker id>."
        )
    if entity_type == BROKERS and name is not None and not re.fullmatch(r"-?\d+", name):
        raise UsageError(
            f"The entity name for brokers must be a valid integer broker id, but it is: {name}"
        )
    return given


# -- users' SCRAM credentials ---------------------------------------------------------------------

_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")


def parse_scram_credential(mechanism: str, text: str) -> tuple[int, str]:
    """``[iterations=N,]password=P`` (a value of ``--add-config`` for a user, its square
    brackets removed) -> ``(iterations, password)``, as Kafka's ConfigCommand parses it:
    iterations absent or -1 mean 4096, fewer than the minimum are refused."""
    match = _CREDENTIAL.fullmatch(text)
    if match is None:
        raise UsageError(
            f"Invalid credential property {mechanism}: expected "
            f"'{mechanism}=[iterations=N,password=P]' or '{mechanism}=[password=P]'"
        )
    iterations_text, password = match.groups()
    if iterations_text is None or iterations_text == "-1":
        iterations = DEFAULT_SCRAM_ITERATIONS
    elif iterations_text in ("", "-"):
        raise UsageError(f"Invalid iterations for {mechanism}: {iterations_text!r}")
    else:
        iterations = int(iterations_text)
    if iterations < MIN_ITERATIONS:
        raise UsageError(
            f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
            f"{mechanism}"
        )
    return iterations, password


def user_alterations(
    user: str, to_add: Mapping[str, str], to_delete: Sequence[str]
) -> list[UserScramCredentialUpsertion | UserScramCredentialDeletion]:
    """The SCRAM credential changes ``--alter`` of a user asks for (deletions, then
    upsertions); anything but a SCRAM mechanism is refused, Kafka's quota configs with a
    message of their own."""
    for names, verb in ((list(to_add), "added"), (to_delete, "deleted")):
        unknown = [n for n in names if n not in SCRAM_CONFIGS]
        if unknown:
            raise UsageError(
                f"Only SCRAM credential configs ({', '.join(SCRAM_CONFIGS)}) can be {verb} for "
                f"'{USERS}' using --bootstrap-server. Unexpected config names: "
                f"{','.join(unknown)}"
            )
    out: list[UserScramCredentialUpsertion | UserScramCredentialDeletion] = [
        UserScramCredentialDeletion(user, SCRAM_CONFIGS[n]) for n in to_delete
    ]
    for name, value in to_add.items():
        iterations, password = parse_scram_credential(name, value)
        out.append(UserScramCredentialUpsertion(user, SCRAM_CONFIGS[name], password, iterations))
    return out


def format_scram_credentials(user: str, credentials: Sequence[tuple[ScramMechanism, int]]) -> str:
    """Kafka's line for one user's SCRAM credentials."""
    described = ", ".join(f"{m.mechanism_name}=iterations={i}" for m, i in credentials)
    return f"SCRAM credential configs for user-principal '{user}' are {described}"


# -- synonyms -----------------------------------------------------------------------------------

_BROKER_GROUPS: list[list[str]] = [
    [s for s, _ in key.synonyms] for key in TOPIC_CONFIGS.values() if key.synonyms
]


def _broker_default(name: str) -> str | None:
    key = BROKER_CONFIGS.get(name)
    return None if key is None else config_value_to_string(key.default)


def broker_synonyms(name: str, group: Sequence[str], broker: Described) -> list[Synonym]:
    """Kafka's ``configSynonyms``: the values of the broker keys ``group`` at each level
    (dynamic broker, dynamic default, static, then Kafka's default; null values left out),
    dropping entries until the first one for ``name``."""
    out: list[Synonym] = []
    for level in BROKER_LEVELS:
        for key in group:
            value, source = broker.get(key, (None, ""))
            if source == level and value is not None:
                out.append((level, key, value))
    for key in group:
        default = _broker_default(key)
        if default is not None:
            out.append((DEFAULT_LEVEL, key, default))
    while out and out[0][1] != name:
        out.pop(0)
    return out


def topic_synonyms(name: str, value: str | None, source: str, broker: Described) -> list[Synonym]:
    """The synonyms Kafka lists for a topic config: the topic's own value when it is set on
    the topic, then its broker-level synonyms."""
    out: list[Synonym] = []
    if source == "DYNAMIC_TOPIC_CONFIG":
        out.append((source, name, value))
    key = TOPIC_CONFIGS.get(name)
    if key is not None and key.synonyms:
        group = [s for s, _ in key.synonyms]
        out += broker_synonyms(group[0], group, broker)
    return out


def broker_config_synonyms(name: str, broker: Described) -> list[Synonym]:
    """The synonyms Kafka lists for a broker config (``log.retention.hours`` falls back
    through ``log.retention.ms``, ``.minutes``, ``.hours``)."""
    group = next((g for g in _BROKER_GROUPS if name in g), [name])
    return broker_synonyms(name, group, broker)


def format_entry(name: str, value: str | None, synonyms: Sequence[Synonym]) -> str:
    """One line of ``--describe``, as Kafka prints it (null values print as ``null``)."""
    shown = ", ".join(f"{src}:{n}={'null' if v is None else v}" for src, n, v in synonyms)
    return f"  {name}={'null' if value is None else value} sensitive=false synonyms={{{shown}}}"


# -- the command --------------------------------------------------------------------------------


def _admin(args: argparse.Namespace) -> AdminClient:
    return admin_client(args.bootstrap_server, args.admin_config)


def run(args: argparse.Namespace) -> int:
    try:
        entities = resolve_entities(args)
        entity_type, name = entities[0]
        if args.describe:
            if args.add_config or args.add_config_file or args.delete_config:
                flag = next(
                    f
                    for f, v in (
                        ("add-config", args.add_config),
                        ("add-config-file", args.add_config_file),
                        ("delete-config", args.delete_config),
                    )
                    if v
                )
                raise UsageError(f'Option "[describe]" can\'t be used with option "[{flag}]"')
        else:
            if name is None:
                raise UsageError(f"An entity name must be specified with --alter of {entity_type}")
            if args.add_config and args.add_config_file:
                raise UsageError("Only one of --add-config or --add-config-file must be specified")
            if not (args.add_config or args.add_config_file or args.delete_config):
                raise UsageError(
                    "At least one of --add-config, --add-config-file, or --delete-config must "
                    "be specified with --alter"
                )
        if entity_type == TOPICS and name:
            validate_topic_name(name)
        if entity_type in (USERS, CLIENTS):
            return _users_and_clients(args, entities)
        with _admin(args) as admin:
            if args.describe:
                return _describe(admin, entity_type, name, args.all)
            return _alter(admin, entity_type, name or "", args)
    except (UsageError, QuotaUsageError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


def _resource_type(entity_type: str) -> int:
    return ConfigResourceType.TOPIC if entity_type == TOPICS else ConfigResourceType.BROKER


def _describe_one(admin: AdminClient, rtype: int, name: str) -> Described:
    return admin.describe_configs([ConfigResource(rtype, name)]).get((rtype, name), {})


def _broker_view(admin: AdminClient) -> Described:
    """The broker-level values topic configs fall back to ({} if they cannot be read)."""
    try:
        return _describe_one(admin, ConfigResourceType.BROKER, "")
    except KafkaError:
        return {}


def _dynamic_source(entity_type: str) -> str:
    return "DYNAMIC_TOPIC_CONFIG" if entity_type == TOPICS else "DYNAMIC_BROKER_CONFIG"


def _describe(admin: AdminClient, entity_type: str, name: str | None, describe_all: bool) -> int:
    singular = entity_type[:-1]
    if name is None:
        if entity_type == TOPICS:
            names = admin.list_topics()
        else:
            names = [str(b["node_id"]) for b in admin.describe_cluster()["brokers"]]
    else:
        names = [name]
        if not describe_all:
            if entity_type == TOPICS:
                exists = name in admin.list_topics()
            else:
                exists = any(str(b["node_id"]) == name for b in admin.describe_cluster()["brokers"])
            if not exists:
                print(f"The {singular} '{name}' doesn't exist and doesn't have dynamic config.")
                return 0
    rtype = _resource_type(entity_type)
    broker = _broker_view(admin) if entity_type == TOPICS else {}
    for entity in names:
        entries = _describe_one(admin, rtype, entity)
        print(f"{'All' if describe_all else 'Dynamic'} configs for {singular} {entity} are:")
        for key in sorted(entries):
            value, source = entries[key]
            if not describe_all and source != _dynamic_source(entity_type):
                continue
            if entity_type == TOPICS:
                synonyms = topic_synonyms(key, value, source, broker)
            else:
                synonyms = broker_config_synonyms(key, entries)
            print(format_entry(key, value, synonyms))
    return 0


def _to_add_and_delete(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """The configs ``--alter`` sets (from --add-config-file, then --add-config) and deletes."""
    to_add: dict[str, str] = {}
    if args.add_config_file:
        to_add.update(load_properties(args.add_config_file))
    if args.add_config:
        to_add.update(parse_add_config(args.add_config))
    validate_keys(list(to_add))
    return to_add, parse_delete_config(args.delete_config)


def _users_and_clients(args: argparse.Namespace, entities: Sequence[Entity]) -> int:
    """Users' SCRAM credentials and client quotas, as Kafka's ConfigCommand: a user alone
    is altered with SCRAM configs or quota configs (not both at once); described, its
    quotas come first, then its SCRAM credentials (not for a default user or with a
    client id)."""
    entity_type, name = entities[0]
    scram = len(entities) == 1 and entity_type == USERS and name != ""
    if args.alter:
        to_add, to_delete = _to_add_and_delete(args)
        names = [*to_add, *to_delete]
        if scram and not any(n in QUOTA_KEYS for n in names):
            alterations = user_alterations(name or "", to_add, to_delete)
            with _admin(args) as admin:
                admin.alter_user_scram_credentials(alterations)
            print(f"Completed updating config for user {name}.")
            return 0
        if any(n in SCRAM_CONFIGS for n in names):
            raise UsageError(
                "SCRAM credential configs can be altered only for a user alone (not a default "
                "user or a client id), and not together with quota configs"
            )
        alteration = quota_alteration(entities, to_add, to_delete)
        with _admin(args) as admin:
            alter_quotas(admin, entities, alteration)
        return 0
    with _admin(args) as admin:
        describe_quotas(admin, entities)
        if scram:
            _describe_users(admin, name)
    return 0


def _describe_users(admin: AdminClient, name: str | None) -> int:
    """Kafka's lines for the user's SCRAM credentials (every user's that has one when
    ``name`` is None); a user named that has none gets Kafka's "Error retrieving" line."""
    described = admin.describe_user_scram_credentials(None if name is None else [name])
    for user, found in described.items():
        if isinstance(found, KafkaError):
            print(f"Error retrieving SCRAM credential configs for user-principal '{user}': {found}")
        else:
            print(format_scram_credentials(user, [(c.mechanism, c.iterations) for c in found]))
    return 0


def _alter(admin: AdminClient, entity_type: str, name: str, args: argparse.Namespace) -> int:
    to_add, to_delete = _to_add_and_delete(args)
    rtype = _resource_type(entity_type)
    dynamic = _dynamic_source(entity_type)
    current = {
        k for k, (_, source) in _describe_one(admin, rtype, name).items() if source == dynamic
    }
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise InvalidConfigurationError(f"Invalid config(s): {','.join(invalid)}")
    changes: dict[str, str | None] = {k: None for k in to_delete}
    changes.update(to_add)
    admin.alter_configs([ConfigResource(rtype, name, changes)])
    print(f"Completed updating config for {entity_type[:-1]} {name}.")
    return 0
