//! `Log` integration tests: the producer state inside the log (idempotent and transactional
//! producers). Leader appends answer retries with their original offsets and refuse
//! sequence, epoch and transaction errors without writing a byte; followers and recovery
//! rebuild the same state; snapshots at roll and close make reopening cheap and a crash
//! (with a torn tail) safe; truncation reloads; retention keeps the state (KIP-360); expiry
//! forgets idle producers; markers end transactions; compaction keeps a producer's last
//! batch so its sequence survives.
//!
//! Every test works in its own temporary directory with fixed clocks (`NOW`).

mod common;
mod log_cleaner_common;

use std::fs;
use std::path::Path;

use common::{config, config_with, fixture, open_new, opts, read_all, reopen, snapshot, NOW, TS};
use log_cleaner_common::{batches, cleaner, compacted_config, read_records};
use rillet_core::log::producer_snapshot::list_snapshot_files;
use rillet_core::log::{AppendOrigin, NUM_BATCHES_TO_RETAIN};
use rillet_core::log::{Log, LogAppendInfo, LogConfig, ProducerStateError, ProducerStateManager};
use rillet_core::record::batch::validate_batch;
use rillet_core::record::control::{ControlRecordType, EndTransactionMarker};
use rillet_core::record::{BatchBuilder, Compression, TimestampType};
use rillet_core::Error;

/// A batch of `n` records from producer `pid` in `epoch` starting at sequence `seq`, every
/// record keyed `p{pid}-s{sequence}` and timestamped `ts`.
fn pbatch(pid: i64, epoch: i16, seq: i32, n: i32, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, epoch, seq);
    for i in 0..n {
        let key = format!("p{pid}-s{}", seq + i);
        b.append(ts, Some(key.as_bytes()), Some(b"value"), &[]);
    }
    b.build().unwrap()
}

fn txn_batch(pid: i64, epoch: i16, seq: i32, n: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, epoch, seq).transactional(true);
    for i in 0..n {
        b.append(TS, Some(format!("t{i}").as_bytes()), Some(b"v"), &[]);
    }
    b.build().unwrap()
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> Vec<u8> {
    let m = EndTransactionMarker {
        control_type: if commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        },
        coordinator_epoch,
    };
    let (k, v) = m.serialize();
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, epoch, -1).transactional(true).control(true);
    b.append(TS, Some(&k), Some(&v), &[]);
    b.build().unwrap()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn lead(log: &mut Log, data: &[u8]) -> LogAppendInfo {
    log.append_as_leader(data, 0, NOW, false, AppendOrigin::Client)
        .unwrap()
}

fn lead_err(log: &mut Log, data: &[u8]) -> Error {
    log.append_as_leader(data, 0, NOW, true, AppendOrigin::Client)
        .unwrap_err()
}

fn kafka_name(e: &Error) -> &'static str {
    e.kafka_name()
}

/// (epoch, last sequence, last data offset, cached batches) of a producer.
fn entry(log: &Log, pid: i64) -> Option<(i16, i32, i64, usize)> {
    log.producer_state().last_entry(pid).map(|e| {
        (
            e.producer_epoch,
            e.last_seq(),
            e.last_data_offset(),
            e.batch_metadata.len(),
        )
    })
}

/// What a snapshot keeps of `state`: each producer's newest batch only.
fn as_snapshotted(state: &ProducerStateManager) -> ProducerStateManager {
    let entries = state.producers().values().map(|e| {
        let mut e = e.clone();
        while e.batch_metadata.len() > 1 {
            e.batch_metadata.pop_front();
        }
        e
    });
    ProducerStateManager::from_entries(entries, state.map_end_offset())
}

fn snapshot_offsets(dir: &Path) -> Vec<i64> {
    list_snapshot_files(dir)
        .unwrap()
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

/// Every byte of the log, for a follower.
fn all_bytes(log: &Log) -> Vec<u8> {
    let info = log
        .read(log.log_start_offset(), u64::MAX, None, false)
        .unwrap();
    let mut out = Vec::new();
    for r in &info.regions {
        r.read_into(&mut out).unwrap();
    }
    out
}

#[test]
fn a_retry_is_answered_with_its_original_offsets_and_not_written() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    let first = cat(&[&pbatch(1, 0, 0, 3, TS), &pbatch(1, 0, 3, 2, TS)]);
    let info = lead(&mut log, &first);
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(info.batch_base_offsets, None);
    let before = snapshot(&log);

    // The same request again: nothing written, both batches answered where they are.
    let info = log
        .append_as_leader(&first, 7, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 4));
    assert_eq!(info.batch_base_offsets, Some(vec![0, 3]));
    assert_eq!(
        (info.record_count, info.batch_count, info.valid_bytes),
        (0, 0, 0)
    );
    // The leader-epoch cache is not touched by an append that writes nothing.
    assert_eq!(snapshot(&log), before);
    assert_eq!(log.epoch_cache().latest_epoch(), Some(0));

    // Each of the last NUM_BATCHES_TO_RETAIN batches is a duplicate, alone too.
    let mut want = vec![(0, 3), (3, 2)];
    for i in 2..NUM_BATCHES_TO_RETAIN as i32 {
        let seq = 5 + 2 * (i - 2);
        lead(&mut log, &pbatch(1, 0, seq, 2, TS));
        want.push((seq, 2));
    }
    for (i, &(seq, n)) in want.iter().enumerate() {
        let info = lead(&mut log, &pbatch(1, 0, seq, n, TS));
        let base = i64::from(seq);
        assert_eq!(info.batch_base_offsets, Some(vec![base]), "batch {i}");
        assert_eq!(
            (info.first_offset, info.last_offset),
            (base, base + i64::from(n) - 1)
        );
    }
    let end = log.log_end_offset();
    assert_eq!(end, i64::from(want.last().unwrap().0) + 2);
    // One more batch pushes the first out of the cache: its retry is now out of order.
    lead(&mut log, &pbatch(1, 0, end as i32, 1, TS));
    let e = lead_err(&mut log, &pbatch(1, 0, 0, 3, TS));
    assert_eq!(kafka_name(&e), "OUT_OF_ORDER_SEQUENCE_NUMBER");
}

#[test]
fn duplicates_within_one_append_and_mixed_with_new_batches() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    lead(&mut log, &pbatch(1, 0, 0, 3, TS)); // 0..=2
    lead(&mut log, &pbatch(2, 0, 0, 2, TS)); // 3..=4

    // A retry, a new batch, a batch of another producer, and the new batch once more.
    let data = cat(&[
        &pbatch(1, 0, 0, 3, TS),
        &pbatch(1, 0, 3, 4, TS),
        &pbatch(-1, -1, -1, 2, TS),
        &pbatch(2, 0, 2, 1, TS),
        &pbatch(1, 0, 3, 4, TS),
    ]);
    let info = lead(&mut log, &data);
    assert_eq!(info.batch_base_offsets, Some(vec![0, 5, 9, 11, 5]));
    assert_eq!((info.first_offset, info.last_offset), (0, 11));
    assert_eq!((info.batch_count, info.record_count), (3, 7));
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(entry(&log, 1), Some((0, 6, 8, 2)));
    assert_eq!(entry(&log, 2), Some((0, 2, 11, 2)));
    assert_eq!(read_all(&log).len(), 12);

    // Only duplicates, answered out of order: last_offset is the largest.
    let info = lead(
        &mut log,
        &cat(&[&pbatch(2, 0, 2, 1, TS), &pbatch(1, 0, 0, 3, TS)]),
    );
    assert_eq!(info.batch_base_offsets, Some(vec![11, 0]));
    assert_eq!((info.first_offset, info.last_offset), (11, 11));
    assert_eq!(log.log_end_offset(), 12);
}

#[test]
fn producer_errors_fail_the_whole_append_and_leave_the_log_unchanged() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    lead(&mut log, &pbatch(1, 3, 0, 2, TS));
    lead(&mut log, &txn_batch(2, 0, 0, 1));
    let before = snapshot(&log);
    let state = log.producer_state().clone();
    let snaps = snapshot_offsets(&f.dir);
    let good = pbatch(9, 0, 0, 1, TS);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // A gap, after a good batch of another producer.
        (
            cat(&[&good, &pbatch(1, 3, 5, 1, TS)]),
            "OUT_OF_ORDER_SEQUENCE_NUMBER",
        ),
        // In order first, then a gap inside the same append.
        (
            cat(&[&pbatch(1, 3, 2, 1, TS), &pbatch(1, 3, 4, 1, TS)]),
            "OUT_OF_ORDER_SEQUENCE_NUMBER",
        ),
        // A new epoch must start at 0.
        (pbatch(1, 4, 2, 1, TS), "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        // A zombie.
        (
            cat(&[&good, &pbatch(1, 2, 0, 1, TS)]),
            "INVALID_PRODUCER_EPOCH",
        ),
        // A plain write inside an open transaction.
        (pbatch(2, 0, 1, 1, TS), "INVALID_TXN_STATE"),
        // A data batch with a producer id must carry a sequence.
        (pbatch(1, 3, -1, 1, TS), "INVALID_RECORD"),
    ];
    for (data, want) in cases {
        let e = lead_err(&mut log, &data);
        assert_eq!(kafka_name(&e), want, "{e}");
        assert_eq!(snapshot(&log), before);
        assert_eq!(log.producer_state(), &state);
        assert_eq!(snapshot_offsets(&f.dir), snaps);
    }
    // A damaged byte reads as CORRUPT_MESSAGE, even where it makes a sequence error.
    let mut bad = pbatch(1, 3, 2, 1, TS);
    bad[56] ^= 0x01; // base sequence 2 -> 3
    let e = lead_err(&mut log, &bad);
    assert_eq!(kafka_name(&e), "CORRUPT_MESSAGE", "{e}");
    assert_eq!(snapshot(&log), before);
    assert!(matches!(
        lead_err(&mut log, &pbatch(1, 2, 0, 1, TS)),
        Error::ProducerState(ProducerStateError::InvalidProducerEpoch { .. })
    ));
}

#[test]
fn an_epoch_bump_starts_over_at_sequence_zero_and_an_unknown_producer_anywhere() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    lead(&mut log, &pbatch(1, 0, 1_000, 2, TS)); // unknown: any sequence
    lead(&mut log, &pbatch(1, 1, 0, 2, TS)); // KIP-360 bump
    assert_eq!(entry(&log, 1), Some((1, 1, 3, 1)));
    // A retry from the old epoch is a zombie now.
    let e = lead_err(&mut log, &pbatch(1, 0, 1_000, 2, TS));
    assert_eq!(kafka_name(&e), "INVALID_PRODUCER_EPOCH");
    // Sequences wrap past i32::MAX.
    lead(&mut log, &pbatch(5, 0, i32::MAX - 1, 2, TS));
    lead(&mut log, &pbatch(5, 0, 0, 1, TS));
    assert_eq!(entry(&log, 5), Some((0, 0, 6, 2)));
}

#[test]
fn a_follower_replaying_the_leaders_batches_has_the_same_state() {
    let f = fixture();
    let mut leader = open_new(&f.dir, config_with(|c| c.segment_bytes = 600));
    for round in 0..4 {
        for pid in 1..4 {
            lead(
                &mut leader,
                &pbatch(pid, 0, round * 2, 2, TS + round as i64),
            );
        }
        lead(&mut leader, &pbatch(-1, -1, -1, 1, TS));
    }
    lead(&mut leader, &txn_batch(7, 2, 0, 2));
    leader
        .append_as_leader(&marker(7, 2, true, 4), 0, NOW, true, AppendOrigin::Client)
        .unwrap();
    lead(&mut leader, &txn_batch(8, 0, 0, 1)); // still open
    assert!(leader.segment_count() > 1);

    let g = fixture();
    let mut follower = open_new(&g.dir, config());
    follower
        .append_as_follower(&all_bytes(&leader), NOW)
        .unwrap();
    assert_eq!(follower.producer_state(), leader.producer_state());
    let txn = follower.producer_state().last_entry(7).unwrap();
    assert_eq!(
        (txn.coordinator_epoch, txn.current_txn_first_offset),
        (4, None)
    );
    let open = follower.producer_state().last_entry(8).unwrap();
    assert!(open.current_txn_first_offset.is_some());
    assert_eq!(
        follower.producer_state().map_end_offset(),
        follower.log_end_offset()
    );
}

#[test]
fn markers_end_transactions_and_fence_old_coordinators() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    lead(&mut log, &txn_batch(4, 1, 0, 3));
    assert_eq!(
        log.producer_state()
            .last_entry(4)
            .unwrap()
            .current_txn_first_offset,
        Some(0)
    );
    // Clients may not write markers.
    let e = log
        .append_as_leader(&marker(4, 1, true, 2), 0, NOW, false, AppendOrigin::Client)
        .unwrap_err();
    assert_eq!(kafka_name(&e), "INVALID_RECORD");
    let info = log
        .append_as_leader(&marker(4, 1, false, 2), 0, NOW, true, AppendOrigin::Client)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 3));
    let e4 = log.producer_state().last_entry(4).unwrap().clone();
    assert_eq!(
        (e4.coordinator_epoch, e4.current_txn_first_offset),
        (2, None)
    );
    assert_eq!(e4.last_timestamp, TS);
    let before = snapshot(&log);
    for (data, want) in [
        (marker(4, 1, true, 1), "TRANSACTION_COORDINATOR_FENCED"),
        (marker(4, 0, true, 3), "INVALID_PRODUCER_EPOCH"),
    ] {
        let e = log
            .append_as_leader(&data, 0, NOW, true, AppendOrigin::Client)
            .unwrap_err();
        assert_eq!(kafka_name(&e), want);
        assert_eq!(snapshot(&log), before);
    }
    // A marker in the same append as the transaction's batches sees them.
    let data = cat(&[&txn_batch(4, 1, 3, 1), &marker(4, 1, true, 2)]);
    log.append_as_leader(&data, 0, NOW, true, AppendOrigin::Client)
        .unwrap();
    assert_eq!(
        log.producer_state()
            .last_entry(4)
            .unwrap()
            .current_txn_first_offset,
        None
    );
    // Malformed markers are invalid records, written by nobody.
    let before = snapshot(&log);
    for (key, value) in [
        (&[0u8, 0, 0, 9][..], &[0u8, 0, 0, 0, 0, 1][..]),
        (&[0, 0, 0, 1], &[0, 0, 0]),
    ] {
        let mut b = BatchBuilder::new(Compression::None);
        b.producer(4, 1, -1).transactional(true).control(true);
        b.append(TS, Some(key), Some(value), &[]);
        let bad = b.build().unwrap();
        let e = log
            .append_as_leader(&bad, 0, NOW, true, AppendOrigin::Client)
            .unwrap_err();
        assert_eq!(kafka_name(&e), "INVALID_RECORD");
        let g = fixture();
        let mut follower = open_new(&g.dir, config());
        let e = follower.append_as_follower(&bad, NOW).unwrap_err();
        assert_eq!(kafka_name(&e), "INVALID_RECORD");
        assert_eq!(follower.log_end_offset(), 0);
    }
    assert_eq!(snapshot(&log), before);
    // A control batch without a producer id (the metadata log's) is not a marker.
    let mut b = BatchBuilder::new(Compression::None);
    b.control(true);
    b.append(TS, None, Some(b"leader change"), &[]);
    log.append_as_leader(&b.build().unwrap(), 0, NOW, true, AppendOrigin::Client)
        .unwrap();
}

#[test]
fn reopening_after_a_clean_close_loads_the_snapshot_at_the_log_end() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 700);
    let mut log = open_new(&f.dir, cfg.clone());
    for s in 0..12 {
        lead(&mut log, &pbatch(1, 0, 2 * s, 2, TS));
        lead(&mut log, &pbatch(2, 4, s, 1, TS));
    }
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    assert!(bases.len() >= 3, "{bases:?}");
    // A snapshot at every roll.
    assert_eq!(snapshot_offsets(&f.dir), bases[1..].to_vec());
    let state = log.producer_state().clone();
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    let mut want_snaps = bases[1..].to_vec();
    want_snaps.push(end);
    assert_eq!(snapshot_offsets(&f.dir), want_snaps);

    let (mut log, _) = reopen(&f.dir, cfg, opts(true, end, 0));
    assert_eq!(log.producer_state(), &as_snapshotted(&state));
    assert_eq!(snapshot_offsets(&f.dir), want_snaps);
    // Only the last batch of each producer is still a detectable duplicate (as in Kafka).
    let info = lead(&mut log, &pbatch(1, 0, 22, 2, TS));
    assert_eq!(info.batch_base_offsets, Some(vec![end - 3]));
    let e = lead_err(&mut log, &pbatch(1, 0, 20, 2, TS));
    assert_eq!(kafka_name(&e), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    assert_eq!(lead(&mut log, &pbatch(1, 0, 24, 1, TS)).first_offset, end);
}

#[test]
fn reopening_after_a_crash_rebuilds_from_a_snapshot_below_the_recovered_segments_and_cuts_a_torn_tail(
) {
    let f = fixture();
    let cfg = config();
    let mut log = open_new(&f.dir, cfg.clone());
    for s in 0..10 {
        lead(&mut log, &pbatch(1, 0, 2 * s, 2, TS)); // 3s..=3s+1
        lead(&mut log, &pbatch(2, 4, s, 1, TS)); // 3s+2
    }
    log.close().unwrap();
    drop(log);
    assert_eq!(snapshot_offsets(&f.dir), vec![30]);
    // More after the clean close, then a crash (no close): the state is the close's
    // snapshot plus every batch after it.
    let (mut log, _) = reopen(&f.dir, cfg.clone(), opts(true, 30, 0));
    lead(&mut log, &pbatch(1, 0, 20, 2, TS)); // 30..=31
    lead(&mut log, &pbatch(1, 0, 22, 2, TS)); // 32..=33
    lead(&mut log, &pbatch(2, 4, 10, 1, TS)); // 34
    let end = log.log_end_offset();
    assert_eq!(end, 35);
    let active = log.segments().last().unwrap().log_path().to_path_buf();
    drop(log);

    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert!(info.recovered_segments >= 1);
    let last_offsets = |log: &Log, pid: i64| -> Vec<i64> {
        let e = log.producer_state().last_entry(pid).unwrap();
        e.batch_metadata.iter().map(|m| m.last_offset).collect()
    };
    // Every segment from the recovery point (0) on was re-read, so the state is rebuilt
    // from a snapshot at or below the first of them (Kafka's LogLoader.recoverSegment; none
    // here): the whole log is replayed, and each producer's last batches are known.
    let last = |all: &[i64]| all[all.len().saturating_sub(NUM_BATCHES_TO_RETAIN)..].to_vec();
    let p1: Vec<i64> = (0..10).map(|s| 3 * s + 1).chain([31, 33]).collect();
    let p2: Vec<i64> = (0..10).map(|s| 3 * s + 2).chain([34]).collect();
    assert_eq!(last_offsets(&log, 1), last(&p1));
    assert_eq!(last_offsets(&log, 2), last(&p2));
    assert_eq!(log.producer_state().map_end_offset(), end);
    // The replay ends in a snapshot at the log end.
    assert_eq!(snapshot_offsets(&f.dir), vec![30, 35]);
    // Every replayed batch is a detectable duplicate.
    let info = lead(
        &mut log,
        &cat(&[&pbatch(1, 0, 20, 2, TS), &pbatch(2, 4, 10, 1, TS)]),
    );
    assert_eq!(info.batch_base_offsets, Some(vec![30, 34]));
    drop(log);

    // A torn tail: part of the last batch is lost. The snapshot past the new end goes, and
    // the producer's last batch is the one before.
    let len = fs::metadata(&active).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(len - 20)
        .unwrap();
    let (mut log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert!(info.truncated_bytes > 0);
    assert_eq!(log.log_end_offset(), end - 1);
    assert_eq!(snapshot_offsets(&f.dir), vec![30, 34]);
    assert_eq!(last_offsets(&log, 2), last(&p2[..p2.len() - 1]));
    assert_eq!(last_offsets(&log, 1), last(&p1));
    // The lost batch is not a duplicate: the retry is written again.
    let info = lead(&mut log, &pbatch(2, 4, 10, 1, TS));
    assert_eq!(
        (info.first_offset, info.batch_base_offsets),
        (end - 1, None)
    );
}

#[test]
fn a_log_without_any_snapshot_after_a_clean_shutdown_replays_its_last_two_segments() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 500);
    let mut log = open_new(&f.dir, cfg.clone());
    lead(&mut log, &pbatch(1, 0, 0, 2, TS)); // only in the first segment
    for s in 0..30 {
        lead(&mut log, &pbatch(2, 0, s, 1, TS));
    }
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    assert!(bases.len() >= 4, "{bases:?}");
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    // As a log written before producer state existed.
    for (_, p) in list_snapshot_files(&f.dir).unwrap() {
        fs::remove_file(p).unwrap();
    }
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, end, 0));
    let second_last = bases[bases.len() - 2];
    assert_eq!(entry(&log, 1), None, "only the last two segments are read");
    let p2 = log.producer_state().last_entry(2).unwrap();
    assert_eq!(p2.last_seq(), 29);
    assert_eq!(
        p2.batch_metadata.front().unwrap().first_offset(),
        second_last.max(end - NUM_BATCHES_TO_RETAIN as i64)
    );
    // An empty snapshot where the replay started, one at the last segment, one at the end.
    assert_eq!(
        snapshot_offsets(&f.dir),
        vec![second_last, bases[bases.len() - 1], end]
    );
    drop(log);

    // After a crash with no snapshot at all, everything is replayed.
    for (_, p) in list_snapshot_files(&f.dir).unwrap() {
        fs::remove_file(p).unwrap();
    }
    let (log, _) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(entry(&log, 1), Some((0, 1, 1, 1)));
    assert_eq!(entry(&log, 2).map(|e| e.1), Some(29));
}

#[test]
fn truncation_reloads_the_state_from_a_snapshot_and_replays() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 500);
    let mut log = open_new(&f.dir, cfg.clone());
    for s in 0..12 {
        lead(&mut log, &pbatch(1, 0, 2 * s, 2, TS));
    }
    let bases: Vec<i64> = log.segments().map(|s| s.base_offset()).collect();
    let cut = bases[bases.len() - 2] + 2; // inside the second-to-last segment
    assert!(log.truncate_to(cut, NOW).unwrap());
    assert_eq!(log.log_end_offset(), cut);
    assert!(snapshot_offsets(&f.dir).iter().all(|&o| o <= cut));
    assert_eq!(log.producer_state().map_end_offset(), cut);
    let e = log.producer_state().last_entry(1).unwrap();
    assert_eq!(
        (e.last_seq(), e.last_data_offset()),
        (cut as i32 - 1, cut - 1)
    );
    // The batches after the snapshot were replayed: both are duplicates.
    let info = lead(
        &mut log,
        &cat(&[
            &pbatch(1, 0, cut as i32 - 4, 2, TS),
            &pbatch(1, 0, cut as i32 - 2, 2, TS),
        ]),
    );
    assert_eq!(info.batch_base_offsets, Some(vec![cut - 4, cut - 2]));
    // The truncated batches are gone: their sequences follow on.
    assert_eq!(
        lead(&mut log, &pbatch(1, 0, cut as i32, 2, TS)).first_offset,
        cut
    );

    // Truncating a log without producers does not scan or reload anything.
    let g = fixture();
    let mut plain = open_new(&g.dir, cfg);
    for _ in 0..8 {
        lead(&mut plain, &pbatch(-1, -1, -1, 2, TS));
    }
    plain.truncate_to(5, NOW).unwrap();
    assert!(plain.producer_state().is_empty());
    assert_eq!(
        plain.producer_state().map_end_offset(),
        plain.log_end_offset()
    );

    // Truncating everything starts over.
    log.truncate_fully_and_start_at(100, NOW).unwrap();
    assert!(log.producer_state().is_empty());
    assert!(snapshot_offsets(&f.dir).is_empty());
    assert_eq!(log.producer_state().map_end_offset(), 100);
}

#[test]
fn retention_keeps_the_producer_state_and_the_latest_snapshot() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 500);
    let mut log = open_new(&f.dir, cfg.clone());
    lead(&mut log, &pbatch(1, 0, 0, 2, TS)); // producer 1 writes only here
    for s in 0..12 {
        lead(&mut log, &pbatch(2, 0, s, 1, TS));
    }
    log.roll(NOW).unwrap();
    let end = log.log_end_offset();
    log.maybe_increment_log_start_offset(end).unwrap();
    assert!(log.delete_old_segments(NOW, None).unwrap() > 0);
    assert_eq!(log.log_start_offset(), end);
    // KIP-360: producer 1's batches are gone, its state is not; its retry is a duplicate.
    assert_eq!(entry(&log, 1), Some((0, 1, 1, 1)));
    let info = lead(&mut log, &pbatch(1, 0, 0, 2, TS));
    assert_eq!(info.batch_base_offsets, Some(vec![0]));
    assert_eq!(log.log_end_offset(), end);
    // The snapshots below the first segment are gone but the latest.
    assert_eq!(snapshot_offsets(&f.dir), vec![end]);
    // A crash now: the snapshot at the log start brings the state back.
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(false, end, end));
    assert_eq!(entry(&log, 1), Some((0, 1, 1, 1)));
    assert_eq!(entry(&log, 2).map(|e| e.1), Some(11));
}

#[test]
fn idle_producers_expire_unless_their_transaction_is_open() {
    let f = fixture();
    let cfg = config_with(|c| c.producer_id_expiration_ms = 1_000);
    let mut log = open_new(&f.dir, cfg.clone());
    lead(&mut log, &pbatch(1, 0, 0, 1, TS));
    lead(&mut log, &pbatch(2, 0, 0, 1, TS + 500));
    lead(&mut log, &txn_batch(3, 0, 0, 1));
    log.remove_expired_producers(TS + 999);
    assert_eq!(log.producer_state().producers().len(), 3);
    log.remove_expired_producers(TS + 1_000);
    let left: Vec<i64> = log.producer_state().producers().keys().copied().collect();
    assert_eq!(left, vec![2, 3]);
    // An expired producer is unknown: any sequence is accepted.
    assert_eq!(lead(&mut log, &pbatch(1, 0, 40, 1, TS)).first_offset, 3);
    // Expired producers are left out when a snapshot is loaded too.
    log.close().unwrap();
    drop(log);
    let mut o = opts(true, 4, 0);
    o.now_ms = TS + 1_500;
    let (log, _) = reopen(&f.dir, cfg, o);
    let left: Vec<i64> = log.producer_state().producers().keys().copied().collect();
    assert_eq!(left, vec![3]);
}

#[test]
fn a_duplicate_under_log_append_time_answers_the_original_append_time() {
    let f = fixture();
    let cfg = config_with(|c| c.message_timestamp_type = TimestampType::LogAppendTime);
    let mut log = open_new(&f.dir, cfg);
    let info = log
        .append_as_leader(&pbatch(1, 0, 0, 2, TS), 0, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(info.log_append_time, NOW);
    let info = log
        .append_as_leader(
            &pbatch(1, 0, 0, 2, TS),
            0,
            NOW + 5,
            false,
            AppendOrigin::Client,
        )
        .unwrap();
    assert_eq!((info.log_append_time, info.first_offset), (NOW, 0));
    assert_eq!(
        log.producer_state().last_entry(1).unwrap().last_timestamp,
        NOW
    );
}

#[test]
fn large_appends_validated_in_parallel_keep_the_producer_state_right() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 64 << 20));
    let big = |seq: i32| {
        let mut b = BatchBuilder::new(Compression::None);
        b.producer(1, 0, seq);
        for _ in 0..100 {
            b.append(TS, Some(b"k"), Some(&[7u8; 1500]), &[]);
        }
        b.build().unwrap()
    };
    let data = cat(&[&big(0), &big(100)]);
    assert!(data.len() >= 256 * 1024);
    assert_eq!(lead(&mut log, &data).last_offset, 199);
    // A retry of the first with a new one: only the new one is written.
    let data = cat(&[&big(0), &big(200), &big(300)]);
    let info = lead(&mut log, &data);
    assert_eq!(info.batch_base_offsets, Some(vec![0, 200, 300]));
    assert_eq!(log.log_end_offset(), 400);
    // A corrupt record fails it and leaves the state alone.
    let state = log.producer_state().clone();
    let mut bad = cat(&[&big(400), &big(500), &big(600)]);
    let n = bad.len();
    bad[n - 3] ^= 0xff;
    let e = lead_err(&mut log, &bad);
    assert_eq!(kafka_name(&e), "CORRUPT_MESSAGE");
    assert_eq!(log.producer_state(), &state);
    assert_eq!(log.log_end_offset(), 400);
}

#[test]
fn compaction_keeps_a_producers_last_batch_as_an_empty_batch_and_the_state_rebuilds() {
    let f = fixture();
    let cfg = compacted_config(|_| {});
    let mut log = open_new(&f.dir, cfg.clone());
    let keyed = |pid: i64, seq: i32, key: &str| {
        let mut b = BatchBuilder::new(Compression::Lz4);
        b.producer(pid, 0, seq);
        b.append(TS, Some(key.as_bytes()), Some(b"v"), &[]);
        b.append(TS, Some(format!("{key}-2").as_bytes()), Some(b"v"), &[]);
        b.build().unwrap()
    };
    lead(&mut log, &keyed(7, 0, "a")); // 0..=1: superseded, producer 7 writes again
    lead(&mut log, &keyed(7, 2, "b")); // 2..=3: superseded, producer 7's last batch
    lead(&mut log, &keyed(-1, -1, "a")); // 4..=5
    lead(&mut log, &keyed(-1, -1, "b")); // 6..=7
    log.roll(NOW).unwrap();
    let state = log.producer_state().clone();
    log.clean(&cleaner(), None, None, NOW).unwrap();
    // Producer 7's last batch stays, emptied, with its header (sequence, epoch, offsets).
    assert_eq!(batches(&log), vec![(2, 3, 0), (4, 5, 2), (6, 7, 2)]);
    let seg = log.segments().next().unwrap().log_path().to_path_buf();
    let raw = fs::read(&seg).unwrap();
    let h = validate_batch(&raw).unwrap();
    assert_eq!(
        (
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.record_count
        ),
        (7, 0, 2, 0)
    );
    assert_eq!(read_records(&log).len(), 4);
    assert_eq!(log.producer_state(), &state);

    // A follower replicating the compacted log, and a reload from the log alone, see the
    // producer's sequence.
    let g = fixture();
    let mut follower = open_new(&g.dir, cfg.clone());
    follower.append_as_follower(&all_bytes(&log), NOW).unwrap();
    let e = follower.producer_state().last_entry(7).unwrap();
    assert_eq!((e.last_seq(), e.last_data_offset()), (3, 3));
    log.close().unwrap();
    drop(log);
    for (_, p) in list_snapshot_files(&f.dir).unwrap() {
        fs::remove_file(p).unwrap();
    }
    let (mut log, _) = reopen(&f.dir, cfg, opts(false, 0, 0));
    let e = log.producer_state().last_entry(7).unwrap();
    assert_eq!((e.last_seq(), e.last_data_offset()), (3, 3));
    let info = lead(&mut log, &keyed(7, 2, "b"));
    assert_eq!(info.batch_base_offsets, Some(vec![2]));
    assert_eq!(lead(&mut log, &keyed(7, 4, "c")).first_offset, 8);

    // An expired producer's last batch is compacted away like any other.
    log.remove_expired_producers(TS + LogConfig::default().producer_id_expiration_ms);
    lead(&mut log, &keyed(-1, -1, "c"));
    log.roll(NOW).unwrap();
    log.clean(&cleaner(), None, None, NOW).unwrap();
    assert!(batches(&log).iter().all(|&(b, _, _)| b != 8 && b != 2));
}

#[test]
fn snapshots_at_roll_and_close_are_written_only_by_the_log() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    assert!(snapshot_offsets(&f.dir).is_empty());
    lead(&mut log, &pbatch(1, 0, 0, 2, TS));
    log.roll(NOW).unwrap();
    assert_eq!(snapshot_offsets(&f.dir), vec![2]);
    log.take_producer_snapshot().unwrap();
    assert_eq!(snapshot_offsets(&f.dir), vec![2]);
    lead(&mut log, &pbatch(1, 0, 2, 1, TS));
    log.take_producer_snapshot().unwrap();
    assert_eq!(snapshot_offsets(&f.dir), vec![2, 3]);
    let (_, loaded) = ProducerStateManager::load_latest_snapshot(&f.dir, NOW, None)
        .unwrap()
        .unwrap();
    assert_eq!(loaded, as_snapshotted(log.producer_state()));
}
