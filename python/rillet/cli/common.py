"""Shared pieces of the Kafka-style tools."""

from __future__ import annotations

import argparse
import base64
import uuid

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
