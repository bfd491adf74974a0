//! Zig-zag varints as in protobuf and Kafka's `ByteUtils`.
//!
//! Decoding is bounded: a varint longer than 5 bytes (int) or 10 bytes (long) is an error,
//! never a panic or a silent wrap.

use crate::error::{Error, Result};

#[inline]
pub fn put_varint(buf: &mut Vec<u8>, value: i32) {
    put_unsigned(buf, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

#[inline]
pub fn put_varlong(buf: &mut Vec<u8>, value: i64) {
    put_unsigned(buf, ((value << 1) ^ (value >> 63)) as u64);
}

#[inline]
fn put_unsigned(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Bytes that `put_varint(value)` writes.
#[inline]
pub fn varint_size(value: i32) -> usize {
    unsigned_size(((value << 1) ^ (value >> 31)) as u32 as u64)
}

/// Bytes that `put_varlong(value)` writes.
#[inline]
pub fn varlong_size(value: i64) -> usize {
    unsigned_size(((value << 1) ^ (value >> 63)) as u64)
}

#[inline]
fn unsigned_size(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// A bounds-checked reader over a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn unsigned(&mut self, max_bytes: usize, what: &str) -> Result<u64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(Error::corrupt(format!("truncated varint in {what}")));
            };
            self.pos += 1;
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::corrupt(format!("varint too long in {what}")))
    }

    pub fn varint(&mut self, what: &str) -> Result<i32> {
        let raw = self.unsigned(5, what)?;
        if raw > u32::MAX as u64 {
            return Err(Error::corrupt(format!(
                "varint overflows 32 bits in {what}"
            )));
        }
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    pub fn varlong(&mut self, what: &str) -> Result<i64> {
        let raw = self.unsigned(10, what)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    pub fn i8(&mut self, what: &str) -> Result<i8> {
        Ok(self.bytes(1, what)?[0] as i8)
    }

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::corrupt(format!(
                "{what} claims {n} bytes but only {} remain",
                self.remaining()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A length-prefixed byte string; -1 means null.
    pub fn nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        let len = self.varint(what)?;
        match len {
            -1 => Ok(None),
            n if n < -1 => Err(Error::corrupt(format!("{what} has negative length {n}"))),
            n => Ok(Some(self.bytes(n as usize, what)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        let mut b = Vec::new();
        put_varint(&mut b, 0);
        put_varint(&mut b, -1);
        put_varint(&mut b, 1);
        put_varint(&mut b, 300);
        assert_eq!(b, vec![0x00, 0x01, 0x02, 0xd8, 0x04]);
    }

    #[test]
    fn overlong_is_error() {
        let bytes = [0xffu8; 11];
        assert!(Reader::new(&bytes).varint("x").is_err());
        assert!(Reader::new(&bytes).varlong("x").is_err());
        assert!(Reader::new(&[0x80]).varint("x").is_err());
    }

    proptest! {
        #[test]
        fn roundtrip_int(v in any::<i32>()) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            prop_assert_eq!(b.len(), varint_size(v));
            let mut r = Reader::new(&b);
            prop_assert_eq!(r.varint("v").unwrap(), v);
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn roundtrip_long(v in any::<i64>()) {
            let mut b = Vec::new();
            put_varlong(&mut b, v);
            prop_assert_eq!(b.len(), varlong_size(v));
            prop_assert_eq!(Reader::new(&b).varlong("v").unwrap(), v);
        }
    }
}
