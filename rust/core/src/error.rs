//! The one error type of the storage core.
//!
//! Each variant corresponds to one of Kafka's error names; `rillet-py` maps them onto the
//! Python classes in `rillet.errors` in a single place (`rust/py/src/errors.rs`).

use std::path::Path;

use crate::log::ProducerStateError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// CORRUPT_MESSAGE: bytes that fail validation (CRC, magic, lengths, varints).
    #[error("{0}")]
    CorruptRecord(String),

    /// INVALID_RECORD: a well-formed batch that breaks a rule of the log (offsets, flags).
    #[error("{0}")]
    InvalidRecord(String),

    /// OFFSET_OUT_OF_RANGE
    #[error("offset {offset} is out of range: the log has offsets [{log_start_offset}, {log_end_offset})")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },

    /// MESSAGE_TOO_LARGE: a batch larger than `max.message.bytes`.
    #[error("the record batch is {size} bytes, larger than max.message.bytes ({max})")]
    RecordTooLarge { size: usize, max: usize },

    /// RECORD_LIST_TOO_LARGE: a batch that cannot fit in any segment.
    #[error("the record batch is {size} bytes, larger than segment.bytes ({max})")]
    RecordBatchTooLarge { size: usize, max: usize },

    /// UNSUPPORTED_COMPRESSION_TYPE
    #[error("unsupported compression codec id {0}")]
    UnsupportedCompressionType(u8),

    /// INVALID_TIMESTAMP
    #[error("{0}")]
    InvalidTimestamp(String),

    /// INVALID_REQUEST: an argument that makes no sense (negative sizes, bad config values).
    #[error("{0}")]
    InvalidRequest(String),

    /// INVALID_CONFIG
    #[error("{0}")]
    InvalidConfig(String),

    /// A producer's batch or transaction marker refused by the partition's producer state:
    /// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE or
    /// TRANSACTION_COORDINATOR_FENCED (see [`ProducerStateError`]).
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),

    /// KAFKA_STORAGE_ERROR: the disk failed us.
    #[error("{context}: {source}")]
    Storage {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::CorruptRecord(msg.into())
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidRecord(msg.into())
    }

    pub fn storage(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Storage {
            context: context.into(),
            source,
        }
    }

    /// Kafka's name for this error, as used on the wire.
    pub fn kafka_name(&self) -> &'static str {
        match self {
            Error::CorruptRecord(_) => "CORRUPT_MESSAGE",
            Error::InvalidRecord(_) => "INVALID_RECORD",
            Error::OffsetOutOfRange { .. } => "OFFSET_OUT_OF_RANGE",
            Error::RecordTooLarge { .. } => "MESSAGE_TOO_LARGE",
            Error::RecordBatchTooLarge { .. } => "RECORD_LIST_TOO_LARGE",
            Error::UnsupportedCompressionType(_) => "UNSUPPORTED_COMPRESSION_TYPE",
            Error::InvalidTimestamp(_) => "INVALID_TIMESTAMP",
            Error::InvalidRequest(_) => "INVALID_REQUEST",
            Error::InvalidConfig(_) => "INVALID_CONFIG",
            Error::ProducerState(e) => e.kafka_name(),
            Error::Storage { .. } => "KAFKA_STORAGE_ERROR",
        }
    }
}

/// Attach a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn ctx(self, what: &str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: &str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::storage(format!("{what} {}", path.display()), e))
    }
}
