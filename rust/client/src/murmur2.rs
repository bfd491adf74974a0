//! Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), so that a keyed
//! record lands on the same partition as with the Java client.

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// Kafka's murmur2 of `data`, as the signed 32-bit value Java returns.
pub fn murmur2(data: &[u8]) -> i32 {
    let len = data.len();
    let mut h = SEED ^ len as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for a key: `toPositive(murmur2) % n`.
pub fn partition_for_key(key: &[u8], num_partitions: u32) -> u32 {
    (murmur2(key) as u32 & 0x7fff_ffff) % num_partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_from_kafka() {
        // Values from Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 5] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
        ];
        for (data, want) in cases {
            assert_eq!(murmur2(data), want, "{}", String::from_utf8_lossy(data));
        }
    }
}
