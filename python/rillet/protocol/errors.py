"""The one place Kafka errors cross the wire.

A handler that fails for one partition (or topic, or resource) catches the exception and puts
:func:`error_to_wire`'s pair into that result's ``error_code`` and ``error_message`` fields; a
client turns a result's pair back into the :mod:`rillet.errors` exception with
:func:`error_from_wire`. Both ends agree because ``rillet.v1.ErrorCode`` and
:mod:`rillet.errors` hold the same names and numbers (Kafka's), which the unit tests check.

gRPC status codes are never used for these errors: they are for transport failures only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rillet.errors import KafkaError, UnknownServerError, error_for_code, error_for_name
from rillet.protocol.gen.v1.common_pb2 import ErrorCode
from rillet.raft.messages import Errors as RaftErrors

__all__ = [
    "WireError",
    "error_from_wire",
    "error_to_wire",
    "raft_error_from_wire",
    "raft_error_to_wire",
    "set_error",
]


class WireError(NamedTuple):
    """An error as the wire carries it: the two fields of every per-partition result.

    The field names match the protobuf fields, so ``Partition(**error._asdict(), ...)`` and
    ``result.error_code, result.error_message = error`` both work.
    """

    error_code: ErrorCode.ValueType
    error_message: str


def error_to_wire(exc: BaseException) -> WireError:
    """The wire form of an exception raised while serving a request.

    A :class:`~rillet.errors.KafkaError` keeps its code and its message (without the
    ``[NAME]`` prefix of ``str(exc)``). Anything else is a bug or an environment failure the
    client cannot act on: it becomes ``UNKNOWN_SERVER_ERROR`` with the exception's type and
    text, as Kafka reports unexpected server exceptions.
    """
    if isinstance(exc, KafkaError):
        return WireError(ErrorCode.ValueType(exc.code), exc.message)
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return WireError(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def error_from_wire(error_code: int, error_message: str = "") -> KafkaError | None:
    """The exception a result's ``error_code`` and ``error_message`` stand for.

    ``None`` for ``NONE`` (success); otherwise an instance of the :mod:`rillet.errors` class of
    that code, carrying the message, ready to raise or to hand to a future. A code this version
    does not know becomes :class:`~rillet.errors.UnknownServerError`, as Kafka's clients do,
    with the number kept in the message.
    """
    if error_code == ErrorCode.NONE:
        return None
    cls = error_for_code(error_code)
    if cls is UnknownServerError and error_code != UnknownServerError.code:
        prefix = f"unknown error code {error_code}"
        return cls(f"{prefix}: {error_message}" if error_message else prefix)
    return cls(error_message)


def set_error(message: Any, exc: BaseException) -> None:
    """Fill the ``error_code`` and ``error_message`` fields of a response message (every
    per-partition, per-topic and per-resource result has both)."""
    wire = error_to_wire(exc)
    message.error_code = wire.error_code
    message.error_message = wire.error_message


def raft_error_to_wire(error: RaftErrors) -> ErrorCode.ValueType:
    """The code of a quorum message's error (the Raft core names its errors as Kafka does)."""
    if error == RaftErrors.NONE:
        return ErrorCode.NONE
    return ErrorCode.ValueType(error_for_name(error.value).code)


def raft_error_from_wire(error_code: int) -> RaftErrors:
    """A quorum response's error as the Raft core names it; a code the core has no name for
    is INVALID_REQUEST, which the core treats as a failed request and retries."""
    if error_code == ErrorCode.NONE:
        return RaftErrors.NONE
    try:
        return RaftErrors(error_for_code(error_code).name)
    except ValueError:
        return RaftErrors.INVALID_REQUEST
