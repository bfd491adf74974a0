//! The log cleaner (compaction) for Python: `clean_log` runs one cleaning of a `Log` with the
//! GIL released, holding the log's lock only to plan and to swap each cleaned group in, so
//! appends and reads go on meanwhile; `cleanable_offsets` tells the scheduler how dirty a log
//! is. Which log to clean, and when, is decided in Python (`rillet.storage.log_cleaner`).

use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use rillet_core::log::{
    CleanerConfig as CoreConfig, CleanerStats as CoreStats, CleaningAbort as CoreAbort,
    CleaningJob, LogToClean as CoreLogToClean,
};

use crate::errors::IntoPyResult;
use crate::log::Log;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One cleaner thread's settings (Kafka's `CleanerConfig`): `dedupe_buffer_size` is this
/// cleaner's share of `log.cleaner.dedupe.buffer.size` (divided by `log.cleaner.threads`).
#[pyclass(module = "rillet._core", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct CleanerConfig {
    inner: CoreConfig,
}

#[pymethods]
impl CleanerConfig {
    #[new]
    #[pyo3(signature = (*, dedupe_buffer_size = 128 << 20, dedupe_buffer_load_factor = 0.9,
        io_buffer_size = 512 << 10))]
    fn new(
        dedupe_buffer_size: usize,
        dedupe_buffer_load_factor: f64,
        io_buffer_size: usize,
    ) -> PyResult<Self> {
        let inner = CoreConfig {
            dedupe_buffer_size,
            dedupe_buffer_load_factor,
            io_buffer_size,
        };
        inner.validate().py()?;
        Ok(CleanerConfig { inner })
    }

    #[getter]
    fn dedupe_buffer_size(&self) -> usize {
        self.inner.dedupe_buffer_size
    }
    #[getter]
    fn dedupe_buffer_load_factor(&self) -> f64 {
        self.inner.dedupe_buffer_load_factor
    }
    #[getter]
    fn io_buffer_size(&self) -> usize {
        self.inner.io_buffer_size
    }

    fn __repr__(&self) -> String {
        format!("CleanerConfig({:?})", self.inner)
    }
}

/// A log's cleanable range and dirtiness (Kafka's `LogToClean`).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct LogToClean {
    first_dirty_offset: i64,
    first_uncleanable_offset: i64,
    clean_bytes: u64,
    cleanable_bytes: u64,
    total_bytes: u64,
    cleanable_ratio: f64,
    max_compaction_delay_ms: i64,
    force_update_checkpoint: bool,
    needs_compaction_now: bool,
}

impl From<CoreLogToClean> for LogToClean {
    fn from(l: CoreLogToClean) -> Self {
        LogToClean {
            first_dirty_offset: l.first_dirty_offset,
            first_uncleanable_offset: l.first_uncleanable_offset,
            clean_bytes: l.clean_bytes,
            cleanable_bytes: l.cleanable_bytes,
            total_bytes: l.total_bytes(),
            cleanable_ratio: l.cleanable_ratio(),
            max_compaction_delay_ms: l.max_compaction_delay_ms,
            force_update_checkpoint: l.force_update_checkpoint,
            needs_compaction_now: l.needs_compaction_now(),
        }
    }
}

#[pymethods]
impl LogToClean {
    /// Kafka's test for a log worth cleaning now: dirtier than `min_cleanable_ratio`, or
    /// holding dirty bytes overdue by `max.compaction.lag.ms`.
    fn should_clean(&self, min_cleanable_ratio: f64) -> bool {
        (self.needs_compaction_now && self.cleanable_bytes > 0)
            || self.cleanable_ratio > min_cleanable_ratio
    }

    fn __repr__(&self) -> String {
        format!(
            "LogToClean(first_dirty_offset={}, first_uncleanable_offset={}, cleanable_ratio={:.3})",
            self.first_dirty_offset, self.first_uncleanable_offset, self.cleanable_ratio
        )
    }
}

/// What one cleaning did (Kafka's `CleanerStats`).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct CleanerStats {
    first_dirty_offset: i64,
    end_offset: i64,
    map_bytes_read: u64,
    map_messages_read: u64,
    bytes_read: u64,
    bytes_written: u64,
    messages_read: u64,
    messages_written: u64,
    records_removed: u64,
    invalid_messages: u64,
    tombstones_removed: u64,
    segments_read: u64,
    segments_written: u64,
    groups_discarded: u64,
    buffer_utilization: f64,
    latest_delete_horizon_ms: i64,
    map_elapsed_secs: f64,
    elapsed_secs: f64,
    messages_per_sec: f64,
    mb_per_sec: f64,
    aborted: bool,
}

impl From<CoreStats> for CleanerStats {
    fn from(s: CoreStats) -> Self {
        CleanerStats {
            first_dirty_offset: s.first_dirty_offset,
            end_offset: s.end_offset,
            map_bytes_read: s.map_bytes_read,
            map_messages_read: s.map_messages_read,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            messages_read: s.messages_read,
            messages_written: s.messages_written,
            records_removed: s.records_removed(),
            invalid_messages: s.invalid_messages,
            tombstones_removed: s.tombstones_removed,
            segments_read: s.segments_read,
            segments_written: s.segments_written,
            groups_discarded: s.groups_discarded,
            buffer_utilization: s.buffer_utilization,
            latest_delete_horizon_ms: s.latest_delete_horizon_ms,
            map_elapsed_secs: s.map_elapsed_secs,
            elapsed_secs: s.elapsed_secs,
            messages_per_sec: s.messages_per_sec(),
            mb_per_sec: s.mb_per_sec(),
            aborted: s.aborted,
        }
    }
}

#[pymethods]
impl CleanerStats {
    fn __repr__(&self) -> String {
        format!(
            "CleanerStats(end_offset={}, bytes_read={}, bytes_written={}, records_removed={}, aborted={})",
            self.end_offset, self.bytes_read, self.bytes_written, self.records_removed, self.aborted
        )
    }
}

/// Stops a running `clean_log` at its next batch (Kafka's `abortCleaning`); thread safe.
#[pyclass(module = "rillet._core", frozen)]
pub struct CleaningAbort {
    inner: CoreAbort,
}

#[pymethods]
impl CleaningAbort {
    #[new]
    fn new() -> Self {
        CleaningAbort {
            inner: CoreAbort::default(),
        }
    }

    fn abort(&self) {
        self.inner.abort();
    }

    #[getter]
    fn aborted(&self) -> bool {
        self.inner.is_aborted()
    }

    fn __repr__(&self) -> String {
        format!("CleaningAbort(aborted={})", self.inner.is_aborted())
    }
}

/// The cleaner's view of `log`: where its dirty section starts (from the checkpoint
/// `last_clean_offset`), what may be cleaned (never past `high_watermark`), how dirty it is.
#[pyfunction]
#[pyo3(signature = (log, *, last_clean_offset = None, high_watermark = None, now_ms = None))]
fn cleanable_offsets(
    py: Python<'_>,
    log: PyRef<'_, Log>,
    last_clean_offset: Option<i64>,
    high_watermark: Option<i64>,
    now_ms: Option<i64>,
) -> PyResult<LogToClean> {
    let now = now_ms.unwrap_or_else(self::now_ms);
    let l = log.with(py, |l| {
        l.cleanable_offsets(last_clean_offset, high_watermark, now)
    })?;
    Ok(l.into())
}

/// Clean (compact) `log` once: keep the newest record per key below the first uncleanable
/// offset, drop tombstones past their delete horizon. The returned stats' `end_offset` is the
/// new checkpoint. Runs with the GIL released; the log stays usable meanwhile. Raises
/// INVALID_REQUEST if the log is already being cleaned, INVALID_CONFIG if the offset map
/// cannot hold one batch, KAFKA_STORAGE_ERROR on disk errors or a closed log.
#[pyfunction]
#[pyo3(signature = (log, config, *, last_clean_offset = None, high_watermark = None,
    now_ms = None, abort = None))]
fn clean_log(
    py: Python<'_>,
    log: PyRef<'_, Log>,
    config: PyRef<'_, CleanerConfig>,
    last_clean_offset: Option<i64>,
    high_watermark: Option<i64>,
    now_ms: Option<i64>,
    abort: Option<PyRef<'_, CleaningAbort>>,
) -> PyResult<CleanerStats> {
    let now = now_ms.unwrap_or_else(self::now_ms);
    let cfg = config.inner.clone();
    let abort = abort.map(|a| a.inner.clone()).unwrap_or_default();
    let plan = log.with(py, |l| {
        l.begin_cleaning(last_clean_offset, high_watermark, now)
    })?;
    let result = (|| -> PyResult<CoreStats> {
        let mut job = py
            .allow_threads(|| CleaningJob::new(plan, &cfg, abort))
            .py()?;
        loop {
            let next = py.allow_threads(|| job.next_group()).py()?;
            let Some(group) = next else { break };
            // A closed log drops the group, which deletes its files.
            let swapped = log.with(py, move |l| l.replace_segments(group))?;
            job.on_replaced(swapped);
        }
        Ok(job.finish())
    })();
    // Whatever happened; a log closed meanwhile has nothing to reset.
    let _ = log.with(py, |l| {
        l.end_cleaning();
        Ok(())
    });
    result.map(CleanerStats::from)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CleanerConfig>()?;
    m.add_class::<LogToClean>()?;
    m.add_class::<CleanerStats>()?;
    m.add_class::<CleaningAbort>()?;
    m.add_function(wrap_pyfunction!(cleanable_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(clean_log, m)?)?;
    Ok(())
}
