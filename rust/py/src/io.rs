use std::os::fd::RawFd;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rillet_core::io::{transfer as core_transfer, FileRegion as CoreRegion};

use pyo3::buffer::PyBuffer;

use crate::errors::{invalid_request, IntoPyResult};
use crate::gil;

/// Bytes of a segment file: `length` bytes from `position`. Holds the file open.
#[pyclass(module = "rillet._core", frozen)]
#[derive(Clone)]
pub struct FileRegion {
    pub(crate) inner: CoreRegion,
}

#[pymethods]
impl FileRegion {
    #[getter]
    fn position(&self) -> u64 {
        self.inner.position
    }

    #[getter]
    fn length(&self) -> u64 {
        self.inner.length
    }

    /// Read the region's bytes (one `pread`, GIL released).
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        read_regions(py, std::slice::from_ref(&self.inner))
    }

    /// Read the region into a writable buffer; returns the bytes written.
    fn read_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        read_regions_into(py, std::slice::from_ref(&self.inner), buffer)
    }

    fn __len__(&self) -> usize {
        self.inner.length as usize
    }

    fn __repr__(&self) -> String {
        format!(
            "FileRegion(position={}, length={})",
            self.inner.position, self.inner.length
        )
    }
}

/// Fill `buf` with the regions back to back.
fn fill(regions: &[CoreRegion], buf: &mut [u8]) -> Result<(), rillet_core::Error> {
    let mut at = 0usize;
    for r in regions {
        let n = r.length as usize;
        r.read_exact_into(&mut buf[at..at + n])?;
        at += n;
    }
    Ok(())
}

/// Read regions back to back into one new `bytes`, filled in place with the GIL released
/// (and not zeroed first: every byte is overwritten by the read or the object is dropped).
pub(crate) fn read_regions<'py>(
    py: Python<'py>,
    regions: &[CoreRegion],
) -> PyResult<Bound<'py, PyBytes>> {
    let total: usize = regions.iter().map(|r| r.length as usize).sum();
    let len =
        pyo3::ffi::Py_ssize_t::try_from(total).map_err(|_| invalid_request("read is too large"))?;
    // SAFETY: a null source makes CPython allocate `len` uninitialised bytes; the new object
    // is owned here and not visible to any other code until it is returned.
    let bytes = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len),
        )?
        .downcast_into_unchecked::<PyBytes>()
    };
    // SAFETY: the buffer spans exactly `len` bytes of the object created above.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(
            pyo3::ffi::PyBytes_AsString(bytes.as_ptr()) as *mut u8,
            total,
        )
    };
    gil::run(py, total > gil::RELEASE_ABOVE_BYTES, || fill(regions, buf)).py()?;
    Ok(bytes)
}

/// Read regions back to back into a writable buffer (bytearray, memoryview, numpy array...)
/// (releasing the GIL for large reads; see `gil`). Returns the bytes written.
pub(crate) fn read_regions_into(
    py: Python<'_>,
    regions: &[CoreRegion],
    buffer: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let total: usize = regions.iter().map(|r| r.length as usize).sum();
    let view = PyBuffer::<u8>::get(buffer)?;
    if view.readonly() || !view.is_c_contiguous() {
        return Err(invalid_request(
            "read_into needs a writable, contiguous buffer",
        ));
    }
    if view.len_bytes() < total {
        return Err(invalid_request(format!(
            "the buffer holds {} bytes but the read returns {total}",
            view.len_bytes()
        )));
    }
    // SAFETY: the view keeps the exporter's memory alive and pinned (no resize while a buffer
    // is exported) until it is released when `view` drops, after the read.
    let buf = unsafe { std::slice::from_raw_parts_mut(view.buf_ptr() as *mut u8, total) };
    gil::run(py, total > gil::RELEASE_ABOVE_BYTES, || fill(regions, buf)).py()?;
    Ok(total)
}

/// Send `regions` to socket `fd` with `sendfile(2)`, starting `skip` bytes in. Returns the
/// bytes sent in total (counting `skip`); less than the regions' total means the
/// non-blocking socket is full: call again with `skip` set to the result once writable.
#[pyfunction]
#[pyo3(signature = (fd, regions, skip = 0))]
fn transfer(
    py: Python<'_>,
    fd: RawFd,
    regions: Vec<PyRef<'_, FileRegion>>,
    skip: u64,
) -> PyResult<u64> {
    let owned: Vec<CoreRegion> = regions.iter().map(|r| r.inner.clone()).collect();
    let t = py.allow_threads(|| core_transfer(&owned, fd, skip)).py()?;
    Ok(t.sent)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FileRegion>()?;
    m.add_function(wrap_pyfunction!(transfer, m)?)?;
    Ok(())
}
