use std::mem::MaybeUninit;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use rillet_protocol::grpc::{
    FetchResponse, FetchedPartition, FetchedTopic, PartitionData, ProduceRequest,
    ProduceRequestView as CoreProduceRequestView, TopicData,
};

use rillet_core::record::batch::next_offset_after;
use rillet_protocol::kafka::{self, RequestHeader, Value};

use crate::accumulator::ClosedBatch;
use crate::bytes::new_bytes;
use crate::errors::IntoPyResult;
use crate::gil;
use crate::log::FetchDataInfo;
use crate::producer_state::AbortedTransaction;

/// Kafka's api key of Produce.
const PRODUCE_API_KEY: i16 = 0;

/// (topic, [(partition, [batch, ...])]) as Python passes it.
type TopicBatches = (String, Vec<(i32, Vec<Py<ClosedBatch>>)>);

/// The wire bytes of a `rillet.v1.ProduceRequest` carrying `topics`: [(topic, [(partition,
/// [ClosedBatch, ...])])], a partition's batches one after the other in its
/// `record_batches`. Each batch is copied once, into the returned bytes, with the GIL
/// released for large requests; a gRPC call sends them as they are.
#[pyfunction]
#[pyo3(signature = (acks, timeout_ms, topics, transactional_id = None))]
fn encode_produce_request<'py>(
    py: Python<'py>,
    acks: i32,
    timeout_ms: i32,
    topics: Vec<TopicBatches>,
    transactional_id: Option<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let request = ProduceRequest {
        acks,
        timeout_ms,
        transactional_id: transactional_id.as_deref(),
        topics: topics
            .iter()
            .map(|(name, partitions)| TopicData {
                name,
                partitions: partitions
                    .iter()
                    .map(|(partition, batches)| PartitionData {
                        partition: *partition,
                        record_batches: batches.iter().map(|b| &b.get().records[..]).collect(),
                    })
                    .collect(),
            })
            .collect(),
    };
    let len = request.encoded_len();
    new_bytes(py, len, |buf| {
        gil::run(py, len > gil::RELEASE_COPY_ABOVE_BYTES, || {
            request.encode_into(buf)
        });
        Ok(())
    })
}

/// A Kafka `Produce` request frame (api key 0 at `api_version`, size prefix included)
/// carrying `topics` as `encode_produce_request` takes them: each partition's batches are
/// its `records`, one after the other. The schema encoder writes everything but the
/// batches, which are then copied once, straight into the returned bytes (with the GIL
/// released for large requests).
#[pyfunction]
#[pyo3(signature = (
    api_version, correlation_id, client_id, acks, timeout_ms, topics, transactional_id = None
))]
#[allow(clippy::too_many_arguments)]
fn kafka_encode_produce_request<'py>(
    py: Python<'py>,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<String>,
    acks: i16,
    timeout_ms: i32,
    topics: Vec<TopicBatches>,
    transactional_id: Option<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let batches: Vec<&[u8]> = topics
        .iter()
        .flat_map(|(_, partitions)| partitions.iter())
        .flat_map(|(_, batches)| batches.iter().map(|b| &b.get().records[..]))
        .collect();
    let topic_data = topics
        .iter()
        .map(|(name, partitions)| {
            let partition_data = partitions
                .iter()
                .map(|(index, batches)| {
                    let len = batches.iter().map(|b| b.get().records.len()).sum();
                    Value::Struct(vec![
                        ("index", Value::Int((*index).into())),
                        ("records", Value::Spliced(len)),
                    ])
                })
                .collect();
            Value::Struct(vec![
                ("name", Value::Str(name.clone())),
                ("partition_data", Value::Array(partition_data)),
            ])
        })
        .collect();
    let body = Value::Struct(vec![
        ("transactional_id", transactional_id.into()),
        ("acks", Value::Int(acks.into())),
        ("timeout_ms", Value::Int(timeout_ms.into())),
        ("topic_data", Value::Array(topic_data)),
    ]);
    let header = RequestHeader {
        api_key: PRODUCE_API_KEY,
        api_version,
        correlation_id,
        client_id,
    };
    let (frame, splices) =
        kafka::encode_request_spliced(&header, &body).map_err(crate::kafka::to_py_err)?;
    // One splice per partition, in order; each is filled by that partition's batches.
    let mut partition_batches = topics
        .iter()
        .flat_map(|(_, partitions)| partitions.iter())
        .map(|(_, batches)| batches.len());
    let len = frame.len() + splices.iter().map(|(_, n)| n).sum::<usize>();
    new_bytes(py, len, |buf| {
        gil::run(py, len > gil::RELEASE_COPY_ABOVE_BYTES, || {
            let mut at = 0;
            let mut from = 0;
            let mut next = batches.iter();
            for &(offset, _) in &splices {
                at = put(buf, at, &frame[from..offset]);
                from = offset;
                for batch in next.by_ref().take(partition_batches.next().unwrap_or(0)) {
                    at = put(buf, at, batch);
                }
            }
            at = put(buf, at, &frame[from..]);
            debug_assert_eq!(at, buf.len());
        });
        Ok(())
    })
}

/// Writes `src` into `buf` at `at`; the position after it.
fn put(buf: &mut [MaybeUninit<u8>], at: usize, src: &[u8]) -> usize {
    for (dst, byte) in buf[at..at + src.len()].iter_mut().zip(src) {
        dst.write(*byte);
    }
    at + src.len()
}

/// One partition of a fetch response as the broker gives it to `encode_fetch_response`:
/// its result, and the read's file regions (None when it has no records to send).
#[pyclass(
    module = "rillet._core",
    frozen,
    get_all,
    name = "FetchResponsePartition"
)]
pub struct FetchResponsePartition {
    partition: i32,
    error_code: i32,
    error_message: String,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// (epoch, end offset) when the fetcher's log diverged (KIP-320).
    diverging_epoch: Option<(i32, i64)>,
    preferred_read_replica: i32,
    records: Option<Py<FetchDataInfo>>,
}

#[pymethods]
impl FetchResponsePartition {
    #[new]
    #[pyo3(signature = (
        partition, *, error_code = 0, error_message = String::new(), high_watermark = -1,
        last_stable_offset = -1, log_start_offset = -1, diverging_epoch = None,
        preferred_read_replica = -1, records = None
    ), text_signature = "(partition, *, error_code=0, error_message='', high_watermark=-1, \
        last_stable_offset=-1, log_start_offset=-1, diverging_epoch=None, \
        preferred_read_replica=-1, records=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        partition: i32,
        error_code: i32,
        error_message: String,
        high_watermark: i64,
        last_stable_offset: i64,
        log_start_offset: i64,
        diverging_epoch: Option<(i32, i64)>,
        preferred_read_replica: i32,
        records: Option<Py<FetchDataInfo>>,
    ) -> Self {
        FetchResponsePartition {
            partition,
            error_code,
            error_message,
            high_watermark,
            last_stable_offset,
            log_start_offset,
            diverging_epoch,
            preferred_read_replica,
            records,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "FetchResponsePartition(partition={}, error_code={}, high_watermark={})",
            self.partition, self.error_code, self.high_watermark
        )
    }
}

/// The wire bytes of a `rillet.v1.FetchResponse` for `topics`: [(topic, [partitions])].
/// Each partition's batches are read from the log's files straight into their place in the
/// response (one copy from the page cache), with the GIL released for large responses.
#[pyfunction]
#[pyo3(signature = (topics, error_code = 0, error_message = "", throttle_time_ms = 0))]
fn encode_fetch_response<'py>(
    py: Python<'py>,
    topics: Vec<(String, Vec<Py<FetchResponsePartition>>)>,
    error_code: i32,
    error_message: &str,
    throttle_time_ms: i32,
) -> PyResult<Bound<'py, PyBytes>> {
    let response = FetchResponse {
        throttle_time_ms,
        error_code,
        error_message,
        topics: topics
            .iter()
            .map(|(name, partitions)| FetchedTopic {
                name,
                partitions: partitions
                    .iter()
                    .map(|p| {
                        let p = p.get();
                        FetchedPartition {
                            partition: p.partition,
                            error_code: p.error_code,
                            error_message: &p.error_message,
                            high_watermark: p.high_watermark,
                            last_stable_offset: p.last_stable_offset,
                            log_start_offset: p.log_start_offset,
                            diverging_epoch: p.diverging_epoch,
                            // A read_committed read lists the aborted transactions it
                            // overlaps (Kafka's FetchResponse.AbortedTransaction).
                            aborted_transactions: p
                                .records
                                .as_ref()
                                .and_then(|d| d.get().inner.aborted_transactions.as_ref())
                                .map(|v| {
                                    v.iter().map(|t| (t.producer_id, t.first_offset)).collect()
                                })
                                .unwrap_or_default(),
                            preferred_read_replica: p.preferred_read_replica,
                            record_batches: 0..p
                                .records
                                .as_ref()
                                .map_or(0, |d| d.get().inner.size() as usize),
                        }
                    })
                    .collect(),
            })
            .collect(),
    };
    let len = response.encoded_len();
    new_bytes(py, len, |buf| {
        gil::run(py, len > gil::RELEASE_COPY_ABOVE_BYTES, || {
            response.encode_into(buf, |ti, pi, slot| {
                let data = topics[ti].1[pi]
                    .get()
                    .records
                    .as_ref()
                    .expect("a partition with batches");
                let mut at = 0;
                for region in &data.get().inner.regions {
                    let n = region.length as usize;
                    region.read_exact_into_uninit(&mut slot[at..at + n])?;
                    at += n;
                }
                // The slot's length is the regions' total, so they filled all of it.
                assert_eq!(at, slot.len(), "file regions of the wrong total length");
                Ok(())
            })
        })
        .py()
    })
}

/// One partition of a fetch response as the consumer reads it: its result, and where its
/// record batches are in the response's bytes (`records_start..records_end`; decode them
/// with `decode_consumer_records`), the aborted transactions they overlap (read_committed),
/// and the offset after its last complete batch (-1 when it has none).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct FetchedPartitionView {
    topic: Py<PyString>,
    partition: i32,
    error_code: i32,
    error_message: String,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// (epoch, end offset) when a fetching follower's log diverged from the leader's.
    diverging_epoch: Option<(i32, i64)>,
    aborted_transactions: Vec<AbortedTransaction>,
    records_start: usize,
    records_end: usize,
    next_offset: i64,
}

#[pymethods]
impl FetchedPartitionView {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "FetchedPartitionView(topic={}, partition={}, error_code={}, records={}..{})",
            self.topic.bind(py),
            self.partition,
            self.error_code,
            self.records_start,
            self.records_end
        )
    }
}

/// A `rillet.v1.FetchResponse` read in place: its error, how long the broker throttled the
/// client (client quotas; 0 when not), and its partitions in order.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct FetchResponseView {
    error_code: i32,
    error_message: String,
    throttle_time_ms: i32,
    partitions: Vec<Py<FetchedPartitionView>>,
}

#[pymethods]
impl FetchResponseView {
    fn __repr__(&self) -> String {
        format!(
            "FetchResponseView(error_code={}, partitions={})",
            self.error_code,
            self.partitions.len()
        )
    }
}

/// Read a `rillet.v1.FetchResponse` in place. Batches are located, not copied; decode them
/// with `decode_consumer_records(data, ..., start=, end=)`. Malformed bytes raise
/// CorruptRecordError.
#[pyfunction]
fn decode_fetch_response(py: Python<'_>, data: &[u8]) -> PyResult<FetchResponseView> {
    let response = FetchResponse::decode(data).py()?;
    let mut partitions = Vec::new();
    for t in &response.topics {
        let name = PyString::new(py, t.name).unbind();
        for p in &t.partitions {
            let view = FetchedPartitionView {
                topic: name.clone_ref(py),
                partition: p.partition,
                error_code: p.error_code,
                error_message: p.error_message.to_string(),
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                log_start_offset: p.log_start_offset,
                diverging_epoch: p.diverging_epoch,
                aborted_transactions: p
                    .aborted_transactions
                    .iter()
                    .map(|&(producer_id, first_offset)| AbortedTransaction {
                        producer_id,
                        first_offset,
                    })
                    .collect(),
                records_start: p.record_batches.start,
                records_end: p.record_batches.end,
                next_offset: next_offset_after(&data[p.record_batches.clone()]).unwrap_or(-1),
            };
            partitions.push(Py::new(py, view)?);
        }
    }
    Ok(FetchResponseView {
        error_code: response.error_code,
        error_message: response.error_message.to_string(),
        throttle_time_ms: response.throttle_time_ms.max(0),
        partitions,
    })
}

/// Kafka's api key of Fetch.
const FETCH_API_KEY: i16 = 1;

/// Read a Kafka `Fetch` response frame (the bytes after its size prefix) of `api_version`
/// (4-12: topics by name) in place, as [`decode_fetch_response`] reads gRPC's: each
/// partition's record batches located in `frame`, not copied. Bytes that do not follow the
/// schema raise CorruptRecordError.
#[pyfunction]
fn kafka_decode_fetch_response(
    py: Python<'_>,
    api_version: i16,
    frame: &[u8],
) -> PyResult<FetchResponseView> {
    let corrupt = |reason: String| {
        crate::errors::kafka_error("CorruptRecordError", format!("a Fetch response: {reason}"))
    };
    if !(4..=12).contains(&api_version) {
        return Err(crate::errors::kafka_error(
            "UnsupportedVersionError",
            format!("Fetch v{api_version} responses name topics by id; read v4-12"),
        ));
    }
    let (_, body) = kafka::decode_response_in_place(FETCH_API_KEY, api_version, frame)
        .map_err(|e| corrupt(e.to_string()))?;
    let int = |v: &Value, key: &str| v.get(key).and_then(Value::as_int).unwrap_or(-1);
    let mut partitions = Vec::new();
    for t in body
        .get("responses")
        .and_then(Value::as_array)
        .unwrap_or_default()
    {
        let name = t.get("topic").and_then(Value::as_str).unwrap_or_default();
        let name = PyString::new(py, name).unbind();
        for p in t
            .get("partitions")
            .and_then(Value::as_array)
            .unwrap_or_default()
        {
            let (records_start, records_end) = match p.get("records") {
                Some(&Value::InPlace { offset, len }) => (offset, offset + len),
                _ => (0, 0),
            };
            let diverging_epoch = p
                .get("diverging_epoch")
                .map(|d| (int(d, "epoch") as i32, int(d, "end_offset")))
                .filter(|&(epoch, _)| epoch >= 0);
            let aborted = p.get("aborted_transactions").and_then(Value::as_array);
            let view = FetchedPartitionView {
                topic: name.clone_ref(py),
                partition: int(p, "partition_index") as i32,
                error_code: int(p, "error_code") as i32,
                error_message: String::new(),
                high_watermark: int(p, "high_watermark"),
                last_stable_offset: int(p, "last_stable_offset"),
                log_start_offset: int(p, "log_start_offset"),
                diverging_epoch,
                aborted_transactions: aborted
                    .unwrap_or_default()
                    .iter()
                    .map(|a| AbortedTransaction {
                        producer_id: int(a, "producer_id"),
                        first_offset: int(a, "first_offset"),
                    })
                    .collect(),
                records_start,
                records_end,
                next_offset: next_offset_after(&frame[records_start..records_end]).unwrap_or(-1),
            };
            partitions.push(Py::new(py, view)?);
        }
    }
    Ok(FetchResponseView {
        error_code: int(&body, "error_code") as i32,
        error_message: String::new(),
        throttle_time_ms: int(&body, "throttle_time_ms").max(0) as i32,
        partitions,
    })
}

/// One partition of a produce request read in place: its `record_batches` are bytes
/// `start..end` of the request.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct ProducePartitionView {
    topic: Py<PyString>,
    partition: i32,
    start: usize,
    end: usize,
}

#[pymethods]
impl ProducePartitionView {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ProducePartitionView(topic={}, partition={}, start={}, end={})",
            self.topic.bind(py),
            self.partition,
            self.start,
            self.end
        )
    }
}

/// A `rillet.v1.ProduceRequest` read in place. `structured` is true when some partition
/// carries structured records instead of batches, which the generated classes decode.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct ProduceRequestView {
    acks: i32,
    timeout_ms: i32,
    transactional_id: Option<String>,
    structured: bool,
    partitions: Vec<Py<ProducePartitionView>>,
}

#[pymethods]
impl ProduceRequestView {
    fn __repr__(&self) -> String {
        format!(
            "ProduceRequestView(acks={}, timeout_ms={}, structured={}, partitions={})",
            self.acks,
            self.timeout_ms,
            self.structured,
            self.partitions.len()
        )
    }
}

/// Read a `rillet.v1.ProduceRequest` in place: each partition's `record_batches` as its
/// byte range in `data`. Malformed bytes raise CorruptRecordError.
#[pyfunction]
fn decode_produce_request(py: Python<'_>, data: &[u8]) -> PyResult<ProduceRequestView> {
    let request = CoreProduceRequestView::decode(data).py()?;
    let mut partitions = Vec::new();
    for t in &request.topics {
        let name = PyString::new(py, t.name).unbind();
        for p in &t.partitions {
            let view = ProducePartitionView {
                topic: name.clone_ref(py),
                partition: p.partition,
                start: p.record_batches.start,
                end: p.record_batches.end,
            };
            partitions.push(Py::new(py, view)?);
        }
    }
    Ok(ProduceRequestView {
        acks: request.acks,
        timeout_ms: request.timeout_ms,
        transactional_id: request.transactional_id.map(str::to_string),
        structured: request.structured(),
        partitions,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FetchResponsePartition>()?;
    m.add_class::<FetchedPartitionView>()?;
    m.add_class::<FetchResponseView>()?;
    m.add_class::<ProducePartitionView>()?;
    m.add_class::<ProduceRequestView>()?;
    m.add_function(wrap_pyfunction!(encode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_encode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(decode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(encode_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_decode_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(decode_fetch_response, m)?)
}
