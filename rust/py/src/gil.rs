//! When a call releases the GIL.
//!
//! Releasing the GIL is not free. When another Python thread is runnable (the producer's
//! sender, gRPC's threads, the broker's schedulers), getting it back waits for that thread
//! to give it up, which can take a whole switch interval: 5 ms by default, fifty times what
//! copying or checksumming a megabyte costs. So calls over small inputs keep the GIL, and
//! calls that may block (disk syncs, file creation and deletion, sockets) or that work on
//! many megabytes release it.

use pyo3::Python;

/// Inputs below this many bytes are handled with the GIL held: copying or CRC-checking
/// 4 MiB from the page cache takes about 0.4 ms here.
pub(crate) const RELEASE_ABOVE_BYTES: usize = 4 << 20;

/// Copies and checksums of record batches on the producer's sender thread run off the GIL
/// above this: a megabyte takes about 0.1 ms, during which the thread calling `send()` runs
/// (it is the one the producer's throughput depends on).
pub(crate) const RELEASE_COPY_ABOVE_BYTES: usize = 256 << 10;

/// Decoding (decompressing and parsing records) costs more per byte than copying.
pub(crate) const RELEASE_DECODE_ABOVE_BYTES: usize = 1 << 20;

/// Run `f`, releasing the GIL only when `release` is true.
pub(crate) fn run<T: Send>(py: Python<'_>, release: bool, f: impl FnOnce() -> T + Send) -> T {
    if release {
        py.allow_threads(f)
    } else {
        f()
    }
}

/// Lock `m` with the GIL held when it is free (the common case), else wait for it with the
/// GIL released. A thread holding `m` may be waiting for the GIL (Python code it calls can
/// hand the GIL to another thread), so blocking on `m` with the GIL held could deadlock.
pub(crate) fn lock<'a, T: Send>(
    py: Python<'_>,
    m: &'a parking_lot::Mutex<T>,
) -> parking_lot::MutexGuard<'a, T> {
    match m.try_lock() {
        Some(guard) => guard,
        None => py.allow_threads(|| m.lock()),
    }
}
