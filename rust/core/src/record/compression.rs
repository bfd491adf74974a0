//! The codecs of attributes bits 0-2: none, gzip, snappy, lz4, zstd.
//!
//! Formats match Kafka's Java client so batches interoperate both ways:
//! gzip is a gzip member, lz4 is an LZ4 frame (independent 64 KiB blocks), zstd is a zstd
//! frame, and snappy is written in xerial's block framing (what `SnappyOutputStream`
//! writes); a plain snappy block is also accepted when reading.
//!
//! Decompression is bounded by [`MAX_DECOMPRESSED_BYTES`] so a small batch cannot expand
//! into unbounded memory.

use std::cell::RefCell;
use std::io::{Read, Write};

use crate::error::{Error, Result};

/// Upper bound for the decompressed records of one batch.
pub const MAX_DECOMPRESSED_BYTES: usize = 512 << 20;

/// zstd level for produced batches (Kafka's default, 3).
const ZSTD_LEVEL: i32 = 3;

thread_local! {
    static ZSTD_CCTX: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static ZSTD_DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { RefCell::new(None) };
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK: usize = 32 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub fn from_id(id: u8) -> Result<Self> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(Error::UnsupportedCompressionType(other)),
        })
    }

    /// Kafka's `compression.type` names.
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "compression.type must be one of none, gzip, snappy, lz4, zstd; got {name:?}"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn id(self) -> u8 {
        self as u8
    }

    /// Compress `raw`, appending to `out`.
    pub fn compress_into(self, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let io = |e: std::io::Error| Error::storage(format!("{} compression", self.name()), e);
        match self {
            Compression::None => out.extend_from_slice(raw),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
                enc.write_all(raw).map_err(io)?;
                enc.finish().map_err(io)?;
            }
            Compression::Snappy => {
                out.extend_from_slice(XERIAL_MAGIC);
                out.extend_from_slice(&1i32.to_be_bytes());
                out.extend_from_slice(&1i32.to_be_bytes());
                let mut enc = snap::raw::Encoder::new();
                for chunk in raw.chunks(XERIAL_BLOCK) {
                    let start = out.len();
                    out.extend_from_slice(&[0; 4]);
                    out.resize(start + 4 + snap::raw::max_compress_len(chunk.len()), 0);
                    let n = enc
                        .compress(chunk, &mut out[start + 4..])
                        .map_err(|e| Error::corrupt(format!("snappy: {e}")))?;
                    out.truncate(start + 4 + n);
                    out[start..start + 4].copy_from_slice(&(n as i32).to_be_bytes());
                }
            }
            Compression::Lz4 => {
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max64KB)
                    .block_mode(lz4_flex::frame::BlockMode::Independent);
                let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
                enc.write_all(raw).map_err(io)?;
                enc.finish()
                    .map_err(|e| Error::corrupt(format!("lz4: {e}")))?;
            }
            Compression::Zstd => ZSTD_CCTX.with(|cell| {
                // One compression context per thread: creating one per batch cost more than
                // compressing a small batch.
                let mut slot = cell.borrow_mut();
                let cctx = match slot.as_mut() {
                    Some(c) => c,
                    None => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(io)?),
                };
                let start = out.len();
                out.resize(start + zstd::zstd_safe::compress_bound(raw.len()), 0);
                let n = cctx
                    .compress_to_buffer(raw, &mut out[start..])
                    .map_err(io)?;
                out.truncate(start + n);
                Ok::<(), Error>(())
            })?,
        }
        Ok(())
    }

    /// Decompress `data` into `out` (cleared first). Malformed input is CORRUPT_MESSAGE.
    pub fn decompress_into(self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let bad = |e: std::io::Error| {
            Error::corrupt(format!("{} decompression failed: {e}", self.name()))
        };
        match self {
            Compression::None => out.extend_from_slice(data),
            Compression::Gzip => {
                read_bounded(flate2::read::GzDecoder::new(data), out).map_err(bad)?
            }
            Compression::Lz4 => {
                read_bounded(lz4_flex::frame::FrameDecoder::new(data), out).map_err(bad)?
            }
            Compression::Zstd => ZSTD_DCTX.with(|cell| {
                // One decompression context per thread, reset for each batch.
                let mut slot = cell.borrow_mut();
                let dctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
                dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
                    .map_err(|code| {
                        Error::corrupt(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
                    })?;
                let dec = zstd::stream::read::Decoder::with_context(data, dctx);
                read_bounded(dec, out).map_err(bad)
            })?,
            Compression::Snappy => snappy_decompress(data, out)?,
        }
        if out.len() > MAX_DECOMPRESSED_BYTES {
            return Err(Error::corrupt(format!(
                "batch decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes"
            )));
        }
        Ok(())
    }
}

fn read_bounded(reader: impl Read, out: &mut Vec<u8>) -> std::io::Result<()> {
    reader
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(out)?;
    Ok(())
}

fn snappy_block(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let bad = |e: snap::Error| Error::corrupt(format!("snappy decompression failed: {e}"));
    let len = snap::raw::decompress_len(data).map_err(bad)?;
    if out.len() + len > MAX_DECOMPRESSED_BYTES {
        return Err(Error::corrupt(
            "snappy block decompresses past the size limit",
        ));
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(data, &mut out[start..])
        .map_err(bad)?;
    out.truncate(start + n);
    Ok(())
}

fn snappy_decompress(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if data.len() < XERIAL_HEADER_LEN || &data[..8] != XERIAL_MAGIC {
        return snappy_block(data, out);
    }
    let mut pos = XERIAL_HEADER_LEN;
    while pos < data.len() {
        if data.len() - pos < 4 {
            return Err(Error::corrupt("truncated xerial snappy block length"));
        }
        let n = i32::from_be_bytes(data[pos..pos + 4].try_into().unwrap());
        pos += 4;
        if n < 0 || n as usize > data.len() - pos {
            return Err(Error::corrupt(format!(
                "xerial snappy block length {n} is out of bounds"
            )));
        }
        snappy_block(&data[pos..pos + n as usize], out)?;
        pos += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_codec() {
        let raw: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut packed = Vec::new();
            c.compress_into(&raw, &mut packed).unwrap();
            let mut back = Vec::new();
            c.decompress_into(&packed, &mut back).unwrap();
            assert_eq!(back, raw, "{c:?}");
        }
    }

    #[test]
    fn garbage_is_an_error() {
        let junk = [0x13u8, 0x37, 0xff, 0x00, 0x42, 0x99, 0x01];
        for c in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut out = Vec::new();
            assert!(c.decompress_into(&junk, &mut out).is_err(), "{c:?}");
        }
    }

    #[test]
    fn plain_snappy_block_is_accepted() {
        let raw = b"hello hello hello hello".to_vec();
        let packed = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let mut out = Vec::new();
        Compression::Snappy
            .decompress_into(&packed, &mut out)
            .unwrap();
        assert_eq!(out, raw);
    }
}
