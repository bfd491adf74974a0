use std::os::fd::{AsRawFd, RawFd};

use super::region::{total_len, FileRegion};
use crate::error::{Error, Result};

/// What one [`transfer`] call achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Bytes of the regions now sent in total, counting the `skip` passed in.
    pub sent: u64,
    /// Bytes of all regions.
    pub total: u64,
}

impl Transfer {
    pub fn is_complete(&self) -> bool {
        self.sent == self.total
    }
}

/// Send `regions` to the socket `out_fd` with `sendfile(2)`, starting `skip` bytes into
/// them. Resumable: on a non-blocking socket that fills up, returns what was sent so far and
/// the caller calls again with `skip = sent` once the socket is writable. A blocking socket
/// is written until everything is sent. Interrupted calls are retried.
pub fn transfer(regions: &[FileRegion], out_fd: RawFd, skip: u64) -> Result<Transfer> {
    let total = total_len(regions);
    if skip > total {
        return Err(Error::InvalidRequest(format!(
            "cannot skip {skip} bytes of a {total}-byte transfer"
        )));
    }
    let mut sent = skip;
    let mut before = 0u64;
    for region in regions {
        let end = before + region.length;
        while sent < end {
            let into = sent - before;
            let mut offset = (region.position + into) as libc::off_t;
            let want = (region.length - into).min(1 << 30) as usize;
            // SAFETY: both descriptors are valid for the call's duration (the region holds
            // its file open; the caller owns the socket) and `offset` is a live local.
            let n = unsafe { libc::sendfile(out_fd, region.file.as_raw_fd(), &mut offset, want) };
            if n > 0 {
                sent += n as u64;
                continue;
            }
            if n == 0 {
                return Err(Error::storage(
                    "sendfile",
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file region ends early: its segment was truncated or deleted",
                    ),
                ));
            }
            let err = std::io::Error::last_os_error();
            match err.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => return Ok(Transfer { sent, total }),
                _ => return Err(Error::storage("sendfile to socket", err)),
            }
        }
        before = end;
    }
    Ok(Transfer { sent, total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    #[test]
    fn sends_regions_in_order_and_resumes() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        let file = Arc::new(f);
        let regions = vec![
            FileRegion {
                file: file.clone(),
                position: 10,
                length: 50_000,
            },
            FileRegion {
                file: file.clone(),
                position: 0,
                length: 10,
            },
        ];
        let (a, mut b) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let t = transfer(&regions, a.as_raw_fd(), 5).unwrap();
        assert!(t.is_complete());
        drop(a);
        let got = reader.join().unwrap();
        let mut want = data[15..50_010].to_vec();
        want.extend_from_slice(&data[..10]);
        assert_eq!(got, want);
    }
}
