//! `rillet._core`: thin PyO3 wrappers over `rillet-core`.
//!
//! Inputs are borrowed from immutable `bytes` (or copied into owned Rust values) before the
//! GIL is released. Calls that may block or work on many megabytes release it; short calls
//! keep it, because getting it back can cost more than the call (see `gil`).

mod accumulator;
mod arrow;
mod bytes;
mod cleaner;
mod consumer;
mod errors;
mod future;
mod gil;
mod io;
mod kafka;
mod log;
mod producer_state;
mod record;
mod wire;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    record::register(m)?;
    accumulator::register(m)?;
    future::register(m)?;
    consumer::register(m)?;
    arrow::register(m)?;
    log::register(m)?;
    producer_state::register(m)?;
    cleaner::register(m)?;
    io::register(m)?;
    wire::register(m)?;
    kafka::register(m)?;
    Ok(())
}
