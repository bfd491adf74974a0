//! Stamping a closed batch again with a new producer epoch and sequence (Kafka's
//! `ProducerBatch.resetProducerState`): after an idempotent producer bumps its epoch
//! (KIP-360), the batches it still has to send carry the new epoch and fresh sequences.

use rillet_core::error::{Error, Result};
use rillet_core::record::batch::compute_crc;
use rillet_core::record::RECORD_BATCH_OVERHEAD;

/// Where the stamped fields sit in a RecordBatch v2 header (Kafka's `DefaultRecordBatch`).
const CRC: usize = 17;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;

/// Rewrite the producer id, epoch and base sequence of the one batch in `batch` and its CRC
/// (which covers them). The records are not touched, so a compressed batch stays as it is.
pub fn restamp_producer(
    batch: &mut [u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Result<()> {
    if batch.len() < RECORD_BATCH_OVERHEAD {
        return Err(Error::CorruptRecord(format!(
            "a record batch of {} bytes is shorter than its {RECORD_BATCH_OVERHEAD}-byte header",
            batch.len()
        )));
    }
    batch[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    batch[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rillet_core::record::batch::validate_batch;
    use rillet_core::record::{BatchBuilder, BatchHeader, Compression};

    #[test]
    fn a_restamped_batch_is_valid_and_carries_the_new_fields() {
        let mut b = BatchBuilder::new(Compression::Zstd);
        b.producer(7, 0, 0);
        b.append(1_000, Some(b"k"), Some(b"value"), &[]);
        b.append(1_001, None, Some(b"value2"), &[]);
        let mut bytes = b.build().unwrap();
        restamp_producer(&mut bytes, 7, 3, 40).unwrap();
        validate_batch(&bytes).unwrap();
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 3, 40)
        );
        assert!(restamp_producer(&mut bytes[..10], 1, 1, 1).is_err());
    }
}
