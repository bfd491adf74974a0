//! Byte strings between Python and Rust: read in place where that is safe ([`BytesArg`]),
//! and written straight into a new `bytes` ([`new_bytes`]).

use std::mem::MaybeUninit;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};

/// A `bytes`, or a `memoryview` of a `bytes` (a slice of a request, say), read in place; any
/// other buffer is copied first, as its owner could change it while the GIL is released.
pub(crate) enum BytesArg<'py> {
    Bytes(Bound<'py, PyBytes>),
    View(PyBuffer<u8>),
    Owned(Vec<u8>),
}

impl<'py> FromPyObject<'py> for BytesArg<'py> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = ob.downcast::<PyBytes>() {
            return Ok(BytesArg::Bytes(b.clone()));
        }
        let buffer = PyBuffer::<u8>::get(ob)?;
        let of_bytes = ob.downcast::<PyMemoryView>().is_ok()
            && ob.getattr("obj")?.downcast::<PyBytes>().is_ok();
        if of_bytes && buffer.readonly() && buffer.is_c_contiguous() {
            Ok(BytesArg::View(buffer))
        } else {
            Ok(BytesArg::Owned(buffer.to_vec(ob.py())?))
        }
    }
}

impl BytesArg<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            BytesArg::Bytes(b) => b.as_bytes(),
            // SAFETY: a contiguous view of an immutable `bytes`, which the buffer keeps alive
            // until it is released (when `self` is dropped).
            BytesArg::View(buffer) => unsafe {
                std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes())
            },
            BytesArg::Owned(v) => v,
        }
    }
}

/// A new `bytes` of `len` bytes, all written by `init`, which may release the GIL (nothing
/// else can see the object yet). Unlike `PyBytes::new_with`, the buffer is not zeroed first:
/// zeroing a response of several megabytes that is overwritten at once cost a tenth of a
/// broker's time serving fetches. `init` must write every byte (the wire encoders check
/// that they did); if it fails, the object is dropped unseen.
pub(crate) fn new_bytes<'py>(
    py: Python<'py>,
    len: usize,
    init: impl FnOnce(&mut [MaybeUninit<u8>]) -> PyResult<()>,
) -> PyResult<Bound<'py, PyBytes>> {
    let size = pyo3::ffi::Py_ssize_t::try_from(len)
        .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("bytes too large"))?;
    // SAFETY: PyBytes_FromStringAndSize(NULL, n) returns a new reference to a bytes object
    // with n bytes of uninitialized contents (or NULL with an exception set); its buffer
    // stays valid and unshared until the object is handed out.
    unsafe {
        let obj = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size);
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        let bytes = Bound::from_owned_ptr(py, obj).downcast_into_unchecked::<PyBytes>();
        let data = pyo3::ffi::PyBytes_AsString(obj).cast::<MaybeUninit<u8>>();
        init(std::slice::from_raw_parts_mut(data, len))?;
        Ok(bytes)
    }
}
