//! Rillet's wire codecs, apart from the storage core: `rillet-core` knows record batches
//! and logs, not the messages that carry them.
//!
//! - [`grpc`]: the protobuf encoding of the gRPC API's hot messages (`ProduceRequest`,
//!   `FetchResponse`), written into their final buffers and read in place.
//! - [`kafka`]: Kafka's binary protocol, every request and response read and written by
//!   interpreting Kafka's own JSON message schemas.
//!
//! Errors are `rillet-core`'s one error enum. No PyO3: `cargo test` runs on its own.

pub mod grpc;
pub mod kafka;
