use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::{PyTraverseError, PyVisit};
use rillet_client::accumulator::{AccumulatorConfig, ProducerIdentity, RecordAccumulator as Core};
use rillet_client::partitioner::{Strategy, TopicPartitioner};
use rillet_client::stamp::restamp_producer;
use rillet_core::record::builder::HeaderRef;
use rillet_core::record::Compression;

use crate::errors::{kafka_error, IntoPyResult};
use crate::future::FutureRecordMetadata;
use crate::gil;
use crate::record::parse_compression;

/// A batch taken by `RecordAccumulator.drain`: its slot and topic partition, the
/// `ProduceRequestResult` its records' futures wait on, the `ClosedBatch` (or the exception
/// that closing it raised), its record count, the buffer memory it holds (give it back with
/// `release`), when it was created, and its first sequence number (-1 unless the producer
/// has an identity: see `set_producer`).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct DrainedBatch {
    slot: u32,
    topic_partition: PyObject,
    result: PyObject,
    batch: PyObject,
    record_count: i32,
    reserved_bytes: usize,
    created_ms: i64,
    base_sequence: i32,
}

#[pymethods]
impl DrainedBatch {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "DrainedBatch(topic_partition={}, record_count={}, reserved_bytes={})",
            self.topic_partition.bind(py),
            self.record_count,
            self.reserved_bytes
        )
    }
}

/// What `RecordAccumulator.ready` found: the slots with a batch to send, and how long until
/// the next batch lingers out (None when no batch is open).
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct ReadyBatches {
    slots: Vec<u32>,
    next_ready_ms: Option<i64>,
}

/// A closed record batch from `RecordAccumulator.drain`, ready to send: its bytes stay in
/// Rust until `encode_produce_request` copies them into a request. `bytes(batch)` copies
/// them out (for tests and tools).
#[pyclass(module = "rillet._core", frozen)]
pub struct ClosedBatch {
    pub(crate) records: Vec<u8>,
}

#[pymethods]
impl ClosedBatch {
    fn __len__(&self) -> usize {
        self.records.len()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.records)
    }

    /// A copy of this batch carrying another producer id, epoch and base sequence, its CRC
    /// recomputed (the records are not touched): after an idempotent producer bumps its
    /// epoch, the batches it has yet to deliver go out with the new epoch (KIP-360).
    fn restamp(&self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> PyResult<Self> {
        let mut records = self.records.clone();
        restamp_producer(&mut records, producer_id, producer_epoch, base_sequence).py()?;
        Ok(ClosedBatch { records })
    }
}

/// What `send` answers instead of a future.
const NEEDS_METADATA: i32 = 0;
const BUFFER_FULL: i32 = 1;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One topic's partitions as the producer last learned them, with the accumulator slot of
/// each (`slots[i]` is `partitioner.partitions()[i]`'s).
struct Route {
    partitioner: TopicPartitioner,
    slots: Vec<u32>,
    expires_ms: i64,
}

struct State {
    core: Core,
    rng: fastrand::Rng,
    topics: HashMap<String, Route>,
    /// Slots are small integers for (topic, partition), assigned once and never reused.
    slot_of: HashMap<(String, i32), u32>,
    slot_tps: Vec<PyObject>,
    /// The result object each open batch's futures share.
    results: HashMap<u64, PyObject>,
}

/// A key or value: borrowed from `bytes`, or copied from another buffer.
enum Payload<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Payload<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Borrowed(b) => b,
            Payload::Owned(v) => v,
        }
    }
}

fn payload<'a>(obj: Option<&'a Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Payload<'a>>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Some(Payload::Borrowed(b.as_bytes())));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(Some(Payload::Owned(buf.to_vec(obj.py())?))),
        Err(_) => Err(PyTypeError::new_err(format!(
            "the record {what} must be bytes (or set a {what}_serializer), got {}",
            obj.get_type().name()?
        ))),
    }
}

/// The producer's record path in Rust: Kafka's partitioner and `RecordAccumulator`.
///
/// `send` picks a record's partition (explicit; murmur2 of the key; sticky, round robin or
/// random without one), appends it to that partition's open batch (batches close at
/// `batch_size` or after `linger_ms`, all within `buffer_memory`), and returns the record's
/// `FutureRecordMetadata`, whose `produce_result` is the object `batch_result(topic_partition)`
/// made for the batch. `on_batch_ready()` is called when a batch fills up or a new one
/// starts, so the sender can wake. The sender takes closed batches with `ready` and `drain`.
///
/// Thread safe: `send()` callers and the sender thread share it. No Python code runs while
/// the lock is held except `batch_result`, and the lock is waited for with the GIL released.
#[pyclass(module = "rillet._core", frozen)]
pub struct RecordAccumulator {
    state: Mutex<State>,
    strategy: Strategy,
    batch_size: usize,
    max_request_size: usize,
    /// Closing a compressed batch is worth releasing the GIL for; copying an uncompressed
    /// one is not (see `gil`).
    compressed: bool,
    batch_result: PyObject,
    on_batch_ready: Option<PyObject>,
}

#[pymethods]
impl RecordAccumulator {
    /// `send` answers this when the topic's partitions are unknown or older than the
    /// `expires_ms` given to `set_topic`: load them, call `set_topic`, send again.
    #[classattr]
    const NEEDS_METADATA: i32 = NEEDS_METADATA;
    /// `send` answers this when a new batch would exceed `buffer_memory`: wait until sent
    /// batches are released, send again.
    #[classattr]
    const BUFFER_FULL: i32 = BUFFER_FULL;

    #[new]
    #[pyo3(signature = (
        *, batch_result, on_batch_ready = None, batch_size = 16384,
        linger_ms = 5, buffer_memory = 33554432, compression = "none",
        partitioner = "default", max_request_size = 1048576, seed = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        batch_result: PyObject,
        on_batch_ready: Option<PyObject>,
        batch_size: usize,
        linger_ms: i64,
        buffer_memory: usize,
        compression: &str,
        partitioner: &str,
        max_request_size: usize,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let compression = parse_compression(compression)?;
        let strategy = Strategy::parse(partitioner).ok_or_else(|| {
            kafka_error(
                "InvalidConfigurationError",
                format!(
                    "Invalid value {partitioner:?} for configuration partitioner: one of \
                     default, round_robin, random"
                ),
            )
        })?;
        let core = Core::new(AccumulatorConfig {
            batch_size,
            linger_ms,
            buffer_memory,
            compression,
        })
        .py()?;
        Ok(RecordAccumulator {
            state: Mutex::new(State {
                core,
                rng: seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed),
                topics: HashMap::new(),
                slot_of: HashMap::new(),
                slot_tps: Vec::new(),
                results: HashMap::new(),
            }),
            strategy,
            batch_size,
            max_request_size,
            compressed: compression != Compression::None,
            batch_result,
            on_batch_ready,
        })
    }

    /// Set `topic`'s partitions, each with its TopicPartition object, valid until
    /// `expires_ms` (wall clock). Sticky and round-robin state start over.
    fn set_topic(
        &self,
        py: Python<'_>,
        topic: String,
        partitions: Vec<(i32, PyObject)>,
        expires_ms: i64,
    ) -> PyResult<()> {
        if partitions.is_empty() {
            return Err(kafka_error(
                "UnknownTopicOrPartitionError",
                format!("topic {topic} has no partitions"),
            ));
        }
        let mut st = gil::lock(py, &self.state);
        let st = &mut *st;
        let partitioner = TopicPartitioner::new(partitions.iter().map(|(p, _)| *p).collect());
        let mut slots = Vec::with_capacity(partitions.len());
        for &p in partitioner.partitions() {
            let slot = match st.slot_of.get(&(topic.clone(), p)) {
                Some(&slot) => slot,
                None => {
                    let tp = partitions
                        .iter()
                        .find(|(q, _)| *q == p)
                        .map(|(_, tp)| tp.clone_ref(py))
                        .expect("the partition was given");
                    let slot = st.slot_tps.len() as u32;
                    st.slot_tps.push(tp);
                    st.slot_of.insert((topic.clone(), p), slot);
                    slot
                }
            };
            slots.push(slot);
        }
        st.topics.insert(
            topic,
            Route {
                partitioner,
                slots,
                expires_ms,
            },
        );
        Ok(())
    }

    /// Forget `topic`'s partitions (its leadership changed): the next `send` to it answers
    /// NEEDS_METADATA.
    fn forget_topic(&self, py: Python<'_>, topic: &str) {
        gil::lock(py, &self.state).topics.remove(topic);
    }

    /// The partitions known for `topic`, or None.
    fn partitions(&self, py: Python<'_>, topic: &str) -> Option<Vec<i32>> {
        let st = gil::lock(py, &self.state);
        st.topics
            .get(topic)
            .map(|r| r.partitioner.partitions().to_vec())
    }

    /// Queue one record: its future, or NEEDS_METADATA, or BUFFER_FULL. `key` and `value`
    /// are bytes-like or None; `headers` a sequence of (str, bytes or None); `timestamp`
    /// defaults to now (CreateTime).
    #[pyo3(signature = (topic, key, value, headers = None, partition = None, timestamp = None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        topic: &str,
        key: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        headers: Option<Vec<(String, Option<Vec<u8>>)>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<PyObject> {
        let key = payload(key, "key")?;
        let value = payload(value, "value")?;
        let key = key.as_ref().map(Payload::bytes);
        let value = value.as_ref().map(Payload::bytes);
        let headers = headers.unwrap_or_default();
        let hs: Vec<HeaderRef> = headers
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_deref()))
            .collect();
        let key_size = key.map_or(-1, |k| k.len() as i64);
        let value_size = value.map_or(-1, |v| v.len() as i64);
        let header_size: usize = hs
            .iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
            .sum();
        let size = key_size.max(0) as usize + value_size.max(0) as usize + header_size;
        if size > self.max_request_size {
            return Err(kafka_error(
                "RecordTooLargeError",
                format!(
                    "The message is {size} bytes when serialized which is larger than \
                     max.request.size ({})",
                    self.max_request_size
                ),
            ));
        }
        let now = now_ms();
        let timestamp = timestamp.unwrap_or(now);

        let mut guard = gil::lock(py, &self.state);
        let st = &mut *guard;
        let Some(route) = st.topics.get_mut(topic) else {
            return Ok(NEEDS_METADATA.into_pyobject(py)?.into_any().unbind());
        };
        if now >= route.expires_ms {
            return Ok(NEEDS_METADATA.into_pyobject(py)?.into_any().unbind());
        }
        let index = match partition {
            Some(p) => route.partitioner.index_of(p).ok_or_else(|| {
                kafka_error(
                    "UnknownTopicOrPartitionError",
                    format!(
                        "Partition {p} of topic {topic} with partition count {} is not \
                         present in metadata.",
                        route.partitioner.partitions().len()
                    ),
                )
            })?,
            None => route.partitioner.choose(self.strategy, key, &mut st.rng),
        };
        let slot = route.slots[index];
        let Some(placed) = st.core.append(slot, timestamp, key, value, &hs, now).py()? else {
            return Ok(BUFFER_FULL.into_pyobject(py)?.into_any().unbind());
        };
        if partition.is_none() {
            route.partitioner.on_append(index, size, self.batch_size);
        }
        let result = if placed.new_batch {
            let tp = st.slot_tps[slot as usize].clone_ref(py);
            match self.batch_result.call1(py, (tp,)) {
                Ok(r) => {
                    st.results.insert(placed.batch_id, r.clone_ref(py));
                    r
                }
                Err(e) => {
                    // The batch exists without a result: drop it so nothing waits on it.
                    let reserved = st.core.discard_last(slot);
                    st.core.release(reserved);
                    return Err(e);
                }
            }
        } else {
            st.results
                .get(&placed.batch_id)
                .expect("every open batch has a result")
                .clone_ref(py)
        };
        drop(guard);
        let future = FutureRecordMetadata::new_for(
            result,
            placed.index,
            timestamp,
            key_size,
            value_size,
            header_size as i64,
        );
        let future = Py::new(py, future)?.into_any();
        if placed.batch_full || placed.new_batch {
            if let Some(wake) = &self.on_batch_ready {
                wake.call0(py)?;
            }
        }
        Ok(future)
    }

    /// The slots with a batch to send (all of them with `flush`), and how long until the
    /// next batch lingers out.
    #[pyo3(signature = (now_ms = None, flush = false))]
    fn ready(&self, py: Python<'_>, now_ms: Option<i64>, flush: bool) -> ReadyBatches {
        let now = now_ms.unwrap_or_else(self::now_ms);
        let (slots, next_ready_ms) = gil::lock(py, &self.state).core.ready(now, flush);
        ReadyBatches {
            slots,
            next_ready_ms,
        }
    }

    /// Stamp every batch drained from now on with this producer id and epoch (and the
    /// transactional flag), each partition's sequence numbers starting again at 0; `None`
    /// for no identity (a producer that is not idempotent).
    #[pyo3(signature = (producer_id = None, producer_epoch = 0, transactional = false))]
    fn set_producer(
        &self,
        py: Python<'_>,
        producer_id: Option<i64>,
        producer_epoch: i16,
        transactional: bool,
    ) {
        let identity = producer_id.map(|producer_id| ProducerIdentity {
            producer_id,
            producer_epoch,
            transactional,
        });
        gil::lock(py, &self.state).core.set_producer(identity);
    }

    /// The first of `count` sequence numbers of `slot`, taken: for a batch stamped again
    /// with `ClosedBatch.restamp`.
    fn reserve_sequence(&self, py: Python<'_>, slot: u32, count: i32) -> i32 {
        gil::lock(py, &self.state)
            .core
            .reserve_sequence(slot, count)
    }

    /// Take and close batches of `slots` (as `ready` named them), up to `max_bytes` in all
    /// (one at least; see rillet-core's `RecordAccumulator::take`), and at most `limits[i]`
    /// batches of `slots[i]` when `limits` is given. Batches are closed (compressed,
    /// checksummed) outside the lock, so `send` goes on meanwhile, and without the GIL
    /// unless they are small, so the thread calling `send` goes on too.
    #[pyo3(signature = (slots, max_bytes, limits = None))]
    fn drain(
        &self,
        py: Python<'_>,
        slots: Vec<u32>,
        max_bytes: usize,
        limits: Option<Vec<usize>>,
    ) -> PyResult<Vec<DrainedBatch>> {
        let mut taken = Vec::new();
        {
            let mut st = gil::lock(py, &self.state);
            let limits = limits.unwrap_or_default();
            for t in st.core.take_limited(&slots, &limits, max_bytes) {
                let result = st
                    .results
                    .remove(&t.batch_id)
                    .expect("every open batch has a result");
                let tp = st.slot_tps[t.partition as usize].clone_ref(py);
                taken.push((t, tp, result));
            }
        }
        let bytes: usize = taken.iter().map(|(t, _, _)| t.reserved).sum();
        // A CRC over a few hundred KiB costs as much as a copy of them (see `gil`).
        let release = self.compressed || bytes > gil::RELEASE_COPY_ABOVE_BYTES;
        let (batches, meta): (Vec<_>, Vec<_>) = taken
            .into_iter()
            .map(|(t, tp, result)| (t, (tp, result)))
            .unzip();
        let built: Vec<_> = gil::run(py, release, || {
            batches
                .into_iter()
                .map(|t| {
                    (
                        (t.partition, t.base_sequence),
                        t.created_ms,
                        t.reserved,
                        t.record_count(),
                        t.build(),
                    )
                })
                .collect()
        });
        built
            .into_iter()
            .zip(meta)
            .map(
                |(((slot, base_sequence), created_ms, reserved, count, records), (tp, result))| {
                    let records = match records {
                        Ok(b) => Py::new(py, ClosedBatch { records: b.records })?.into_any(),
                        Err(e) => crate::errors::to_py(e).into_value(py).into_any(),
                    };
                    Ok(DrainedBatch {
                        slot,
                        topic_partition: tp,
                        result,
                        batch: records,
                        record_count: count,
                        reserved_bytes: reserved,
                        created_ms,
                        base_sequence,
                    })
                },
            )
            .collect()
    }

    /// Give back the memory of a sent or failed batch.
    fn release(&self, py: Python<'_>, reserved: usize) {
        gil::lock(py, &self.state).core.release(reserved)
    }

    /// Drop every unsent batch; returns their result objects.
    fn abort_all(&self, py: Python<'_>) -> Vec<PyObject> {
        let mut st = gil::lock(py, &self.state);
        let mut ids = st.core.abort_all();
        ids.sort_unstable();
        ids.iter().filter_map(|id| st.results.remove(id)).collect()
    }

    #[getter]
    fn used_memory(&self, py: Python<'_>) -> usize {
        gil::lock(py, &self.state).core.used_memory()
    }

    #[getter]
    fn pending_batches(&self, py: Python<'_>) -> usize {
        gil::lock(py, &self.state).core.pending_batches()
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.batch_result)?;
        if let Some(wake) = &self.on_batch_ready {
            visit.call(wake)?;
        }
        // The collector runs with the GIL held; a thread inside `send` or `drain` holds the
        // lock only while it holds the GIL too, except while closing batches, which touches
        // no Python object. Skipping a busy accumulator only delays collecting a cycle.
        if let Some(st) = self.state.try_lock() {
            for r in st.results.values() {
                visit.call(r)?;
            }
            for tp in &st.slot_tps {
                visit.call(tp)?;
            }
        }
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordAccumulator>()?;
    m.add_class::<ReadyBatches>()?;
    m.add_class::<DrainedBatch>()?;
    m.add_class::<ClosedBatch>()
}
