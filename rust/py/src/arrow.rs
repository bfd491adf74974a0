//! `decode_arrow`: fetched RecordBatch v2 bytes to a `pyarrow.RecordBatch` with Spark's Kafka
//! source schema, for the PySpark data source. The columns are built in Rust (see
//! `rillet_core::record::arrow`) and handed to pyarrow through the Arrow C Data Interface, so
//! Python neither loops over records nor copies the buffers.

use arrow_array::{Array, StructArray};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use rillet_core::record::arrow::{decode_to_arrow, ArrowDecodeOptions};
use rillet_core::Error;

use crate::errors::IntoPyResult;

/// `pyarrow.RecordBatch._import_from_c`, looked up once.
static IMPORT_FROM_C: GILOnceCell<PyObject> = GILOnceCell::new();

fn import_from_c(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    IMPORT_FROM_C
        .get_or_try_init(py, || {
            let pyarrow = py.import("pyarrow").map_err(|e| {
                let err = PyImportError::new_err(
                    "rillet._core.decode_arrow needs pyarrow: pip install 'rillet[spark]'",
                );
                err.set_cause(py, Some(e));
                err
            })?;
            Ok::<_, PyErr>(
                pyarrow
                    .getattr("RecordBatch")?
                    .getattr("_import_from_c")?
                    .unbind(),
            )
        })
        .map(|f| f.bind(py))
}

/// Decode fetched batches (bytes `start..end` of `data`; all of it by default) into a
/// `pyarrow.RecordBatch` of the records with
/// `from_offset <= offset < until_offset`, in Spark's Kafka source schema (key, value, topic,
/// partition, offset, timestamp, timestampType, and headers when `include_headers`).
/// Returns an `ArrowBatch`: the batch and the offset to fetch next (after the last whole
/// batch; never below `from_offset`). Control batches are skipped and a trailing partial
/// batch is ignored; a corrupt batch raises CorruptRecordError.
#[pyfunction]
#[pyo3(signature = (
    data, topic, partition, from_offset, until_offset, *, include_headers = false,
    verify_crc = true, start = 0, end = None
))]
#[allow(clippy::too_many_arguments)]
fn decode_arrow(
    py: Python<'_>,
    data: &[u8],
    topic: &str,
    partition: i32,
    from_offset: i64,
    until_offset: i64,
    include_headers: bool,
    verify_crc: bool,
    start: usize,
    end: Option<usize>,
) -> PyResult<ArrowBatch> {
    // Fail on a missing pyarrow before doing the work.
    let import = import_from_c(py)?;
    let end = end.unwrap_or(data.len()).min(data.len());
    let data = data.get(start..end).unwrap_or_default();
    let topic = topic.to_owned();
    let (array, schema, next_offset) = py
        .allow_threads(|| {
            let opts = ArrowDecodeOptions {
                topic: &topic,
                partition,
                from_offset,
                until_offset,
                include_headers,
                verify_crc,
            };
            let out = decode_to_arrow(data, &opts)?;
            let schema = FFI_ArrowSchema::try_from(out.batch.schema().as_ref())
                .map_err(|e| Error::InvalidRequest(format!("exporting the Arrow schema: {e}")))?;
            let array = FFI_ArrowArray::new(&StructArray::from(out.batch).into_data());
            Ok::<_, Error>((Box::new(array), Box::new(schema), out.next_offset))
        })
        .py()?;
    // pyarrow moves both structs out (leaving them released), so dropping the boxes
    // afterwards frees nothing twice; if the import fails first, the drops release them.
    let array = Box::into_raw(array);
    let schema = Box::into_raw(schema);
    let batch = import.call1((array as usize, schema as usize));
    // SAFETY: both pointers came from Box::into_raw above and are turned back once.
    unsafe {
        drop(Box::from_raw(array));
        drop(Box::from_raw(schema));
    }
    Ok(ArrowBatch {
        batch: batch?.unbind(),
        next_offset,
    })
}

/// What `decode_arrow` decoded: the `pyarrow.RecordBatch` and the offset to fetch next.
#[pyclass(module = "rillet._core", frozen, get_all)]
pub struct ArrowBatch {
    batch: PyObject,
    next_offset: i64,
}

#[pymethods]
impl ArrowBatch {
    fn __repr__(&self) -> String {
        format!("ArrowBatch(next_offset={})", self.next_offset)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowBatch>()?;
    m.add_function(wrap_pyfunction!(decode_arrow, m)?)?;
    Ok(())
}
