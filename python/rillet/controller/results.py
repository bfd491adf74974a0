"""What every controller operation returns: the records to append, and the response to
send once they commit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from rillet.metadata.records import MetadataRecord

__all__ = ["ControllerResult"]

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    records: list[MetadataRecord]
    response: T
