"""Client metrics as Kafka's clients keep them (``org.apache.kafka.common.metrics``, which
kafka-python ports as ``kafka.metrics``): a :class:`Sensor` records values into stats, each
stat registered under a :class:`MetricName` (name and group), and
:meth:`Metrics.snapshot` reads them all, keyed by group and name, as ``metrics()`` answers.

Windows (Kafka's ``SampledStat``): a windowed stat keeps up to ``samples`` samples
(``metrics.num.samples``, 2), each started by the first value recorded after the current
one is ``time_window_ms`` old (``metrics.sample.window.ms``, 30 s), reusing the oldest
sample's slot. A sample ``samples * time_window_ms`` old is empty when measured. A
:class:`Rate` is its windowed sum divided by the time its samples span, counted as at least
``samples - 1`` whole windows (Kafka's ``Rate.windowSize``) so that a rate does not shoot up
just after a window starts, and at least 1 ms.

:class:`Avg` and :class:`Max` with nothing recorded in their window are NaN, as in Kafka's
Java client (kafka-python's port answers 0.0 and -inf): no measurement is not zero.

Values are milliseconds of an injected clock (``clock``, default ``time.monotonic``), so
tests drive the windows without sleeping.

Thread safety: a sensor records and its stats are measured under the sensor's own lock (the
producer's sender thread, response threads and the application share them); registering
sensors and metrics takes the registry's lock.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rillet.errors import InvalidConfigurationError

__all__ = [
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "KafkaMetric",
    "Max",
    "MetricConfig",
    "MetricName",
    "Metrics",
    "Rate",
    "SampledStat",
    "Sensor",
    "Stat",
    "WindowedCount",
    "WindowedSum",
    "metrics_from_config",
    "monotonic_ms",
]

# Milliseconds, read when a value is recorded or a metric measured.
Clock = Callable[[], float]
S = TypeVar("S", bound="Stat")

# The client configs of the metrics (kafka-python's names; Kafka's dotted ones map onto them).
METRICS_DEFAULTS: Mapping[str, Any] = {
    "metrics_enabled": True,
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
}

SECOND_MS = 1000.0
NANOSECOND_MS = 1e-6


def monotonic_ms() -> float:
    return time.monotonic_ns() / 1e6


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """How windowed stats sample: ``samples`` windows of ``time_window_ms`` each."""

    samples: int = 2
    time_window_ms: float = 30000.0

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise InvalidConfigurationError(
                f"Invalid value {self.samples} for configuration metrics.num.samples: "
                "Value must be at least 1"
            )
        if not self.time_window_ms > 0:
            raise InvalidConfigurationError(
                f"Invalid value {self.time_window_ms} for configuration "
                "metrics.sample.window.ms: Value must be at least 1"
            )


@dataclass(frozen=True, slots=True)
class MetricName:
    """A metric's name within its group (``producer-metrics``,
    ``producer-topic-metrics.<topic>``, ...); the description is not part of its identity."""

    name: str
    group: str
    description: str = field(default="", compare=False)


# -- stats ---------------------------------------------------------------------------------


class Stat(ABC):
    """A measurable stat: values are recorded into it, and it is measured at a time."""

    __slots__ = ()

    @abstractmethod
    def record(self, config: MetricConfig, value: float, now_ms: float) -> None: ...

    @abstractmethod
    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        """``count`` values at once, summing to ``total``, the largest ``largest``: as if
        each were recorded at ``now_ms``."""

    @abstractmethod
    def measure(self, config: MetricConfig, now_ms: float) -> float: ...


class _Sample:
    __slots__ = ("count", "start_ms", "value")

    def __init__(self, value: float, start_ms: float) -> None:
        self.value = value
        self.count = 0
        self.start_ms = start_ms


class SampledStat(Stat):
    """A stat over the last ``samples`` windows (Kafka's ``SampledStat``): a subclass says
    how a value updates the current sample (``record``, inline: it is the hot path) and how
    the samples combine."""

    __slots__ = ("_current", "_head", "_samples")
    INITIAL = 0.0

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0
        self._head: _Sample | None = None  # samples[_current]

    def _sample(self, config: MetricConfig, now_ms: float) -> _Sample:
        """The sample a value recorded at ``now_ms`` goes to."""
        head = self._head
        if head is None or now_ms - head.start_ms >= config.time_window_ms:
            head = self._advance(config, now_ms)
        return head

    def _advance(self, config: MetricConfig, now_ms: float) -> _Sample:
        """Start a new sample at ``now_ms`` in the next slot (the oldest sample's, once all
        ``samples`` slots are taken)."""
        if self._head is not None:
            self._current = (self._current + 1) % config.samples
        if self._current >= len(self._samples):
            sample = _Sample(self.INITIAL, now_ms)
            self._samples.append(sample)
        else:
            sample = self._samples[self._current]
            sample.value, sample.count, sample.start_ms = self.INITIAL, 0, now_ms
        self._head = sample
        return sample

    def purge(self, config: MetricConfig, now_ms: float) -> None:
        """Empty the samples too old to count (no value was recorded to replace them)."""
        expire_age = config.samples * config.time_window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.value, sample.count, sample.start_ms = self.INITIAL, 0, now_ms

    def oldest_start_ms(self, now_ms: float) -> float:
        return min((s.start_ms for s in self._samples), default=now_ms)

    def measure(self, config: MetricConfig, now_ms: float) -> float:
        self.purge(config, now_ms)
        return self._combine(self._samples)

    @abstractmethod
    def _combine(self, samples: list[_Sample]) -> float: ...


class Avg(SampledStat):
    """The mean of the values in the window; NaN with none."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        sample = self._sample(config, now_ms)
        sample.value += value
        sample.count += 1

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        sample = self._sample(config, now_ms)
        sample.value += total
        sample.count += count

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.count for s in samples)
        return sum(s.value for s in samples) / count if count else math.nan


class Max(SampledStat):
    """The largest value in the window; NaN with none."""

    __slots__ = ()
    INITIAL = -math.inf

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        sample = self._sample(config, now_ms)
        if value > sample.value:
            sample.value = value
        sample.count += 1

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        sample = self._sample(config, now_ms)
        if largest > sample.value:
            sample.value = largest
        sample.count += count

    def _combine(self, samples: list[_Sample]) -> float:
        if not any(s.count for s in samples):
            return math.nan
        return float(max(s.value for s in samples))


class WindowedSum(SampledStat):
    """The sum of the values in the window (Kafka's ``WindowedSum``, kafka-python's
    ``SampledTotal``)."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        sample = self._sample(config, now_ms)
        sample.value += value
        sample.count += 1

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        sample = self._sample(config, now_ms)
        sample.value += total
        sample.count += count

    def _combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(SampledStat):
    """How many values were recorded in the window, whatever they were."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        sample = self._sample(config, now_ms)
        sample.value += 1
        sample.count += 1

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        sample = self._sample(config, now_ms)
        sample.value += count
        sample.count += count

    def _combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.value for s in samples))


class Rate(Stat):
    """A windowed stat (by default the sum of the values) per ``unit_ms`` of the time its
    samples span: per second by default; ``NANOSECOND_MS`` of nanoseconds recorded gives the
    fraction of the time (Kafka's ``bufferpool-wait-ratio``)."""

    __slots__ = ("_stat", "_unit_ms")

    def __init__(self, stat: SampledStat | None = None, unit_ms: float = SECOND_MS) -> None:
        self._stat = stat if stat is not None else WindowedSum()
        self._unit_ms = unit_ms

    @property
    def stat(self) -> SampledStat:
        """The windowed stat the rate is of (recorded directly by a sensor)."""
        return self._stat

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        self._stat.record(config, value, now_ms)

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        self._stat.record_many(config, count, total, largest, now_ms)

    def measure(self, config: MetricConfig, now_ms: float) -> float:
        value = self._stat.measure(config, now_ms)
        return value / (self.window_size_ms(config, now_ms) / self._unit_ms)

    def window_size_ms(self, config: MetricConfig, now_ms: float) -> float:
        """The time the samples span, counted as at least ``samples - 1`` whole windows
        (Kafka's ``Rate.windowSize``): a rate measured 1 s into a 30 s window is over 31 s,
        not 1 s. At least 1 ms."""
        self._stat.purge(config, now_ms)
        elapsed = now_ms - self._stat.oldest_start_ms(now_ms)
        full_windows = int(elapsed // config.time_window_ms)
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.time_window_ms
        return max(elapsed, 1.0)


class CumulativeSum(Stat):
    """The sum of every value ever recorded (the ``-total`` of Kafka's ``Meter``)."""

    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total = 0.0

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        self._total += value

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        self._total += total

    def measure(self, config: MetricConfig, now_ms: float) -> float:
        return self._total


class CumulativeCount(Stat):
    """How many values were ever recorded."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0.0

    def record(self, config: MetricConfig, value: float, now_ms: float) -> None:
        self._count += 1

    def record_many(
        self, config: MetricConfig, count: int, total: float, largest: float, now_ms: float
    ) -> None:
        self._count += count

    def measure(self, config: MetricConfig, now_ms: float) -> float:
        return self._count


# -- sensors and the registry ------------------------------------------------------------------


class KafkaMetric:
    """One registered metric: its name and how to measure it (kafka-python's
    ``KafkaMetric``, what ``metrics(raw=True)`` maps names to)."""

    __slots__ = ("_clock", "_measure", "metric_name")

    def __init__(self, name: MetricName, measure: Callable[[float], float], clock: Clock) -> None:
        self.metric_name = name
        self._measure = measure
        self._clock = clock

    def value(self, now_ms: float | None = None) -> float:
        return self._measure(self._clock() if now_ms is None else now_ms)

    def __repr__(self) -> str:
        return f"KafkaMetric({self.metric_name.group}/{self.metric_name.name})"


class Sensor:
    """Records values into its stats, each of them a registered metric or not (a stat
    another metric is derived from). ``record`` is the hot path: one lock, one call per
    stat, no allocation once the window's samples exist."""

    __slots__ = (
        "_config",
        "_lock",
        "_recorders",
        "_registry",
        "_stats",
        "before_measure",
        "name",
    )

    def __init__(self, registry: Metrics, name: str) -> None:
        self.name = name
        self._registry = registry
        self._config = registry.config
        self._lock = threading.Lock()
        self._recorders: tuple[Callable[[MetricConfig, float, float], None], ...] = ()
        self._stats: tuple[Stat, ...] = ()
        # Called (outside the lock) before a stat of this sensor is measured: it may record
        # what a hot path only counted (the consumer's poll()).
        self.before_measure: Callable[[float], None] | None = None

    def add(self, name: MetricName | None, stat: S) -> S:
        """Record into ``stat`` from now on, and register it as ``name`` (unless None)."""
        # A rate is recorded straight into its windowed stat.
        recorder = stat.stat.record if isinstance(stat, Rate) else stat.record
        with self._lock:
            self._recorders = (*self._recorders, recorder)
            self._stats = (*self._stats, stat)
        if name is not None:
            self._registry.add_metric(name, lambda now_ms: self.measure(stat, now_ms))
        return stat

    def add_meter(
        self,
        rate: MetricName,
        total: MetricName,
        *,
        count: bool = False,
        unit_ms: float = SECOND_MS,
    ) -> Rate:
        """Kafka's ``Meter``: the rate of the values (or, with ``count``, of the recordings)
        over the window, and their total since the start. Returns the rate (whose ``stat``
        is the windowed sum or count)."""
        meter = self.add(rate, Rate(WindowedCount() if count else WindowedSum(), unit_ms))
        self.add(total, CumulativeCount() if count else CumulativeSum())
        return meter

    def record(self, value: float = 1.0, now_ms: float | None = None) -> None:
        if now_ms is None:
            now_ms = self._registry.clock()
        config = self._config
        with self._lock:
            for record in self._recorders:
                record(config, value, now_ms)

    def record_many(
        self, count: int, total: float, largest: float, now_ms: float | None = None
    ) -> None:
        """``count`` values at once (say, a request's batches' sizes), summing to ``total``,
        the largest ``largest``: one call where ``record`` would take ``count``."""
        if count <= 0:
            return
        if now_ms is None:
            now_ms = self._registry.clock()
        config = self._config
        with self._lock:
            for stat in self._stats:
                stat.record_many(config, count, total, largest, now_ms)

    def measure(self, stat: Stat, now_ms: float) -> float:
        if self.before_measure is not None:
            self.before_measure(now_ms)
        with self._lock:
            return stat.measure(self._config, now_ms)


class Metrics:
    """The registry of a client's sensors and metrics (Kafka's ``Metrics``)."""

    def __init__(self, config: MetricConfig | None = None, clock: Clock = monotonic_ms) -> None:
        self.config = config if config is not None else MetricConfig()
        self.clock = clock
        self._lock = threading.Lock()
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[MetricName, KafkaMetric] = {}

    def sensor(self, name: str) -> Sensor:
        """The sensor called ``name``, made on first use."""
        with self._lock:
            found = self._sensors.get(name)
            if found is None:
                found = self._sensors[name] = Sensor(self, name)
            return found

    def get_sensor(self, name: str) -> Sensor | None:
        return self._sensors.get(name)

    def add_metric(self, name: MetricName, measure: Callable[[float], float]) -> KafkaMetric:
        """Register a metric measured by ``measure(now_ms)`` (a gauge, or a sensor's stat).
        A name is registered once."""
        metric = KafkaMetric(name, measure, self.clock)
        with self._lock:
            if name in self._metrics:
                raise ValueError(f"A metric named {name.group}/{name.name} already exists")
            self._metrics[name] = metric
        return metric

    @property
    def metrics(self) -> dict[MetricName, KafkaMetric]:
        """Every registered metric, by name (a copy)."""
        with self._lock:
            return dict(self._metrics)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Every metric's value now, by group and then name (kafka-python's
        ``metrics()``)."""
        now_ms = self.clock()
        out: dict[str, dict[str, float]] = {}
        for name, metric in self.metrics.items():
            out.setdefault(name.group, {})[name.name] = metric.value(now_ms)
        return out


def metrics_from_config(config: Mapping[str, Any], clock: Clock = monotonic_ms) -> Metrics | None:
    """A client's registry from its ``metrics_*`` configs; None with
    ``metrics_enabled=False`` (``metrics()`` then answers None, as kafka-python's does)."""
    if not config["metrics_enabled"]:
        return None
    samples = config["metrics_num_samples"]
    window_ms = config["metrics_sample_window_ms"]
    for key, value, kind in (
        ("metrics.num.samples", samples, "32-bit"),  # Kafka's INT and LONG
        ("metrics.sample.window.ms", window_ms, "64-bit"),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidConfigurationError(
                f"Invalid value {value!r} for configuration {key}: Expected value to be a "
                f"{kind} integer"
            )
    return Metrics(MetricConfig(samples, float(window_ms)), clock)
