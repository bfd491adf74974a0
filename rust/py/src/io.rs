use std::os::fd::RawFd;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rillet_core::io::{transfer as core_transfer, FileRegion as CoreRegion};

use crate::errors::IntoPyResult;

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

/// Read regions back to back into one new `bytes`, filling it in place with the GIL released.
pub(crate) fn read_regions<'py>(
    py: Python<'py>,
    regions: &[CoreRegion],
) -> PyResult<Bound<'py, PyBytes>> {
    let total: u64 = regions.iter().map(|r| r.length).sum();
    PyBytes::new_with(py, total as usize, |buf: &mut [u8]| {
        py.allow_threads(|| {
            let mut at = 0usize;
            for r in regions {
                let n = r.length as usize;
                r.read_exact_into(&mut buf[at..at + n])?;
                at += n;
            }
            Ok::<_, rillet_core::Error>(())
        })
        .py()
    })
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
