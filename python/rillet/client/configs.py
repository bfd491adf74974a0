"""Client configs: kafka-python's keyword names, or Kafka's dotted names in a dict.

``Producer(bootstrap_servers="h:9092", acks="all")`` and
``Producer({"bootstrap.servers": "h:9092", "acks": "all"})`` mean the same; an unknown name
is refused with a message naming it, and values are checked with Kafka's wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rillet.errors import InvalidConfigurationError

__all__ = ["merge_configs", "parse_bootstrap"]


def merge_configs(
    defaults: Mapping[str, Any],
    positional: Mapping[str, Any] | None,
    keywords: Mapping[str, Any],
    kind: str,
) -> dict[str, Any]:
    """Defaults, then a dict of Kafka names (dots allowed), then keyword arguments."""
    out = dict(defaults)
    for source in (positional or {}, keywords):
        for key, value in source.items():
            name = key.replace(".", "_")
            if name not in defaults:
                raise InvalidConfigurationError(f"Unknown {kind} config: {key}")
            out[name] = value if name in _FREE_FORM else _coerce(key, value, defaults[name])
    return out


# Configs whose values are not of one type (acks is 0, 1, -1 or "all").
_FREE_FORM = frozenset({"acks"})


def _coerce(key: str, value: Any, default: Any) -> Any:
    """Strings from properties files and command lines take the default's type."""
    if not isinstance(value, str) or default is None or isinstance(default, str):
        return value
    text = value.strip()
    if isinstance(default, bool):
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise InvalidConfigurationError(
            f"Invalid value {value} for configuration {key}: Expected value to be either true "
            "or false"
        )
    try:
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        kind = "INT" if isinstance(default, int) else "DOUBLE"
        raise InvalidConfigurationError(
            f"Invalid value {value} for configuration {key}: Not a number of type {kind}"
        ) from None
    return value


def parse_bootstrap(servers: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"h1:9092,h2:9092"`` or a list of ``host:port`` → validated ``host:port`` strings."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidConfigurationError(
                f"Invalid url in bootstrap.servers: {item!r} (expected host:port)"
            )
        out.append(item)
    if not out:
        raise InvalidConfigurationError("bootstrap.servers is empty")
    return out
