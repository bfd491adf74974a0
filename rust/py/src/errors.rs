//! The one place where core errors become Python exceptions: each variant maps onto the
//! class in `rillet.errors` named after Kafka's error.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;
use rillet_core::log::ProducerStateError;
use rillet_core::Error;

static ERRORS_MODULE: GILOnceCell<Py<PyModule>> = GILOnceCell::new();

fn class_name(err: &Error) -> &'static str {
    match err {
        Error::CorruptRecord(_) => "CorruptRecordError",
        Error::InvalidRecord(_) => "InvalidRecordError",
        Error::OffsetOutOfRange { .. } => "OffsetOutOfRangeError",
        Error::RecordTooLarge { .. } => "RecordTooLargeError",
        Error::RecordBatchTooLarge { .. } => "RecordBatchTooLargeError",
        Error::UnsupportedCompressionType(_) => "UnsupportedCompressionTypeError",
        Error::InvalidTimestamp(_) => "InvalidTimestampError",
        Error::InvalidRequest(_) => "InvalidRequestError",
        Error::InvalidConfig(_) => "InvalidConfigurationError",
        Error::ProducerState(e) => match e {
            ProducerStateError::InvalidProducerEpoch { .. } => "InvalidProducerEpochError",
            ProducerStateError::OutOfOrderSequenceNumber { .. } => "OutOfOrderSequenceNumberError",
            ProducerStateError::InvalidTxnState { .. } => "InvalidTxnStateError",
            ProducerStateError::TransactionCoordinatorFenced { .. } => {
                "TransactionCoordinatorFencedError"
            }
        },
        Error::Storage { .. } => "KafkaStorageError",
    }
}

/// Convert a core error into the matching `rillet.errors` exception.
pub fn to_py(err: Error) -> PyErr {
    kafka_error(class_name(&err), err.to_string())
}

/// The `rillet.errors` exception `class` (named after Kafka's error) with `msg`, for errors
/// that the bindings find themselves rather than the core.
pub fn kafka_error(class: &str, msg: String) -> PyErr {
    Python::with_gil(|py| {
        let module =
            ERRORS_MODULE.get_or_try_init(py, || py.import("rillet.errors").map(|m| m.unbind()));
        let class = module
            .and_then(|m| m.bind(py).getattr(class))
            .and_then(|c| Ok(c.downcast_into::<PyType>()?));
        match class {
            Ok(cls) => PyErr::from_type(cls, msg),
            Err(import_failure) => import_failure,
        }
    })
}

/// `?`-friendly conversion for core results.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// A bad argument from Python, as Kafka's INVALID_REQUEST.
pub fn invalid_request(msg: impl Into<String>) -> PyErr {
    to_py(Error::InvalidRequest(msg.into()))
}
