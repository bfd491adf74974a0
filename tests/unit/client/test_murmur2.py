"""Keyed partitioning matches Kafka's (an independent reference: kafka-python's murmur2)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rillet._core import murmur2, partition_for_key
from rillet.errors import InvalidRequestError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.partitioner.default import murmur2 as reference_murmur2


@given(st.binary(max_size=200))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    # kafka-python returns the unsigned 32-bit value; Java (and rillet) the signed one.
    assert murmur2(key) & 0xFFFFFFFF == reference_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_matches_kafka(key: bytes, n: int) -> None:
    assert partition_for_key(key, n) == (reference_murmur2(key) & 0x7FFFFFFF) % n


def test_zero_partitions_is_an_error() -> None:
    with pytest.raises(InvalidRequestError):
        partition_for_key(b"k", 0)
