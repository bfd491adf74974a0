//! Walking the batches of a segment file by position, with few reads.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};
use crate::record::batch::{validate_batch, BatchHeader};
use crate::record::RECORD_BATCH_OVERHEAD;

/// Reads batch headers (or whole batches) from `file` between two positions, one `pread` per
/// chunk rather than per batch.
pub struct BatchScanner<'f> {
    file: &'f File,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    chunk: usize,
}

impl<'f> BatchScanner<'f> {
    pub fn new(file: &'f File, start: u64, end: u64, chunk: usize) -> Self {
        BatchScanner {
            file,
            pos: start,
            end,
            buf: Vec::new(),
            buf_start: start,
            chunk: chunk.max(RECORD_BATCH_OVERHEAD),
        }
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Make `buf` hold file bytes [at, at + len), reading `max(len, chunk)` bytes.
    fn ensure(&mut self, at: u64, len: usize) -> Result<()> {
        let have =
            at >= self.buf_start && at + len as u64 <= self.buf_start + self.buf.len() as u64;
        if have {
            return Ok(());
        }
        let want = (len.max(self.chunk) as u64).min(self.end - at) as usize;
        self.buf.clear();
        self.buf.resize(want, 0);
        let mut got = 0;
        while got < want {
            match self.file.read_at(&mut self.buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::storage(
                        format!("reading segment at position {}", at + got as u64),
                        e,
                    ))
                }
            }
        }
        self.buf.truncate(got);
        self.buf_start = at;
        if got < len {
            return Err(Error::corrupt(format!(
                "segment ends at {} inside a batch at {at}",
                at + got as u64
            )));
        }
        Ok(())
    }

    fn slice(&self, at: u64, len: usize) -> &[u8] {
        let s = (at - self.buf_start) as usize;
        &self.buf[s..s + len]
    }

    /// The next batch's position and header, checking only that the header is sane and the
    /// batch ends by `end`.
    pub fn next_header(&mut self) -> Option<Result<(u64, BatchHeader)>> {
        if self.pos >= self.end {
            return None;
        }
        let at = self.pos;
        let r = (|| {
            let head = (self.end - at).min(RECORD_BATCH_OVERHEAD as u64) as usize;
            self.ensure(at, head)?;
            let h = BatchHeader::parse(self.slice(at, head))?;
            if at + h.size_in_bytes() as u64 > self.end {
                return Err(Error::corrupt(format!(
                    "batch at position {at} needs {} bytes but the segment ends at {}",
                    h.size_in_bytes(),
                    self.end
                )));
            }
            Ok(h)
        })();
        match r {
            Ok(h) => {
                self.pos = at + h.size_in_bytes() as u64;
                Some(Ok((at, h)))
            }
            Err(e) => {
                self.pos = self.end;
                Some(Err(e))
            }
        }
    }

    /// The bytes of the batch at `at` whose header `h` [`Self::next_header`] just returned
    /// (not CRC-checked). The scan goes on after it.
    pub fn batch_at(&mut self, at: u64, h: &BatchHeader) -> Result<&[u8]> {
        let size = h.size_in_bytes();
        if at + size as u64 > self.end {
            return Err(Error::corrupt(format!(
                "batch at position {at} is torn: {size} bytes claimed"
            )));
        }
        self.ensure(at, size)?;
        Ok(self.slice(at, size))
    }

    /// The next whole batch, validated (header, length, CRC).
    pub fn next_batch(&mut self) -> Option<Result<(u64, BatchHeader, &[u8])>> {
        if self.pos >= self.end {
            return None;
        }
        let at = self.pos;
        let head = (self.end - at).min(RECORD_BATCH_OVERHEAD as u64) as usize;
        let r = self
            .ensure(at, head)
            .and_then(|_| BatchHeader::parse(self.slice(at, head)))
            .and_then(|h| {
                let size = h.size_in_bytes();
                if at + size as u64 > self.end {
                    return Err(Error::corrupt(format!(
                        "batch at position {at} is torn: {size} bytes claimed"
                    )));
                }
                self.ensure(at, size)?;
                validate_batch(self.slice(at, size))?;
                Ok(h)
            });
        match r {
            Ok(h) => {
                self.pos = at + h.size_in_bytes() as u64;
                Some(Ok((at, h, self.slice(at, h.size_in_bytes()))))
            }
            Err(e) => {
                self.pos = self.end;
                Some(Err(e))
            }
        }
    }
}
