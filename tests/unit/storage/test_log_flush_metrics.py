"""The log flusher tells ``on_flush_ms`` how long each flush it makes took (Kafka's
LogFlushRateAndTimeMs): one observation per log flushed, whole or up to its active segment,
none when nothing was due."""

from __future__ import annotations

from pathlib import Path

from rillet.storage.log_manager import LogManager
from tests.unit.storage.test_log_manager import FakeClock, fill


def test_each_flush_is_timed(tmp_path: Path) -> None:
    flushes: list[float] = []
    lm = LogManager(
        [tmp_path / "a"],
        broker_config={"log.flush.interval.messages": 5, "log.segment.bytes": 4096},
        clock=FakeClock(),
        on_flush_ms=flushes.append,
    )
    lm.startup()
    try:
        due = lm.get_or_create_log("t", 0)
        quiet = lm.get_or_create_log("t", 1)
        fill(due, 5)
        fill(quiet, 1)
        assert lm.flush_dirty_logs() == 1
        assert len(flushes) == 1 and flushes[0] >= 0
        assert lm.flush_dirty_logs() == 0
        assert len(flushes) == 1
        # A rolled segment below a log that is not due is flushed (and timed) too.
        rolled = lm.get_or_create_log("t", 2)
        fill(rolled, 4, value_size=2000)
        assert rolled.recovery_point < rolled.active_segment_base_offset
        assert lm.flush_dirty_logs() == 1
        assert len(flushes) == 2
    finally:
        lm.shutdown()
