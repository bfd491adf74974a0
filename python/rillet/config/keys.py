"""Config keys: each key's Kafka name, type, default and validator (:class:`ConfigKey`),
parsing a raw value as its type (:func:`parse_value`, errors naming the key), the common
validators, and Kafka's string form of a parsed value."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rillet.errors import InvalidConfigurationError

__all__ = [
    "HOUR_MS",
    "INT_MAX",
    "LONG_MAX",
    "MINUTE_MS",
    "SHORT_MAX",
    "ConfigKey",
    "Validator",
    "all_of",
    "at_least",
    "between",
    "config_value_to_string",
    "not_supported_yet",
    "one_of",
    "parse_value",
]


HOUR_MS = 3_600_000
MINUTE_MS = 60_000
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1

Validator = Callable[[str, Any], None]


def at_least(low: int) -> Validator:
    def check(key: str, value: Any) -> None:
        if value < low:
            raise InvalidConfigurationError(
                f"Invalid value {value} for configuration {key}: Value must be at least {low}"
            )

    return check


def all_of(*validators: Validator) -> Validator:
    """Every validator, in order."""

    def check(key: str, value: Any) -> None:
        for v in validators:
            v(key, value)

    return check


def not_supported_yet(*refused: str, reason: str) -> Validator:
    """Refuse values that name a feature Rillet does not have yet, rather than accept them
    and do nothing (or worse): ``reason`` says what is missing and what to use instead."""

    def check(key: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v in refused:
                raise InvalidConfigurationError(
                    f"Invalid value {v} for configuration {key}: {reason}"
                )

    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v not in choices:
                raise InvalidConfigurationError(
                    f"Invalid value {v} for configuration {key}: String must be one of: "
                    + ", ".join(choices)
                )

    return check


def between(low: float, high: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if not low <= value <= high:
            raise InvalidConfigurationError(
                f"Invalid value {value} for configuration {key}: "
                f"Value must be between {low} and {high}"
            )

    return check


@dataclass(frozen=True)
class ConfigKey:
    """One config: its Kafka name, type, default and validator, and the broker keys it
    falls back to (``synonyms``: ``(key, multiplier)`` in order of precedence)."""

    name: str
    type: str  # "short", "int", "long", "double", "string", "boolean", "list"
    default: Any
    doc: str
    validator: Validator | None = None
    synonyms: tuple[tuple[str, int], ...] = field(default=())


_INT_RANGES = {
    "short": (-(2**15), SHORT_MAX),
    "int": (-(2**31), INT_MAX),
    "long": (-(2**63), LONG_MAX),
}


def parse_value(key: ConfigKey | str, raw: object, type_: str | None = None) -> Any:
    """Parse ``raw`` (a string from a properties file or the wire, or a Python value) as the
    key's type; raise :class:`InvalidConfigurationError` naming the key."""
    name = key.name if isinstance(key, ConfigKey) else key
    t = key.type if isinstance(key, ConfigKey) else (type_ or "string")
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    try:
        if t in ("short", "int", "long"):
            if isinstance(raw, bool):
                raise ValueError
            value: Any = int(raw.strip()) if isinstance(raw, str) else int(raw)  # type: ignore[call-overload]
            low, high = _INT_RANGES[t]
            if not low <= value <= high:
                raise ValueError
        elif t == "double":
            if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                raise ValueError
            value = float(raw.strip()) if isinstance(raw, str) else float(raw)
        elif t == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            else:
                raise ValueError
        elif t == "list":
            if isinstance(raw, str):
                value = [p.strip() for p in raw.split(",") if p.strip()]
            elif isinstance(raw, list | tuple):
                value = [os.fspath(p) if isinstance(p, os.PathLike) else str(p) for p in raw]
            else:
                raise ValueError
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw.strip()
    except (ValueError, TypeError):
        expected = {
            "short": "a 16-bit integer",
            "int": "a 32-bit integer",
            "long": "a 64-bit integer",
            "double": "a number",
            "list": "a list",
        }
        shown = raw if isinstance(raw, str) else repr(raw)
        raise InvalidConfigurationError(
            f"Invalid value {shown} for configuration {name}: "
            f"Expected value to be {expected.get(t, 'a ' + t)}"
        ) from None
    if isinstance(key, ConfigKey) and key.validator is not None:
        key.validator(name, value)
    return value


def config_value_to_string(value: object) -> str | None:
    """Kafka's string form of a parsed value: lists comma-joined, booleans lower case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
