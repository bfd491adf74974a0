//! The producer's per-record work, apart from the storage core.
//!
//! - [`partitioner`]: Kafka's partitioners for one topic (explicit, keyed by [`murmur2`],
//!   KIP-794 sticky, round robin, random).
//! - [`accumulator`]: Kafka's `RecordAccumulator`: per-partition batches closed by size or
//!   age within a memory budget, built with `rillet-core`'s batch builder.
//! - [`stamp`]: a closed batch stamped again with a bumped producer epoch (KIP-360).
//!
//! Errors are `rillet-core`'s one error enum. No PyO3: `cargo test` runs on its own.

pub mod accumulator;
pub mod murmur2;
pub mod partitioner;
pub mod stamp;
