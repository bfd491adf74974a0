//! The partition log: a directory of segments.
//!
//! ```text
//! <log dir>/<topic>-<partition>/
//!     00000000000000000000.log        record batches, exactly as on the wire
//!     00000000000000000000.index      sparse offset index  (see OffsetIndex)
//!     00000000000000000000.timeindex  sparse time index    (see TimeIndex)
//!     leader-epoch-checkpoint         (epoch, start offset) pairs
//! ```

mod checkpoint;
mod config;
mod epoch_cache;
mod index;
#[allow(clippy::module_inception)]
mod log;
mod scan;
mod segment;

pub use checkpoint::{read_offset_checkpoint, write_offset_checkpoint, CheckpointEntry};
pub use config::LogConfig;
pub use epoch_cache::{EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
pub use index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
pub use log::{
    FetchDataInfo, Log, LogAppendInfo, LogOffsetMetadata, OpenOptions, RecoveryInfo,
    TimestampAndOffset, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
};
pub use scan::BatchScanner;
pub use segment::{log_file_name, Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
