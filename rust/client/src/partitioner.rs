//! Kafka's built-in partitioning of one topic's records (`BuiltInPartitioner` and the
//! partitioners selectable by `partitioner.class`), per record and without Python.
//!
//! * A keyed record goes to `toPositive(murmur2(key)) % numPartitions`, as the Java client
//!   does, so a key lands on the same partition with either client.
//! * A record without a key, under the default strategy, sticks to one partition until
//!   `batch.size` bytes have gone to it, then moves to another picked at random (KIP-480,
//!   KIP-794); so keyless records fill whole batches instead of spreading thin.
//! * Round robin cycles through the partitions; random picks one per record.
//!
//! The randomness is injected ([`fastrand::Rng`]), so a seeded test is deterministic.

use crate::murmur2::partition_for_key;

/// How a record without an explicit partition gets one (`partitioner` in the producer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// murmur2 for keys, sticky (KIP-794) for null keys: Kafka's default.
    Default,
    /// every record to the next partition, keys ignored.
    RoundRobin,
    /// every record to a partition picked at random, keys ignored.
    Random,
}

impl Strategy {
    pub fn parse(name: &str) -> Option<Strategy> {
        match name {
            "default" | "murmur2" | "sticky" => Some(Strategy::Default),
            "round_robin" => Some(Strategy::RoundRobin),
            "random" => Some(Strategy::Random),
            _ => None,
        }
    }
}

/// Where one topic's records go. Holds the topic's partition ids (as metadata lists them)
/// and the sticky and round-robin state. Not thread safe: the owner serializes calls.
#[derive(Debug, Clone)]
pub struct TopicPartitioner {
    partitions: Vec<i32>,
    /// Index of the sticky partition and the bytes appended to it since it was picked.
    sticky: Option<(usize, usize)>,
    /// The previous sticky partition, avoided by the next pick when there is a choice.
    last_sticky: Option<usize>,
    round_robin: usize,
}

impl TopicPartitioner {
    /// `partitions` are the topic's partition ids; they are sorted here.
    pub fn new(mut partitions: Vec<i32>) -> Self {
        partitions.sort_unstable();
        partitions.dedup();
        TopicPartitioner {
            partitions,
            sticky: None,
            last_sticky: None,
            round_robin: 0,
        }
    }

    pub fn partitions(&self) -> &[i32] {
        &self.partitions
    }

    /// The index of `partition` in [`Self::partitions`], if the topic has it.
    pub fn index_of(&self, partition: i32) -> Option<usize> {
        self.partitions.binary_search(&partition).ok()
    }

    /// The index (into [`Self::partitions`]) of the partition for a record with `key`.
    /// The topic must have at least one partition.
    pub fn choose(
        &mut self,
        strategy: Strategy,
        key: Option<&[u8]>,
        rng: &mut fastrand::Rng,
    ) -> usize {
        let n = self.partitions.len();
        debug_assert!(n > 0, "a topic with no partitions");
        match (strategy, key) {
            (Strategy::Default, Some(key)) => partition_for_key(key, n as u32) as usize,
            (Strategy::Default, None) => match self.sticky {
                Some((index, _)) => index,
                None => {
                    let index = match self.last_sticky {
                        Some(previous) if n > 1 => {
                            // Any partition but the previous one, uniformly.
                            let pick = rng.usize(..n - 1);
                            if pick >= previous {
                                pick + 1
                            } else {
                                pick
                            }
                        }
                        _ => rng.usize(..n),
                    };
                    self.sticky = Some((index, 0));
                    self.last_sticky = Some(index);
                    index
                }
            },
            (Strategy::RoundRobin, _) => {
                let index = self.round_robin % n;
                self.round_robin = self.round_robin.wrapping_add(1);
                index
            }
            (Strategy::Random, _) => rng.usize(..n),
        }
    }

    /// Count `bytes` appended to the partition at `index` by [`Self::choose`]; after
    /// `batch_size` bytes on the sticky partition the next keyless record moves on (KIP-794).
    pub fn on_append(&mut self, index: usize, bytes: usize, batch_size: usize) {
        if let Some((sticky, sent)) = self.sticky {
            if sticky == index {
                let sent = sent + bytes;
                self.sticky = if sent >= batch_size {
                    None
                } else {
                    Some((sticky, sent))
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_as_kafka_does() {
        let mut p = TopicPartitioner::new(vec![2, 0, 1]);
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(p.partitions(), &[0, 1, 2]);
        for key in [&b"a"[..], b"user-1", b"", b"some longer key"] {
            let index = p.choose(Strategy::Default, Some(key), &mut rng);
            assert_eq!(index, partition_for_key(key, 3) as usize);
        }
    }

    #[test]
    fn sticky_moves_on_after_batch_size_and_never_to_the_same_partition() {
        let mut p = TopicPartitioner::new((0..4).collect());
        let mut rng = fastrand::Rng::with_seed(7);
        let mut previous = None;
        for _ in 0..100 {
            let first = p.choose(Strategy::Default, None, &mut rng);
            assert_ne!(
                Some(first),
                previous,
                "a new sticky partition differs from the last"
            );
            // 10 records of 100 bytes fill a 1000-byte batch; all go to one partition.
            for _ in 0..10 {
                assert_eq!(p.choose(Strategy::Default, None, &mut rng), first);
                p.on_append(first, 100, 1000);
            }
            previous = Some(first);
        }
    }

    #[test]
    fn sticky_ignores_bytes_sent_elsewhere_and_single_partition_stays() {
        let mut p = TopicPartitioner::new(vec![0, 1]);
        let mut rng = fastrand::Rng::with_seed(3);
        let s = p.choose(Strategy::Default, None, &mut rng);
        p.on_append(1 - s, 10_000, 1000);
        assert_eq!(p.choose(Strategy::Default, None, &mut rng), s);
        let mut one = TopicPartitioner::new(vec![5]);
        for _ in 0..3 {
            assert_eq!(one.choose(Strategy::Default, None, &mut rng), 0);
            one.on_append(0, 5000, 1000);
        }
    }

    #[test]
    fn round_robin_and_random_cover_every_partition() {
        let mut p = TopicPartitioner::new((0..3).collect());
        let mut rng = fastrand::Rng::with_seed(11);
        let rr: Vec<usize> = (0..6)
            .map(|_| p.choose(Strategy::RoundRobin, Some(b"k"), &mut rng))
            .collect();
        assert_eq!(rr, vec![0, 1, 2, 0, 1, 2]);
        let mut seen = [false; 3];
        for _ in 0..200 {
            seen[p.choose(Strategy::Random, None, &mut rng)] = true;
        }
        assert_eq!(seen, [true; 3]);
        assert_eq!(p.index_of(2), Some(2));
        assert_eq!(p.index_of(3), None);
    }
}
