//! `rillet._core`: thin PyO3 wrappers over `rillet-core`.
//!
//! Inputs are borrowed from immutable `bytes` (or copied into owned Rust values) before the
//! GIL is released; every call that touches the disk or loops over records releases it.

mod accumulator;
mod consumer;
mod errors;
mod io;
mod log;
mod record;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    record::register(m)?;
    accumulator::register(m)?;
    consumer::register(m)?;
    log::register(m)?;
    io::register(m)?;
    Ok(())
}
