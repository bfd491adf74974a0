//! Embeds Kafka's JSON message schemas (`schemas/kafka/*.json`) into the crate: writes
//! `$OUT_DIR/kafka_schemas.rs`, one static list of `(file stem, file contents)` sorted by
//! file name, each contents an `include_str!` of the file. `kafka::registry` parses them
//! once, on first use.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join("kafka");
    // A directory makes cargo rerun on any file added, removed or changed under it.
    println!("cargo:rerun-if-changed={}", dir.display());

    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();

    let mut out = String::from(
        "/// Kafka's message schemas, `(file stem, JSON with // comments)`, sorted by name.\n\
         pub(crate) static SCHEMA_FILES: &[(&str, &str)] = &[\n",
    );
    for path in &files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name");
        let full = path.to_str().expect("a UTF-8 path");
        writeln!(out, "    ({stem:?}, include_str!({full:?})),").expect("writing to a String");
    }
    out.push_str("];\n");

    let out_path =
        Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("kafka_schemas.rs");
    fs::write(&out_path, out)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", out_path.display()));
}
