use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rillet_core::record::accumulator::{AccumulatorConfig, RecordAccumulator as Core};
use rillet_core::record::Compression;

use crate::errors::IntoPyResult;
use crate::gil;
use crate::record::parse_compression;

/// (partition, batch id, records, record count, reserved bytes)
type Drained<'py> = (u32, u64, Bound<'py, PyBytes>, i32, usize);

/// The producer's per-partition batching (`batch.size`, `linger.ms`, `buffer.memory`,
/// `compression.type`) in Rust. Partitions are small integers the producer assigns.
/// Thread safe: `send()` callers and the sender thread share it.
#[pyclass(module = "rillet._core", frozen)]
pub struct RecordAccumulator {
    inner: Mutex<Core>,
    /// Closing a compressed batch is worth releasing the GIL for; copying an uncompressed
    /// one is not (see `gil`).
    compressed: bool,
}

#[pymethods]
impl RecordAccumulator {
    #[new]
    #[pyo3(signature = (*, batch_size = 16384, linger_ms = 5, buffer_memory = 33554432, compression = "none"))]
    fn new(
        batch_size: usize,
        linger_ms: i64,
        buffer_memory: usize,
        compression: &str,
    ) -> PyResult<Self> {
        let compression = parse_compression(compression)?;
        let config = AccumulatorConfig {
            batch_size,
            linger_ms,
            buffer_memory,
            compression,
        };
        Ok(RecordAccumulator {
            inner: Mutex::new(Core::new(config).py()?),
            compressed: compression != Compression::None,
        })
    }

    /// Append a record. Returns (batch_id, index in batch, batch_full, new_batch), or None
    /// when `buffer.memory` is exhausted (wait for sent batches to be released, retry).
    #[pyo3(signature = (partition, timestamp, key, value, headers = None, *, now_ms))]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        partition: u32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Option<Vec<(String, Option<Vec<u8>>)>>,
        now_ms: i64,
    ) -> PyResult<Option<(u64, i32, bool, bool)>> {
        let owned = headers.unwrap_or_default();
        let hs: Vec<(&[u8], Option<&[u8]>)> = owned
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        let r = self
            .inner
            .lock()
            .append(partition, timestamp, key, value, &hs, now_ms)
            .py()?;
        Ok(r.map(|r| (r.batch_id, r.index, r.batch_full, r.new_batch)))
    }

    /// (partitions with a batch to send, ms until the next lingers out or None).
    #[pyo3(signature = (now_ms, flush = false))]
    fn ready(&self, now_ms: i64, flush: bool) -> (Vec<u32>, Option<i64>) {
        self.inner.lock().ready(now_ms, flush)
    }

    /// Close and take the oldest batch of each partition, up to `max_bytes` in all (one at
    /// least): [(partition, batch_id, records bytes, record count, reserved bytes)].
    fn drain<'py>(
        &self,
        py: Python<'py>,
        partitions: Vec<u32>,
        max_bytes: usize,
    ) -> PyResult<Vec<Drained<'py>>> {
        let drained = gil::run(py, self.compressed, || {
            self.inner.lock().drain(&partitions, max_bytes)
        })
        .py()?;
        Ok(drained
            .into_iter()
            .map(|d| {
                (
                    d.partition,
                    d.batch_id,
                    PyBytes::new(py, &d.records),
                    d.record_count,
                    d.reserved,
                )
            })
            .collect())
    }

    /// Give back the memory of a sent or failed batch.
    fn release(&self, reserved: usize) {
        self.inner.lock().release(reserved)
    }

    /// Drop every unsent batch; returns their ids.
    fn abort_all(&self) -> Vec<u64> {
        self.inner.lock().abort_all()
    }

    #[getter]
    fn used_memory(&self) -> usize {
        self.inner.lock().used_memory()
    }

    #[getter]
    fn pending_batches(&self) -> usize {
        self.inner.lock().pending_batches()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordAccumulator>()
}
