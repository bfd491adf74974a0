//! The consumer's record type and its decoder: fetched RecordBatch v2 bytes straight to
//! `ConsumerRecord` objects, so a consumer makes one Python call per partition fetch rather
//! than one per record.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use rillet_core::record::batch::decode_batches_up_to;
use rillet_core::record::control::ControlRecordType;
use rillet_core::record::txn_filter::AbortedTxnFilter;
use rillet_core::record::TimestampType;

use crate::errors::IntoPyResult;
use crate::gil;
use crate::producer_state::AbortedTransaction;

/// A read_committed consumer's view of one fetched partition's aborted transactions (the
/// read_committed half of Kafka's `CompletedFetch`): give it to every
/// `decode_consumer_records` call over that fetch's batches, in order, and the batches of
/// aborted transactions are left out (a producer's transactional batches from its aborted
/// transaction's first offset until its ABORT marker). Its state carries from call to call:
/// one filter per fetched partition response.
#[pyclass(module = "rillet._core")]
pub struct AbortedTransactionFilter {
    inner: AbortedTxnFilter,
}

#[pymethods]
impl AbortedTransactionFilter {
    #[new]
    fn new(aborted_transactions: Vec<PyRef<'_, AbortedTransaction>>) -> Self {
        AbortedTransactionFilter {
            inner: AbortedTxnFilter::new(
                aborted_transactions
                    .iter()
                    .map(|t| (t.producer_id, t.first_offset)),
            ),
        }
    }

    fn __repr__(&self) -> String {
        format!("AbortedTransactionFilter(empty={})", self.inner.is_empty())
    }
}

/// One fetched record, with kafka-python's field names. `timestamp_type` is 0 (CreateTime)
/// or 1 (LogAppendTime); `checksum` is always None (RecordBatch v2 has one CRC per batch).
/// `key`, `value` and `headers` are writable so a deserializer can replace them.
#[pyclass(module = "rillet._core")]
pub struct ConsumerRecord {
    #[pyo3(get)]
    topic: Py<PyString>,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    leader_epoch: Option<i32>,
    #[pyo3(get)]
    offset: i64,
    #[pyo3(get)]
    timestamp: i64,
    #[pyo3(get)]
    timestamp_type: i32,
    #[pyo3(get, set)]
    key: PyObject,
    #[pyo3(get, set)]
    value: PyObject,
    /// A record without headers gets its (empty) list when first asked: most have none, and
    /// a list for each would cost an allocation and garbage-collector work per record.
    headers: Option<PyObject>,
    #[pyo3(get)]
    checksum: Option<i64>,
    #[pyo3(get)]
    serialized_key_size: i64,
    #[pyo3(get)]
    serialized_value_size: i64,
    #[pyo3(get)]
    serialized_header_size: i64,
}

#[pymethods]
impl ConsumerRecord {
    /// [(key, value)], key a str and value bytes or None.
    #[getter]
    fn headers(&mut self, py: Python<'_>) -> PyObject {
        self.headers
            .get_or_insert_with(|| PyList::empty(py).into_any().unbind())
            .clone_ref(py)
    }

    #[setter]
    fn set_headers(&mut self, headers: PyObject) {
        self.headers = Some(headers);
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ConsumerRecord(topic={}, partition={}, leader_epoch={}, offset={}, timestamp={}, \
             timestamp_type={}, key={}, value={}, headers={}, checksum=None, \
             serialized_key_size={}, serialized_value_size={}, serialized_header_size={})",
            self.topic.bind(py).repr()?,
            self.partition,
            self.leader_epoch
                .map_or_else(|| "None".to_string(), |e| e.to_string()),
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key.bind(py).repr()?,
            self.value.bind(py).repr()?,
            self.headers.as_ref().map_or(Ok("[]".into()), |h| h
                .bind(py)
                .repr()
                .map(|r| r.to_string()))?,
            self.serialized_key_size,
            self.serialized_value_size,
            self.serialized_header_size,
        ))
    }
}

/// Decode fetched batches in bytes `start..end` of `data` (to its end by default; a fetch
/// response read with `decode_fetch_response` gives the range) into records at or after
/// `from_offset`, skipping control batches and, with `aborted` (a read_committed fetch),
/// the batches of aborted transactions; stopping after the batch that reaches
/// `max_records` (whole batches only, so a compressed batch is decompressed once). Returns
/// them as `DecodedRecords`, with where to go on from (past skipped batches too).
/// A trailing partial batch is ignored, as a size-limited fetch may return one; a corrupt
/// batch raises CorruptRecordError.
#[pyfunction]
#[pyo3(signature = (data, topic, partition, from_offset, *, verify_crc = true, start = 0,
    end = None, max_records = None, aborted = None))]
#[allow(clippy::too_many_arguments)]
fn decode_consumer_records(
    py: Python<'_>,
    data: &[u8],
    topic: Bound<'_, PyString>,
    partition: i32,
    from_offset: i64,
    verify_crc: bool,
    start: usize,
    end: Option<usize>,
    max_records: Option<usize>,
    aborted: Option<Bound<'_, AbortedTransactionFilter>>,
) -> PyResult<DecodedRecords> {
    let mut filter = aborted.as_ref().map(|f| f.try_borrow_mut()).transpose()?;
    let end = end.unwrap_or(data.len()).min(data.len());
    let data = data.get(start..end).unwrap_or_default();
    let limit = max_records.unwrap_or(usize::MAX);
    let batches = gil::run(py, data.len() > gil::RELEASE_DECODE_ABOVE_BYTES, || {
        decode_batches_up_to(data, verify_crc, true, limit)
    })
    .py()?;
    let decoded_to = batches
        .last()
        .map_or(0, |b| b.position + b.header.size_in_bytes());
    let topic = topic.unbind();
    let out = PyList::empty(py);
    let mut next = from_offset;
    for b in &batches {
        let h = &b.header;
        next = next.max(h.last_offset() + 1);
        // The filter sees every batch in order, those below `from_offset` included.
        if let Some(f) = filter.as_mut() {
            if h.is_control() {
                let control_type = b.records.first().and_then(|span| {
                    ControlRecordType::parse(span.resolve(h, b.records_buf(data)).key).ok()
                });
                f.inner.on_control_batch(h, control_type);
                continue;
            }
            if f.inner.is_aborted(h) {
                continue;
            }
        }
        if h.is_control() || h.last_offset() < from_offset {
            continue;
        }
        let ts_type = match h.timestamp_type() {
            TimestampType::CreateTime => 0,
            TimestampType::LogAppendTime => 1,
        };
        let epoch = (h.partition_leader_epoch >= 0).then_some(h.partition_leader_epoch);
        let buf = b.records_buf(data);
        for span in &b.records {
            let r = span.resolve(h, buf);
            if r.offset < from_offset {
                continue;
            }
            let mut header_size = 0i64;
            let headers = if r.headers.is_empty() {
                None
            } else {
                let list = PyList::empty(py);
                for hd in &r.headers {
                    header_size += (hd.key.len() + hd.value.map_or(0, <[u8]>::len)) as i64;
                    let k = PyString::new(py, &String::from_utf8_lossy(hd.key)).into_any();
                    let v = hd.value.map_or_else(
                        || py.None().into_bound(py),
                        |v| PyBytes::new(py, v).into_any(),
                    );
                    list.append(PyTuple::new(py, [k, v])?)?;
                }
                Some(list.into_any().unbind())
            };
            let bytes_or_none = |b: Option<&[u8]>| -> PyObject {
                b.map_or_else(|| py.None(), |b| PyBytes::new(py, b).into_any().unbind())
            };
            let rec = ConsumerRecord {
                topic: topic.clone_ref(py),
                partition,
                leader_epoch: epoch,
                offset: r.offset,
                timestamp: r.timestamp,
                timestamp_type: ts_type,
                key: bytes_or_none(r.key),
                value: bytes_or_none(r.value),
                headers,
                checksum: None,
                serialized_key_size: r.key.map_or(-1, |k| k.len() as i64),
                serialized_value_size: r.value.map_or(-1, |v| v.len() as i64),
                serialized_header_size: header_size,
            };
            out.append(Py::new(py, rec)?)?;
        }
    }
    Ok(DecodedRecords {
        records: out.unbind(),
        next_offset: next,
        end: start + decoded_to,
    })
}

/// What `decode_consumer_records` decoded: the records, the offset to fetch next (after
/// the last decoded batch; `from_offset` when none was) and the byte position after the
/// last decoded batch (`start` when none was).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct DecodedRecords {
    records: Py<PyList>,
    next_offset: i64,
    end: usize,
}

#[pymethods]
impl DecodedRecords {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "DecodedRecords(records=<{} records>, next_offset={}, end={})",
            self.records.bind(py).len(),
            self.next_offset,
            self.end
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumerRecord>()?;
    m.add_class::<DecodedRecords>()?;
    m.add_class::<AbortedTransactionFilter>()?;
    m.add_function(wrap_pyfunction!(decode_consumer_records, m)?)?;
    Ok(())
}
