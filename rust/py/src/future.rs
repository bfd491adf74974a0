use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

/// One sent record's future, as kafka-python's `FutureRecordMetadata`.
///
/// It holds what is particular to the record (its index in the batch, timestamp and sizes)
/// and the batch's shared `produce_result` (`rillet.client.futures.ProduceRequestResult`),
/// which owns the waiting and the callbacks: the methods here hand over to it. Made in Rust
/// by `RecordAccumulator.send`, one per record, so it is kept small and immutable.
#[pyclass(module = "rillet._core", frozen)]
pub struct FutureRecordMetadata {
    /// The outcome shared by every record of this record's batch.
    #[pyo3(get)]
    produce_result: PyObject,
    /// The record's offset delta in its batch.
    #[pyo3(get)]
    relative_offset: i32,
    #[pyo3(get)]
    timestamp: i64,
    #[pyo3(get)]
    serialized_key_size: i64,
    #[pyo3(get)]
    serialized_value_size: i64,
    #[pyo3(get)]
    serialized_header_size: i64,
}

impl FutureRecordMetadata {
    /// Hand a callback (or an errback) over to the batch's result.
    fn listen<'py>(
        slf: &Bound<'py, Self>,
        errback: bool,
        f: PyObject,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, Self>> {
        slf.get().produce_result.call_method1(
            slf.py(),
            "add_listener",
            (slf, f, args, kwargs, errback),
        )?;
        Ok(slf.clone())
    }

    pub(crate) fn new_for(
        produce_result: PyObject,
        relative_offset: i32,
        timestamp: i64,
        serialized_key_size: i64,
        serialized_value_size: i64,
        serialized_header_size: i64,
    ) -> Self {
        FutureRecordMetadata {
            produce_result,
            relative_offset,
            timestamp,
            serialized_key_size,
            serialized_value_size,
            serialized_header_size,
        }
    }
}

#[pymethods]
impl FutureRecordMetadata {
    #[new]
    #[pyo3(signature = (produce_result, relative_offset, timestamp, serialized_key_size, serialized_value_size, serialized_header_size))]
    fn new(
        produce_result: PyObject,
        relative_offset: i32,
        timestamp: i64,
        serialized_key_size: i64,
        serialized_value_size: i64,
        serialized_header_size: i64,
    ) -> Self {
        Self::new_for(
            produce_result,
            relative_offset,
            timestamp,
            serialized_key_size,
            serialized_value_size,
            serialized_header_size,
        )
    }

    /// The batch was acknowledged or failed.
    #[getter]
    fn is_done(&self, py: Python<'_>) -> PyResult<bool> {
        self.produce_result.getattr(py, "is_done")?.extract(py)
    }

    fn succeeded(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.is_done(py)? && self.produce_result.getattr(py, "error")?.is_none(py))
    }

    fn failed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.is_done(py)? && !self.produce_result.getattr(py, "error")?.is_none(py))
    }

    /// The send's error once it failed, else None.
    #[getter]
    fn exception(&self, py: Python<'_>) -> PyResult<PyObject> {
        if self.is_done(py)? {
            self.produce_result.getattr(py, "error")
        } else {
            Ok(py.None())
        }
    }

    /// The record's `RecordMetadata` once acknowledged, else None.
    #[getter]
    fn value(slf: &Bound<'_, Self>) -> PyResult<PyObject> {
        let py = slf.py();
        slf.get()
            .produce_result
            .call_method1(py, "metadata_for", (slf,))
    }

    /// Block until the batch completes: the record's `RecordMetadata`, or the send's error
    /// raised, or `KafkaTimeoutError` after `timeout` seconds.
    #[pyo3(signature = (timeout = None))]
    fn get(slf: &Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyObject> {
        let py = slf.py();
        slf.get()
            .produce_result
            .call_method1(py, "get_for", (slf, timeout))
    }

    /// Call `f(*args, metadata, **kwargs)` on success (at once if already acknowledged).
    #[pyo3(signature = (f, *args, **kwargs))]
    fn add_callback<'py>(
        slf: &Bound<'py, Self>,
        f: PyObject,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, Self>> {
        Self::listen(slf, false, f, args, kwargs)
    }

    /// Call `f(*args, exception, **kwargs)` on failure (at once if already failed).
    #[pyo3(signature = (f, *args, **kwargs))]
    fn add_errback<'py>(
        slf: &Bound<'py, Self>,
        f: PyObject,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, Self>> {
        Self::listen(slf, true, f, args, kwargs)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.produce_result)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FutureRecordMetadata>()
}
