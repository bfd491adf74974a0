"""Shared pieces of the Kafka-style tools."""

from __future__ import annotations

import argparse
import base64
import uuid
from collections.abc import Sequence

from rillet.client.admin import AdminClient
from rillet.client.security import SECURITY_CONFIG_TYPES
from rillet.config import ConfigKey, load_properties, parse_value
from rillet.errors import InvalidConfigurationError

ZOOKEEPER_MESSAGE = (
    "--zookeeper is not supported: Rillet runs in KRaft mode and has no ZooKeeper. "
    "Use --bootstrap-server HOST:PORT instead."
)


class ZooKeeperAction(argparse.Action):
    """``--zookeeper`` answers with a clear message pointing to ``--bootstrap-server``."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        parser.exit(1, f"Error: {ZOOKEEPER_MESSAGE}\n")


def add_zookeeper(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--zookeeper", action=ZooKeeperAction, metavar="HOST:PORT", help=argparse.SUPPRESS
    )


def add_bootstrap(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "--bootstrap-server", required=required, metavar="HOST:PORT", help="a broker to connect to"
    )
    add_zookeeper(p)


def parse_key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"Error: {flag} needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def topic_id_string(topic_id: uuid.UUID | None) -> str:
    """Kafka's printed form of a topic id (base64url, no padding)."""
    if topic_id is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


_ADMIN_CONFIG_TYPES = {
    "client.id": "string",
    "request.timeout.ms": "int",
    **SECURITY_CONFIG_TYPES,
}


def add_admin_config(p: argparse.ArgumentParser, flag: str = "--command-config") -> None:
    """The flag naming a properties file of admin client configs (Kafka's tools call it
    ``--command-config``, or ``--admin.config`` in kafka-leader-election.sh)."""
    p.add_argument(
        flag,
        dest="admin_config",
        metavar="FILE",
        help="a properties file of admin client configs (client.id, request.timeout.ms, "
        "security.protocol, ssl.*)",
    )


def admin_client(bootstrap_server: str, config_file: str | None) -> AdminClient:
    """An admin client for ``--bootstrap-server``, with the admin client configs of a
    properties file (``--command-config`` / ``--admin.config``) when one is given."""
    configs: dict[str, object] = {}
    if config_file:
        for k, v in load_properties(config_file).items():
            if k not in _ADMIN_CONFIG_TYPES:
                raise InvalidConfigurationError(f"Unknown admin config: {k}")
            configs[k] = parse_value(ConfigKey(k, _ADMIN_CONFIG_TYPES[k], None, ""), v)
    configs["bootstrap.servers"] = bootstrap_server
    return AdminClient(configs)


def print_table(rows: Sequence[Sequence[object]]) -> None:
    """Rows as left-aligned columns a space apart, the first row the header (Kafka's tools'
    ``prettyPrintTable``)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
