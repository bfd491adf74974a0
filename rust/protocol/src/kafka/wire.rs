//! Kafka's primitive encodings: big-endian fixed-width integers and unsigned varints
//! (7 bits a byte, least significant group first, the high bit set on every byte but the
//! last; at most 5 bytes for the 32-bit values the protocol uses).

use super::error::Fault;

/// A bounds-checked cursor over bytes. Every read checks what is left first, so no length
/// read from the wire can make it allocate or slice past the end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Where `buf` starts in the bytes the caller gave, for error offsets.
    base: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// The offset of the next byte, counted from the start of the caller's bytes.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Fault> {
        if n > self.remaining() {
            return Err(Fault::malformed(
                self.offset(),
                format!("{what} needs {n} bytes, {} left", self.remaining()),
            ));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Fault> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// The next `n` bytes as a reader of their own (a tagged field's value).
    pub(crate) fn sub(&mut self, n: usize, what: &str) -> Result<Reader<'a>, Fault> {
        let base = self.offset();
        let buf = self.take(n, what)?;
        Ok(Reader { buf, pos: 0, base })
    }

    pub(crate) fn i8(&mut self) -> Result<i8, Fault> {
        Ok(i8::from_be_bytes(self.array("an int8")?))
    }

    pub(crate) fn i16(&mut self) -> Result<i16, Fault> {
        Ok(i16::from_be_bytes(self.array("an int16")?))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Fault> {
        Ok(u16::from_be_bytes(self.array("a uint16")?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, Fault> {
        Ok(i32::from_be_bytes(self.array("an int32")?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Fault> {
        Ok(u32::from_be_bytes(self.array("a uint32")?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, Fault> {
        Ok(i64::from_be_bytes(self.array("an int64")?))
    }

    pub(crate) fn f64(&mut self) -> Result<f64, Fault> {
        Ok(f64::from_be_bytes(self.array("a float64")?))
    }

    pub(crate) fn uuid(&mut self) -> Result<[u8; 16], Fault> {
        self.array("a uuid")
    }

    /// An unsigned varint of at most 5 bytes whose value fits 32 bits.
    pub(crate) fn uvarint(&mut self) -> Result<u32, Fault> {
        let start = self.offset();
        let mut value: u32 = 0;
        for shift in [0, 7, 14, 21] {
            let byte = self.array::<1>("a varint")?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        // The fifth byte holds the top 4 bits and ends the varint.
        let byte = self.array::<1>("a varint")?[0];
        if byte > 0x0f {
            return Err(Fault::malformed(
                start,
                "varint longer than 5 bytes or 32 bits",
            ));
        }
        Ok(value | u32::from(byte) << 28)
    }
}

pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
fn uvarint_len(value: u32) -> usize {
    (32 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            2_097_151,
            2_097_152,
            u32::MAX,
        ] {
            let mut out = Vec::new();
            put_uvarint(&mut out, value);
            assert_eq!(out.len(), uvarint_len(value), "{value}");
            let mut reader = Reader::new(&out);
            assert_eq!(reader.uvarint().unwrap(), value);
            assert_eq!(reader.remaining(), 0);
        }
        let mut out = Vec::new();
        put_uvarint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn varints_past_32_bits_are_refused() {
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x7f])
            .uvarint()
            .is_err());
        assert!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
            .uvarint()
            .is_err());
        assert!(Reader::new(&[0x80, 0x80]).uvarint().is_err());
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f])
                .uvarint()
                .unwrap(),
            u32::MAX
        );
    }

    #[test]
    fn reads_past_the_end_fail_with_the_offset() {
        let mut reader = Reader::new(&[0, 1, 2]);
        assert_eq!(reader.i16().unwrap(), 1);
        let mut sub = reader.sub(1, "a tagged field").unwrap();
        assert_eq!(sub.offset(), 2);
        assert!(sub.i16().is_err());
        assert!(reader.i8().is_err());
        assert!(reader.take(usize::MAX, "records").is_err());
    }
}
