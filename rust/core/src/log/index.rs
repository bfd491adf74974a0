//! The sparse indexes of a segment, memory-mapped.
//!
//! `.index` (OffsetIndex), 8-byte entries, big-endian:
//! ```text
//! 0..4  relative offset  (offset - segment base offset), u32
//! 4..8  position         byte position of a batch in the .log file, u32
//! ```
//! An entry (o, p) says: the batch at position p ends at offset base + o. Entries are
//! strictly increasing in both fields.
//!
//! `.timeindex` (TimeIndex), 12-byte entries, big-endian:
//! ```text
//! 0..8   timestamp        i64, the largest timestamp in the segment so far
//! 8..12  relative offset  u32, the last offset of the batch holding that timestamp
//! ```
//! Entries are strictly increasing in timestamp, non-decreasing in offset.
//!
//! While its segment is active an index file is preallocated to `segment.index.bytes` and
//! mapped writable; the entry count lives in memory. When the segment rolls (or closes) the
//! file is trimmed to its entries. After a crash the preallocated tail is zeros; the count
//! is then unknown, which is why the segments past the recovery point have their indexes
//! rebuilt rather than read. Any index that fails [`OffsetIndex::sanity_check`] is rebuilt too.

use std::fs::{File, OpenOptions};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{Error, IoContext, Result};

/// A file of fixed-size entries, memory-mapped.
#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    file: File,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
}

impl IndexFile {
    /// Open (creating if missing). The entry count is the file length rounded down to whole
    /// entries; `capacity_bytes`, when given, preallocates the file to that size.
    fn open(path: &Path, entry_size: usize, capacity_bytes: Option<u64>) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx("opening index", path)?;
        let len = file.metadata().ctx("stat", path)?.len();
        let entries = (len / entry_size as u64) as usize;
        let mut idx = IndexFile {
            path: path.to_path_buf(),
            file,
            mmap: None,
            entry_size,
            entries,
        };
        let cap = capacity_bytes
            .unwrap_or(len)
            .max((entries * entry_size) as u64);
        idx.remap(cap)?;
        Ok(idx)
    }

    fn capacity_entries(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len() / self.entry_size)
    }

    /// Resize the file to `bytes` (rounded down to whole entries, never below the live
    /// entries) and map it again.
    fn remap(&mut self, bytes: u64) -> Result<()> {
        let bytes = (bytes / self.entry_size as u64 * self.entry_size as u64)
            .max((self.entries * self.entry_size) as u64);
        if let Some(m) = self.mmap.take() {
            m.flush().ctx("flushing index", &self.path)?;
        }
        self.file.set_len(bytes).ctx("resizing index", &self.path)?;
        if bytes > 0 {
            // SAFETY: the file belongs to this segment, which this process owns exclusively
            // (the log directory is locked), and it is never shrunk while mapped.
            let m = unsafe { MmapMut::map_mut(&self.file) }.ctx("mapping index", &self.path)?;
            self.mmap = Some(m);
        }
        Ok(())
    }

    fn entry(&self, i: usize) -> &[u8] {
        let m = self.mmap.as_ref().expect("an index with entries is mapped");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.entries >= self.capacity_entries() {
            return Err(Error::InvalidRequest(format!(
                "index {} is full",
                self.path.display()
            )));
        }
        let at = self.entries * self.entry_size;
        self.mmap.as_mut().expect("capacity > 0 means mapped")[at..at + self.entry_size]
            .copy_from_slice(bytes);
        self.entries += 1;
        Ok(())
    }

    fn truncate_entries(&mut self, n: usize) {
        if n < self.entries {
            if let Some(m) = self.mmap.as_mut() {
                m[n * self.entry_size..self.entries * self.entry_size].fill(0);
            }
            self.entries = n;
        }
    }

    fn flush(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().ctx("flushing index", &self.path)?;
        }
        Ok(())
    }

    /// Binary search for the last entry whose key (read by `key`) is <= `target`.
    fn floor(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        if self.entries == 0 || key(self.entry(0)) > target {
            return None;
        }
        let (mut lo, mut hi) = (0usize, self.entries - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if key(self.entry(mid)) <= target {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }
}

#[inline]
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
#[inline]
fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().unwrap())
}

/// An absolute offset and the byte position of the batch it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u64,
}

/// A timestamp and the offset it was seen at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// The entry layout of an index kind.
pub trait IndexKind {
    const ENTRY_SIZE: usize;
}

/// `.index` entries: relative offset, position.
#[derive(Debug)]
pub struct Offsets;
impl IndexKind for Offsets {
    const ENTRY_SIZE: usize = 8;
}

/// `.timeindex` entries: timestamp, relative offset.
#[derive(Debug)]
pub struct Timestamps;
impl IndexKind for Timestamps {
    const ENTRY_SIZE: usize = 12;
}

/// A sparse index of one segment, `K` saying which. See the module docs for the formats.
#[derive(Debug)]
pub struct Index<K: IndexKind> {
    base_offset: i64,
    inner: IndexFile,
    kind: PhantomData<K>,
}

/// The `.index` of one segment.
pub type OffsetIndex = Index<Offsets>;
/// The `.timeindex` of one segment.
pub type TimeIndex = Index<Timestamps>;

impl<K: IndexKind> Index<K> {
    pub const ENTRY_SIZE: usize = K::ENTRY_SIZE;

    /// Open (creating if missing); `capacity_bytes` preallocates an active segment's index.
    pub fn open(path: &Path, base_offset: i64, capacity_bytes: Option<u64>) -> Result<Self> {
        Ok(Index {
            base_offset,
            inner: IndexFile::open(path, K::ENTRY_SIZE, capacity_bytes)?,
            kind: PhantomData,
        })
    }

    pub fn entries(&self) -> usize {
        self.inner.entries
    }

    pub fn is_full(&self) -> bool {
        self.inner.entries >= self.inner.capacity_entries()
    }

    pub fn reset(&mut self) {
        self.inner.truncate_entries(0);
    }

    pub fn resize(&mut self, capacity_bytes: u64) -> Result<()> {
        self.inner.remap(capacity_bytes)
    }

    /// Shrink the file to its entries (on roll and close).
    pub fn trim(&mut self) -> Result<()> {
        self.inner
            .remap((self.inner.entries * K::ENTRY_SIZE) as u64)
    }

    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

impl Index<Offsets> {
    pub fn entry(&self, i: usize) -> OffsetPosition {
        let e = self.inner.entry(i);
        OffsetPosition {
            offset: self.base_offset + be_u32(e) as i64,
            position: be_u32(&e[4..]) as u64,
        }
    }

    pub fn last_entry(&self) -> Option<OffsetPosition> {
        (self.inner.entries > 0).then(|| self.entry(self.inner.entries - 1))
    }

    /// The last entry with offset <= `target`, or (base offset, 0).
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let rel = target - self.base_offset;
        match self.inner.floor(rel, |e| be_u32(e) as i64) {
            Some(i) => self.entry(i),
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    /// The last entry with position <= `position`, or (base offset, 0).
    pub fn lookup_by_position(&self, position: u64) -> OffsetPosition {
        match self
            .inner
            .floor(position as i64, |e| be_u32(&e[4..]) as i64)
        {
            Some(i) => self.entry(i),
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    /// Append (offset, position); both must exceed the last entry's.
    pub fn append(&mut self, offset: i64, position: u64) -> Result<()> {
        let rel = offset - self.base_offset;
        if !(0..=u32::MAX as i64).contains(&rel) || position > u32::MAX as u64 {
            return Err(Error::InvalidRequest(format!(
                "offset {offset} at position {position} cannot be indexed in a segment based at {}",
                self.base_offset
            )));
        }
        if let Some(last) = self.last_entry() {
            if offset <= last.offset || position <= last.position {
                return Err(Error::InvalidRequest(format!(
                    "index entry ({offset}, {position}) is not after the last ({}, {})",
                    last.offset, last.position
                )));
            }
        }
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&(rel as u32).to_be_bytes());
        e[4..].copy_from_slice(&(position as u32).to_be_bytes());
        self.inner.push(&e)
    }

    /// Remove entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = match self
            .inner
            .floor(offset - self.base_offset - 1, |e| be_u32(e) as i64)
        {
            Some(i) => i + 1,
            None => 0,
        };
        self.inner.truncate_entries(keep);
    }

    /// Entries strictly increasing, within the segment's offsets and bytes.
    pub fn sanity_check(&self, log_size: u64) -> Result<()> {
        let mut prev: Option<OffsetPosition> = None;
        for i in 0..self.inner.entries {
            let e = self.entry(i);
            let ordered = prev.is_none_or(|p| e.offset > p.offset && e.position > p.position);
            if !ordered || e.position >= log_size {
                return Err(Error::corrupt(format!(
                    "index {} entry {i} ({}, {}) is out of order or past the log's {log_size} bytes",
                    self.inner.path.display(),
                    e.offset,
                    e.position
                )));
            }
            prev = Some(e);
        }
        Ok(())
    }
}

impl Index<Timestamps> {
    pub fn entry(&self, i: usize) -> TimestampOffset {
        let e = self.inner.entry(i);
        TimestampOffset {
            timestamp: be_i64(e),
            offset: self.base_offset + be_u32(&e[8..]) as i64,
        }
    }

    pub fn last_entry(&self) -> Option<TimestampOffset> {
        (self.inner.entries > 0).then(|| self.entry(self.inner.entries - 1))
    }

    /// The last entry with timestamp <= `target`, or (-1, base offset).
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        match self.inner.floor(target, be_i64) {
            Some(i) => self.entry(i),
            None => TimestampOffset {
                timestamp: -1,
                offset: self.base_offset,
            },
        }
    }

    /// Append (timestamp, offset) if `timestamp` is newer than the last entry. With
    /// `skip_full_check` (used when the segment rolls) a full index is not an error.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<()> {
        if let Some(last) = self.last_entry() {
            if timestamp <= last.timestamp {
                return Ok(());
            }
            if offset < last.offset {
                return Err(Error::InvalidRequest(format!(
                    "time index entry offset {offset} is before the last ({})",
                    last.offset
                )));
            }
        }
        let rel = offset - self.base_offset;
        if !(0..=u32::MAX as i64).contains(&rel) {
            return Err(Error::InvalidRequest(format!(
                "offset {offset} cannot be time-indexed here"
            )));
        }
        if self.is_full() {
            if skip_full_check {
                return Ok(());
            }
            return Err(Error::InvalidRequest(format!(
                "time index {} is full",
                self.inner.path.display()
            )));
        }
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&(rel as u32).to_be_bytes());
        self.inner.push(&e)
    }

    /// Remove entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let mut keep = self.inner.entries;
        while keep > 0 && self.entry(keep - 1).offset >= offset {
            keep -= 1;
        }
        self.inner.truncate_entries(keep);
    }

    /// Timestamps strictly increasing, offsets non-decreasing and within the segment.
    pub fn sanity_check(&self, last_offset: i64) -> Result<()> {
        let mut prev: Option<TimestampOffset> = None;
        for i in 0..self.inner.entries {
            let e = self.entry(i);
            let ordered = prev.is_none_or(|p| e.timestamp > p.timestamp && e.offset >= p.offset);
            if !ordered || e.offset > last_offset {
                return Err(Error::corrupt(format!(
                    "time index {} entry {i} ({}, {}) is out of order or past offset {last_offset}",
                    self.inner.path.display(),
                    e.timestamp,
                    e.offset
                )));
            }
            prev = Some(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// Index lookup equals a linear scan for the same answer.
        #[test]
        fn lookup_equals_linear_scan(
            gaps in proptest::collection::vec((1u32..1000, 1u32..5000), 0..300),
            targets in proptest::collection::vec(0i64..400_000, 1..50),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let base = 1_000;
            let mut idx = OffsetIndex::open(&dir.path().join("x.index"), base, Some(8 * 400)).unwrap();
            let mut tidx = TimeIndex::open(&dir.path().join("x.timeindex"), base, Some(12 * 400)).unwrap();
            let mut model = Vec::new();
            let (mut off, mut pos, mut ts) = (base, 0u64, 0i64);
            for (g, p) in gaps {
                off += g as i64;
                pos += p as u64;
                ts += g as i64;
                idx.append(off, pos).unwrap();
                tidx.maybe_append(ts, off, false).unwrap();
                model.push((off, pos, ts));
            }
            for t in targets {
                let t = t + base - 10;
                let want = model.iter().rev().find(|(o, _, _)| *o <= t)
                    .map(|&(o, p, _)| OffsetPosition { offset: o, position: p })
                    .unwrap_or(OffsetPosition { offset: base, position: 0 });
                prop_assert_eq!(idx.lookup(t), want);
                let want_t = model.iter().rev().find(|(_, _, s)| *s <= t)
                    .map(|&(o, _, s)| TimestampOffset { timestamp: s, offset: o })
                    .unwrap_or(TimestampOffset { timestamp: -1, offset: base });
                prop_assert_eq!(tidx.lookup(t), want_t);
                let want_p = model.iter().rev().find(|(_, p, _)| *p as i64 <= t)
                    .map(|&(o, p, _)| OffsetPosition { offset: o, position: p })
                    .unwrap_or(OffsetPosition { offset: base, position: 0 });
                prop_assert_eq!(idx.lookup_by_position(t as u64), want_p);
            }
        }
    }

    #[test]
    fn trim_reopen_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000000.index");
        let mut idx = OffsetIndex::open(&p, 0, Some(80)).unwrap();
        for i in 1..=10 {
            idx.append(i * 10, i as u64 * 100).unwrap();
        }
        assert!(idx.is_full());
        assert!(idx.append(200, 2000).is_err());
        idx.trim().unwrap();
        drop(idx);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 80);
        let mut idx = OffsetIndex::open(&p, 0, Some(160)).unwrap();
        assert_eq!(idx.entries(), 10);
        idx.truncate_to(55);
        assert_eq!(
            idx.last_entry(),
            Some(OffsetPosition {
                offset: 50,
                position: 500
            })
        );
        idx.sanity_check(1000).unwrap();
        assert!(idx.sanity_check(400).is_err());
    }
}
