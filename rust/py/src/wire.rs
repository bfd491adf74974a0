use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rillet_core::wire::{PartitionData, ProduceRequest, TopicData};

use crate::accumulator::ClosedBatch;
use crate::gil;

/// (topic, [(partition, batch)]) as Python passes it.
type TopicBatches = (String, Vec<(i32, Py<ClosedBatch>)>);

/// The wire bytes of a `rillet.v1.ProduceRequest` carrying `topics`: [(topic, [(partition,
/// ClosedBatch)])]. Each batch is copied once, into the returned bytes, with the GIL released
/// for large requests; a gRPC call sends them as they are.
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
                    .map(|(partition, batch)| PartitionData {
                        partition: *partition,
                        record_batches: &batch.get().records,
                    })
                    .collect(),
            })
            .collect(),
    };
    let len = request.encoded_len();
    PyBytes::new_with(py, len, |buf| {
        gil::run(py, len > gil::RELEASE_COPY_ABOVE_BYTES, || {
            request.encode_into(buf)
        });
        Ok(())
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_produce_request, m)?)
}
