//! The leader-epoch cache: for each leader epoch, the first offset written in it.
//!
//! `leader-epoch-checkpoint` in the partition directory, Kafka's format:
//!
//! ```text
//! 0            version
//! 2            number of entries
//! 0 0          epoch start_offset
//! 3 1500
//! ```
//!
//! Entries are strictly increasing in both epoch and start offset. Every change is written
//! through atomically (tmp + fsync + rename), so a crash leaves a consistent file. A file that
//! cannot be parsed is rebuilt from the epochs stamped in the batches (see `Log::open`).

use std::fs;
use std::path::{Path, PathBuf};

use super::checkpoint::atomic_write;
use crate::error::{Error, Result};

pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Load from `dir/leader-epoch-checkpoint`; a missing file is an empty cache. Returns
    /// `Err` only when the file exists but is malformed.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::empty(dir)),
            Err(e) => return Err(Error::storage(format!("reading {}", path.display()), e)),
        };
        let malformed = || Error::corrupt(format!("{} is malformed", path.display()));
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some("0") {
            return Err(malformed());
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(malformed)?;
        let mut entries: Vec<EpochEntry> = Vec::new();
        for line in lines.by_ref().take(count) {
            let mut it = line.split_whitespace();
            let epoch: i32 = it
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(malformed)?;
            let start_offset: i64 = it
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(malformed)?;
            if it.next().is_some() || epoch < 0 || start_offset < 0 {
                return Err(malformed());
            }
            if let Some(last) = entries.last() {
                if epoch <= last.epoch || start_offset < last.start_offset {
                    return Err(malformed());
                }
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if entries.len() != count || lines.any(|l| !l.trim().is_empty()) {
            return Err(malformed());
        }
        Ok(LeaderEpochCache { path, entries })
    }

    pub fn empty(dir: &Path) -> Self {
        LeaderEpochCache {
            path: dir.join(LEADER_EPOCH_CHECKPOINT),
            entries: Vec::new(),
        }
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Record that `epoch` starts at `start_offset`. Ignored unless `epoch` is newer than the
    /// latest; entries that the new one contradicts (starting at or after it) are removed.
    /// Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if !self.assign_in_memory(epoch, start_offset) {
            return Ok(false);
        }
        self.flush()?;
        Ok(true)
    }

    pub(crate) fn assign_in_memory(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if epoch <= last.epoch {
                return false;
            }
        }
        while matches!(self.entries.last(), Some(e) if e.start_offset >= start_offset) {
            self.entries.pop();
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// The leader epoch in which `offset` was written, if known.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Kafka's `endOffsetFor`: the largest epoch <= `requested` that this log knows, and the
    /// offset where the next epoch after it starts (the log end offset for the latest).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            None => (requested, higher.start_offset),
            Some(floor) => (floor.epoch, higher.start_offset),
        }
    }

    /// Forget epochs that start at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.flush()?;
        }
        Ok(())
    }

    /// The log now starts at `start_offset`: drop epochs that end before it, and move the
    /// start of the epoch that covers it up to it.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        let covering = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        let Some(i) = covering else { return Ok(()) };
        if i == 0 && self.entries[0].start_offset == start_offset {
            return Ok(());
        }
        self.entries.drain(..i);
        self.entries[0].start_offset = start_offset;
        self.flush()
    }

    pub fn clear(&mut self) -> Result<()> {
        self.entries.clear();
        self.flush()
    }

    pub(crate) fn replace(&mut self, entries: Vec<EpochEntry>) -> Result<()> {
        self.entries = entries;
        self.flush()
    }

    pub fn flush(&self) -> Result<()> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        atomic_write(&self.path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, LeaderEpochCache) {
        let d = tempfile::tempdir().unwrap();
        let c = LeaderEpochCache::empty(d.path());
        (d, c)
    }

    #[test]
    fn assign_and_end_offsets() {
        let (d, mut c) = cache();
        assert!(c.assign(1, 0).unwrap());
        assert!(!c.assign(1, 5).unwrap());
        assert!(!c.assign(0, 7).unwrap());
        assert!(c.assign(3, 10).unwrap());
        assert!(c.assign(5, 20).unwrap());
        assert_eq!(c.end_offset_for(5, 42), (5, 42));
        assert_eq!(c.end_offset_for(4, 42), (3, 20));
        assert_eq!(c.end_offset_for(1, 42), (1, 10));
        assert_eq!(c.end_offset_for(0, 42), (0, 0));
        assert_eq!(
            c.end_offset_for(9, 42),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(c.epoch_for_offset(15), Some(3));
        let again = LeaderEpochCache::load(d.path()).unwrap();
        assert_eq!(again.entries(), c.entries());
        assert_eq!(
            std::fs::read_to_string(d.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap(),
            "0\n3\n1 0\n3 10\n5 20\n"
        );
    }

    #[test]
    fn truncation() {
        let (_d, mut c) = cache();
        for (e, o) in [(1, 0), (2, 10), (3, 20), (4, 30)] {
            c.assign(e, o).unwrap();
        }
        c.truncate_from_end(20).unwrap();
        assert_eq!(c.latest_epoch(), Some(2));
        c.truncate_from_start(15).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 2,
                start_offset: 15
            }]
        );
        // A newer epoch that starts earlier than existing entries replaces them.
        c.assign(7, 12).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 7,
                start_offset: 12
            }]
        );
    }

    #[test]
    fn malformed_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(LEADER_EPOCH_CHECKPOINT), "0\n2\n1 0\n").unwrap();
        assert!(LeaderEpochCache::load(d.path()).is_err());
        std::fs::write(d.path().join(LEADER_EPOCH_CHECKPOINT), "0\n2\n3 10\n1 20\n").unwrap();
        assert!(LeaderEpochCache::load(d.path()).is_err());
    }
}
