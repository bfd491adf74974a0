"""The client's metric types (rillet.client.metrics) on an injected clock: Kafka's windowed
stats (``metrics.num.samples`` windows of ``metrics.sample.window.ms``), rates over the
windows' span, cumulative totals, sensors and the registry ``metrics()`` reads."""

from __future__ import annotations

import math
import threading

import pytest

from rillet.client.metrics import (
    NANOSECOND_MS,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Rate,
    WindowedCount,
    WindowedSum,
    metrics_from_config,
)
from rillet.errors import InvalidConfigurationError

WINDOW = MetricConfig(samples=2, time_window_ms=1000)


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


def test_avg_and_max_cover_the_last_samples_and_are_nan_without_values() -> None:
    avg, top = Avg(), Max()
    assert math.isnan(avg.measure(WINDOW, 0)) and math.isnan(top.measure(WINDOW, 0))
    for t, v in ((0, 10.0), (500, 30.0), (1200, 2.0)):  # 1200: a second sample starts
        avg.record(WINDOW, v, t)
        top.record(WINDOW, v, t)
    assert avg.measure(WINDOW, 1200) == pytest.approx(14.0)
    assert top.measure(WINDOW, 1200) == 30.0
    # At 2000 the first sample (started at 0) is two windows old: only 2.0 is left.
    assert avg.measure(WINDOW, 2000) == 2.0
    assert top.measure(WINDOW, 2000) == 2.0
    # At 3200 the second one (started at 1200) is too: nothing in the window.
    assert math.isnan(avg.measure(WINDOW, 3200)) and math.isnan(top.measure(WINDOW, 3200))


def test_a_third_window_reuses_the_oldest_sample() -> None:
    total = WindowedSum()
    total.record(WINDOW, 1, 0)
    total.record(WINDOW, 10, 1000)
    total.record(WINDOW, 100, 2000)  # replaces the sample of 0..1000
    assert total.measure(WINDOW, 2000) == 110.0
    three = MetricConfig(samples=3, time_window_ms=1000)
    kept = WindowedSum()
    for t, v in ((0, 1), (1000, 10), (2000, 100)):
        kept.record(three, v, t)
    assert kept.measure(three, 2000) == 111.0


def test_max_of_negative_values_is_not_the_empty_initial_value() -> None:
    top = Max()
    top.record(WINDOW, -5, 0)
    assert top.measure(WINDOW, 0) == -5.0


def test_rate_divides_by_at_least_samples_minus_one_windows() -> None:
    rate = Rate()
    rate.record(WINDOW, 100, 0)
    # Just started: the span counts as one whole window (samples - 1), not 0 ms.
    assert rate.measure(WINDOW, 0) == pytest.approx(100.0)
    assert rate.measure(WINDOW, 500) == pytest.approx(100 / 1.5)
    rate.record(WINDOW, 50, 1500)  # a second sample, from 1500
    assert rate.measure(WINDOW, 1500) == pytest.approx(150 / 1.5)
    # At 2000 the first sample is obsolete: 50 over 500 ms plus one window.
    assert rate.measure(WINDOW, 2000) == pytest.approx(50 / 1.5)
    assert rate.measure(WINDOW, 10_000) == 0.0


def test_rate_of_a_count_counts_recordings_and_a_nanosecond_rate_is_a_fraction() -> None:
    requests = Rate(WindowedCount())
    for t in range(0, 1000, 100):
        requests.record(WINDOW, 12345, t)  # the value does not matter
    assert requests.measure(WINDOW, 1000) == pytest.approx(10.0)  # 10 in one window (1 s)
    waited = Rate(WindowedSum(), NANOSECOND_MS)
    waited.record(WINDOW, 250e6, 0)  # a quarter of a second waited, over a 1 s span
    assert waited.measure(WINDOW, 1000) == pytest.approx(0.25)


def test_cumulative_stats_never_forget() -> None:
    total, count = CumulativeSum(), CumulativeCount()
    for t in (0, 5000, 100_000):
        total.record(WINDOW, 7, t)
        count.record(WINDOW, 7, t)
    assert total.measure(WINDOW, 1e9) == 21.0
    assert count.measure(WINDOW, 1e9) == 3.0


def test_a_sensor_records_into_all_its_stats_and_the_registry_reads_them_by_group() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    sent = metrics.sensor("records")
    sent.add_meter(MetricName("record-send-rate", "producer-metrics"),
                   MetricName("record-send-total", "producer-metrics"))  # fmt: skip
    sent.add(MetricName("records-per-request-avg", "producer-metrics"), Avg())
    hidden = sent.add(None, WindowedCount())
    metrics.add_metric(MetricName("buffer-total-bytes", "producer-metrics"), lambda now: 42.0)
    topic = metrics.sensor("topic.t.records")
    topic.add_meter(MetricName("record-send-rate", "producer-topic-metrics.t"),
                    MetricName("record-send-total", "producer-topic-metrics.t"))  # fmt: skip
    assert metrics.sensor("records") is sent
    sent.record(10)
    clock.ms = 500
    sent.record(30)
    topic.record(40)
    snapshot = metrics.snapshot()
    assert snapshot == {
        "producer-metrics": {
            "record-send-rate": pytest.approx(40 / 1.5),
            "record-send-total": 40.0,
            "records-per-request-avg": 20.0,
            "buffer-total-bytes": 42.0,
        },
        "producer-topic-metrics.t": {
            "record-send-rate": pytest.approx(40 / 1.0),
            "record-send-total": 40.0,
        },
    }
    assert sent.measure(hidden, clock.ms) == 2.0
    raw = metrics.metrics
    assert raw[MetricName("record-send-total", "producer-metrics")].value() == 40.0
    # Not part of the name's identity: the description.
    assert MetricName("record-send-total", "producer-metrics", "anything") in raw


def test_record_many_is_recording_each_value() -> None:
    clock = Clock()
    one_by_one, at_once = Metrics(WINDOW, clock), Metrics(WINDOW, clock)
    sensors = []
    for metrics in (one_by_one, at_once):
        sensor = metrics.sensor("batch-size")
        sensor.add(MetricName("avg", "g"), Avg())
        sensor.add(MetricName("max", "g"), Max())
        sensor.add_meter(MetricName("rate", "g"), MetricName("total", "g"))
        sensor.add_meter(MetricName("count-rate", "g"), MetricName("count", "g"), count=True)
        sensors.append(sensor)
    for t, values in ((0, [3, 9, 4]), (1500, [1, 2])):
        clock.ms = t
        for v in values:
            sensors[0].record(v)
        sensors[1].record_many(len(values), sum(values), max(values))
    sensors[1].record_many(0, 0, 0)  # nothing
    clock.ms = 1700
    assert one_by_one.snapshot() == at_once.snapshot()
    assert at_once.snapshot()["g"]["avg"] == pytest.approx(19 / 5)
    assert at_once.snapshot()["g"]["max"] == 9.0
    assert at_once.snapshot()["g"]["count"] == 5.0


def test_a_metric_name_is_registered_once() -> None:
    metrics = Metrics(WINDOW, Clock())
    name = MetricName("commit-rate", "consumer-coordinator-metrics")
    metrics.sensor("a").add(name, Rate())
    with pytest.raises(ValueError, match="consumer-coordinator-metrics/commit-rate"):
        metrics.sensor("b").add(name, Rate())


def test_concurrent_recording_loses_nothing() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    sensor = metrics.sensor("s")
    sensor.add_meter(MetricName("x-rate", "g"), MetricName("x-total", "g"), count=True)
    sensor.add(MetricName("x-max", "g"), Max())

    def work(base: int) -> None:
        for i in range(5000):
            sensor.record(base + i)

    threads = [threading.Thread(target=work, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = metrics.snapshot()["g"]
    assert values["x-total"] == 20_000.0
    assert values["x-max"] == 34_999.0


def test_the_configs_set_the_windows() -> None:
    clock = Clock()
    config = {"metrics_enabled": True, "metrics_num_samples": 3, "metrics_sample_window_ms": 10}
    metrics = metrics_from_config(config, clock)
    assert metrics is not None
    assert metrics.config == MetricConfig(3, 10.0)
    assert metrics_from_config({**config, "metrics_enabled": False}) is None
    with pytest.raises(InvalidConfigurationError, match=r"metrics\.num\.samples"):
        metrics_from_config({**config, "metrics_num_samples": 0})
    with pytest.raises(InvalidConfigurationError, match=r"metrics\.sample\.window\.ms"):
        metrics_from_config({**config, "metrics_sample_window_ms": 0})
    with pytest.raises(InvalidConfigurationError, match=r"metrics\.sample\.window\.ms"):
        metrics_from_config({**config, "metrics_sample_window_ms": "soon"})
