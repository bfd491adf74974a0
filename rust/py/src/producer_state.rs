//! The producer state and transaction values of a partition's log as Python sees them:
//! `ProducerStateEntry` and its `BatchMetadata` (Kafka's `ProducerStateEntry`, for
//! DescribeProducers and tools), `AbortedTransaction` (an entry of the `.txnindex`, for
//! read_committed fetches), and `read_producer_snapshot` for `.snapshot` files.

use std::path::PathBuf;

use pyo3::prelude::*;
use rillet_core::log::producer_snapshot::read_snapshot;
use rillet_core::log::{
    AbortedTxn, BatchMetadata as CoreBatchMetadata, ProducerStateEntry as CoreProducerEntry,
};

use crate::errors::IntoPyResult;

/// One cached batch of a producer (Kafka's `BatchMetadata`).
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(Clone, PartialEq)]
pub struct BatchMetadata {
    first_sequence: i32,
    last_sequence: i32,
    first_offset: i64,
    last_offset: i64,
    offset_delta: i32,
    timestamp: i64,
}

impl From<&CoreBatchMetadata> for BatchMetadata {
    fn from(m: &CoreBatchMetadata) -> Self {
        BatchMetadata {
            first_sequence: m.first_seq(),
            last_sequence: m.last_seq,
            first_offset: m.first_offset(),
            last_offset: m.last_offset,
            offset_delta: m.offset_delta,
            timestamp: m.timestamp,
        }
    }
}

#[pymethods]
impl BatchMetadata {
    fn __repr__(&self) -> String {
        format!(
            "BatchMetadata(first_sequence={}, last_sequence={}, first_offset={}, last_offset={}, timestamp={})",
            self.first_sequence, self.last_sequence, self.first_offset, self.last_offset, self.timestamp
        )
    }
}

/// One producer's state in a partition (Kafka's `ProducerStateEntry`, what DescribeProducers
/// answers): its epoch, last sequence and timestamp, the coordinator epoch of its last
/// transaction marker, where its open transaction started (None: none open), and its newest
/// cached batch (None when only a marker was seen).
#[pyclass(module = "rillet._core", frozen, get_all, eq)]
#[derive(Clone, PartialEq)]
pub struct ProducerStateEntry {
    producer_id: i64,
    producer_epoch: i16,
    last_sequence: i32,
    last_timestamp: i64,
    coordinator_epoch: i32,
    current_txn_start_offset: Option<i64>,
    last_batch: Option<BatchMetadata>,
}

impl From<&CoreProducerEntry> for ProducerStateEntry {
    fn from(e: &CoreProducerEntry) -> Self {
        ProducerStateEntry {
            producer_id: e.producer_id,
            producer_epoch: e.producer_epoch,
            last_sequence: e.last_seq(),
            last_timestamp: e.last_timestamp,
            coordinator_epoch: e.coordinator_epoch,
            current_txn_start_offset: e.current_txn_first_offset,
            last_batch: e.batch_metadata.back().map(BatchMetadata::from),
        }
    }
}

#[pymethods]
impl ProducerStateEntry {
    fn __repr__(&self) -> String {
        format!(
            "ProducerStateEntry(producer_id={}, producer_epoch={}, last_sequence={}, last_timestamp={}, coordinator_epoch={}, current_txn_start_offset={:?})",
            self.producer_id,
            self.producer_epoch,
            self.last_sequence,
            self.last_timestamp,
            self.coordinator_epoch,
            self.current_txn_start_offset
        )
    }
}

/// An aborted transaction a read_committed fetch returns (Kafka's
/// `FetchResponse.AbortedTransaction`): the consumer drops `producer_id`'s transactional
/// batches from `first_offset` until that producer's ABORT marker.
#[pyclass(module = "rillet._core", frozen, get_all, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AbortedTransaction {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
}

impl From<&AbortedTxn> for AbortedTransaction {
    fn from(t: &AbortedTxn) -> Self {
        AbortedTransaction {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
        }
    }
}

#[pymethods]
impl AbortedTransaction {
    #[new]
    fn new(producer_id: i64, first_offset: i64) -> Self {
        AbortedTransaction {
            producer_id,
            first_offset,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "AbortedTransaction(producer_id={}, first_offset={})",
            self.producer_id, self.first_offset
        )
    }
}

/// The producers in a producer state snapshot file (`<offset>.snapshot`), in producer id
/// order. A file that fails its checks raises CorruptRecordError.
#[pyfunction]
fn read_producer_snapshot(py: Python<'_>, path: PathBuf) -> PyResult<Vec<ProducerStateEntry>> {
    let entries = py.allow_threads(|| read_snapshot(&path)).py()?;
    Ok(entries.iter().map(ProducerStateEntry::from).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AbortedTransaction>()?;
    m.add_class::<BatchMetadata>()?;
    m.add_class::<ProducerStateEntry>()?;
    m.add_function(wrap_pyfunction!(read_producer_snapshot, m)?)?;
    Ok(())
}
