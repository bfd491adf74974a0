use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rillet_core::log::{
    read_offset_checkpoint as core_read_cp, write_offset_checkpoint as core_write_cp, AppendOrigin,
    CheckpointEntry, FetchDataInfo as CoreFetch, Log as CoreLog, LogAppendInfo as CoreAppendInfo,
    LogConfig as CoreConfig, OpenOptions, RecoveryInfo as CoreRecovery,
};
use rillet_core::Error;

use crate::bytes::BytesArg;
use crate::errors::{invalid_request, to_py, IntoPyResult};
use crate::gil;
use crate::io::{read_regions, read_regions_into, FileRegion};
use crate::producer_state::AbortedTransaction;
use crate::producer_state::ProducerStateEntry;
use crate::record::parse_timestamp_type;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Topic-level log settings (Kafka's `segment.bytes`, `retention.ms`, ... as attributes).
#[pyclass(module = "rillet._core", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct LogConfig {
    pub(crate) inner: CoreConfig,
}

#[pymethods]
impl LogConfig {
    #[new]
    #[pyo3(signature = (*, segment_bytes = 1 << 30, segment_ms = 604_800_000, segment_jitter_ms = 0,
        segment_index_bytes = 10 << 20, index_interval_bytes = 4096, max_message_bytes = 1_048_588,
        retention_ms = 604_800_000, retention_bytes = -1, message_timestamp_type = "CreateTime",
        compact = false, delete_retention_ms = 86_400_000, min_compaction_lag_ms = 0,
        max_compaction_lag_ms = i64::MAX, min_cleanable_dirty_ratio = 0.5,
        producer_id_expiration_ms = 86_400_000))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        segment_bytes: i64,
        segment_ms: i64,
        segment_jitter_ms: i64,
        segment_index_bytes: i64,
        index_interval_bytes: i64,
        max_message_bytes: i64,
        retention_ms: i64,
        retention_bytes: i64,
        message_timestamp_type: &str,
        compact: bool,
        delete_retention_ms: i64,
        min_compaction_lag_ms: i64,
        max_compaction_lag_ms: i64,
        min_cleanable_dirty_ratio: f64,
        producer_id_expiration_ms: i64,
    ) -> PyResult<Self> {
        let non_neg = |name: &str, v: i64| -> PyResult<u64> {
            u64::try_from(v).map_err(|_| {
                to_py(Error::InvalidConfig(format!(
                    "{name} must be >= 0, got {v}"
                )))
            })
        };
        let inner = CoreConfig {
            segment_bytes: non_neg("segment.bytes", segment_bytes)?,
            segment_ms,
            segment_jitter_ms,
            segment_index_bytes: non_neg("segment.index.bytes", segment_index_bytes)?,
            index_interval_bytes: non_neg("index.interval.bytes", index_interval_bytes)?,
            max_message_bytes: non_neg("max.message.bytes", max_message_bytes)?,
            retention_ms,
            retention_bytes,
            message_timestamp_type: parse_timestamp_type(message_timestamp_type)?,
            compact,
            delete_retention_ms,
            min_compaction_lag_ms,
            max_compaction_lag_ms,
            min_cleanable_dirty_ratio,
            producer_id_expiration_ms,
        };
        inner.validate().py()?;
        Ok(LogConfig { inner })
    }

    /// This config with the broker's `producer.id.expiration.ms` (not a topic config, so
    /// the LogManager sets it on each topic's config).
    fn with_producer_id_expiration_ms(&self, producer_id_expiration_ms: i64) -> PyResult<Self> {
        let inner = CoreConfig {
            producer_id_expiration_ms,
            ..self.inner.clone()
        };
        inner.validate().py()?;
        Ok(LogConfig { inner })
    }

    #[getter]
    fn segment_bytes(&self) -> u64 {
        self.inner.segment_bytes
    }
    #[getter]
    fn segment_ms(&self) -> i64 {
        self.inner.segment_ms
    }
    #[getter]
    fn segment_jitter_ms(&self) -> i64 {
        self.inner.segment_jitter_ms
    }
    #[getter]
    fn segment_index_bytes(&self) -> u64 {
        self.inner.segment_index_bytes
    }
    #[getter]
    fn index_interval_bytes(&self) -> u64 {
        self.inner.index_interval_bytes
    }
    #[getter]
    fn max_message_bytes(&self) -> u64 {
        self.inner.max_message_bytes
    }
    #[getter]
    fn retention_ms(&self) -> i64 {
        self.inner.retention_ms
    }
    #[getter]
    fn retention_bytes(&self) -> i64 {
        self.inner.retention_bytes
    }
    #[getter]
    fn message_timestamp_type(&self) -> &'static str {
        self.inner.message_timestamp_type.name()
    }
    /// `cleanup.policy` holds `compact`.
    #[getter]
    fn compact(&self) -> bool {
        self.inner.compact
    }
    #[getter]
    fn delete_retention_ms(&self) -> i64 {
        self.inner.delete_retention_ms
    }
    #[getter]
    fn min_compaction_lag_ms(&self) -> i64 {
        self.inner.min_compaction_lag_ms
    }
    #[getter]
    fn max_compaction_lag_ms(&self) -> i64 {
        self.inner.max_compaction_lag_ms
    }
    #[getter]
    fn min_cleanable_dirty_ratio(&self) -> f64 {
        self.inner.min_cleanable_dirty_ratio
    }
    /// The broker's `producer.id.expiration.ms`.
    #[getter]
    fn producer_id_expiration_ms(&self) -> i64 {
        self.inner.producer_id_expiration_ms
    }

    fn __repr__(&self) -> String {
        format!("LogConfig({:?})", self.inner)
    }
}

/// What an append did (Kafka's `LogAppendInfo`). `first_offset` is the base offset of the
/// request's first batch, `last_offset` the largest offset answered for; when some batch was
/// a duplicate (an idempotent retry, not written again), `batch_base_offsets` holds each
/// request batch's base offset (the duplicate's original one), else it is None.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct LogAppendInfo {
    first_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    log_append_time: i64,
    log_start_offset: i64,
    record_count: i64,
    batch_count: usize,
    valid_bytes: u64,
    batch_base_offsets: Option<Vec<i64>>,
}

impl From<CoreAppendInfo> for LogAppendInfo {
    fn from(i: CoreAppendInfo) -> Self {
        LogAppendInfo {
            first_offset: i.first_offset,
            last_offset: i.last_offset,
            max_timestamp: i.max_timestamp,
            offset_of_max_timestamp: i.offset_of_max_timestamp,
            log_append_time: i.log_append_time,
            log_start_offset: i.log_start_offset,
            record_count: i.record_count,
            batch_count: i.batch_count,
            valid_bytes: i.valid_bytes,
            batch_base_offsets: i.batch_base_offsets,
        }
    }
}

#[pymethods]
impl LogAppendInfo {
    fn __repr__(&self) -> String {
        format!(
            "LogAppendInfo(first_offset={}, last_offset={}, record_count={})",
            self.first_offset, self.last_offset, self.record_count
        )
    }
}

/// What opening the log found and repaired.
#[pyclass(module = "rillet._core", frozen, get_all)]
#[derive(Clone)]
pub struct RecoveryInfo {
    recovered_segments: usize,
    recovered_bytes: u64,
    truncated_bytes: u64,
    deleted_segments: usize,
    rebuilt_indexes: usize,
}

impl From<CoreRecovery> for RecoveryInfo {
    fn from(r: CoreRecovery) -> Self {
        RecoveryInfo {
            recovered_segments: r.recovered_segments,
            recovered_bytes: r.recovered_bytes,
            truncated_bytes: r.truncated_bytes,
            deleted_segments: r.deleted_segments,
            rebuilt_indexes: r.rebuilt_indexes,
        }
    }
}

#[pymethods]
impl RecoveryInfo {
    fn __repr__(&self) -> String {
        format!(
            "RecoveryInfo(recovered_segments={}, recovered_bytes={}, truncated_bytes={}, deleted_segments={}, rebuilt_indexes={})",
            self.recovered_segments, self.recovered_bytes, self.truncated_bytes, self.deleted_segments, self.rebuilt_indexes
        )
    }
}

/// The result of a read: whole batches as file regions (Kafka's `FetchDataInfo`), and for a
/// read_committed read the aborted transactions overlapping them.
#[pyclass(module = "rillet._core", frozen)]
pub struct FetchDataInfo {
    pub(crate) inner: CoreFetch,
}

#[pymethods]
impl FetchDataInfo {
    /// The offset the read asked for.
    #[getter]
    fn fetch_offset(&self) -> i64 {
        self.inner.fetch_offset_metadata.message_offset
    }
    #[getter]
    fn segment_base_offset(&self) -> i64 {
        self.inner.fetch_offset_metadata.segment_base_offset
    }
    #[getter]
    fn relative_position(&self) -> u64 {
        self.inner.fetch_offset_metadata.relative_position
    }
    #[getter]
    fn regions(&self) -> Vec<FileRegion> {
        self.inner
            .regions
            .iter()
            .map(|r| FileRegion { inner: r.clone() })
            .collect()
    }
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size()
    }
    /// read_committed reads only: the aborted transactions overlapping the batches (None
    /// for other reads).
    #[getter]
    fn aborted_transactions(&self) -> Option<Vec<AbortedTransaction>> {
        self.inner
            .aborted_transactions
            .as_ref()
            .map(|v| v.iter().map(AbortedTransaction::from).collect())
    }
    /// All regions' bytes, read into one `bytes` with the GIL released.
    fn read_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        read_regions(py, &self.inner.regions)
    }
    /// All regions' bytes, read into a writable buffer (no allocation); returns the count.
    fn read_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        read_regions_into(py, &self.inner.regions, buffer)
    }
    fn __repr__(&self) -> String {
        format!(
            "FetchDataInfo(fetch_offset={}, regions={}, size={})",
            self.fetch_offset(),
            self.inner.regions.len(),
            self.size()
        )
    }
}

/// One segment as the log sees it.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct SegmentInfo {
    base_offset: i64,
    size: u64,
    path: PathBuf,
    max_timestamp: i64,
    index_entries: usize,
    time_index_entries: usize,
}

#[pymethods]
impl SegmentInfo {
    fn __repr__(&self) -> String {
        format!(
            "SegmentInfo(base_offset={}, size={})",
            self.base_offset, self.size
        )
    }
}

/// ListOffsets by timestamp's answer (Kafka's `TimestampAndOffset`): the first record at or
/// after the wanted time, and the leader epoch of its batch (None when unknown).
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct TimestampAndOffset {
    timestamp: i64,
    offset: i64,
    leader_epoch: Option<i32>,
}

#[pymethods]
impl TimestampAndOffset {
    #[new]
    #[pyo3(signature = (timestamp, offset, leader_epoch = None))]
    fn new(timestamp: i64, offset: i64, leader_epoch: Option<i32>) -> Self {
        TimestampAndOffset {
            timestamp,
            offset,
            leader_epoch,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "TimestampAndOffset(timestamp={}, offset={}, leader_epoch={:?})",
            self.timestamp, self.offset, self.leader_epoch
        )
    }
}

/// One entry of the leader-epoch cache: `epoch` started at `start_offset`.
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct EpochEntry {
    epoch: i32,
    start_offset: i64,
}

#[pymethods]
impl EpochEntry {
    #[new]
    fn new(epoch: i32, start_offset: i64) -> Self {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "EpochEntry(epoch={}, start_offset={})",
            self.epoch, self.start_offset
        )
    }
}

/// OffsetsForLeaderEpoch's answer (Kafka's `EpochEndOffset`): the largest epoch at or below
/// the one asked for, and the offset where it ends (-1, -1 when there is none).
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct EpochEndOffset {
    epoch: i32,
    end_offset: i64,
}

#[pymethods]
impl EpochEndOffset {
    #[new]
    fn new(epoch: i32, end_offset: i64) -> Self {
        EpochEndOffset { epoch, end_offset }
    }

    fn __repr__(&self) -> String {
        format!(
            "EpochEndOffset(epoch={}, end_offset={})",
            self.epoch, self.end_offset
        )
    }
}

/// One line of a Kafka offset checkpoint file (`recovery-point-offset-checkpoint`, ...).
#[pyclass(module = "rillet._core", frozen, get_all, eq, name = "CheckpointEntry")]
#[derive(PartialEq)]
pub struct PyCheckpointEntry {
    topic: String,
    partition: i32,
    offset: i64,
}

#[pymethods]
impl PyCheckpointEntry {
    #[new]
    fn new(topic: String, partition: i32, offset: i64) -> Self {
        PyCheckpointEntry {
            topic,
            partition,
            offset,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "CheckpointEntry(topic={:?}, partition={}, offset={})",
            self.topic, self.partition, self.offset
        )
    }
}

/// A partition log on disk. Thread safe: calls are serialized by an internal lock that is
/// taken with the GIL released; disk work happens without the GIL.
#[pyclass(module = "rillet._core", frozen)]
pub struct Log {
    inner: Mutex<Option<CoreLog>>,
    recovery: RecoveryInfo,
    dir: PathBuf,
}

impl Log {
    /// Run `f` on the log with the GIL held when the log's lock is free (the common case:
    /// most calls take microseconds, less than getting the GIL back would cost; see `gil`),
    /// else wait for the lock with the GIL released.
    fn with_gil<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreLog) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let Some(mut guard) = self.inner.try_lock() else {
            return self.with(py, f);
        };
        self.apply(&mut guard, f).py()
    }

    /// `f` on the open log, or KafkaStorageError once it is closed.
    fn apply<T>(
        &self,
        log: &mut Option<CoreLog>,
        f: impl FnOnce(&mut CoreLog) -> Result<T, Error>,
    ) -> Result<T, Error> {
        match log.as_mut() {
            Some(log) => f(log),
            None => Err(Error::storage(
                format!("log {}", self.dir.display()),
                std::io::Error::other("the log is closed"),
            )),
        }
    }

    /// `with_gil` for work on up to `gil::RELEASE_ABOVE_BYTES`, `with` above.
    fn with_for<T: Send>(
        &self,
        py: Python<'_>,
        bytes: usize,
        f: impl FnOnce(&mut CoreLog) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        if bytes > gil::RELEASE_ABOVE_BYTES {
            self.with(py, f)
        } else {
            self.with_gil(py, f)
        }
    }

    /// Run `f` on the log with the GIL released (disk syncs, file creation and deletion,
    /// large appends; the log cleaner's steps under the lock).
    pub(crate) fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreLog) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| self.apply(&mut self.inner.lock(), f))
            .py()
    }
}

#[pymethods]
impl Log {
    /// Open (and if needed recover) the log in `path`.
    #[staticmethod]
    #[pyo3(signature = (path, config = None, *, recovery_point = 0, log_start_offset = 0, clean_shutdown = false, now_ms = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        config: Option<LogConfig>,
        recovery_point: i64,
        log_start_offset: i64,
        clean_shutdown: bool,
        now_ms: Option<i64>,
    ) -> PyResult<Log> {
        let cfg = config.map(|c| c.inner).unwrap_or_default();
        let opts = OpenOptions {
            recovery_point,
            log_start_offset,
            clean_shutdown,
            now_ms: now_ms.unwrap_or_else(self::now_ms),
        };
        let dir = path.clone();
        let (log, info) = py.allow_threads(|| CoreLog::open(&path, cfg, opts)).py()?;
        Ok(Log {
            inner: Mutex::new(Some(log)),
            recovery: info.into(),
            dir,
        })
    }

    /// What the open recovered.
    #[getter]
    fn recovery_info(&self) -> RecoveryInfo {
        self.recovery.clone()
    }
    #[getter]
    fn dir(&self) -> PathBuf {
        self.dir.clone()
    }
    #[getter]
    fn log_start_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with_gil(py, |l| Ok(l.log_start_offset()))
    }
    #[getter]
    fn log_end_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with_gil(py, |l| Ok(l.log_end_offset()))
    }
    #[getter]
    fn recovery_point(&self, py: Python<'_>) -> PyResult<i64> {
        self.with_gil(py, |l| Ok(l.recovery_point()))
    }
    #[getter]
    fn active_segment_base_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with_gil(py, |l| Ok(l.active_segment_base_offset()))
    }
    #[getter]
    fn size_in_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_gil(py, |l| Ok(l.size_in_bytes()))
    }
    #[getter]
    fn config(&self, py: Python<'_>) -> PyResult<LogConfig> {
        self.with_gil(py, |l| {
            Ok(LogConfig {
                inner: l.config().clone(),
            })
        })
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().is_none()
    }

    fn update_config(&self, py: Python<'_>, config: LogConfig) -> PyResult<()> {
        self.with_gil(py, move |l| l.update_config(config.inner))
    }

    fn segments(&self, py: Python<'_>) -> PyResult<Vec<SegmentInfo>> {
        self.with_gil(py, |l| {
            Ok(l.segments()
                .map(|s| SegmentInfo {
                    base_offset: s.base_offset(),
                    size: s.size(),
                    path: s.log_path().to_path_buf(),
                    max_timestamp: s.max_timestamp_so_far(),
                    index_entries: s.offset_index().entries(),
                    time_index_entries: s.time_index().entries(),
                })
                .collect())
        })
    }

    /// Append producer batches: validated whole, offsets assigned, `leader_epoch` stamped.
    /// `origin` is "client", or "coordinator" for a coordinator of this broker (Kafka's
    /// `AppendOrigin.COORDINATOR`: the producer epoch is checked, sequences are not, so a
    /// transactional batch without a sequence is accepted).
    #[pyo3(signature = (records, leader_epoch = 0, *, now_ms = None, allow_control = false,
        origin = "client"))]
    fn append_as_leader(
        &self,
        py: Python<'_>,
        records: BytesArg<'_>,
        leader_epoch: i32,
        now_ms: Option<i64>,
        allow_control: bool,
        origin: &str,
    ) -> PyResult<LogAppendInfo> {
        let origin = match origin {
            "client" => AppendOrigin::Client,
            "coordinator" => AppendOrigin::Coordinator,
            other => {
                return Err(invalid_request(format!(
                    "origin must be 'client' or 'coordinator', got {other:?}"
                )))
            }
        };
        let now = now_ms.unwrap_or_else(self::now_ms);
        let records = records.as_slice();
        Ok(self
            .with_for(py, records.len(), |l| {
                l.append_as_leader(records, leader_epoch, now, allow_control, origin)
            })?
            .into())
    }

    /// Append batches replicated from a leader, keeping their offsets and epochs.
    #[pyo3(signature = (records, *, now_ms = None))]
    fn append_as_follower(
        &self,
        py: Python<'_>,
        records: BytesArg<'_>,
        now_ms: Option<i64>,
    ) -> PyResult<LogAppendInfo> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        let records = records.as_slice();
        Ok(self
            .with_for(py, records.len(), |l| l.append_as_follower(records, now))?
            .into())
    }

    /// Whole batches from `offset`, up to `max_bytes` (one batch at least with
    /// `min_one_batch`), none whose last offset reaches `max_offset`. With `read_committed`
    /// (the caller passes the last stable offset as `max_offset`) the result also lists the
    /// aborted transactions overlapping the batches.
    #[pyo3(signature = (offset, max_bytes, *, max_offset = None, min_one_batch = true,
        read_committed = false))]
    fn read(
        &self,
        py: Python<'_>,
        offset: i64,
        max_bytes: i64,
        max_offset: Option<i64>,
        min_one_batch: bool,
        read_committed: bool,
    ) -> PyResult<FetchDataInfo> {
        if max_bytes < 0 {
            return Err(invalid_request(format!(
                "max_bytes must be >= 0, got {max_bytes}"
            )));
        }
        let inner = self.with_gil(py, |l| {
            if read_committed {
                l.read_committed(offset, max_bytes as u64, max_offset, min_one_batch)
            } else {
                l.read(offset, max_bytes as u64, max_offset, min_one_batch)
            }
        })?;
        Ok(FetchDataInfo { inner })
    }

    /// The first offset of the oldest transaction still open, or whose marker the high
    /// watermark has not passed yet (Kafka's `firstUnstableOffset`); None when there is none.
    #[getter]
    fn first_unstable_offset(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.with_gil(py, |l| Ok(l.first_unstable_offset()))
    }

    /// The last stable offset given the partition's high watermark: min(first unstable
    /// offset, high watermark). Read_committed fetches read below it. Also records the high
    /// watermark (see `update_high_watermark`).
    fn last_stable_offset(&self, py: Python<'_>, high_watermark: i64) -> PyResult<i64> {
        self.with_gil(py, |l| {
            l.update_high_watermark(high_watermark);
            Ok(l.last_stable_offset(high_watermark))
        })
    }

    /// The partition's high watermark moved: completed transactions whose marker is below it
    /// stop holding the last stable offset back (Kafka's `onHighWatermarkUpdated`).
    fn update_high_watermark(&self, py: Python<'_>, high_watermark: i64) -> PyResult<()> {
        self.with_gil(py, |l| {
            l.update_high_watermark(high_watermark);
            Ok(())
        })
    }

    /// The aborted transactions overlapping `[start_offset, upper_bound_offset)`, from the
    /// segments' `.txnindex` files (Kafka's `collectAbortedTransactions`), in marker order.
    fn collect_aborted_transactions(
        &self,
        py: Python<'_>,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> PyResult<Vec<AbortedTransaction>> {
        let found = self.with_gil(py, |l| {
            Ok(l.collect_aborted_transactions(start_offset, upper_bound_offset))
        })?;
        Ok(found.iter().map(AbortedTransaction::from).collect())
    }

    /// ListOffsets by timestamp: the first record at or after `timestamp`; -2 earliest, -1
    /// latest, -3 the max timestamp. None if there is none.
    fn fetch_offset_by_timestamp(
        &self,
        py: Python<'_>,
        timestamp: i64,
    ) -> PyResult<Option<TimestampAndOffset>> {
        let r = self.with_gil(py, |l| l.fetch_offset_by_timestamp(timestamp))?;
        Ok(r.map(|t| TimestampAndOffset {
            timestamp: t.timestamp,
            offset: t.offset,
            leader_epoch: t.leader_epoch,
        }))
    }

    #[pyo3(signature = (offset, *, now_ms = None))]
    fn truncate_to(&self, py: Python<'_>, offset: i64, now_ms: Option<i64>) -> PyResult<bool> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        self.with(py, |l| l.truncate_to(offset, now))
    }

    #[pyo3(signature = (offset, *, now_ms = None))]
    fn truncate_fully_and_start_at(
        &self,
        py: Python<'_>,
        offset: i64,
        now_ms: Option<i64>,
    ) -> PyResult<()> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        self.with(py, |l| l.truncate_fully_and_start_at(offset, now))
    }

    fn maybe_increment_log_start_offset(&self, py: Python<'_>, offset: i64) -> PyResult<bool> {
        self.with(py, |l| l.maybe_increment_log_start_offset(offset))
    }

    /// Retention by time, size and log start offset; returns segments deleted.
    #[pyo3(signature = (*, now_ms = None, high_watermark = None))]
    fn delete_old_segments(
        &self,
        py: Python<'_>,
        now_ms: Option<i64>,
        high_watermark: Option<i64>,
    ) -> PyResult<usize> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        self.with(py, |l| l.delete_old_segments(now, high_watermark))
    }

    #[pyo3(signature = (*, now_ms = None))]
    fn roll(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<()> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        self.with(py, |l| l.roll(now))
    }

    /// fsync everything below `offset` (the log end by default); advances the recovery point.
    #[pyo3(signature = (offset = None))]
    fn flush(&self, py: Python<'_>, offset: Option<i64>) -> PyResult<()> {
        self.with(py, |l| {
            let o = offset.unwrap_or(l.log_end_offset());
            l.flush(o)
        })
    }

    /// The leader-epoch cache, oldest epoch first.
    fn leader_epoch_entries(&self, py: Python<'_>) -> PyResult<Vec<EpochEntry>> {
        self.with_gil(py, |l| {
            Ok(l.epoch_cache()
                .entries()
                .iter()
                .map(|e| EpochEntry {
                    epoch: e.epoch,
                    start_offset: e.start_offset,
                })
                .collect())
        })
    }

    fn latest_epoch(&self, py: Python<'_>) -> PyResult<Option<i32>> {
        self.with_gil(py, |l| Ok(l.epoch_cache().latest_epoch()))
    }

    /// Mark where leader epoch `epoch` starts (a new leader, at its log end offset).
    fn assign_epoch_start_offset(
        &self,
        py: Python<'_>,
        epoch: i32,
        start_offset: i64,
    ) -> PyResult<bool> {
        self.with(py, |l| l.assign_epoch_start_offset(epoch, start_offset))
    }

    /// The end of `epoch`: Kafka's OffsetsForLeaderEpoch answer.
    fn end_offset_for_epoch(&self, py: Python<'_>, epoch: i32) -> PyResult<EpochEndOffset> {
        self.with_gil(py, |l| {
            let (epoch, end_offset) = l.epoch_cache().end_offset_for(epoch, l.log_end_offset());
            Ok(EpochEndOffset { epoch, end_offset })
        })
    }

    /// Every producer the partition's producer state knows, by producer id.
    fn producer_state(&self, py: Python<'_>) -> PyResult<Vec<ProducerStateEntry>> {
        self.with_gil(py, |l| {
            Ok(l.producer_state()
                .producers()
                .values()
                .map(ProducerStateEntry::from)
                .collect())
        })
    }

    /// Write the producer state to `<log end offset>.snapshot`.
    fn take_producer_snapshot(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |l| l.take_producer_snapshot())
    }

    /// Forget the producers idle for `producer.id.expiration.ms` (the config's
    /// `producer_id_expiration_ms`) at `now_ms` (now by default), unless their transaction
    /// is open.
    #[pyo3(signature = (now_ms = None))]
    fn remove_expired_producers(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<()> {
        let now = now_ms.unwrap_or_else(self::now_ms);
        self.with_gil(py, |l| {
            l.remove_expired_producers(now);
            Ok(())
        })
    }

    /// Flush, snapshot the producer state, trim indexes and close; later calls raise
    /// KafkaStorageError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let mut guard = self.inner.lock();
            match guard.take() {
                Some(mut log) => log.close(),
                None => Ok(()),
            }
        })
        .py()
    }

    /// Close the log and remove its directory.
    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let mut guard = self.inner.lock();
            match guard.take() {
                Some(log) => log.delete(),
                None => std::fs::remove_dir_all(&self.dir)
                    .map_err(|e| Error::storage(format!("deleting {}", self.dir.display()), e)),
            }
        })
        .py()
    }

    fn __repr__(&self) -> String {
        format!("Log({:?})", self.dir)
    }
}

/// Read a Kafka offset checkpoint file. Missing = empty.
#[pyfunction]
fn read_offset_checkpoint(py: Python<'_>, path: PathBuf) -> PyResult<Vec<PyCheckpointEntry>> {
    let v = py.allow_threads(|| core_read_cp(&path)).py()?;
    Ok(v.into_iter()
        .map(|e| PyCheckpointEntry {
            topic: e.topic,
            partition: e.partition,
            offset: e.offset,
        })
        .collect())
}

/// Write a Kafka offset checkpoint file atomically.
#[pyfunction]
fn write_offset_checkpoint(
    py: Python<'_>,
    path: PathBuf,
    entries: Vec<PyRef<'_, PyCheckpointEntry>>,
) -> PyResult<()> {
    let entries: Vec<CheckpointEntry> = entries
        .iter()
        .map(|e| CheckpointEntry {
            topic: e.topic.clone(),
            partition: e.partition,
            offset: e.offset,
        })
        .collect();
    py.allow_threads(|| core_write_cp(&path, &entries)).py()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LogConfig>()?;
    m.add_class::<LogAppendInfo>()?;
    m.add_class::<RecoveryInfo>()?;
    m.add_class::<FetchDataInfo>()?;
    m.add_class::<SegmentInfo>()?;
    m.add_class::<Log>()?;
    m.add_class::<TimestampAndOffset>()?;
    m.add_class::<EpochEntry>()?;
    m.add_class::<EpochEndOffset>()?;
    m.add_class::<PyCheckpointEntry>()?;
    m.add_function(wrap_pyfunction!(read_offset_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(write_offset_checkpoint, m)?)?;
    Ok(())
}
