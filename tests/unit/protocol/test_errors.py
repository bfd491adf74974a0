"""Kafka's error table on both sides of the wire: ErrorCode (proto/rillet/v1) and
rillet.errors hold the same names and numbers, both ways, and agree with an independent
reference (kafka-python's table); the error mapping of rillet.protocol.errors works both
ways."""

from __future__ import annotations

import inspect
import warnings

import pytest

import rillet.errors
from rillet.errors import (
    CorruptRecordError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownServerError,
    error_for_code,
    error_for_name,
)
from rillet.protocol import (
    common_pb2,
    fetch_pb2,
    produce_pb2,
)
from rillet.protocol.errors import WireError, error_from_wire, error_to_wire

with warnings.catch_warnings():
    # kafka/__init__ pulls in modules that use deprecated importlib.resources APIs.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_python_errors

ErrorCode = common_pb2.ErrorCode


def _error_classes() -> list[type[KafkaError]]:
    """Every distinct error class in rillet.errors (aliases count once), KafkaError excluded."""
    found = {
        obj
        for _, obj in inspect.getmembers(rillet.errors, inspect.isclass)
        if issubclass(obj, KafkaError)
        and obj is not KafkaError
        and obj not in rillet.errors.LOCAL_ERRORS
    }
    return sorted(found, key=lambda cls: cls.code)


# ---------------------------------------------------------------------------------------------
# ErrorCode <-> rillet.errors


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_is_an_error_code(cls: type[KafkaError]) -> None:
    assert ErrorCode.Value(cls.name) == cls.code
    assert error_for_code(cls.code) is cls
    assert error_for_name(cls.name) is cls


@pytest.mark.parametrize("name", [v.name for v in ErrorCode.DESCRIPTOR.values if v.name != "NONE"])
def test_every_error_code_is_an_error_class(name: str) -> None:
    code = ErrorCode.Value(name)
    cls = error_for_code(code)
    assert (cls.name, cls.code) == (name, code)
    assert error_for_name(name) is cls


def test_error_table_is_complete_and_one_to_one() -> None:
    classes = _error_classes()
    codes = [cls.code for cls in classes]
    assert len(set(codes)) == len(codes)
    assert len({cls.name for cls in classes}) == len(classes)
    assert len(classes) == len(ErrorCode.keys()) - 1  # NONE has no class
    # Kafka's table from -1 to 133 without gaps (NONE = 0 is the enum's).
    assert sorted(ErrorCode.values()) == list(range(-1, 134))
    assert ErrorCode.Name(0) == "NONE"
    # Every class is exported.
    assert {cls.__name__ for cls in classes} <= set(rillet.errors.__all__)


@pytest.mark.parametrize(
    ("name", "code", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("OFFSET_OUT_OF_RANGE", 1, False),
        ("CORRUPT_MESSAGE", 2, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("REQUEST_TIMED_OUT", 7, True),
        ("MESSAGE_TOO_LARGE", 10, False),
        ("INVALID_TOPIC_EXCEPTION", 17, False),
        ("RECORD_LIST_TOO_LARGE", 18, False),
        ("NOT_ENOUGH_REPLICAS", 19, True),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True),
        ("INVALID_REQUIRED_ACKS", 21, False),
        ("TOPIC_AUTHORIZATION_FAILED", 29, False),
        ("INVALID_TIMESTAMP", 32, False),
        ("TOPIC_ALREADY_EXISTS", 36, False),
        ("INVALID_PARTITIONS", 37, False),
        ("INVALID_REPLICATION_FACTOR", 38, False),
        ("INVALID_REPLICA_ASSIGNMENT", 39, False),
        ("INVALID_CONFIG", 40, False),
        ("NOT_CONTROLLER", 41, True),
        ("INVALID_REQUEST", 42, False),
        ("KAFKA_STORAGE_ERROR", 56, True),
        ("FENCED_LEADER_EPOCH", 74, True),
        ("UNKNOWN_LEADER_EPOCH", 75, True),
        ("UNSUPPORTED_COMPRESSION_TYPE", 76, False),
        ("INVALID_RECORD", 87, False),
        ("SNAPSHOT_NOT_FOUND", 98, False),
        ("POSITION_OUT_OF_RANGE", 99, False),
        ("UNKNOWN_TOPIC_ID", 100, True),
        ("INCONSISTENT_CLUSTER_ID", 104, False),
    ],
)
def test_kafka_names_numbers_and_retriable_flags(name: str, code: int, retriable: bool) -> None:
    assert ErrorCode.Value(name) == code
    assert error_for_code(code).name == name
    assert error_for_code(code).retriable is retriable


# kafka-python keeps some pre-KIP names; Kafka's own table (and Rillet) use the new ones.
KAFKA_PYTHON_RENAMED = {
    -1: ("UNKNOWN", "UNKNOWN_SERVER_ERROR"),
    6: ("NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER"),
    10: ("MESSAGE_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE"),
    17: ("INVALID_TOPIC", "INVALID_TOPIC_EXCEPTION"),
    39: ("INVALID_REPLICATION_ASSIGNMENT", "INVALID_REPLICA_ASSIGNMENT"),
}
# Where Kafka's table says retriable and kafka-python does not.
KAFKA_PYTHON_RETRIABLE_DIFFERS = {2}


def _kafka_python_table() -> dict[int, tuple[str, bool]]:
    table = {}
    for _, cls in inspect.getmembers(kafka_python_errors, inspect.isclass):
        errno = getattr(cls, "errno", None)
        if issubclass(cls, kafka_python_errors.BrokerResponseError) and isinstance(errno, int):
            table[errno] = (cls.message, cls.retriable)
    return table


def test_error_table_matches_kafka_python_reference() -> None:
    reference = _kafka_python_table()
    assert len(reference) > 100
    for code, (name, retriable) in reference.items():
        if code == 0:
            assert ErrorCode.Name(0) == "NONE"
            continue
        ours = error_for_code(code)
        assert ours.code == code, f"no class for code {code} ({name})"
        expected_name = KAFKA_PYTHON_RENAMED.get(code, (name, name))[1]
        assert ours.name == expected_name
        if code not in KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert ours.retriable is retriable, ours.name


def test_kafka_python_aliases() -> None:
    assert rillet.errors.MessageSizeTooLargeError is rillet.errors.RecordTooLargeError
    assert rillet.errors.RecordListTooLargeError is rillet.errors.RecordBatchTooLargeError
    assert rillet.errors.NotLeaderForPartitionError is NotLeaderOrFollowerError
    assert rillet.errors.NetworkExceptionError is rillet.errors.NetworkError


def test_unknown_codes_and_names_fall_back_to_unknown_server_error() -> None:
    assert error_for_code(9999) is UnknownServerError
    assert error_for_code(0) is UnknownServerError
    assert error_for_name("NO_SUCH_ERROR") is UnknownServerError


# ---------------------------------------------------------------------------------------------
# the error mapping (rillet.protocol.errors)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_error_mapping_round_trips_every_class(cls: type[KafkaError]) -> None:
    wire = error_to_wire(cls("partition 3: why"))
    assert wire == WireError(ErrorCode.Value(cls.name), "partition 3: why")
    back = error_from_wire(*wire)
    assert type(back) is cls
    assert back.message == "partition 3: why"


def test_error_mapping_through_a_partition_result() -> None:
    result = produce_pb2.ProduceResponse.Partition(
        partition=2,
        base_offset=-1,
        **error_to_wire(NotLeaderOrFollowerError("leader is 3"))._asdict(),
    )
    parsed = produce_pb2.ProduceResponse.Partition.FromString(result.SerializeToString())
    assert parsed.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    error = error_from_wire(parsed.error_code, parsed.error_message)
    assert isinstance(error, NotLeaderOrFollowerError)
    assert error.retriable
    assert str(error) == "[NOT_LEADER_OR_FOLLOWER] leader is 3"

    ok = fetch_pb2.FetchResponse.Partition(partition=0)
    assert error_from_wire(ok.error_code, ok.error_message) is None


def test_error_mapping_of_empty_messages() -> None:
    assert error_to_wire(CorruptRecordError()) == (ErrorCode.CORRUPT_MESSAGE, "")
    back = error_from_wire(ErrorCode.CORRUPT_MESSAGE)
    assert isinstance(back, CorruptRecordError)
    assert str(back) == "CORRUPT_MESSAGE"


def test_unexpected_exceptions_become_unknown_server_error() -> None:
    assert error_to_wire(ValueError("bad state")) == WireError(
        ErrorCode.UNKNOWN_SERVER_ERROR, "ValueError: bad state"
    )
    assert error_to_wire(RuntimeError()) == (ErrorCode.UNKNOWN_SERVER_ERROR, "RuntimeError")
    back = error_from_wire(*error_to_wire(KeyError("k")))
    assert type(back) is UnknownServerError
    assert "KeyError" in back.message


def test_unknown_wire_codes_keep_the_number() -> None:
    back = error_from_wire(4242, "from a newer broker")
    assert type(back) is UnknownServerError
    assert back.message == "unknown error code 4242: from a newer broker"
    bare = error_from_wire(4242)
    assert bare is not None
    assert bare.message == "unknown error code 4242"
    assert error_from_wire(ErrorCode.NONE, "ignored") is None
