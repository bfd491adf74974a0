use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use crate::error::{Error, Result};

/// `length` bytes of an open segment file starting at `position`.
///
/// The region holds the file open, so it stays readable even if its segment is deleted by
/// retention or truncation meanwhile (the bytes then may be shorter than `length`; reading
/// reports that as a storage error rather than returning garbage).
#[derive(Debug, Clone)]
pub struct FileRegion {
    pub file: Arc<File>,
    pub position: u64,
    pub length: u64,
}

impl FileRegion {
    /// Read the region into `out` (appended).
    pub fn read_into(&self, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        out.resize(start + self.length as usize, 0);
        let res = self.read_exact_into(&mut out[start..]);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }

    /// Fill `buf` (exactly `length` bytes) from the region.
    pub fn read_exact_into(&self, buf: &mut [u8]) -> Result<()> {
        debug_assert_eq!(buf.len() as u64, self.length);
        self.file.read_exact_at(buf, self.position).map_err(|e| {
            Error::storage(
                format!(
                    "reading {} bytes at position {}",
                    self.length, self.position
                ),
                e,
            )
        })
    }
}

impl FileRegion {
    /// Fill `buf` (exactly `length` bytes, not initialized yet: the caller saves zeroing
    /// megabytes it is about to overwrite) from the region.
    pub fn read_exact_into_uninit(&self, buf: &mut [MaybeUninit<u8>]) -> Result<()> {
        debug_assert_eq!(buf.len() as u64, self.length);
        let fd = self.file.as_raw_fd();
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: `rest` is valid for writes of `rest.len()` bytes; pread writes no more.
            let n = unsafe {
                libc::pread(
                    fd,
                    rest.as_mut_ptr().cast(),
                    rest.len(),
                    (self.position + done as u64) as libc::off_t,
                )
            };
            let err = match n {
                n if n > 0 => {
                    done += n as usize;
                    continue;
                }
                0 => io::Error::from(io::ErrorKind::UnexpectedEof),
                _ => io::Error::last_os_error(),
            };
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::storage(
                format!(
                    "reading {} bytes at position {}",
                    self.length, self.position
                ),
                err,
            ));
        }
        Ok(())
    }
}

/// Total bytes of a list of regions.
pub fn total_len(regions: &[FileRegion]) -> u64 {
    regions.iter().map(|r| r.length).sum()
}
