//! Producer state (Kafka's `ProducerStateManager`): duplicate detection over the last
//! batches, sequence and epoch checks (KIP-360), expiry, the `.snapshot` file format byte by
//! byte, snapshot selection and deletion, truncation, and a property test against a model.
//!
//! Every test uses fixed timestamps and its own temporary directory.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use rillet_core::log::producer_snapshot::{
    decode_snapshot, delete_snapshots_after, delete_snapshots_before, encode_snapshot,
    latest_snapshot_offset, list_snapshot_files, oldest_snapshot_offset, read_snapshot,
};
use rillet_core::log::{
    snapshot_file, AppendOrigin, BatchMetadata, ProducerBatch, ProducerStateEntry,
    ProducerStateError, ProducerStateManager, Validation, DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NUM_BATCHES_TO_RETAIN,
};
use rillet_core::record::{BatchBuilder, BatchHeader, Compression};
use rillet_core::Error;

const TS: i64 = 1_700_000_000_000;
const PID: i64 = 1_000;

/// A non-transactional batch of `count` records at offsets `first..first + count`.
fn batch(pid: i64, epoch: i16, seq: i32, first: i64, count: i64) -> ProducerBatch {
    ProducerBatch::new(pid, epoch, seq, first, first + count - 1, TS, false)
}

fn txn_batch(pid: i64, epoch: i16, seq: i32, first: i64, count: i64, ts: i64) -> ProducerBatch {
    ProducerBatch::new(pid, epoch, seq, first, first + count - 1, ts, true)
}

fn name(r: Result<Validation, ProducerStateError>) -> &'static str {
    match r {
        Ok(Validation::Append) => "APPEND",
        Ok(Validation::Duplicate { .. }) => "DUPLICATE",
        Ok(Validation::NotIdempotent) => "NOT_IDEMPOTENT",
        Err(e) => e.kafka_name(),
    }
}

/// One batch more than the cache keeps, of 3 records each: sequences from 0 at offsets
/// from 100.
fn six_batches() -> (ProducerStateManager, Vec<ProducerBatch>) {
    let mut s = ProducerStateManager::new();
    let batches: Vec<_> = (0..=NUM_BATCHES_TO_RETAIN as i32)
        .map(|i| batch(PID, 0, 3 * i, 100 + 3 * i as i64, 3))
        .collect();
    for b in &batches {
        assert_eq!(s.append_as_leader(b), Ok(Validation::Append));
    }
    (s, batches)
}

#[test]
fn duplicates_of_each_of_the_cached_batches_get_their_original_offsets() {
    let (s, batches) = six_batches();
    for b in &batches[1..] {
        // A retry arrives with new offsets assigned; the answer is the original ones.
        let retry = ProducerBatch::new(PID, 0, b.base_sequence, 500, 502, TS, false);
        assert_eq!(
            s.validate(&retry),
            Ok(Validation::Duplicate {
                first_offset: b.first_offset,
                last_offset: b.last_offset
            })
        );
    }
    // The oldest fell out of the cache: it is now a sequence going backwards.
    let oldest = ProducerBatch::new(PID, 0, 0, 500, 502, TS, false);
    assert_eq!(name(s.validate(&oldest)), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    // A batch overlapping but not equal to a cached one is no duplicate either.
    let overlap = ProducerBatch::new(PID, 0, 15, 500, 500, TS, false);
    assert_eq!(name(s.validate(&overlap)), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    assert_eq!(
        s.last_entry(PID).unwrap().batch_metadata.len(),
        NUM_BATCHES_TO_RETAIN
    );
}

#[test]
fn a_duplicate_does_not_change_the_state() {
    let (mut s, batches) = six_batches();
    let before = s.clone();
    let v = s.append_as_leader(&batches[3]).unwrap();
    assert!(matches!(v, Validation::Duplicate { .. }));
    assert_eq!(s, before);
}

#[test]
fn a_sequence_gap_is_out_of_order() {
    let (s, batches) = six_batches();
    let next = batches.last().unwrap().last_sequence + 1;
    let at = batches.last().unwrap().last_offset + 1;
    assert_eq!(
        s.validate(&batch(PID, 0, next, at, 1)),
        Ok(Validation::Append)
    );
    for seq in [next - 1, next + 1, next + 2, 1_000, i32::MAX] {
        let err = s.validate(&batch(PID, 0, seq, at, 1)).unwrap_err();
        assert_eq!(
            err,
            ProducerStateError::OutOfOrderSequenceNumber {
                producer_id: PID,
                offset: at,
                sequence: seq,
                last_sequence: next - 1,
                current_epoch: 0,
            }
        );
        assert_eq!(err.kafka_name(), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    }
}

#[test]
fn sequences_wrap_around_at_i32_max() {
    let mut s = ProducerStateManager::new();
    // An unknown producer may start anywhere; this batch ends exactly at i32::MAX.
    let b1 = batch(PID, 0, i32::MAX - 2, 0, 3);
    assert_eq!(b1.last_sequence, i32::MAX);
    assert_eq!(s.append_as_leader(&b1), Ok(Validation::Append));
    assert_eq!(
        name(s.validate(&batch(PID, 0, 1, 3, 2))),
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    let b2 = batch(PID, 0, 0, 3, 2);
    assert_eq!(s.append_as_leader(&b2), Ok(Validation::Append));
    // A batch that itself wraps: i32::MAX - 1, i32::MAX, 0, 1.
    let mut s2 = ProducerStateManager::new();
    let b3 = batch(PID, 0, i32::MAX - 1, 10, 4);
    assert_eq!(b3.last_sequence, 1);
    s2.append_as_leader(&b3).unwrap();
    assert_eq!(
        s2.validate(&batch(PID, 0, i32::MAX - 1, 50, 4)),
        Ok(Validation::Duplicate {
            first_offset: 10,
            last_offset: 13
        })
    );
    assert_eq!(
        s2.validate(&batch(PID, 0, 2, 14, 1)),
        Ok(Validation::Append)
    );
    // Duplicates still found across the wrap in the first state.
    assert_eq!(
        s.validate(&batch(PID, 0, i32::MAX - 2, 9, 3)),
        Ok(Validation::Duplicate {
            first_offset: 0,
            last_offset: 2
        })
    );
}

#[test]
fn an_old_epoch_is_fenced_and_a_bumped_epoch_starts_at_zero() {
    let mut s = ProducerStateManager::new();
    s.append_as_leader(&batch(PID, 5, 0, 0, 2)).unwrap();
    s.append_as_leader(&batch(PID, 5, 2, 2, 2)).unwrap();

    let err = s.validate(&batch(PID, 4, 4, 4, 1)).unwrap_err();
    assert_eq!(
        err,
        ProducerStateError::InvalidProducerEpoch {
            producer_id: PID,
            offset: 4,
            epoch: 4,
            current_epoch: 5
        }
    );
    assert_eq!(err.kafka_name(), "INVALID_PRODUCER_EPOCH");

    // A newer epoch must start at 0 (KIP-360: the producer bumps its epoch and resets).
    assert_eq!(
        name(s.validate(&batch(PID, 6, 4, 4, 1))),
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    assert_eq!(
        s.append_as_leader(&batch(PID, 6, 0, 4, 3)),
        Ok(Validation::Append)
    );
    let e = s.last_entry(PID).unwrap();
    assert_eq!((e.producer_epoch, e.batch_metadata.len()), (6, 1));

    // A retry of an old-epoch batch is not a duplicate any more: the epoch is fenced.
    assert_eq!(
        name(s.validate(&batch(PID, 5, 2, 9, 2))),
        "INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(s.validate(&batch(PID, 6, 3, 7, 1)), Ok(Validation::Append));
}

#[test]
fn an_unknown_producer_is_accepted_at_any_sequence() {
    let s = ProducerStateManager::new();
    for seq in [0, 1, 42, i32::MAX] {
        assert_eq!(
            s.validate(&batch(PID, 3, seq, 0, 1)),
            Ok(Validation::Append)
        );
    }
}

#[test]
fn non_idempotent_batches_are_never_tracked() {
    let mut s = ProducerStateManager::new();
    let plain = ProducerBatch::new(-1, -1, -1, 0, 9, TS, false);
    assert_eq!(plain.last_sequence, -1);
    for _ in 0..3 {
        assert_eq!(s.append_as_leader(&plain), Ok(Validation::NotIdempotent));
    }
    s.update(&plain);
    assert!(s.is_empty());
    assert_eq!(s.map_end_offset(), 10);
}

#[test]
fn built_from_a_record_batch_header() {
    let mut b = BatchBuilder::new(Compression::None);
    b.base_offset(40).producer(PID, 2, 7);
    for i in 0..4 {
        b.append(TS + i, None, Some(b"v"), &[]);
    }
    let bytes = b.build().unwrap();
    let h = BatchHeader::parse(&bytes).unwrap();
    let pb = ProducerBatch::from_header(&h);
    assert_eq!(
        pb,
        ProducerBatch {
            producer_id: PID,
            producer_epoch: 2,
            base_sequence: 7,
            last_sequence: 10,
            first_offset: 40,
            last_offset: 43,
            max_timestamp: TS + 3,
            is_transactional: false,
        }
    );
}

#[test]
fn expiry_keeps_producers_with_an_ongoing_transaction() {
    let mut s = ProducerStateManager::new();
    let exp = DEFAULT_PRODUCER_ID_EXPIRATION_MS;
    s.update(&batch(1, 0, 0, 0, 1)); // timestamp TS
    s.update(&txn_batch(2, 0, 0, 1, 1, TS)); // open transaction
    s.update(&ProducerBatch::new(3, 0, 0, 2, 2, TS + 10, false));

    s.remove_expired_producers(TS + exp - 1, exp);
    assert_eq!(s.producers().len(), 3);
    s.remove_expired_producers(TS + exp, exp); // idle >= expiration: gone
    assert_eq!(
        s.producers().keys().copied().collect::<Vec<_>>(),
        vec![2, 3]
    );
    s.remove_expired_producers(TS + 10 * exp, exp);
    assert_eq!(s.producers().keys().copied().collect::<Vec<_>>(), vec![2]);

    // Once its transaction ends, it expires from the marker's timestamp.
    s.append_end_txn_marker(AppendOrigin::Replication, 2, 0, 1, false, 3, TS + 20)
        .unwrap();
    s.remove_expired_producers(TS + 20 + exp - 1, exp);
    assert_eq!(s.producers().len(), 1);
    s.remove_expired_producers(TS + 20 + exp, exp);
    assert!(s.is_empty());
}

// ---- snapshots --------------------------------------------------------------------------

/// CRC-32C (Castagnoli, reflected, poly 0x82F63B78), bit by bit: independent of the crate.
fn crc32c_by_hand(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn snapshot_bytes_are_kafkas_producer_snapshot_v1() {
    assert_eq!(crc32c_by_hand(b"123456789"), 0xE306_9283);

    let mut s = ProducerStateManager::new();
    // Producer 7, epoch 3: two batches, only the last goes into the snapshot.
    s.update(&ProducerBatch::new(7, 3, 0, 10, 11, 1_000, false));
    s.update(&ProducerBatch::new(7, 3, 2, 12, 14, 2_000, false));
    // Producer 9, epoch 0: an open transaction, coordinator epoch from an earlier marker.
    s.append_end_txn_marker(AppendOrigin::Replication, 9, 0, 4, false, 15, 2_500)
        .unwrap();
    s.update(&ProducerBatch::new(9, 0, 5, 16, 16, 3_000, true));

    #[rustfmt::skip]
    let body: Vec<u8> = [
        &[0, 0, 0, 2][..],                          // entry count
        &[0, 0, 0, 0, 0, 0, 0, 7],                  // producer_id 7
        &[0, 3],                                    // epoch 3
        &[0, 0, 0, 4],                              // last_sequence 4
        &[0, 0, 0, 0, 0, 0, 0, 14],                 // last_offset 14
        &[0, 0, 0, 2],                              // offset_delta 2
        &[0, 0, 0, 0, 0, 0, 0x07, 0xD0],            // timestamp 2000
        &[0xFF, 0xFF, 0xFF, 0xFF],                  // coordinator_epoch -1
        &[0xFF; 8],                                 // current_txn_first_offset -1
        &[0, 0, 0, 0, 0, 0, 0, 9],                  // producer_id 9
        &[0, 0],                                    // epoch 0
        &[0, 0, 0, 5],                              // last_sequence 5
        &[0, 0, 0, 0, 0, 0, 0, 16],                 // last_offset 16
        &[0, 0, 0, 0],                              // offset_delta 0
        &[0, 0, 0, 0, 0, 0, 0x0B, 0xB8],            // timestamp 3000
        &[0, 0, 0, 4],                              // coordinator_epoch 4
        &[0, 0, 0, 0, 0, 0, 0, 16],                 // current_txn_first_offset 16
    ]
    .concat();
    let mut expected = vec![0, 1]; // version 1
    expected.extend_from_slice(&crc32c_by_hand(&body).to_be_bytes());
    expected.extend_from_slice(&body);

    let dir = tempfile::tempdir().unwrap();
    let path = s.take_snapshot(dir.path(), 17).unwrap();
    assert_eq!(path, dir.path().join("00000000000000000017.snapshot"));
    assert_eq!(fs::read(&path).unwrap(), expected);
    assert!(!dir
        .path()
        .join("00000000000000000017.snapshot.tmp")
        .exists());

    // Round trip: each producer keeps its last batch only.
    let (offset, loaded) = ProducerStateManager::load_latest_snapshot(dir.path(), TS, None)
        .unwrap()
        .unwrap();
    assert_eq!(offset, 17);
    assert_eq!(loaded.map_end_offset(), 17);
    let e7 = loaded.last_entry(7).unwrap();
    assert_eq!(
        e7.batch_metadata.iter().copied().collect::<Vec<_>>(),
        vec![BatchMetadata {
            last_seq: 4,
            last_offset: 14,
            offset_delta: 2,
            timestamp: 2_000
        }]
    );
    assert_eq!(loaded.last_entry(9), s.last_entry(9));
    assert_eq!(encode_snapshot(loaded.producers().values()), expected);
}

#[test]
fn an_entry_with_no_batch_round_trips_with_last_offset_minus_one() {
    let mut s = ProducerStateManager::new();
    s.append_end_txn_marker(AppendOrigin::Replication, 5, 2, 1, true, 0, 99)
        .unwrap();
    let bytes = encode_snapshot(s.producers().values());
    assert_eq!(&bytes[10 + 8 + 2..10 + 8 + 2 + 4], &(-1i32).to_be_bytes()); // last_sequence
    assert_eq!(&bytes[10 + 14..10 + 22], &(-1i64).to_be_bytes()); // last_offset
    let back = decode_snapshot(&bytes).unwrap();
    assert_eq!(back, vec![s.last_entry(5).unwrap().clone()]);
    assert!(back[0].is_empty());
}

#[test]
fn after_a_reload_only_the_last_batch_is_a_detectable_duplicate() {
    let (s, batches) = six_batches();
    let dir = tempfile::tempdir().unwrap();
    let end = batches.last().unwrap().last_offset + 1;
    s.take_snapshot(dir.path(), end).unwrap();
    let (_, loaded) = ProducerStateManager::load_latest_snapshot(dir.path(), TS, None)
        .unwrap()
        .unwrap();
    let last = batches[NUM_BATCHES_TO_RETAIN];
    assert_eq!(
        loaded.validate(&last),
        Ok(Validation::Duplicate {
            first_offset: last.first_offset,
            last_offset: last.last_offset
        })
    );
    assert_eq!(
        name(loaded.validate(&batches[NUM_BATCHES_TO_RETAIN - 1])),
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    assert_eq!(
        loaded.validate(&batch(PID, 0, last.last_sequence + 1, end, 1)),
        Ok(Validation::Append)
    );
}

fn sample_snapshot() -> Vec<u8> {
    let (s, _) = six_batches();
    encode_snapshot(s.producers().values())
}

fn assert_corrupt(bytes: &[u8]) {
    assert!(
        matches!(decode_snapshot(bytes), Err(Error::CorruptRecord(_))),
        "{bytes:?}"
    );
}

#[test]
fn corrupt_truncated_and_unknown_version_snapshots_are_refused() {
    let good = sample_snapshot();
    assert!(decode_snapshot(&good).is_ok());

    let mut bad_crc = good.clone();
    bad_crc[3] ^= 1;
    assert_corrupt(&bad_crc);

    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 0x80;
    assert_corrupt(&flipped);

    for len in [0, 1, 5, 9, good.len() - 1] {
        assert_corrupt(&good[..len]);
    }
    // A consistent CRC does not make a short entry list whole.
    let mut short = good[..good.len() - 8].to_vec();
    let crc = crc32c_by_hand(&short[6..]);
    short[2..6].copy_from_slice(&crc.to_be_bytes());
    assert_corrupt(&short);

    for version in [0i16, 2, -1] {
        let mut v = good.clone();
        v[..2].copy_from_slice(&version.to_be_bytes());
        assert_corrupt(&v);
    }
}

#[test]
fn a_corrupt_latest_snapshot_is_deleted_and_an_older_one_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ProducerStateManager::new();
    s.update(&batch(PID, 0, 0, 0, 5));
    s.take_snapshot(dir.path(), 5).unwrap();
    s.update(&batch(PID, 0, 5, 5, 5));
    let newest = s.take_snapshot(dir.path(), 10).unwrap();
    let mut bytes = fs::read(&newest).unwrap();
    bytes[12] ^= 0xFF;
    fs::write(&newest, &bytes).unwrap();
    assert!(matches!(
        read_snapshot(&newest),
        Err(Error::CorruptRecord(_))
    ));

    let (offset, loaded) = ProducerStateManager::load_latest_snapshot(dir.path(), TS, None)
        .unwrap()
        .unwrap();
    assert_eq!(offset, 5);
    assert_eq!(loaded.last_entry(PID).unwrap().last_seq(), 4);
    assert!(!newest.exists());

    // All corrupt: no snapshot at all.
    fs::write(snapshot_file(dir.path(), 5), b"junk").unwrap();
    assert!(
        ProducerStateManager::load_latest_snapshot(dir.path(), TS, None)
            .unwrap()
            .is_none()
    );
    assert!(list_snapshot_files(dir.path()).unwrap().is_empty());
}

#[test]
fn loading_leaves_out_expired_producers() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ProducerStateManager::new();
    s.update(&ProducerBatch::new(1, 0, 0, 0, 0, TS, false));
    s.update(&ProducerBatch::new(2, 0, 0, 1, 1, TS + 100, false));
    s.update(&txn_batch(3, 0, 0, 2, 2, TS));
    s.take_snapshot(dir.path(), 3).unwrap();
    let (_, loaded) = ProducerStateManager::load_latest_snapshot(dir.path(), TS + 100, Some(100))
        .unwrap()
        .unwrap();
    assert_eq!(
        loaded.producers().keys().copied().collect::<Vec<_>>(),
        vec![2, 3]
    );
}

fn offsets(dir: &Path) -> Vec<i64> {
    list_snapshot_files(dir)
        .unwrap()
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

#[test]
fn snapshots_are_listed_selected_and_deleted_by_offset() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(latest_snapshot_offset(d).unwrap(), None);
    let mut s = ProducerStateManager::new();
    for (i, offset) in [30i64, 0, 1_000_000_000_000, 200, 7]
        .into_iter()
        .enumerate()
    {
        s.update(&batch(PID, 0, i as i32, i as i64, 1));
        s.take_snapshot(d, offset).unwrap();
    }
    // Not snapshots: ignored.
    fs::write(d.join("00000000000000000050.log"), b"").unwrap();
    fs::write(d.join("leader-epoch-checkpoint"), b"").unwrap();
    fs::write(d.join("abc.snapshot"), b"").unwrap();
    fs::create_dir(d.join("00000000000000000099.snapshot")).unwrap();

    assert_eq!(offsets(d), vec![0, 7, 30, 200, 1_000_000_000_000]);
    assert!(d.join("00000001000000000000.snapshot").exists());
    assert_eq!(latest_snapshot_offset(d).unwrap(), Some(1_000_000_000_000));
    assert_eq!(oldest_snapshot_offset(d).unwrap(), Some(0));
    let (offset, latest) = ProducerStateManager::load_latest_snapshot(d, TS, None)
        .unwrap()
        .unwrap();
    assert_eq!(offset, 1_000_000_000_000);
    // Selected by offset, not by when it was written (it was the third).
    assert_eq!(latest.last_entry(PID).unwrap().last_seq(), 2);

    delete_snapshots_before(d, 30).unwrap(); // strictly before
    assert_eq!(offsets(d), vec![30, 200, 1_000_000_000_000]);
    delete_snapshots_after(d, 200).unwrap(); // strictly after
    assert_eq!(offsets(d), vec![30, 200]);
    let (offset, _) = ProducerStateManager::load_latest_snapshot(d, TS, None)
        .unwrap()
        .unwrap();
    assert_eq!(offset, 200);
    assert!(d.join("00000000000000000050.log").exists());
}

#[test]
fn truncate_and_reload_falls_back_to_the_snapshot_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = ProducerStateManager::new();
    s.update(&batch(PID, 0, 0, 0, 10));
    s.take_snapshot(d, 10).unwrap();
    s.update(&batch(PID, 0, 10, 10, 10));
    s.take_snapshot(d, 20).unwrap();
    s.update(&batch(PID, 0, 20, 20, 10));
    assert_eq!(s.map_end_offset(), 30);

    // The log is truncated to 15: the snapshot at 20 goes, the one at 10 is reloaded and
    // the caller replays [10, 15).
    s.truncate_and_reload(d, 0, 15, TS, DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        .unwrap();
    assert_eq!(offsets(d), vec![10]);
    assert_eq!(s.map_end_offset(), 10);
    assert_eq!(s.last_entry(PID).unwrap().last_seq(), 9);
    s.update(&batch(PID, 0, 10, 10, 5));
    assert_eq!(
        s.validate(&batch(PID, 0, 15, 15, 1)),
        Ok(Validation::Append)
    );

    // Nothing changed at the end: the state is kept, only the start moves.
    let before = s.clone();
    s.truncate_and_reload(d, 0, 15, TS, DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        .unwrap();
    assert_eq!(s, before);

    // The log start moved past every snapshot: they go, and the state starts empty there.
    s.truncate_and_reload(d, 12, 13, TS, DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        .unwrap();
    assert!(offsets(d).is_empty());
    assert!(s.is_empty());
    assert_eq!(s.map_end_offset(), 12);
}

#[test]
fn truncate_fully_clears_the_state_and_every_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = six_batches();
    s.take_snapshot(dir.path(), 118).unwrap();
    s.take_snapshot(dir.path(), 200).unwrap();
    s.truncate_fully_and_start_at(dir.path(), 500).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.map_end_offset(), 500);
    assert!(offsets(dir.path()).is_empty());
}

#[test]
fn a_follower_records_without_validation() {
    let mut s = ProducerStateManager::new();
    s.update(&batch(PID, 5, 0, 0, 1));
    // Gaps and old epochs are what the leader wrote; the follower records them.
    s.update(&batch(PID, 5, 10, 1, 1));
    s.update(&batch(PID, 4, 3, 2, 1));
    let e = s.last_entry(PID).unwrap();
    assert_eq!(
        (e.producer_epoch, e.last_seq(), e.last_data_offset()),
        (4, 3, 2)
    );
}

// ---- property test against a model ------------------------------------------------------

/// The model: every batch a producer wrote in its current epoch, kept in full.
#[derive(Clone, Default)]
struct ModelProducer {
    epoch: i16,
    /// (first_seq, last_seq, first_offset, last_offset), oldest first.
    batches: Vec<(i32, i32, i64, i64)>,
    last_ts: i64,
}

/// Sequence arithmetic in i64, modulo 2^31.
fn model_next(last_seq: i32) -> i32 {
    ((i64::from(last_seq) + 1) % (1i64 << 31)) as i32
}

fn model_expect(m: &HashMap<i64, ModelProducer>, b: &ProducerBatch) -> &'static str {
    if b.producer_id == -1 {
        return "NOT_IDEMPOTENT";
    }
    let Some(p) = m.get(&b.producer_id) else {
        return "APPEND";
    };
    let recent = &p.batches[p.batches.len().saturating_sub(NUM_BATCHES_TO_RETAIN)..];
    if b.producer_epoch == p.epoch
        && recent
            .iter()
            .any(|x| x.0 == b.base_sequence && x.1 == b.last_sequence)
    {
        return "DUPLICATE";
    }
    if b.producer_epoch < p.epoch {
        return "INVALID_PRODUCER_EPOCH";
    }
    if b.producer_epoch > p.epoch {
        return if b.base_sequence == 0 {
            "APPEND"
        } else {
            "OUT_OF_ORDER_SEQUENCE_NUMBER"
        };
    }
    let last = p.batches.last().map_or(-1, |x| x.1);
    if model_next(last) == b.base_sequence {
        "APPEND"
    } else {
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    }
}

#[derive(Debug, Clone)]
enum Op {
    Produce {
        pid: i64,
        epoch_delta: i8,
        seq_choice: u8,
        pick: usize,
        count: i64,
    },
    SnapshotAndReload,
    Expire,
    Tick(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop::sample::select(vec![-1i64, 1, 2, 3]), -1i8..=1, 0u8..6, 0usize..16, 1i64..4)
            .prop_map(|(pid, epoch_delta, seq_choice, pick, count)| Op::Produce {
                pid,
                epoch_delta,
                seq_choice,
                pick,
                count
            }),
        1 => Just(Op::SnapshotAndReload),
        1 => Just(Op::Expire),
        2 => (0i64..600).prop_map(Op::Tick),
    ]
}

const EXPIRATION_MS: i64 = 1_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn producer_state_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ProducerStateManager::new();
        let mut m: HashMap<i64, ModelProducer> = HashMap::new();
        let mut now = TS;
        let mut next_offset = 0i64;
        for op in ops {
            match op {
                Op::Produce { pid, epoch_delta, seq_choice, pick, count } => {
                    let p = m.get(&pid).cloned().unwrap_or_default();
                    let epoch = (p.epoch + i16::from(epoch_delta)).max(0);
                    let last = p.batches.last().map_or(-1, |x| x.1);
                    let seq = match seq_choice {
                        0 | 1 => model_next(last),
                        2 => 0,
                        3 if !p.batches.is_empty() => p.batches[pick % p.batches.len()].0,
                        3 => i32::MAX - 1,
                        4 => model_next(last).wrapping_add(1 + pick as i32).max(0),
                        _ => i32::MAX - (pick as i32 % 3),
                    };
                    let b = if pid == -1 {
                        ProducerBatch::new(-1, -1, -1, next_offset, next_offset + count - 1, now, false)
                    } else if seq_choice == 3 && !p.batches.is_empty() {
                        // A retry: same sequence range as a cached batch.
                        let x = p.batches[pick % p.batches.len()];
                        let n = x.3 - x.2 + 1;
                        ProducerBatch::new(pid, epoch, x.0, next_offset, next_offset + n - 1, now, false)
                    } else {
                        ProducerBatch::new(pid, epoch, seq, next_offset, next_offset + count - 1, now, false)
                    };
                    let expected = model_expect(&m, &b);
                    let got = s.append_as_leader(&b);
                    prop_assert_eq!(name(got.clone()), expected, "batch {:?}", b);
                    match got {
                        Ok(Validation::Duplicate { first_offset, last_offset }) => {
                            let p = &m[&pid];
                            let orig = p.batches.iter().rev().find(|x| x.0 == b.base_sequence && x.1 == b.last_sequence).unwrap();
                            prop_assert_eq!((first_offset, last_offset), (orig.2, orig.3));
                        }
                        Ok(Validation::Append) => {
                            let p = m.entry(pid).or_default();
                            if p.epoch != b.producer_epoch || p.batches.is_empty() {
                                p.batches.clear();
                            }
                            p.epoch = b.producer_epoch;
                            p.batches.push((b.base_sequence, b.last_sequence, b.first_offset, b.last_offset));
                            p.last_ts = now;
                            next_offset = b.last_offset + 1;
                        }
                        Ok(Validation::NotIdempotent) => {
                            s.update(&b);
                            next_offset = b.last_offset + 1;
                        }
                        Err(_) => {}
                    }
                }
                Op::SnapshotAndReload => {
                    s.take_snapshot(dir.path(), next_offset).unwrap();
                    let (offset, loaded) =
                        ProducerStateManager::load_latest_snapshot(dir.path(), now, None).unwrap().unwrap();
                    prop_assert_eq!(offset, next_offset);
                    s = loaded;
                    for p in m.values_mut() {
                        let keep = p.batches.len().saturating_sub(1);
                        p.batches.drain(..keep);
                    }
                }
                Op::Expire => {
                    s.remove_expired_producers(now, EXPIRATION_MS);
                    m.retain(|_, p| now - p.last_ts < EXPIRATION_MS);
                }
                Op::Tick(ms) => now += ms,
            }
            let got: BTreeMap<i64, (i16, i32, i64)> = s
                .producers()
                .iter()
                .map(|(k, e)| (*k, (e.producer_epoch, e.last_seq(), e.last_data_offset())))
                .collect();
            let want: BTreeMap<i64, (i16, i32, i64)> = m
                .iter()
                .map(|(k, p)| (*k, (p.epoch, p.batches.last().map_or(-1, |x| x.1), p.batches.last().map_or(-1, |x| x.3))))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn entries_compare_by_value() {
    // ProducerStateEntry is a plain value: the same history gives equal entries.
    let mut a = ProducerStateManager::new();
    let mut b = ProducerStateManager::new();
    for s in [&mut a, &mut b] {
        s.update(&batch(PID, 0, 0, 0, 2));
    }
    assert_eq!(a.last_entry(PID), b.last_entry(PID));
    assert_ne!(a.last_entry(PID), Some(&ProducerStateEntry::empty(PID)));
}
