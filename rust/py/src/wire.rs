use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use rillet_protocol::grpc::{
    FetchResponse, FetchedPartition, FetchedTopic, PartitionData, ProduceRequest,
    ProduceRequestView, TopicData,
};

use rillet_core::record::batch::next_offset_after;

use crate::accumulator::ClosedBatch;
use crate::bytes::new_bytes;
use crate::errors::IntoPyResult;
use crate::gil;
use crate::log::FetchDataInfo;

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

/// One partition of a fetch response as the broker gives it: (partition, error code, error
/// message, high watermark, last stable offset, log start offset, diverging epoch as (epoch,
/// end offset) or None, preferred read replica, the read's FetchDataInfo or None).
type PartitionOut = (
    i32,
    i32,
    String,
    i64,
    i64,
    i64,
    Option<(i32, i64)>,
    i32,
    Option<Py<FetchDataInfo>>,
);

/// The wire bytes of a `rillet.v1.FetchResponse` for `topics`: [(topic, [PartitionOut])].
/// Each partition's batches are read from the log's files straight into their place in the
/// response (one copy from the page cache), with the GIL released for large responses.
#[pyfunction]
#[pyo3(signature = (topics, error_code = 0, error_message = "", throttle_time_ms = 0))]
fn encode_fetch_response<'py>(
    py: Python<'py>,
    topics: Vec<(String, Vec<PartitionOut>)>,
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
                    .map(|p| FetchedPartition {
                        partition: p.0,
                        error_code: p.1,
                        error_message: &p.2,
                        high_watermark: p.3,
                        last_stable_offset: p.4,
                        log_start_offset: p.5,
                        diverging_epoch: p.6,
                        preferred_read_replica: p.7,
                        record_batches: 0..p
                            .8
                            .as_ref()
                            .map_or(0, |d| d.get().inner.size() as usize),
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
                    .8
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

/// One partition of a fetch response as the consumer reads it: (topic, partition, error
/// code, error message, high watermark, last stable offset, log start offset, start and end
/// of its record batches in the response bytes, the offset after its last complete batch or
/// -1 when it has none).
type PartitionIn = (
    Py<PyString>,
    i32,
    i32,
    String,
    i64,
    i64,
    i64,
    usize,
    usize,
    i64,
);

/// Read a `rillet.v1.FetchResponse` in place: (error code, error message, [PartitionIn]).
/// Batches are located, not copied; decode them with `decode_consumer_records(data, ...,
/// start=, end=)`. Malformed bytes raise CorruptRecordError.
#[pyfunction]
fn decode_fetch_response(py: Python<'_>, data: &[u8]) -> PyResult<(i32, String, Vec<PartitionIn>)> {
    let response = FetchResponse::decode(data).py()?;
    let mut partitions = Vec::new();
    for t in &response.topics {
        let name = PyString::new(py, t.name).unbind();
        for p in &t.partitions {
            partitions.push((
                name.clone_ref(py),
                p.partition,
                p.error_code,
                p.error_message.to_string(),
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                p.record_batches.start,
                p.record_batches.end,
                next_offset_after(&data[p.record_batches.clone()]).unwrap_or(-1),
            ));
        }
    }
    Ok((
        response.error_code,
        response.error_message.to_string(),
        partitions,
    ))
}

/// (acks, timeout_ms, transactional_id, structured, [(topic, partition, start, end)]).
type ProduceRequestIn = (
    i32,
    i32,
    Option<String>,
    bool,
    Vec<(Py<PyString>, i32, usize, usize)>,
);

/// Read a `rillet.v1.ProduceRequest` in place: each partition's `record_batches` as its
/// byte range in `data`. `structured` is true when some partition carries structured
/// records instead, which the generated classes decode. Malformed bytes raise
/// CorruptRecordError.
#[pyfunction]
fn decode_produce_request(py: Python<'_>, data: &[u8]) -> PyResult<ProduceRequestIn> {
    let view = ProduceRequestView::decode(data).py()?;
    let mut partitions = Vec::new();
    for t in &view.topics {
        let name = PyString::new(py, t.name).unbind();
        for p in &t.partitions {
            partitions.push((
                name.clone_ref(py),
                p.partition,
                p.record_batches.start,
                p.record_batches.end,
            ));
        }
    }
    Ok((
        view.acks,
        view.timeout_ms,
        view.transactional_id.map(str::to_string),
        view.structured(),
        partitions,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(decode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(encode_fetch_response, m)?)?;
    m.add_function(wrap_pyfunction!(decode_fetch_response, m)?)
}
