//! Generates the rillet.v1 client code from `proto/` with protox, a protobuf compiler written in
//! Rust, so the build needs no `protoc` binary: protox parses the .proto files into a
//! FileDescriptorSet and tonic-prost-build turns that into prost messages and tonic clients.

use std::path::PathBuf;

/// The services this example calls; their imports (common.proto) come along.
const PROTOS: &[&str] = &[
    "rillet/v1/admin.proto",
    "rillet/v1/produce.proto",
    "rillet/v1/fetch.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    // A directory makes Cargo rerun this script when any file under it changes.
    println!("cargo:rerun-if-changed={}", proto_root.display());
    let fds = protox::compile(PROTOS, [&proto_root])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
