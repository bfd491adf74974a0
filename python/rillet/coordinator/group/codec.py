"""A small codec for Kafka's message schemas, for the structs of ``__consumer_offsets``.

Kafka describes each record key and value with a JSON schema (``validVersions``,
``flexibleVersions``, fields with ``versions`` and ``nullableVersions``) and generates its
serializers from them. This module is the Python counterpart for the few structs the group
coordinator writes (:mod:`rillet.coordinator.group.records` declares them): a declarative
:class:`StructSchema` per struct, and :func:`encode_struct` / :func:`decode_struct` that
follow Kafka's rules byte for byte.

Encoding rules (the protocol guide's "Protocol Primitive Types"), all integers big-endian:

- ``int8`` / ``int16`` / ``int32`` / ``int64``: 1, 2, 4, 8 bytes, two's complement.
- ``uuid``: 16 bytes, most significant first (``uuid.UUID.bytes``).
- Non-flexible versions: ``string`` is an int16 length then UTF-8 bytes (length -1 for
  null); ``bytes`` an int32 length then the bytes (-1 for null); an array an int32 count then
  the elements (-1 for null).
- Flexible versions (KIP-482): ``string`` and ``bytes`` are COMPACT: an unsigned varint of
  length + 1 (0 for null) then the bytes; arrays likewise (unsigned varint count + 1); and
  every struct, nested ones included, ends with its tagged fields: an unsigned varint count,
  then per field an unsigned varint tag, an unsigned varint size and the data.

This codec writes no tagged fields (the structs used have none that Rillet sets) and skips
any it reads, which is what Kafka's generated code does with unknown tags. Truncated or
malformed input raises :class:`~rillet.errors.CorruptRecordError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rillet.errors import CorruptRecordError

__all__ = [
    "Array",
    "Field",
    "Reader",
    "StructSchema",
    "Writer",
    "decode_struct",
    "encode_struct",
]

_ALL_VERSIONS = (0, 0x7FFF)

_INT = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}


@dataclass(frozen=True)
class Array:
    """An array of ``element`` (a primitive type name or a :class:`StructSchema`)."""

    element: str | StructSchema


@dataclass(frozen=True)
class Field:
    """One field of a schema, named as the Python attribute that holds it.

    ``versions`` and ``nullable_versions`` are inclusive ranges as in Kafka's JSON
    (``"3+"`` is ``(3, 0x7FFF)``); outside ``versions`` the field is not on the wire and
    decodes to ``default``.
    """

    name: str
    type: str | Array | StructSchema
    versions: tuple[int, int] = _ALL_VERSIONS
    nullable_versions: tuple[int, int] | None = None
    default: Any = None

    def present_in(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        r = self.nullable_versions
        return r is not None and r[0] <= version <= r[1]


@dataclass(frozen=True)
class StructSchema:
    """A struct: its fields in wire order, the first flexible version (None: never) and the
    constructor that builds the Python value from the decoded fields (by keyword)."""

    name: str
    fields: tuple[Field, ...]
    build: Callable[..., Any]
    flexible_from: int | None = None

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


class Writer:
    """Appends Kafka primitives to a growing buffer."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def integer(self, kind: str, value: int) -> None:
        try:
            self.buffer += _INT[kind].pack(value)
        except struct.error as e:
            raise ValueError(f"{value} does not fit in {kind}") from e

    def unsigned_varint(self, value: int) -> None:
        if value < 0 or value > 0xFFFFFFFF:
            raise ValueError(f"unsigned varint out of range: {value}")
        while value >= 0x80:
            self.buffer.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buffer.append(value)

    def uuid(self, value: uuid.UUID) -> None:
        self.buffer += value.bytes

    def length(self, n: int | None, *, compact: bool, wide: bool) -> None:
        """A length or count prefix; None is null. ``wide``: int32 (bytes, arrays) rather
        than int16 (strings) when not compact."""
        if compact:
            self.unsigned_varint(0 if n is None else n + 1)
        else:
            self.integer("int32" if wide else "int16", -1 if n is None else n)

    def raw(self, data: bytes) -> None:
        self.buffer += data


class Reader:
    """Reads Kafka primitives from a buffer, refusing truncated input."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.position = 0

    def _take(self, n: int) -> memoryview:
        end = self.position + n
        if n < 0 or end > len(self.data):
            raise CorruptRecordError(f"record truncated: needs {n} bytes at {self.position}")
        view = self.data[self.position : end]
        self.position = end
        return view

    def integer(self, kind: str) -> int:
        codec = _INT[kind]
        value: int = codec.unpack(self._take(codec.size))[0]
        return value

    def unsigned_varint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise CorruptRecordError("unsigned varint longer than 5 bytes")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def length(self, *, compact: bool, wide: bool) -> int | None:
        n = self.unsigned_varint() - 1 if compact else self.integer("int32" if wide else "int16")
        if n < -1:
            raise CorruptRecordError(f"negative length {n}")
        return None if n == -1 else n

    def raw(self, n: int) -> bytes:
        return bytes(self._take(n))

    def at_end(self) -> bool:
        return self.position == len(self.data)


def _write_value(
    w: Writer, kind: str | Array | StructSchema, value: Any, version: int, flexible: bool
) -> None:
    if isinstance(kind, StructSchema):
        _write_struct(w, kind, value, version)
    elif isinstance(kind, Array):
        items: Sequence[Any] | None = value
        w.length(None if items is None else len(items), compact=flexible, wide=True)
        for item in items or ():
            _write_value(w, kind.element, item, version, flexible)
    elif kind in _INT:
        w.integer(kind, value)
    elif kind == "uuid":
        w.uuid(value)
    elif kind == "string":
        data = None if value is None else value.encode("utf-8")
        if data is not None and not flexible and len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
        w.length(None if data is None else len(data), compact=flexible, wide=False)
        if data is not None:
            w.raw(data)
    elif kind == "bytes":
        w.length(None if value is None else len(value), compact=flexible, wide=True)
        if value is not None:
            w.raw(bytes(value))
    else:  # pragma: no cover - schemas are static
        raise ValueError(f"unknown type {kind}")


def _write_struct(w: Writer, schema: StructSchema, value: Any, version: int) -> None:
    flexible = schema.is_flexible(version)
    for f in schema.fields:
        if not f.present_in(version):
            continue
        v = getattr(value, f.name)
        if v is None and not f.nullable_in(version):
            raise ValueError(f"{schema.name}.{f.name} is not nullable in version {version}")
        _write_value(w, f.type, v, version, flexible)
    if flexible:
        w.unsigned_varint(0)  # no tagged fields


def _read_value(r: Reader, kind: str | Array | StructSchema, version: int, flexible: bool) -> Any:
    if isinstance(kind, StructSchema):
        return _read_struct(r, kind, version)
    if isinstance(kind, Array):
        n = r.length(compact=flexible, wide=True)
        if n is None:
            return None
        return tuple(_read_value(r, kind.element, version, flexible) for _ in range(n))
    if kind in _INT:
        return r.integer(kind)
    if kind == "uuid":
        return r.uuid()
    if kind == "string":
        n = r.length(compact=flexible, wide=False)
        if n is None:
            return None
        try:
            return r.raw(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"string is not UTF-8: {e}") from e
    if kind == "bytes":
        n = r.length(compact=flexible, wide=True)
        return None if n is None else r.raw(n)
    raise ValueError(f"unknown type {kind}")  # pragma: no cover


def _read_struct(r: Reader, schema: StructSchema, version: int) -> Any:
    flexible = schema.is_flexible(version)
    values: dict[str, Any] = {}
    for f in schema.fields:
        if not f.present_in(version):
            values[f.name] = f.default
            continue
        v = _read_value(r, f.type, version, flexible)
        if v is None and not f.nullable_in(version):
            raise CorruptRecordError(f"{schema.name}.{f.name} is null in version {version}")
        values[f.name] = v
    if flexible:
        for _ in range(r.unsigned_varint()):
            r.unsigned_varint()  # tag: none of ours is read, all are skipped
            r.raw(r.unsigned_varint())
    return schema.build(**values)


def encode_struct(schema: StructSchema, value: Any, version: int) -> bytes:
    """``value`` (an object with the schema's field names as attributes) at ``version``."""
    w = Writer()
    _write_struct(w, schema, value, version)
    return bytes(w.buffer)


def decode_struct(
    schema: StructSchema, data: bytes | Reader, version: int, *, allow_trailing: bool = False
) -> Any:
    """The value encoded in ``data`` at ``version``; the whole input must be consumed unless
    ``allow_trailing`` (Kafka's embedded consumer protocol reads newer versions that way)."""
    r = data if isinstance(data, Reader) else Reader(data)
    value = _read_struct(r, schema, version)
    if not allow_trailing and not r.at_end():
        raise CorruptRecordError(f"{len(r.data) - r.position} bytes after {schema.name}")
    return value


def schema_fields(**fields: str | Array | StructSchema) -> tuple[Field, ...]:
    """Fields present in every version, none nullable (shorthand for simple key structs)."""
    return tuple(Field(name, kind) for name, kind in fields.items())
