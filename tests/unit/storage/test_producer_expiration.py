"""The LogManager's share of producer state: ``producer.id.expiration.ms`` reaches every log
(created, loaded, reconfigured), and ``producer.id.expiration.check.interval.ms`` schedules
Kafka's PeriodicProducerExpirationCheck, which forgets idle producers in every log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rillet._core import BatchBuilder, Log
from rillet.config import BrokerConfig
from rillet.errors import InvalidConfigurationError
from rillet.storage.log_manager import LogManager, ProducerStateConfig
from rillet.types import TopicPartition

T0 = 1_700_000_000_000
DAY_MS = 86_400_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeScheduler:
    """Records the periodic tasks handed to it; the test runs them."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[Callable[[], object], int]] = {}

    def schedule(self, name: str, fn: Callable[[], object], interval_ms: int) -> None:
        self.tasks[name] = (fn, interval_ms)


@pytest.fixture
def managers() -> Iterator[list[LogManager]]:
    started: list[LogManager] = []
    yield started
    for lm in started:
        lm.shutdown()


def start(
    managers: list[LogManager], d: Path, clock: FakeClock, config: ProducerStateConfig
) -> LogManager:
    lm = LogManager([d], clock=clock, producer_state_config=config)
    lm.startup()
    managers.append(lm)
    return lm


def idempotent(producer_id: int, sequence: int, ts: int) -> bytes:
    b = BatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    b.append(ts, b"k", b"v")
    return b.build()


def producer_ids(log: Log) -> list[int]:
    return [e.producer_id for e in log.producer_state()]


def test_producer_state_config_comes_from_the_broker_keys(tmp_path: Path) -> None:
    assert ProducerStateConfig.from_broker_config({}) == ProducerStateConfig(DAY_MS, 600_000)
    broker = BrokerConfig.embedded_default(
        tmp_path,
        {
            "producer.id.expiration.ms": "60000",
            "producer.id.expiration.check.interval.ms": "1000",
        },
    )
    assert ProducerStateConfig.from_broker_config(broker.values) == ProducerStateConfig(
        60_000, 1_000
    )
    assert (broker.producer_id_expiration_ms, broker.producer_id_expiration_check_interval_ms) == (
        60_000,
        1_000,
    )
    # They act now: setting them is not reported as inert.
    assert broker.inert_settings() == []


@pytest.mark.parametrize(
    "key", ["producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"]
)
def test_producer_id_keys_are_validated_like_kafka(key: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        BrokerConfig({key: "0"})
    assert (
        info.value.message == f"Invalid value 0 for configuration {key}: Value must be at least 1"
    )


def test_every_log_gets_the_brokers_expiration(tmp_path: Path, managers: list[LogManager]) -> None:
    clock = FakeClock()
    lm = start(managers, tmp_path, clock, ProducerStateConfig(5_000, 100))
    log = lm.get_or_create_log("t", 0)
    assert log.config.producer_id_expiration_ms == 5_000
    lm.update_topic_config("t", {"retention.ms": "1000"})
    assert (log.config.retention_ms, log.config.producer_id_expiration_ms) == (1_000, 5_000)
    managers.remove(lm)
    lm.shutdown()
    lm = start(managers, tmp_path, clock, ProducerStateConfig(7_000, 100))
    loaded = lm.get_log("t", 0)
    assert loaded is not None
    assert loaded.config.producer_id_expiration_ms == 7_000


def test_the_periodic_check_forgets_idle_producers_in_every_log(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    clock = FakeClock()
    lm = start(managers, tmp_path, clock, ProducerStateConfig(10_000, 250))
    a = lm.get_or_create_log("a", 0)
    b = lm.get_or_create_log("b", 3)
    a.append_as_leader(idempotent(1, 0, T0), now_ms=T0)
    a.append_as_leader(idempotent(2, 0, T0 + 5_000), now_ms=T0)
    b.append_as_leader(idempotent(1, 0, T0 + 1_000), now_ms=T0)
    scheduler = FakeScheduler()
    lm.schedule(
        scheduler,
        flush_check_ms=1_000,
        retention_check_ms=1_000,
        checkpoint_ms=1_000,
        high_watermarks=lambda: dict[TopicPartition, int](),
    )
    check, interval = scheduler.tasks["PeriodicProducerExpirationCheck"]
    assert interval == 250

    clock.now = T0 + 9_999
    check()
    assert (producer_ids(a), producer_ids(b)) == ([1, 2], [1])
    clock.now = T0 + 10_000
    check()
    assert (producer_ids(a), producer_ids(b)) == ([2], [1])
    clock.now = T0 + 15_000
    check()
    assert (producer_ids(a), producer_ids(b)) == ([], [])
    # A forgotten producer may start anywhere.
    info = a.append_as_leader(idempotent(1, 77, T0 + 15_000), now_ms=T0)
    assert info.batch_base_offsets is None
