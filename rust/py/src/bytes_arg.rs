//! Byte strings from Python without a copy where that is safe.

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
