//! Control records: Kafka's `ControlRecordType` (the record key) and
//! `EndTransactionMarker` (the record value of a COMMIT or ABORT marker).
//!
//! A control batch (attributes bit 5) holds one control record. Its key and value:
//!
//! ```text
//! key    offset  width  field
//!             0      2  version            int16, 0 (>= 0; a newer one is read as 0)
//!             2      2  type               int16: 0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, ...
//! value (ABORT and COMMIT only)
//!             0      2  version            int16, 0 (>= 0; a newer one is read as 0)
//!             2      4  coordinator_epoch  int32
//! ```
//! All big-endian. Bytes after those fields are ignored, as Kafka does, so later versions
//! stay readable.

use super::batch::{parse_records, records_bytes, BatchHeader};
use crate::error::{Error, Result};

/// Kafka's `ControlRecordType.CURRENT_CONTROL_RECORD_KEY_SIZE`.
pub const CONTROL_RECORD_KEY_SIZE: usize = 4;
/// Kafka's `EndTransactionMarker.CURRENT_END_TXN_MARKER_VALUE_SIZE`.
pub const END_TXN_MARKER_VALUE_SIZE: usize = 6;

/// The type in a control record's key (Kafka's `ControlRecordType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecordType {
    Abort,
    Commit,
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KraftVersion,
    KraftVoters,
    /// A type this version does not know; readers ignore it.
    Unknown,
}

impl ControlRecordType {
    pub fn from_type_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KraftVersion,
            6 => ControlRecordType::KraftVoters,
            _ => ControlRecordType::Unknown,
        }
    }

    /// Kafka's name (`ABORT`, `COMMIT`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ControlRecordType::Abort => "ABORT",
            ControlRecordType::Commit => "COMMIT",
            ControlRecordType::LeaderChange => "LEADER_CHANGE",
            ControlRecordType::SnapshotHeader => "SNAPSHOT_HEADER",
            ControlRecordType::SnapshotFooter => "SNAPSHOT_FOOTER",
            ControlRecordType::KraftVersion => "KRAFT_VERSION",
            ControlRecordType::KraftVoters => "KRAFT_VOTERS",
            ControlRecordType::Unknown => "UNKNOWN",
        }
    }

    /// The type id in a control record's key (Kafka's `ControlRecordType.parseTypeId`).
    pub fn parse_type_id(key: Option<&[u8]>) -> Result<i16> {
        let key = key.unwrap_or_default();
        if key.len() < CONTROL_RECORD_KEY_SIZE {
            return Err(Error::invalid(format!(
                "Invalid value size found for end control record key. Must have at least \
                 {CONTROL_RECORD_KEY_SIZE} bytes, but found only {}",
                key.len()
            )));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(Error::invalid(format!(
                "Invalid version found for control record: {version}. May indicate data corruption"
            )));
        }
        Ok(i16::from_be_bytes([key[2], key[3]]))
    }

    pub fn parse(key: Option<&[u8]>) -> Result<Self> {
        Self::parse_type_id(key).map(Self::from_type_id)
    }
}

/// A COMMIT or ABORT marker (Kafka's `EndTransactionMarker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTransactionMarker {
    pub control_type: ControlRecordType,
    pub coordinator_epoch: i32,
}

impl EndTransactionMarker {
    pub fn is_abort(&self) -> bool {
        self.control_type == ControlRecordType::Abort
    }

    /// The marker a control record's key and value hold (Kafka's `deserialize`). A key of
    /// another type, or a short or negative-version value, is INVALID_RECORD.
    pub fn deserialize(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self> {
        let control_type = ControlRecordType::parse(key)?;
        if !matches!(
            control_type,
            ControlRecordType::Abort | ControlRecordType::Commit
        ) {
            return Err(Error::invalid(format!(
                "Invalid control record type for end transaction marker: {}",
                control_type.name()
            )));
        }
        let value = value.unwrap_or_default();
        if value.len() < END_TXN_MARKER_VALUE_SIZE {
            return Err(Error::invalid(format!(
                "Invalid value size found for end transaction marker. Must have at least \
                 {END_TXN_MARKER_VALUE_SIZE} bytes, but found only {}",
                value.len()
            )));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(Error::invalid(format!(
                "Invalid version found for end transaction marker: {version}. May indicate data corruption"
            )));
        }
        Ok(EndTransactionMarker {
            control_type,
            coordinator_epoch: i32::from_be_bytes(value[2..6].try_into().unwrap()),
        })
    }

    /// The key and value of this marker's control record, version 0.
    pub fn serialize(
        &self,
    ) -> (
        [u8; CONTROL_RECORD_KEY_SIZE],
        [u8; END_TXN_MARKER_VALUE_SIZE],
    ) {
        let type_id: i16 = match self.control_type {
            ControlRecordType::Abort => 0,
            _ => 1,
        };
        let mut key = [0u8; CONTROL_RECORD_KEY_SIZE];
        key[2..].copy_from_slice(&type_id.to_be_bytes());
        let mut value = [0u8; END_TXN_MARKER_VALUE_SIZE];
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        (key, value)
    }
}

/// The marker of a transaction control batch and its record's timestamp, or `None` when
/// the batch holds no record (the cleaner emptied it). `batch` is the whole batch; its CRC
/// is not checked here.
pub fn read_end_txn_marker(
    h: &BatchHeader,
    batch: &[u8],
) -> Result<Option<(EndTransactionMarker, i64)>> {
    if h.record_count == 0 {
        return Ok(None);
    }
    if batch.len() != h.size_in_bytes() {
        return Err(Error::corrupt(format!(
            "control batch at offset {} claims {} bytes but {} were given",
            h.base_offset,
            h.size_in_bytes(),
            batch.len()
        )));
    }
    let mut scratch = Vec::new();
    let records = records_bytes(h, batch, &mut scratch)?;
    let spans = parse_records(h, records, false)?;
    let Some(first) = spans.first() else {
        return Ok(None);
    };
    let r = first.resolve(h, records);
    let marker = EndTransactionMarker::deserialize(r.key, r.value)?;
    Ok(Some((marker, r.timestamp)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::validate_batch;
    use crate::record::{BatchBuilder, Compression};

    fn control_batch(key: Option<&[u8]>, value: Option<&[u8]>, c: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(c);
        b.producer(9, 2, -1).transactional(true).control(true);
        b.append(1_234, key, value, &[]);
        b.build().unwrap()
    }

    #[test]
    fn markers_round_trip_in_every_codec() {
        for c in [Compression::None, Compression::Zstd, Compression::Gzip] {
            for t in [ControlRecordType::Abort, ControlRecordType::Commit] {
                let m = EndTransactionMarker {
                    control_type: t,
                    coordinator_epoch: 77,
                };
                let (k, v) = m.serialize();
                let batch = control_batch(Some(&k), Some(&v), c);
                let h = validate_batch(&batch).unwrap();
                assert_eq!(read_end_txn_marker(&h, &batch).unwrap(), Some((m, 1_234)));
            }
        }
    }

    #[test]
    fn malformed_markers_are_invalid_records() {
        type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
        let cases: [KeyValue<'_>; 6] = [
            (None, Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0xff, 0xff, 0, 1]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0, 2]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0, 1]), Some(&[0x80, 0, 0, 0, 0, 1])),
        ];
        for (k, v) in cases {
            let batch = control_batch(k, v, Compression::None);
            let h = validate_batch(&batch).unwrap();
            let e = read_end_txn_marker(&h, &batch).unwrap_err();
            assert_eq!(e.kafka_name(), "INVALID_RECORD", "{k:?} {v:?}: {e}");
        }
        // A newer version with more bytes is read as version 0.
        let batch = control_batch(
            Some(&[0, 3, 0, 0, 9]),
            Some(&[0, 5, 0, 0, 0, 4, 7]),
            Compression::None,
        );
        let h = validate_batch(&batch).unwrap();
        let (m, _) = read_end_txn_marker(&h, &batch).unwrap().unwrap();
        assert!(m.is_abort());
        assert_eq!(m.coordinator_epoch, 4);
    }
}
