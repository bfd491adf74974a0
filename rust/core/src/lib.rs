//! Rillet's storage core.
//!
//! Everything here is plain Rust with no Python in it, so `cargo test` and `cargo bench`
//! run on their own. The `rillet._core` extension (crate `rillet-py`) is a thin adapter.
//!
//! - [`record`]: Kafka's RecordBatch v2 (magic 2) codec: builder, validating decoder,
//!   zig-zag varints, CRC-32C, compression codecs.
//! - [`log`]: segments, the sparse offset and time indexes, the partition log (append, read,
//!   lookup, roll, retention, truncation), recovery, checkpoints and the leader-epoch cache.
//! - [`io`]: [`io::FileRegion`] and zero-copy `sendfile(2)` transfer.
//!
//! The wire codecs (`rillet-protocol`) and the producer's accumulator and partitioners
//! (`rillet-client`) are crates of their own on top of this one.

pub mod error;
pub mod io;
pub mod log;
pub mod record;

pub use error::{Error, Result};
