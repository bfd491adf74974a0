//! The aborted transaction index of a segment (Kafka's `TransactionIndex` and `AbortedTxn`):
//! `<base offset>.txnindex`, one entry per transaction that an ABORT marker in the segment
//! ended, in marker order. A read_committed fetch lists the aborted transactions overlapping
//! what it returns, so the consumer can drop their records.
//!
//! Each entry is 34 bytes, big-endian (Kafka's format, version 0):
//!
//! ```text
//! offset  width  field
//!      0      2  version             int16, 0
//!      2      8  producer_id         int64
//!     10      8  first_offset        int64: the transaction's first offset
//!     18      8  last_offset         int64: the offset of its ABORT marker
//!     26      8  last_stable_offset  int64: the log's last stable offset once the marker was
//!                                    written (the first offset of the oldest transaction
//!                                    of another producer still open, else last_offset + 1)
//! ```
//!
//! Entries' `last_offset`s strictly increase. The file is created only when the first entry
//! is appended (most segments have none), and the entries are kept in memory too: aborted
//! transactions are rare, and every read_committed fetch looks them up.
//!
//! Crash behaviour: an entry is written with one `write` at the end of the file and fsynced
//! with its segment. A torn tail (less than a whole entry) is cut when the index is opened; a
//! segment whose index fails [`TransactionIndex::sanity_check`], or that is re-read after a
//! crash, has its index rebuilt from the log (its ABORT markers and the producer state before
//! them, see `producer_log.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

pub const TXN_INDEX_SUFFIX: &str = ".txnindex";

/// Bytes of one entry.
pub const ABORTED_TXN_SIZE: usize = 34;
/// The only entry version.
pub const ABORTED_TXN_VERSION: i16 = 0;

/// One aborted transaction (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes.
    pub fn to_bytes(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut b = [0u8; ABORTED_TXN_SIZE];
        b[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// An entry from its 34 bytes; a version other than 0 is CORRUPT_MESSAGE.
    pub fn from_bytes(b: &[u8; ABORTED_TXN_SIZE]) -> Result<Self> {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let version = i16::from_be_bytes([b[0], b[1]]);
        if version != ABORTED_TXN_VERSION {
            return Err(Error::corrupt(format!(
                "unexpected aborted transaction version {version}, current version is {ABORTED_TXN_VERSION}"
            )));
        }
        Ok(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// What a search of one index found (Kafka's `TxnIndexSearchResult`): the entries
/// overlapping the range, and whether no later segment can hold more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnIndexSearchResult {
    pub aborted_transactions: Vec<AbortedTxn>,
    pub is_complete: bool,
}

/// The `.txnindex` of one segment. Owned by its segment; not thread safe.
#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    base_offset: i64,
    /// Open once the file exists.
    file: Option<File>,
    entries: Vec<AbortedTxn>,
    /// An entry failed to read at open: the index must be rebuilt (see `sanity_check`).
    unreadable: Option<String>,
}

impl TransactionIndex {
    /// The index of the segment based at `base_offset` at `path`, read if the file exists.
    /// A torn last entry is cut; an entry of an unknown version fails
    /// [`Self::sanity_check`], so the segment is recovered and its index rebuilt.
    pub fn open(path: &Path, base_offset: i64) -> Result<Self> {
        let mut idx = TransactionIndex {
            path: path.to_path_buf(),
            base_offset,
            file: None,
            entries: Vec::new(),
            unreadable: None,
        };
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(idx),
            Err(e) => return Err(Error::storage(format!("reading {}", path.display()), e)),
        };
        let whole = bytes.len() / ABORTED_TXN_SIZE * ABORTED_TXN_SIZE;
        for chunk in bytes[..whole].chunks_exact(ABORTED_TXN_SIZE) {
            match AbortedTxn::from_bytes(chunk.try_into().expect("whole entries")) {
                Ok(entry) => idx.entries.push(entry),
                Err(e) => {
                    idx.unreadable = Some(format!("{}: {e}", path.display()));
                    idx.entries.clear();
                    break;
                }
            }
        }
        let file = idx.open_file()?;
        if whole < bytes.len() {
            file.set_len(whole as u64).ctx("truncating", path)?;
        }
        Ok(idx)
    }

    fn open_file(&mut self) -> Result<&mut File> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ctx("opening transaction index", &self.path)?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("just opened"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, in marker order (Kafka's `allAbortedTxns`).
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Append an entry, creating the file if need be. Its last offset must exceed the
    /// previous entry's.
    pub fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        if self.unreadable.is_some() {
            // Appending after entries of an unknown layout would only add to the damage.
            self.reset()?;
        }
        if let Some(last) = self.entries.last() {
            if last.last_offset >= txn.last_offset {
                return Err(Error::InvalidRequest(format!(
                    "the last offset of appended transactions must increase sequentially, but {} is not greater than current last offset {} of index {}",
                    txn.last_offset,
                    last.last_offset,
                    self.path.display()
                )));
            }
        }
        let path = self.path.clone();
        let file = self.open_file()?;
        file.write_all(&txn.to_bytes())
            .ctx("appending to transaction index", &path)?;
        self.entries.push(txn);
        Ok(())
    }

    /// Remove the entries whose marker is at or after `offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        if let Some(f) = &self.file {
            f.set_len((keep * ABORTED_TXN_SIZE) as u64)
                .ctx("truncating", &self.path)?;
        }
        Ok(())
    }

    /// Remove every entry (before the index is rebuilt from the log). The file stays.
    pub fn reset(&mut self) -> Result<()> {
        self.entries.clear();
        self.unreadable = None;
        if let Some(f) = &self.file {
            f.set_len(0).ctx("truncating", &self.path)?;
        }
        Ok(())
    }

    /// The entries overlapping `[fetch_offset, upper_bound_offset)` (Kafka's
    /// `collectAbortedTxns`): marker at or after `fetch_offset`, first offset before
    /// `upper_bound_offset`. Complete once an entry's last stable offset reaches
    /// `upper_bound_offset`: every transaction overlapping the range ended by then, so no
    /// later segment holds another.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> TxnIndexSearchResult {
        let mut out = TxnIndexSearchResult::default();
        // Entries with a marker before `fetch_offset` never overlap, but one of them may
        // still end the search (Kafka scans them all).
        for e in &self.entries {
            if e.last_offset >= fetch_offset && e.first_offset < upper_bound_offset {
                out.aborted_transactions.push(*e);
            }
            if e.last_stable_offset >= upper_bound_offset {
                out.is_complete = true;
                return out;
            }
        }
        out
    }

    /// Entries in marker order, each marker within the segment (`[base, next_base)`).
    pub fn sanity_check(&self, next_base_offset: i64) -> Result<()> {
        if let Some(why) = &self.unreadable {
            return Err(Error::corrupt(why.clone()));
        }
        let mut prev = i64::MIN;
        for e in &self.entries {
            if e.last_offset < self.base_offset
                || e.last_offset >= next_base_offset
                || e.last_offset <= prev
                || e.first_offset > e.last_offset
            {
                return Err(Error::corrupt(format!(
                    "aborted transaction {e:?} in index {} is out of order or outside its segment [{}, {next_base_offset})",
                    self.path.display(),
                    self.base_offset
                )));
            }
            prev = e.last_offset;
        }
        Ok(())
    }

    pub fn flush(&self) -> Result<()> {
        match &self.file {
            Some(f) => f.sync_data().ctx("fsyncing", &self.path),
            None => Ok(()),
        }
    }

    /// Delete the file if it exists.
    pub fn delete(mut self) -> Result<()> {
        self.file = None;
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::storage(
                format!("deleting {}", self.path.display()),
                e,
            )),
        }
    }
}

/// Write `entries` as a whole `.txnindex` file at `path` (the cleaner's new segment), and
/// fsync it. The file is written even when there are none.
pub(crate) fn write_txn_index(path: &Path, entries: &[AbortedTxn]) -> Result<()> {
    let mut buf = Vec::with_capacity(entries.len() * ABORTED_TXN_SIZE);
    for e in entries {
        buf.extend_from_slice(&e.to_bytes());
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .ctx("creating transaction index", path)?;
    f.write_all(&buf).ctx("writing", path)?;
    f.sync_all().ctx("fsyncing", path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entries_are_kafkas_34_bytes() {
        let b = txn(0x0102030405060708, 10, 20, 21).to_bytes();
        assert_eq!(&b[0..2], &[0, 0]);
        assert_eq!(&b[2..10], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[10..18], &10i64.to_be_bytes());
        assert_eq!(&b[18..26], &20i64.to_be_bytes());
        assert_eq!(&b[26..34], &21i64.to_be_bytes());
        assert_eq!(
            AbortedTxn::from_bytes(&b).unwrap(),
            txn(0x0102030405060708, 10, 20, 21)
        );
        let mut v1 = b;
        v1[1] = 1;
        assert!(AbortedTxn::from_bytes(&v1).is_err());
    }

    #[test]
    fn lazily_created_appended_truncated_and_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TransactionIndex::open(&path, 0).unwrap();
        assert!(!path.exists());
        idx.append(txn(1, 0, 5, 6)).unwrap();
        idx.append(txn(2, 3, 9, 10)).unwrap();
        assert!(idx.append(txn(3, 3, 9, 10)).is_err());
        assert_eq!(fs::metadata(&path).unwrap().len(), 68);
        idx.truncate_to(9).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 34);
        idx.append(txn(2, 7, 12, 13)).unwrap();
        drop(idx);
        // A torn tail is cut at open.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 1]).unwrap();
        drop(f);
        let idx = TransactionIndex::open(&path, 0).unwrap();
        assert_eq!(idx.entries(), &[txn(1, 0, 5, 6), txn(2, 7, 12, 13)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), 68);
        idx.sanity_check(13).unwrap();
        assert!(idx.sanity_check(12).is_err());
        idx.delete().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_search_stops_at_an_entry_whose_last_stable_offset_reaches_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TransactionIndex::open(&dir.path().join("x.txnindex"), 0).unwrap();
        idx.append(txn(1, 0, 5, 2)).unwrap();
        idx.append(txn(2, 2, 8, 9)).unwrap();
        idx.append(txn(3, 9, 12, 13)).unwrap();
        let r = idx.collect_aborted_txns(6, 9);
        assert_eq!(r.aborted_transactions, vec![txn(2, 2, 8, 9)]);
        assert!(r.is_complete);
        let r = idx.collect_aborted_txns(0, 20);
        assert_eq!(r.aborted_transactions.len(), 3);
        assert!(!r.is_complete);
    }
}
