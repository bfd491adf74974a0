//! The Kafka wire protocol codec (`rillet_protocol::kafka`) for Python: a request frame in,
//! its header and body as a dict out; a response body dict in, its frame out.
//!
//! Bodies are dicts keyed by the snake_case of the schema's field names, in Kafka's types:
//! `int`, `float`, `bool`, `str`, `bytes` (for `bytes` and `records`), `uuid.UUID`, lists
//! and nested dicts; `None` for a null. A dict leaves out any field it wants at the schema's
//! default. Python values are read with the schema in hand, so a wrong type or an unknown
//! key is reported with its field path.
//!
//! Errors: an unknown api key or a version the schemas do not have is `UnsupportedVersionError`
//! (the broker answers UNSUPPORTED_VERSION with the correlation id it read itself); bytes that
//! do not follow the schema are `InvalidRequestError`; a body that does not fit its schema
//! (a bug of the caller) is `ValueError` or `TypeError`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyInt, PyList, PyMemoryView, PySlice, PyString, PyTuple,
};
use rillet_protocol::kafka::{
    self, registry, FieldType, MessageKind, MessageSpec, RequestHeader, Splice, StructSpec, Value,
};

use crate::bytes::BytesArg;
use crate::errors::kafka_error;

static UUID_CLASS: GILOnceCell<PyObject> = GILOnceCell::new();

pub(crate) fn to_py_err(err: kafka::Error) -> PyErr {
    match err {
        kafka::Error::UnknownApiKey { .. } | kafka::Error::UnsupportedVersion { .. } => {
            kafka_error("UnsupportedVersionError", err.to_string())
        }
        kafka::Error::Malformed { .. } => kafka_error("InvalidRequestError", err.to_string()),
        kafka::Error::InvalidValue { .. } => PyValueError::new_err(err.to_string()),
    }
}

/// The body of an `api_key` message given as a dict, read against its schema.
fn body_from_py(
    api_key: i16,
    kind: MessageKind,
    body: &Bound<'_, PyAny>,
    splice: bool,
) -> PyResult<Value> {
    let spec: &MessageSpec = registry().message(api_key, kind).ok_or_else(|| {
        to_py_err(kafka::Error::UnknownApiKey {
            api_key,
            kind,
            correlation_id: None,
        })
    })?;
    struct_from_py(&spec.body, body, "", splice)
}

// -- Value -> Python ------------------------------------------------------------------------

/// Where a [`Value::InPlace`] record set is: the decoded frame, as the caller passed it.
struct InPlace<'a, 'py> {
    frame: &'a Bound<'py, PyAny>,
    bytes: &'a [u8],
    /// The frame is a `bytes`, so a `memoryview` slice of it can stand for the record set.
    immutable: bool,
}

fn to_py(py: Python<'_>, value: &Value) -> PyResult<PyObject> {
    to_py_in(py, value, None)
}

fn to_py_in(py: Python<'_>, value: &Value, frame: Option<&InPlace<'_, '_>>) -> PyResult<PyObject> {
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Str(s) => PyString::new(py, s).into_any().unbind(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any().unbind(),
        Value::Uuid(u) => {
            let class = UUID_CLASS.get_or_try_init(py, || -> PyResult<PyObject> {
                Ok(py.import("uuid")?.getattr("UUID")?.unbind())
            })?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("bytes", PyBytes::new(py, u))?;
            class.bind(py).call((), Some(&kwargs))?.unbind()
        }
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py_in(py, item, frame)?)?;
            }
            list.into_any().unbind()
        }
        Value::Spliced(len) => len.into_pyobject(py)?.into_any().unbind(),
        Value::InPlace { offset, len } => {
            let Some(at) = frame else {
                return Err(PyValueError::new_err(
                    "records read in place, without their frame",
                ));
            };
            if at.immutable {
                let view = PyMemoryView::from(at.frame)?;
                let slice = PySlice::new(py, *offset as isize, (*offset + *len) as isize, 1);
                view.get_item(slice)?.unbind()
            } else {
                PyBytes::new(py, &at.bytes[*offset..*offset + *len])
                    .into_any()
                    .unbind()
            }
        }
        Value::Struct(fields) => {
            let dict = PyDict::new(py);
            for (key, v) in fields {
                dict.set_item(PyString::intern(py, key), to_py_in(py, v, frame)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

// -- Python -> Value, read with the schema --------------------------------------------------

/// `splice`: an `int` given for a `records` field is a record set of that many bytes the
/// caller sends itself ([`Value::Spliced`]).
fn struct_from_py(
    spec: &StructSpec,
    obj: &Bound<'_, PyAny>,
    path: &str,
    splice: bool,
) -> PyResult<Value> {
    let dict = obj.downcast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{path}: a {} must be a dict, not {}",
            spec.name,
            type_name(obj)
        ))
    })?;
    let mut fields = Vec::with_capacity(dict.len());
    for (key, v) in dict.iter() {
        let key: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{path}: field names must be str")))?;
        let Some(field) = spec.field(&key) else {
            return Err(PyValueError::new_err(format!(
                "{path}: {} has no field {key:?}",
                spec.name
            )));
        };
        let field_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        fields.push((
            field.key,
            value_from_py(&field.field_type, &v, &field_path, splice)?,
        ));
    }
    Ok(Value::Struct(fields))
}

fn value_from_py(
    t: &FieldType,
    obj: &Bound<'_, PyAny>,
    path: &str,
    splice: bool,
) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    let wrong = |what: &str| {
        PyTypeError::new_err(format!(
            "{path}: a {t} field takes {what}, not {}",
            type_name(obj)
        ))
    };
    Ok(match t {
        FieldType::Bool => Value::Bool(
            obj.downcast::<PyBool>()
                .map_err(|_| wrong("a bool"))?
                .is_true(),
        ),
        FieldType::Int8
        | FieldType::Int16
        | FieldType::Uint16
        | FieldType::Int32
        | FieldType::Uint32
        | FieldType::Int64 => Value::Int(obj.extract().map_err(|_| wrong("an int"))?),
        FieldType::Float64 => Value::Float(obj.extract().map_err(|_| wrong("a float"))?),
        FieldType::String => Value::Str(obj.extract().map_err(|_| wrong("a str"))?),
        FieldType::Records if splice && obj.is_instance_of::<PyInt>() => {
            Value::Spliced(obj.extract().map_err(|_| wrong("a length"))?)
        }
        FieldType::Bytes | FieldType::Records => {
            // Read as a buffer: extracting a `Vec<u8>` would walk the bytes as a sequence of
            // ints, a million Python calls for a 1 MiB record set.
            let bytes: BytesArg<'_> = obj.extract().map_err(|_| wrong("bytes"))?;
            Value::Bytes(bytes.as_slice().to_vec())
        }
        FieldType::Uuid => {
            let raw: Vec<u8> = match obj.extract::<Vec<u8>>() {
                Ok(b) if obj.is_instance_of::<PyBytes>() => b,
                _ => obj
                    .getattr("bytes")
                    .and_then(|b| b.extract())
                    .map_err(|_| wrong("a uuid.UUID"))?,
            };
            Value::Uuid(raw.try_into().map_err(|_| wrong("16 bytes"))?)
        }
        FieldType::Struct(spec) => struct_from_py(spec, obj, path, splice)?,
        FieldType::Array(element) => {
            if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
                return Err(wrong("a list"));
            }
            let items = obj.try_iter().map_err(|_| wrong("a list"))?;
            let mut out = Vec::new();
            for (i, item) in items.enumerate() {
                out.push(value_from_py(
                    element,
                    &item?,
                    &format!("{path}[{i}]"),
                    splice,
                )?);
            }
            Value::Array(out)
        }
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

// -- the functions ---------------------------------------------------------------------------

/// Every request api key the schemas know, with its supported versions: `[(api_key,
/// min_version, max_version)]`, as ApiVersions answers them (a latest version Kafka marks
/// unstable left out).
#[pyfunction]
fn kafka_api_versions() -> Vec<(i16, i16, i16)> {
    registry()
        .api_versions()
        .into_iter()
        .map(|r| (r.api_key, r.min_version, r.max_version))
        .collect()
}

/// A request frame (the bytes after its size prefix; any buffer): `(api_key, api_version,
/// correlation_id, client_id, body)`. With `records_in_place`, a produced record set is a
/// `memoryview` slice of `frame` when `frame` is a `bytes` (no copy), else `bytes`.
#[pyfunction]
#[pyo3(signature = (frame, records_in_place = false))]
fn kafka_decode_request<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyAny>,
    records_in_place: bool,
) -> PyResult<(i16, i16, i32, Option<String>, PyObject)> {
    let arg: BytesArg<'py> = frame.extract()?;
    let bytes = arg.as_slice();
    let decoded = if records_in_place {
        kafka::decode_request_in_place(bytes)
    } else {
        kafka::decode_request(bytes)
    };
    let (header, body) = decoded.map_err(to_py_err)?;
    let at = InPlace {
        frame,
        bytes,
        immutable: frame.is_instance_of::<PyBytes>(),
    };
    Ok((
        header.api_key,
        header.api_version,
        header.correlation_id,
        header.client_id,
        to_py_in(py, &body, Some(&at))?,
    ))
}

/// A `bytes` of `size` bytes and a writable `memoryview` of its memory, for a socket to
/// receive a frame into (`recv_into`), so that the frame needs no copy to become `bytes`.
/// The caller keeps the `bytes` alive while it uses the view, writes every byte through the
/// view before it reads or shares the `bytes`, and drops the view then. The contents start
/// uninitialized (and are not exposed before they are written).
#[pyfunction]
fn kafka_frame_buffer(py: Python<'_>, size: usize) -> PyResult<(PyObject, PyObject)> {
    let len = pyo3::ffi::Py_ssize_t::try_from(size)
        .map_err(|_| PyValueError::new_err("frame buffer too large"))?;
    // SAFETY: PyBytes_FromStringAndSize(NULL, n) returns a new, unshared bytes object of n
    // bytes (or NULL with an exception set). The memoryview over its buffer holds no
    // reference to it: the caller keeps the bytes alive while the view is in use (see above).
    unsafe {
        let obj = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len);
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        let bytes = Bound::from_owned_ptr(py, obj);
        let data = pyo3::ffi::PyBytes_AsString(obj);
        let view = pyo3::ffi::PyMemoryView_FromMemory(data, len, pyo3::ffi::PyBUF_WRITE);
        if view.is_null() {
            return Err(PyErr::fetch(py));
        }
        let view = Bound::from_owned_ptr(py, view);
        Ok((bytes.unbind(), view.unbind()))
    }
}

/// A response's frame, size prefix included.
#[pyfunction]
fn kafka_encode_response<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = body_from_py(api_key, MessageKind::Response, body, false)?;
    let frame =
        kafka::encode_response(api_key, api_version, correlation_id, &value).map_err(to_py_err)?;
    Ok(PyBytes::new(py, &frame))
}

/// A response's frame, size prefix included, with each `records` field given as an `int`
/// left out (a record set of that many bytes the caller sends itself, with `sendfile`):
/// `(frame, [(offset, length), ...])`, each record set going before `frame[offset]`, in
/// order. The size prefix counts them.
#[pyfunction]
fn kafka_encode_response_spliced<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<Splice>)> {
    let value = body_from_py(api_key, MessageKind::Response, body, true)?;
    let (frame, splices) =
        kafka::encode_response_spliced(api_key, api_version, correlation_id, &value)
            .map_err(to_py_err)?;
    Ok((PyBytes::new(py, &frame), splices))
}

/// A request's frame, size prefix included (for clients and tests).
#[pyfunction]
#[pyo3(signature = (api_key, api_version, correlation_id, client_id, body))]
fn kafka_encode_request<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<String>,
    body: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let value = body_from_py(api_key, MessageKind::Request, body, false)?;
    let header = RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id,
    };
    let frame = kafka::encode_request(&header, &value).map_err(to_py_err)?;
    Ok(PyBytes::new(py, &frame))
}

/// A response frame (the bytes after its size prefix) of `api_key` at `api_version`:
/// `(correlation_id, body)`.
#[pyfunction]
fn kafka_decode_response<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    frame: BytesArg<'py>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (correlation_id, body) =
        kafka::decode_response(api_key, api_version, frame.as_slice()).map_err(to_py_err)?;
    PyTuple::new(
        py,
        [
            correlation_id.into_pyobject(py)?.into_any().unbind(),
            to_py(py, &body)?,
        ],
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kafka_api_versions, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_decode_request, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_frame_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_encode_response, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_encode_response_spliced, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_encode_request, m)?)?;
    m.add_function(wrap_pyfunction!(kafka_decode_response, m)?)?;
    Ok(())
}
