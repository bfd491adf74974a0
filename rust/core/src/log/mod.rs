//! The partition log: a directory of segments.
//!
//! ```text
//! <log dir>/<topic>-<partition>/
//!     00000000000000000000.log        record batches, exactly as on the wire
//!     00000000000000000000.index      sparse offset index  (see OffsetIndex)
//!     00000000000000000000.timeindex  sparse time index    (see TimeIndex)
//!     00000000000000000000.txnindex   aborted transactions, once there is one (see txn_index)
//!     00000000000000000100.snapshot   producer state up to an offset (see producer_snapshot)
//!     leader-epoch-checkpoint         (epoch, start offset) pairs
//! ```
//!
//! One owner per concern, dependencies one way (loader -> log -> segment -> index):
//! `segment` (one segment's files), `index` (the two sparse indexes), `log` (appends, reads,
//! lookups, roll, retention, truncation), `loader` (opening and recovery, Kafka's
//! `LogLoader`), `epoch_cache` (`leader-epoch-checkpoint`), `checkpoint` (the log dir's
//! offset checkpoint files), `scan` (walking batch headers). Compaction is Kafka's
//! `LogCleaner` split by concern: `cleanable` (what may be cleaned, how dirty a log is),
//! `offset_map` (the key -> last offset map), `cleaner` (planning, cleaning, swapping in),
//! `swap` (the `.cleaned` / `.swap` files, and finishing an interrupted swap at open, which
//! `loader` calls first). Producer state is Kafka's `ProducerStateManager`: `producer_state`
//! (validation, duplicates, expiry, truncation), `producer_snapshot` (the `.snapshot`
//! files) and `producer_log` (where the log consults and feeds it: appends, roll, close,
//! loading, truncation, retention). Transactions as readers see them: `txn_index` (each
//! segment's aborted transaction index) and `txn_log` (the first unstable and last stable
//! offsets, collecting aborted transactions, read_committed reads).

mod checkpoint;
mod cleanable;
mod cleaner;
mod config;
mod epoch_cache;
mod index;
mod loader;
#[allow(clippy::module_inception)]
mod log;
mod offset_map;
mod producer_log;
pub mod producer_snapshot;
pub mod producer_state;
mod scan;
mod segment;
mod swap;
pub mod txn_index;
mod txn_log;

pub use checkpoint::{read_offset_checkpoint, write_offset_checkpoint, CheckpointEntry};
pub use cleanable::LogToClean;
pub use cleaner::{
    CleanPlan, CleanedGroup, CleanerConfig, CleanerStats, CleaningAbort, CleaningJob,
};
pub use config::LogConfig;
pub use epoch_cache::{EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
pub use loader::{OpenOptions, RecoveryInfo};
pub use log::{
    FetchDataInfo, Log, LogAppendInfo, LogOffsetMetadata, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
};
pub use offset_map::SkimpyOffsetMap;
pub use producer_snapshot::{snapshot_file, PRODUCER_SNAPSHOT_FILE_SUFFIX};
pub use producer_state::{
    AppendOrigin, BatchMetadata, CompletedTxn, ProducerBatch, ProducerStateEntry,
    ProducerStateError, ProducerStateManager, Validation, DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NUM_BATCHES_TO_RETAIN,
};
pub use scan::BatchScanner;
pub use segment::{
    log_file_name, Segment, TimestampAndOffset, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};
pub use swap::{CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX};
pub use txn_index::{
    AbortedTxn, TransactionIndex, TxnIndexSearchResult, ABORTED_TXN_SIZE, TXN_INDEX_SUFFIX,
};
