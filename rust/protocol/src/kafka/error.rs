//! The codec's errors. Each says what was wrong and where: the message and version, the
//! field path (`topics[1].partitions[0].fetch_offset`), and for bytes, the offset.

use std::fmt;

use super::schema::MessageKind;
use super::versions::Versions;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// No schema has this api key in this direction. `correlation_id` is the frame's, when
    /// the error comes from one.
    UnknownApiKey {
        api_key: i16,
        kind: MessageKind,
        correlation_id: Option<i32>,
    },
    /// The api key is known, the version is not one of its `validVersions`: the broker
    /// answers UNSUPPORTED_VERSION with `correlation_id`.
    UnsupportedVersion {
        message: String,
        api_key: i16,
        api_version: i16,
        valid_versions: Versions,
        correlation_id: Option<i32>,
    },
    /// Bytes that do not follow the schema: truncated, a bad length or varint, a null
    /// where none is allowed, invalid UTF-8, bytes left over. `offset` counts from the
    /// start of the bytes given to the decoder (the frame, after its size prefix).
    Malformed {
        context: String,
        offset: usize,
        reason: String,
    },
    /// A value that does not fit the schema (wrong type, out of range, unknown field, a
    /// non-default value for a field the version does not carry).
    InvalidValue { context: String, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownApiKey { api_key, kind, .. } => {
                write!(f, "unknown api key {api_key} (no {kind:?} schema has it)")
            }
            Error::UnsupportedVersion {
                message,
                api_version,
                valid_versions,
                ..
            } => write!(
                f,
                "{message} version {api_version} is not supported (valid versions: {valid_versions})"
            ),
            Error::Malformed {
                context,
                offset,
                reason,
            } => write!(f, "{context} at byte {offset}: {reason}"),
            Error::InvalidValue { context, reason } => write!(f, "{context}: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// Every codec error is an INVALID_REQUEST for the storage core's one error enum, which has
/// no UNSUPPORTED_VERSION: a broker matches [`Error::UnsupportedVersion`] before converting.
impl From<Error> for rillet_core::Error {
    fn from(e: Error) -> Self {
        rillet_core::Error::InvalidRequest(e.to_string())
    }
}

/// One step of a field path.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Field(&'static str),
    Index(usize),
}

/// An error inside a message, before it knows which message: the path is gathered while
/// the error unwinds (innermost step first), so the happy path builds no strings.
#[derive(Debug)]
pub(crate) struct Fault {
    /// `Some` for a decoding error.
    offset: Option<usize>,
    reason: String,
    path: Vec<Step>,
}

impl Fault {
    pub(crate) fn malformed(offset: usize, reason: impl Into<String>) -> Fault {
        Fault {
            offset: Some(offset),
            reason: reason.into(),
            path: Vec::new(),
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Fault {
        Fault {
            offset: None,
            reason: reason.into(),
            path: Vec::new(),
        }
    }

    pub(crate) fn in_field(mut self, key: &'static str) -> Fault {
        self.path.push(Step::Field(key));
        self
    }

    pub(crate) fn at_index(mut self, index: usize) -> Fault {
        self.path.push(Step::Index(index));
        self
    }

    /// The error, placed in `message` at `version`.
    pub(crate) fn into_error(self, message: &str, version: i16) -> Error {
        let mut context = format!("{message} v{version}");
        for (i, step) in self.path.iter().rev().enumerate() {
            match step {
                Step::Field(key) if i == 0 => {
                    context.push(' ');
                    context.push_str(key);
                }
                Step::Field(key) => {
                    context.push('.');
                    context.push_str(key);
                }
                Step::Index(index) => context.push_str(&format!("[{index}]")),
            }
        }
        match self.offset {
            Some(offset) => Error::Malformed {
                context,
                offset,
                reason: self.reason,
            },
            None => Error::InvalidValue {
                context,
                reason: self.reason,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_reads_outermost_first() {
        let fault = Fault::malformed(37, "invalid UTF-8")
            .in_field("name")
            .at_index(1)
            .in_field("topics");
        let error = fault.into_error("MetadataRequest", 12);
        assert_eq!(
            error.to_string(),
            "MetadataRequest v12 topics[1].name at byte 37: invalid UTF-8"
        );
        let core: rillet_core::Error = error.into();
        assert_eq!(core.kafka_name(), "INVALID_REQUEST");
    }
}
