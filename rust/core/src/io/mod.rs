//! Zero-copy reads: a [`FileRegion`] names bytes of a segment file; [`transfer`] sends a
//! list of them to a socket with `sendfile(2)`.

mod region;
mod sendfile;

pub use region::FileRegion;
pub use sendfile::{transfer, Transfer};
