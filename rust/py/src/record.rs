use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use rillet_core::record::batch::{
    decode_batches as core_decode, validate_batches, BatchHeader, DecodedBatch,
};
use rillet_core::record::{BatchBuilder as CoreBuilder, Compression, TimestampType};

use crate::errors::{invalid_request, to_py, IntoPyResult};
use crate::gil;

/// Largest single key, value or header the builder takes (a record batch length is an int32).
const MAX_FIELD_BYTES: usize = (1 << 30) - 1;

pub(crate) fn parse_compression(name: &str) -> PyResult<Compression> {
    Compression::from_name(name).map_err(to_py)
}

pub(crate) fn parse_timestamp_type(name: &str) -> PyResult<TimestampType> {
    match name {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        other => Err(to_py(rillet_core::Error::InvalidConfig(format!(
            "message.timestamp.type must be CreateTime or LogAppendTime, got {other:?}"
        )))),
    }
}

fn checked(b: Option<&[u8]>, what: &str) -> PyResult<()> {
    match b {
        Some(b) if b.len() > MAX_FIELD_BYTES => Err(invalid_request(format!(
            "record {what} of {} bytes is too large",
            b.len()
        ))),
        _ => Ok(()),
    }
}

/// Builds one RecordBatch v2 at a time. `append` adds a record (well under a microsecond);
/// `append_values` adds many in one call; `build` returns the batch bytes and resets.
#[pyclass(module = "rillet._core")]
pub struct BatchBuilder {
    inner: CoreBuilder,
}

#[pymethods]
impl BatchBuilder {
    #[new]
    #[pyo3(signature = (compression = "none", *, base_offset = 0, partition_leader_epoch = -1,
        producer_id = -1, producer_epoch = -1, base_sequence = -1, is_transactional = false,
        is_control = false, timestamp_type = "CreateTime"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        compression: &str,
        base_offset: i64,
        partition_leader_epoch: i32,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        is_transactional: bool,
        is_control: bool,
        timestamp_type: &str,
    ) -> PyResult<Self> {
        if base_offset < 0 {
            return Err(invalid_request(format!(
                "base_offset must be >= 0, got {base_offset}"
            )));
        }
        let mut inner = CoreBuilder::new(parse_compression(compression)?);
        inner
            .base_offset(base_offset)
            .partition_leader_epoch(partition_leader_epoch)
            .producer(producer_id, producer_epoch, base_sequence)
            .transactional(is_transactional)
            .control(is_control)
            .timestamp_type(parse_timestamp_type(timestamp_type)?);
        Ok(BatchBuilder { inner })
    }

    /// Append one record; returns its offset delta in the batch.
    #[pyo3(signature = (timestamp, key, value, headers = None))]
    fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Option<Vec<(String, Option<Vec<u8>>)>>,
    ) -> PyResult<i32> {
        checked(key, "key")?;
        checked(value, "value")?;
        let owned = headers.unwrap_or_default();
        let hs: Vec<(&[u8], Option<&[u8]>)> = owned
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        for (k, v) in &hs {
            checked(Some(k), "header key")?;
            checked(*v, "header value")?;
        }
        let grown =
            self.inner.uncompressed_size() + self.inner.record_size(timestamp, key, value, &hs);
        if grown > i32::MAX as usize {
            return Err(invalid_request(format!(
                "a record batch cannot exceed {} bytes",
                i32::MAX
            )));
        }
        Ok(self.inner.append(timestamp, key, value, &hs))
    }

    /// Append many records with one timestamp (and optional keys); returns how many.
    #[pyo3(signature = (values, timestamp, keys = None))]
    fn append_values(
        &mut self,
        py: Python<'_>,
        values: Vec<Option<Bound<'_, PyBytes>>>,
        timestamp: i64,
        keys: Option<Vec<Option<Bound<'_, PyBytes>>>>,
    ) -> PyResult<usize> {
        if let Some(k) = &keys {
            if k.len() != values.len() {
                return Err(invalid_request(format!(
                    "{} keys for {} values",
                    k.len(),
                    values.len()
                )));
            }
        }
        // `bytes` are immutable and held alive by `values`/`keys`, so their slices can be
        // read with the GIL released.
        let vs: Vec<Option<&[u8]>> = values
            .iter()
            .map(|v| v.as_ref().map(|b| b.as_bytes()))
            .collect();
        let ks: Vec<Option<&[u8]>> = match &keys {
            Some(k) => k.iter().map(|v| v.as_ref().map(|b| b.as_bytes())).collect(),
            None => vec![None; vs.len()],
        };
        let mut grown = self.inner.uncompressed_size();
        for (k, v) in ks.iter().zip(&vs) {
            checked(*k, "key")?;
            checked(*v, "value")?;
            grown += k.map_or(0, <[u8]>::len) + v.map_or(0, <[u8]>::len) + 32;
        }
        if grown > i32::MAX as usize {
            return Err(invalid_request(format!(
                "a record batch cannot exceed {} bytes",
                i32::MAX
            )));
        }
        let inner = &mut self.inner;
        py.allow_threads(|| {
            for (k, v) in ks.iter().zip(&vs) {
                inner.append(timestamp, *k, *v, &[]);
            }
        });
        Ok(vs.len())
    }

    /// Bytes the batch would take uncompressed, header included.
    fn estimated_size(&self) -> usize {
        self.inner.uncompressed_size()
    }

    fn __len__(&self) -> usize {
        self.inner.record_count() as usize
    }

    #[getter]
    fn compression(&self) -> &'static str {
        self.inner.compression().name()
    }

    /// Finish the batch (compressing with the GIL released) and reset the builder.
    fn build<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let big = inner.uncompressed_size() > gil::RELEASE_DECODE_ABOVE_BYTES;
        let bytes = gil::run(py, big, || inner.build()).py()?;
        Ok(PyBytes::new(py, &bytes))
    }
}

/// One record of a decoded batch.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct Record {
    offset: i64,
    timestamp: i64,
    attributes: i8,
    key: Option<Py<PyBytes>>,
    value: Option<Py<PyBytes>>,
    headers: Py<PyList>,
}

#[pymethods]
impl Record {
    fn __repr__(&self, py: Python<'_>) -> String {
        let show = |b: &Option<Py<PyBytes>>| match b {
            None => "None".to_string(),
            Some(b) => format!("{:?}", String::from_utf8_lossy(b.bind(py).as_bytes())),
        };
        format!(
            "Record(offset={}, timestamp={}, key={}, value={})",
            self.offset,
            self.timestamp,
            show(&self.key),
            show(&self.value)
        )
    }
}

/// A decoded batch: its header fields and its records.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct RecordBatch {
    base_offset: i64,
    last_offset: i64,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    attributes: i16,
    compression: &'static str,
    timestamp_type: &'static str,
    is_transactional: bool,
    is_control: bool,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
    size_in_bytes: usize,
    records: Py<PyList>,
}

#[pymethods]
impl RecordBatch {
    fn __repr__(&self) -> String {
        format!(
            "RecordBatch(base_offset={}, last_offset={}, count={}, compression={}, size={})",
            self.base_offset,
            self.last_offset,
            self.record_count,
            self.compression,
            self.size_in_bytes
        )
    }
}

fn header_fields(h: &BatchHeader, records: Py<PyList>) -> RecordBatch {
    RecordBatch {
        base_offset: h.base_offset,
        last_offset: h.last_offset(),
        partition_leader_epoch: h.partition_leader_epoch,
        magic: h.magic,
        crc: h.crc,
        attributes: h.attributes,
        compression: h.compression().name(),
        timestamp_type: h.timestamp_type().name(),
        is_transactional: h.is_transactional(),
        is_control: h.is_control(),
        base_timestamp: h.base_timestamp,
        max_timestamp: h.max_timestamp,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        record_count: h.record_count,
        size_in_bytes: h.size_in_bytes(),
        records,
    }
}

fn to_python_batch(py: Python<'_>, b: &DecodedBatch, source: &[u8]) -> PyResult<RecordBatch> {
    let buf = b.records_buf(source);
    let records = PyList::empty(py);
    for span in &b.records {
        let r = span.resolve(&b.header, buf);
        let headers = PyList::empty(py);
        for h in &r.headers {
            let k = PyString::new(py, &String::from_utf8_lossy(h.key));
            let v = h.value.map(|v| PyBytes::new(py, v));
            headers.append(PyTuple::new(
                py,
                [
                    k.into_any(),
                    v.map_or_else(|| py.None().into_bound(py), |v| v.into_any()),
                ],
            )?)?;
        }
        let rec = Record {
            offset: r.offset,
            timestamp: r.timestamp,
            attributes: r.attributes,
            key: r.key.map(|k| PyBytes::new(py, k).unbind()),
            value: r.value.map(|v| PyBytes::new(py, v).unbind()),
            headers: headers.unbind(),
        };
        records.append(Py::new(py, rec)?)?;
    }
    Ok(header_fields(&b.header, records.unbind()))
}

/// Decode every batch in `data`, validating headers, CRCs (unless `verify_crc` is false),
/// decompressing and parsing every record. With `allow_partial`, a trailing partial batch
/// (as a size-limited fetch can return) is ignored instead of refused.
#[pyfunction]
#[pyo3(signature = (data, *, verify_crc = true, allow_partial = false))]
fn decode_batches(
    py: Python<'_>,
    data: &[u8],
    verify_crc: bool,
    allow_partial: bool,
) -> PyResult<Vec<RecordBatch>> {
    let decoded = gil::run(py, data.len() > gil::RELEASE_DECODE_ABOVE_BYTES, || {
        core_decode(data, verify_crc, allow_partial)
    })
    .py()?;
    decoded
        .iter()
        .map(|b| to_python_batch(py, b, data))
        .collect()
}

/// Where one batch is and what it holds, as `validate_record_batches` found it.
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(PartialEq)]
pub struct BatchSpan {
    /// Byte position of the batch in the data.
    position: usize,
    base_offset: i64,
    last_offset: i64,
    record_count: i32,
}

#[pymethods]
impl BatchSpan {
    #[new]
    fn new(position: usize, base_offset: i64, last_offset: i64, record_count: i32) -> Self {
        BatchSpan {
            position,
            base_offset,
            last_offset,
            record_count,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "BatchSpan(position={}, base_offset={}, last_offset={}, record_count={})",
            self.position, self.base_offset, self.last_offset, self.record_count
        )
    }
}

/// Validate the batches in `data` (header sanity and CRC) without parsing records.
#[pyfunction]
fn validate_record_batches(py: Python<'_>, data: &[u8]) -> PyResult<Vec<BatchSpan>> {
    let v = gil::run(py, data.len() > gil::RELEASE_ABOVE_BYTES, || {
        validate_batches(data)
    })
    .py()?;
    Ok(v.into_iter()
        .map(|(position, h)| BatchSpan {
            position,
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            record_count: h.record_count,
        })
        .collect())
}

/// CRC-32C (Castagnoli) of `data`.
#[pyfunction]
fn crc32c(py: Python<'_>, data: &[u8]) -> u32 {
    gil::run(py, data.len() > gil::RELEASE_ABOVE_BYTES, || {
        rillet_core::record::crc32c(data)
    })
}

/// Kafka's murmur2 hash of `data` (the signed 32-bit value Java's `Utils.murmur2` returns).
#[pyfunction]
fn murmur2(data: &[u8]) -> i32 {
    rillet_client::murmur2::murmur2(data)
}

/// The partition Kafka's default partitioner picks for `key` among `num_partitions`.
#[pyfunction]
fn partition_for_key(key: &[u8], num_partitions: u32) -> PyResult<u32> {
    if num_partitions == 0 {
        return Err(invalid_request("a topic has at least one partition"));
    }
    Ok(rillet_client::murmur2::partition_for_key(
        key,
        num_partitions,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(partition_for_key, m)?)?;
    m.add_class::<BatchBuilder>()?;
    m.add_class::<Record>()?;
    m.add_class::<RecordBatch>()?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_class::<BatchSpan>()?;
    m.add_function(wrap_pyfunction!(validate_record_batches, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    Ok(())
}
