//! Producer state snapshots: `<log dir>/<20-digit offset>.snapshot`, Kafka's
//! `ProducerSnapshot` message (storage/src/main/resources/message/ProducerSnapshot.json,
//! version 1), read and written exactly as Kafka's `ProducerStateManager` does.
//!
//! ```text
//! offset  width  field
//!      0      2  version                  int16, 1
//!      2      4  crc                      uint32, CRC-32C of bytes 6.. (everything after it)
//!      6      4  entry count              int32
//!     10     46  per producer, in producer id order:
//!                  producer_id              int64
//!                  epoch                    int16
//!                  last_sequence            int32
//!                  last_offset              int64  (-1: no batch cached)
//!                  offset_delta             int32
//!                  timestamp                int64  (the entry's last timestamp)
//!                  coordinator_epoch        int32
//!                  current_txn_first_offset int64  (-1: no ongoing transaction)
//! ```
//! All big-endian. The offset in the name is the log offset the state covers up to
//! (exclusive). Only each producer's last batch is kept, so duplicates of its older
//! batches are no longer detected after a reload (as in Kafka).
//!
//! Written to a `.tmp` sibling, fsynced, renamed into place and the directory fsynced, so a
//! crash leaves either no snapshot or a whole one. A file with an unknown version, a bad
//! CRC, or the wrong length is refused with [`Error::CorruptRecord`]; the loader deletes
//! it and falls back to an older snapshot, as Kafka does. Kafka tolerates bytes after the
//! last entry if the CRC covers them; we refuse them, since no writer produces them.

use std::fs;
use std::path::{Path, PathBuf};

use super::checkpoint::atomic_write;
use super::producer_state::{BatchMetadata, ProducerStateEntry};
use crate::error::{Error, IoContext, Result};
use crate::record::crc32c;

/// Kafka's `LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX`.
pub const PRODUCER_SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";
/// The only version of `ProducerSnapshot`.
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;

const CRC_OFFSET: usize = 2;
const PRODUCER_ENTRIES_OFFSET: usize = CRC_OFFSET + 4;
const ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// `<dir>/<offset as 20 digits>.snapshot`.
pub fn snapshot_file(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"))
}

/// The bytes of a snapshot of `entries` (written in the order given).
pub fn encode_snapshot<'a>(entries: impl IntoIterator<Item = &'a ProducerStateEntry>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[0; 4]);
    let mut count: i32 = 0;
    for e in entries {
        count += 1;
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.producer_epoch.to_be_bytes());
        out.extend_from_slice(&e.last_seq().to_be_bytes());
        out.extend_from_slice(&e.last_data_offset().to_be_bytes());
        out.extend_from_slice(&e.last_offset_delta().to_be_bytes());
        out.extend_from_slice(&e.last_timestamp.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    out[PRODUCER_ENTRIES_OFFSET..PRODUCER_ENTRIES_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c(&out[PRODUCER_ENTRIES_OFFSET..]);
    out[CRC_OFFSET..PRODUCER_ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Parse a snapshot's bytes (Kafka's `readSnapshot`).
pub fn decode_snapshot(buf: &[u8]) -> Result<Vec<ProducerStateEntry>> {
    let corrupt = |why: String| Error::corrupt(format!("producer snapshot: {why}"));
    if buf.len() < PRODUCER_ENTRIES_OFFSET + 4 {
        return Err(corrupt(format!("{} bytes is too short", buf.len())));
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(corrupt(format!("unknown file version {version}")));
    }
    let stored = u32::from_be_bytes(buf[CRC_OFFSET..PRODUCER_ENTRIES_OFFSET].try_into().unwrap());
    let computed = crc32c(&buf[PRODUCER_ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(corrupt(format!(
            "CRC is no longer valid: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let mut r = Reader {
        buf,
        pos: PRODUCER_ENTRIES_OFFSET,
    };
    let count = r.i32();
    let body = buf.len() - r.pos;
    if count < 0 || body != count as usize * ENTRY_BYTES {
        return Err(corrupt(format!("{count} entries do not fill {body} bytes")));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let producer_id = r.i64();
        let producer_epoch = r.i16();
        let last_seq = r.i32();
        let last_offset = r.i64();
        let offset_delta = r.i32();
        let timestamp = r.i64();
        let coordinator_epoch = r.i32();
        let current_txn_first_offset = r.i64();
        let mut entry = ProducerStateEntry::empty(producer_id);
        entry.producer_epoch = producer_epoch;
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = timestamp;
        entry.current_txn_first_offset =
            (current_txn_first_offset >= 0).then_some(current_txn_first_offset);
        if last_offset >= 0 {
            entry.batch_metadata.push_back(BatchMetadata {
                last_seq,
                last_offset,
                offset_delta,
                timestamp,
            });
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Write `entries` to `path` atomically (`.tmp`, fsync, rename, fsync the directory).
pub fn write_snapshot<'a>(
    path: &Path,
    entries: impl IntoIterator<Item = &'a ProducerStateEntry>,
) -> Result<()> {
    atomic_write(path, &encode_snapshot(entries))
}

/// Read and validate the snapshot at `path`.
pub fn read_snapshot(path: &Path) -> Result<Vec<ProducerStateEntry>> {
    let buf = fs::read(path).ctx("reading", path)?;
    decode_snapshot(&buf).map_err(|e| Error::corrupt(format!("{}: {e}", path.display())))
}

/// The snapshots in `dir` as (offset, path), oldest first. Files whose name is not a
/// number followed by `.snapshot` are ignored, like Kafka's `listSnapshotFiles`.
pub fn list_snapshot_files(dir: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).ctx("listing", dir)? {
        let entry = entry.ctx("listing", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(PRODUCER_SNAPSHOT_FILE_SUFFIX) else {
            continue;
        };
        let Ok(offset) = stem.parse::<i64>() else {
            continue;
        };
        if entry
            .file_type()
            .ctx("inspecting", &entry.path())?
            .is_file()
        {
            out.push((offset, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The offset of the latest snapshot in `dir`, if any.
pub fn latest_snapshot_offset(dir: &Path) -> Result<Option<i64>> {
    Ok(list_snapshot_files(dir)?.last().map(|(o, _)| *o))
}

/// The offset of the oldest snapshot in `dir`, if any.
pub fn oldest_snapshot_offset(dir: &Path) -> Result<Option<i64>> {
    Ok(list_snapshot_files(dir)?.first().map(|(o, _)| *o))
}

/// Delete the snapshots with offset `< offset` (Kafka's `deleteSnapshotsBefore`, called
/// when the log start offset moves and when old segments are deleted).
pub fn delete_snapshots_before(dir: &Path, offset: i64) -> Result<()> {
    for (o, path) in list_snapshot_files(dir)? {
        if o < offset {
            delete_snapshot(&path)?;
        }
    }
    Ok(())
}

/// Delete the snapshots with offset `> offset`: after the log is truncated to `offset`
/// they describe records that no longer exist.
pub fn delete_snapshots_after(dir: &Path, offset: i64) -> Result<()> {
    for (o, path) in list_snapshot_files(dir)? {
        if o > offset {
            delete_snapshot(&path)?;
        }
    }
    Ok(())
}

/// Delete the snapshots below `offset` except the latest snapshot of all (the log's
/// retention: the live state stays in memory, and the latest snapshot keeps it on disk
/// until the next roll writes a newer one).
pub fn delete_snapshots_before_except_latest(dir: &Path, offset: i64) -> Result<()> {
    let files = list_snapshot_files(dir)?;
    let latest = files.last().map(|(o, _)| *o);
    for (o, path) in files {
        if o < offset && Some(o) != latest {
            delete_snapshot(&path)?;
        }
    }
    Ok(())
}

/// Delete every snapshot whose offset is not one of `segment_base_offsets`, except the
/// latest such "stray" one when it lies past the last segment's base (Kafka's
/// `removeStraySnapshots`): snapshots are taken at segment rolls and at the log end, so a
/// stray one below the active segment only survives from segments since removed or merged.
pub fn remove_stray_snapshots(dir: &Path, segment_base_offsets: &[i64]) -> Result<()> {
    let max_base = segment_base_offsets.iter().copied().max();
    let mut latest_stray: Option<(i64, PathBuf)> = None;
    for (o, path) in list_snapshot_files(dir)? {
        if segment_base_offsets.contains(&o) {
            continue;
        }
        if let Some((_, prev)) = latest_stray.replace((o, path)) {
            delete_snapshot(&prev)?;
        }
    }
    if let (Some((o, path)), Some(max_base)) = (latest_stray, max_base) {
        if o < max_base {
            delete_snapshot(&path)?;
        }
    }
    Ok(())
}

/// Delete one snapshot file; one already gone is not an error.
pub fn delete_snapshot(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::storage(format!("deleting {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out = self.buf[self.pos..self.pos + N].try_into().unwrap();
        self.pos += N;
        out
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flipped_byte_fails_the_crc() {
        let mut e = ProducerStateEntry::empty(3);
        e.producer_epoch = 2;
        e.last_timestamp = 77;
        e.batch_metadata.push_back(BatchMetadata {
            last_seq: 9,
            last_offset: 40,
            offset_delta: 4,
            timestamp: 77,
        });
        let good = encode_snapshot([&e]);
        assert_eq!(good.len(), 10 + ENTRY_BYTES);
        assert_eq!(decode_snapshot(&good).unwrap(), vec![e]);
        for i in 2..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(decode_snapshot(&bad).is_err(), "byte {i}");
        }
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = decode_snapshot(&bytes);
        }
    }
}
