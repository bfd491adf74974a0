//! `Log` integration tests: transactions as read_committed readers see them. The first
//! unstable and last stable offsets with interleaved transactions of several producers,
//! commits, aborts and the high watermark; the aborted transaction index (`.txnindex`: its
//! byte layout, lazily created, one per segment, written by leaders, followers and
//! recovery, truncated and deleted with its segment, kept by compaction);
//! `collect_aborted_transactions` and read_committed reads; the coordinator's append origin.
//!
//! Every test works in its own temporary directory with fixed clocks (`NOW`).

mod common;
mod log_cleaner_common;

use std::fs;
use std::path::Path;

use common::{config, fixture, open_new, opts, reopen, seg_path, NOW, TS};
use log_cleaner_common::{cleaner, compacted_config};
use rillet_core::log::{AbortedTxn, AppendOrigin, Log, LogAppendInfo, ABORTED_TXN_SIZE};
use rillet_core::record::batch::decode_batches;
use rillet_core::record::control::{ControlRecordType, EndTransactionMarker};
use rillet_core::record::{BatchBuilder, Compression};

/// A transactional batch of `n` records from `pid` (epoch 0) at sequence `seq`, keyed
/// `{key}{i}` with value `{value}`.
fn txn(pid: i64, seq: i32, n: i32, key: &str, value: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, 0, seq).transactional(true);
    for i in 0..n {
        b.append(
            TS,
            Some(format!("{key}{i}").as_bytes()),
            Some(value.as_bytes()),
            &[],
        );
    }
    b.build().unwrap()
}

/// A plain batch (no producer id) of one record.
fn plain(key: &str, value: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(TS, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    b.build().unwrap()
}

/// An idempotent, non-transactional batch of one record.
fn idempotent(pid: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, 0, seq);
    b.append(TS, Some(b"i"), Some(b"idem"), &[]);
    b.build().unwrap()
}

fn marker(pid: i64, epoch: i16, commit: bool) -> Vec<u8> {
    let m = EndTransactionMarker {
        control_type: if commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        },
        coordinator_epoch: 0,
    };
    let (k, v) = m.serialize();
    let mut b = BatchBuilder::new(Compression::None);
    b.producer(pid, epoch, -1).transactional(true).control(true);
    b.append(TS, Some(&k), Some(&v), &[]);
    b.build().unwrap()
}

fn lead(log: &mut Log, data: &[u8]) -> LogAppendInfo {
    log.append_as_leader(data, 0, NOW, true, AppendOrigin::Client)
        .unwrap()
}

fn aborted(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

/// Every segment's transaction index entries, by segment base.
fn txn_indexes(log: &Log) -> Vec<(i64, Vec<AbortedTxn>)> {
    log.segments()
        .filter(|s| !s.txn_index().is_empty())
        .map(|s| (s.base_offset(), s.txn_index().entries().to_vec()))
        .collect()
}

/// The entries of a `.txnindex` file, decoded here from Kafka's layout.
fn txn_index_file(path: &Path) -> Vec<AbortedTxn> {
    let bytes = fs::read(path).unwrap();
    assert_eq!(bytes.len() % ABORTED_TXN_SIZE, 0);
    bytes
        .chunks(ABORTED_TXN_SIZE)
        .map(|c| {
            assert_eq!(&c[0..2], &[0, 0], "version 0");
            let at = |i: usize| i64::from_be_bytes(c[i..i + 8].try_into().unwrap());
            aborted(at(2), at(10), at(18), at(26))
        })
        .collect()
}

/// Every record value at or after `from`, read with `read_committed` below `lso` and
/// filtered as a read_committed consumer does (Kafka's CompletedFetch): the batches of an
/// aborted transaction are dropped from its first offset to its ABORT marker.
fn committed_values(log: &Log, from: i64, lso: i64) -> Vec<String> {
    let info = log
        .read_committed(from, u64::MAX, Some(lso), false)
        .unwrap();
    let mut bytes = Vec::new();
    for r in &info.regions {
        r.read_into(&mut bytes).unwrap();
    }
    let mut pending = info.aborted_transactions.unwrap();
    pending.sort_by_key(|t| std::cmp::Reverse(t.first_offset));
    let mut open = std::collections::HashSet::new();
    let mut out = Vec::new();
    for b in decode_batches(&bytes, true, false).unwrap() {
        let h = &b.header;
        while pending
            .last()
            .is_some_and(|t| t.first_offset <= h.last_offset())
        {
            open.insert(pending.pop().unwrap().producer_id);
        }
        let recs = b.records_buf(&bytes);
        if h.is_control() {
            let r = b.records[0].resolve(h, recs);
            if ControlRecordType::parse(r.key).unwrap() == ControlRecordType::Abort {
                open.remove(&h.producer_id);
            }
            continue;
        }
        if h.is_transactional() && open.contains(&h.producer_id) {
            continue;
        }
        for s in &b.records {
            let r = s.resolve(h, recs);
            if r.offset >= from {
                out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
            }
        }
    }
    out
}

/// Every batch from the log start, decoded.
fn all_batches(log: &Log) -> Vec<u8> {
    let info = log
        .read(log.log_start_offset(), u64::MAX, None, false)
        .unwrap();
    let mut bytes = Vec::new();
    for r in &info.regions {
        r.read_into(&mut bytes).unwrap();
    }
    bytes
}

/// (offset, value) of every record of a data batch.
fn data_records(log: &Log) -> Vec<(i64, String)> {
    let bytes = all_batches(log);
    let mut out = Vec::new();
    for b in decode_batches(&bytes, true, false).unwrap() {
        if b.header.is_control() {
            continue;
        }
        let recs = b.records_buf(&bytes);
        for s in &b.records {
            let r = s.resolve(&b.header, recs);
            out.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

/// The offsets of the control batches.
fn control_offsets(log: &Log) -> Vec<i64> {
    let bytes = all_batches(log);
    decode_batches(&bytes, true, false)
        .unwrap()
        .iter()
        .filter(|b| b.header.is_control())
        .map(|b| b.header.base_offset)
        .collect()
}

/// The log the first tests share, offset by offset:
///
/// ```text
/// 0-1  p1 txn "a"     2  plain "x"     3-4  p2 txn "b"     5  p1 txn "a"
/// 6    p3 idempotent  7  p1 COMMIT     8    p2 txn "b"     9  p2 ABORT    10  plain "y"
/// ```
fn interleaved(log: &mut Log) {
    lead(log, &txn(1, 0, 2, "a", "a"));
    lead(log, &plain("x", "x"));
    lead(log, &txn(2, 0, 2, "b", "b"));
    lead(log, &txn(1, 2, 1, "a", "a"));
    lead(log, &idempotent(3, 0));
    lead(log, &marker(1, 0, true));
    lead(log, &txn(2, 2, 1, "b", "b"));
    lead(log, &marker(2, 0, false));
    lead(log, &plain("y", "y"));
}

#[test]
fn the_last_stable_offset_follows_interleaved_transactions_and_the_high_watermark() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(0), 0);
    lead(&mut log, &txn(1, 0, 2, "a", "a"));
    lead(&mut log, &plain("x", "x"));
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(log.last_stable_offset(3), 0);
    lead(&mut log, &txn(2, 0, 2, "b", "b"));
    lead(&mut log, &txn(1, 2, 1, "a", "a"));
    lead(&mut log, &idempotent(3, 0));
    assert_eq!(log.first_unstable_offset(), Some(0));
    // p1 commits at 7: its transaction holds the LSO back until the HW passes the marker.
    lead(&mut log, &marker(1, 0, true));
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(log.last_stable_offset(7), 0);
    assert_eq!(log.last_stable_offset(8), 3);
    assert_eq!(log.last_stable_offset(2), 0);
    log.update_high_watermark(8);
    assert_eq!(log.first_unstable_offset(), Some(3));
    lead(&mut log, &txn(2, 2, 1, "b", "b"));
    lead(&mut log, &marker(2, 0, false));
    lead(&mut log, &plain("y", "y"));
    assert_eq!(log.last_stable_offset(9), 3);
    assert_eq!(log.last_stable_offset(10), 10);
    assert_eq!(log.last_stable_offset(11), 11);
    // Never past the log end.
    assert_eq!(log.last_stable_offset(99), 11);
    assert_eq!(log.first_unstable_offset(), Some(3));
    log.update_high_watermark(11);
    assert_eq!(log.first_unstable_offset(), None);

    // A follower fed the same bytes has the same open transactions.
    let g = fixture();
    let mut follower = open_new(&g.dir, config());
    let bytes = all_batches(&log);
    follower.append_as_follower(&bytes[..], NOW).unwrap();
    assert_eq!(follower.last_stable_offset(9), 3);
    assert_eq!(follower.last_stable_offset(11), 11);
    assert_eq!(txn_indexes(&follower), txn_indexes(&log));
}

#[test]
fn an_abort_writes_kafkas_34_byte_entry_to_the_segments_txnindex() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    interleaved(&mut log);
    let path = seg_path(&f.dir, 0, ".txnindex");
    let want = aborted(2, 3, 9, 10);
    assert_eq!(txn_indexes(&log), vec![(0, vec![want])]);
    let bytes = fs::read(&path).unwrap();
    let mut expect = vec![0u8, 0];
    for v in [2i64, 3, 9, 10] {
        expect.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(bytes, expect);

    // A new segment has no file until one of its transactions aborts; the entry records
    // the oldest open transaction of another producer as the LSO.
    log.roll(NOW).unwrap();
    assert!(!seg_path(&f.dir, 11, ".txnindex").exists());
    lead(&mut log, &txn(4, 0, 1, "c", "c")); // 11
    lead(&mut log, &txn(5, 0, 2, "d", "d")); // 12-13
    lead(&mut log, &marker(4, 0, true)); // 14
    assert!(!seg_path(&f.dir, 11, ".txnindex").exists());
    lead(&mut log, &txn(6, 0, 1, "e", "e")); // 15
    lead(&mut log, &marker(5, 0, false)); // 16: p6 still open at 15
    lead(&mut log, &marker(6, 0, false)); // 17: nothing open
    lead(&mut log, &marker(6, 0, false)); // 18: no transaction to end, no entry
    assert_eq!(
        txn_index_file(&seg_path(&f.dir, 11, ".txnindex")),
        vec![aborted(5, 12, 16, 15), aborted(6, 15, 17, 18)]
    );
    assert_eq!(txn_index_file(&path), vec![want]);
}

#[test]
fn aborted_transactions_are_collected_across_segments_as_kafka_does() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    // p1's transaction spans three segments and aborts in the third; p2 aborts inside the
    // second while p1 is open; p3 commits.
    lead(&mut log, &txn(1, 0, 2, "a", "a")); // 0-1
    lead(&mut log, &plain("x", "x")); // 2
    log.roll(NOW).unwrap();
    lead(&mut log, &txn(2, 0, 1, "b", "b")); // 3
    lead(&mut log, &marker(2, 0, false)); // 4
    lead(&mut log, &txn(3, 0, 1, "c", "c")); // 5
    lead(&mut log, &marker(3, 0, true)); // 6
    log.roll(NOW).unwrap();
    lead(&mut log, &txn(1, 2, 1, "a", "a")); // 7
    lead(&mut log, &marker(1, 0, false)); // 8
    lead(&mut log, &plain("y", "y")); // 9
    let p2 = aborted(2, 3, 4, 0);
    let p1 = aborted(1, 0, 8, 9);
    assert_eq!(txn_indexes(&log), vec![(3, vec![p2]), (7, vec![p1])]);
    // The search continues past entries whose LSO is below the bound (p2's: p1 was open).
    assert_eq!(log.collect_aborted_transactions(0, 3), vec![p1]);
    assert_eq!(log.collect_aborted_transactions(0, 10), vec![p2, p1]);
    assert_eq!(log.collect_aborted_transactions(5, 7), vec![p1]);
    assert_eq!(log.collect_aborted_transactions(9, 10), vec![]);
    assert_eq!(log.collect_aborted_transactions(4, 5), vec![p2, p1]);

    // A read_committed read lists what overlaps the batches it returns.
    log.update_high_watermark(10);
    assert_eq!(log.last_stable_offset(10), 10);
    let info = log.read_committed(0, u64::MAX, Some(10), false).unwrap();
    assert_eq!(info.aborted_transactions, Some(vec![p2, p1]));
    assert_eq!(committed_values(&log, 0, 10), vec!["x", "c", "y"]);
    // A small read ends at the first batch: only what overlaps [5, 6) is listed.
    let info = log.read_committed(5, 1, Some(10), true).unwrap();
    assert_eq!(info.aborted_transactions, Some(vec![p1]));
    // Nothing to return, nothing listed; a plain read lists nothing either.
    let info = log.read_committed(10, u64::MAX, Some(10), false).unwrap();
    assert_eq!(info.aborted_transactions, Some(vec![]));
    assert_eq!(
        log.read(0, 100, None, true).unwrap().aborted_transactions,
        None
    );
}

#[test]
fn read_committed_stops_at_an_open_transaction() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    interleaved(&mut log);
    log.update_high_watermark(11);
    lead(&mut log, &plain("z", "z")); // 11
    lead(&mut log, &txn(7, 0, 1, "o", "open")); // 12
    lead(&mut log, &plain("w", "w")); // 13
    let lso = log.last_stable_offset(14);
    assert_eq!(lso, 12);
    assert_eq!(
        committed_values(&log, 0, lso),
        vec!["a", "a", "x", "a", "idem", "y", "z"]
    );
    assert_eq!(committed_values(&log, 3, lso), vec!["a", "idem", "y", "z"]);
    lead(&mut log, &marker(7, 0, true)); // 14
    log.update_high_watermark(15);
    assert_eq!(log.last_stable_offset(15), 15);
    assert_eq!(committed_values(&log, 11, 15), vec!["z", "open", "w"]);
}

#[test]
fn a_crash_rebuilds_the_txnindex_of_the_recovered_segments() {
    let f = fixture();
    let cfg = config();
    let mut log = open_new(&f.dir, cfg.clone());
    lead(&mut log, &txn(1, 0, 2, "a", "a")); // 0-1, open across the roll
    lead(&mut log, &txn(2, 0, 1, "b", "b")); // 2
    lead(&mut log, &marker(2, 0, false)); // 3
    log.roll(NOW).unwrap(); // snapshot at 4 with p1 open
    lead(&mut log, &txn(3, 0, 1, "c", "c")); // 4
    lead(&mut log, &marker(1, 0, false)); // 5: p1 started in the first segment
    lead(&mut log, &marker(3, 0, false)); // 6
    let want = txn_indexes(&log);
    assert_eq!(
        want,
        vec![
            (0, vec![aborted(2, 2, 3, 0)]),
            (4, vec![aborted(1, 0, 5, 4), aborted(3, 4, 6, 7)])
        ]
    );
    log.flush(4).unwrap();
    drop(log); // a crash: no close

    // The second segment's index is lost (a crash before it reached the disk): recovery
    // from the recovery point (4) rebuilds it from the snapshot at 4, where p1 is open.
    fs::remove_file(seg_path(&f.dir, 4, ".txnindex")).unwrap();
    let (log, info) = reopen(&f.dir, cfg.clone(), opts(false, 4, 0));
    assert_eq!(info.recovered_segments, 1);
    assert_eq!(txn_indexes(&log), want);
    assert_eq!(txn_index_file(&seg_path(&f.dir, 4, ".txnindex")), want[1].1);
    drop(log);

    // A recovery of everything rebuilds both, identically (no duplicate entries).
    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert_eq!(info.recovered_segments, 2);
    assert_eq!(txn_indexes(&log), want);
    assert_eq!(txn_index_file(&seg_path(&f.dir, 0, ".txnindex")), want[0].1);
    log.close().unwrap();
    drop(log);

    // After a clean shutdown, an index that fails its check (an unknown version) is rebuilt.
    let mut bytes = fs::read(seg_path(&f.dir, 4, ".txnindex")).unwrap();
    bytes[1] = 7;
    fs::write(seg_path(&f.dir, 4, ".txnindex"), &bytes).unwrap();
    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(true, 7, 0));
    assert_eq!(info.rebuilt_indexes, 1);
    assert_eq!(txn_indexes(&log), want);
    log.close().unwrap();
    drop(log);
    // A torn last entry is cut.
    let path = seg_path(&f.dir, 0, ".txnindex");
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0, 0, 0]);
    fs::write(&path, &bytes).unwrap();
    let (mut log, info) = reopen(&f.dir, cfg, opts(true, 7, 0));
    assert_eq!(info.rebuilt_indexes, 0);
    assert_eq!(txn_indexes(&log), want);
    assert_eq!(fs::metadata(&path).unwrap().len(), ABORTED_TXN_SIZE as u64);
    // Every transaction ended.
    log.update_high_watermark(7);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn truncation_cuts_the_index_and_reopens_the_transaction() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    interleaved(&mut log);
    log.roll(NOW).unwrap();
    lead(&mut log, &txn(4, 0, 1, "c", "c")); // 11
    lead(&mut log, &marker(4, 0, false)); // 12
    assert_eq!(txn_indexes(&log).len(), 2);
    // Cutting the second segment's marker: its entry goes.
    assert!(log.truncate_to(11, NOW).unwrap());
    assert_eq!(
        fs::metadata(seg_path(&f.dir, 11, ".txnindex"))
            .unwrap()
            .len(),
        0
    );
    assert_eq!(txn_indexes(&log), vec![(0, vec![aborted(2, 3, 9, 10)])]);
    // Cutting p2's abort marker: the entry goes (the second segment with its file), and
    // p2's transaction is open again.
    assert!(log.truncate_to(9, NOW).unwrap());
    assert!(!seg_path(&f.dir, 11, ".txnindex").exists());
    assert_eq!(txn_indexes(&log), vec![]);
    assert_eq!(
        fs::metadata(seg_path(&f.dir, 0, ".txnindex"))
            .unwrap()
            .len(),
        0
    );
    log.update_high_watermark(9);
    assert_eq!(log.first_unstable_offset(), Some(3));
    assert_eq!(log.last_stable_offset(9), 3);
    // The transaction can end again.
    lead(&mut log, &marker(2, 0, false)); // 9
    assert_eq!(txn_indexes(&log), vec![(0, vec![aborted(2, 3, 9, 10)])]);
    // A full truncation clears everything.
    log.truncate_fully_and_start_at(50, NOW).unwrap();
    assert_eq!(txn_indexes(&log), vec![]);
    assert_eq!(log.first_unstable_offset(), None);
    assert!(!seg_path(&f.dir, 0, ".txnindex").exists());
}

#[test]
fn retention_deletes_a_segments_txnindex_with_it() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    interleaved(&mut log);
    log.roll(NOW).unwrap();
    lead(&mut log, &txn(4, 0, 1, "c", "c")); // 11
    lead(&mut log, &marker(4, 0, false)); // 12
    lead(&mut log, &plain("z", "z")); // 13
    log.maybe_increment_log_start_offset(11).unwrap();
    assert_eq!(log.delete_old_segments(NOW, Some(14)).unwrap(), 1);
    assert!(!seg_path(&f.dir, 0, ".txnindex").exists());
    assert!(seg_path(&f.dir, 11, ".txnindex").exists());
    assert_eq!(
        log.collect_aborted_transactions(11, 14),
        vec![aborted(4, 11, 12, 13)]
    );
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(14), 14);
}

#[test]
fn compaction_drops_aborted_records_keeps_committed_ones_and_the_index() {
    let f = fixture();
    let mut log = open_new(&f.dir, compacted_config(|_| {}));
    lead(&mut log, &plain("k", "v1")); // 0
    lead(&mut log, &txn(1, 0, 1, "k", "aborted")); // 1: k0 = aborted
    lead(&mut log, &plain("k0", "committed-before")); // 2
    lead(&mut log, &txn(1, 1, 1, "k", "aborted")); // 3
    lead(&mut log, &marker(1, 0, false)); // 4
    lead(&mut log, &txn(2, 0, 1, "j", "committed")); // 5: j0
    lead(&mut log, &marker(2, 0, true)); // 6
    log.roll(NOW).unwrap();
    lead(&mut log, &txn(3, 0, 1, "k", "open")); // 7: k0 = open, uncleanable
    lead(&mut log, &plain("m", "m")); // 8
    log.roll(NOW).unwrap();
    let index_before = txn_indexes(&log);
    assert_eq!(index_before, vec![(0, vec![aborted(1, 1, 4, 5)])]);
    // The LSO (7) bounds the cleaning to the first segment.
    let stats = log.clean(&cleaner(), None, Some(9), NOW).unwrap();
    assert_eq!(stats.end_offset, 7);
    // The aborted records are gone and did not shadow the committed k0 at 2; p1's last
    // batch stays as an empty batch (its sequence must survive), the markers stay.
    assert_eq!(
        data_records(&log),
        vec![
            (0, "v1".into()),
            (2, "committed-before".into()),
            (5, "committed".into()),
            (7, "open".into()),
            (8, "m".into()),
        ]
    );
    assert_eq!(control_offsets(&log), vec![4, 6], "both markers are kept");
    // The markers stay, and so does the cleaned segment's index entry.
    assert_eq!(txn_indexes(&log), index_before);
    assert_eq!(
        txn_index_file(&seg_path(&f.dir, 0, ".txnindex")),
        index_before[0].1
    );
    assert!(fs::read_dir(&f.dir).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".txnindex.")));
    // Reopened: the same index.
    log.close().unwrap();
    drop(log);
    let (log, _) = reopen(&f.dir, compacted_config(|_| {}), opts(true, 9, 0));
    assert_eq!(txn_indexes(&log), index_before);
    assert_eq!(log.first_unstable_offset(), Some(7));
}

#[test]
fn a_coordinator_writes_without_sequences_but_its_epoch_is_checked() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    // A transactional offset commit as the group coordinator writes it: sequence -1.
    let commit = |epoch: i16| {
        let mut b = BatchBuilder::new(Compression::None);
        b.producer(9, epoch, -1).transactional(true);
        b.append(TS, Some(b"group"), Some(b"offsets"), &[]);
        b.build().unwrap()
    };
    let e = log
        .append_as_leader(&commit(1), 0, NOW, false, AppendOrigin::Client)
        .unwrap_err();
    assert_eq!(e.kafka_name(), "INVALID_RECORD");
    let e = log
        .append_as_leader(&commit(1), 0, NOW, false, AppendOrigin::Replication)
        .unwrap_err();
    assert_eq!(e.kafka_name(), "INVALID_REQUEST");
    for _ in 0..2 {
        // Not a duplicate: the coordinator's batches carry no sequence to compare.
        log.append_as_leader(&commit(1), 0, NOW, false, AppendOrigin::Coordinator)
            .unwrap();
    }
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.first_unstable_offset(), Some(0));
    let e = log
        .append_as_leader(&commit(0), 0, NOW, false, AppendOrigin::Coordinator)
        .unwrap_err();
    assert_eq!(e.kafka_name(), "INVALID_PRODUCER_EPOCH");
    log.append_as_leader(
        &marker(9, 1, false),
        0,
        NOW,
        true,
        AppendOrigin::Coordinator,
    )
    .unwrap();
    assert_eq!(txn_indexes(&log), vec![(0, vec![aborted(9, 0, 2, 3)])]);
    log.update_high_watermark(3);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn an_interrupted_compaction_swap_keeps_the_new_txnindex() {
    // The crash points of `swap.rs`: each leaves the files of a swap that `Log::open`
    // must finish with the cleaned segment's index, not the old one's.
    for stage in 0..3 {
        let f = fixture();
        let mut log = open_new(&f.dir, compacted_config(|_| {}));
        lead(&mut log, &txn(1, 0, 1, "k", "aborted")); // 0
        lead(&mut log, &marker(1, 0, false)); // 1
        log.roll(NOW).unwrap();
        lead(&mut log, &txn(2, 0, 1, "j", "aborted")); // 2
        lead(&mut log, &marker(2, 0, false)); // 3
        log.roll(NOW).unwrap();
        lead(&mut log, &plain("m", "m")); // 4
        let want = vec![aborted(1, 0, 1, 2), aborted(2, 2, 3, 4)];
        log.close().unwrap();
        drop(log);
        // The files a swap of segments 0 and 2 into one leaves behind after a crash.
        let new_index: Vec<u8> = want.iter().flat_map(|t| t.to_bytes()).collect();
        let segment_log = [
            fs::read(seg_path(&f.dir, 0, ".log")).unwrap(),
            fs::read(seg_path(&f.dir, 2, ".log")).unwrap(),
        ]
        .concat();
        match stage {
            // Committed (.log.swap), nothing deleted yet.
            0 => {
                fs::write(seg_path(&f.dir, 0, ".txnindex.swap"), &new_index).unwrap();
                fs::write(seg_path(&f.dir, 0, ".log.swap"), &segment_log).unwrap();
            }
            // The old files deleted, the index already renamed into place.
            1 => {
                for s in [".log", ".index", ".timeindex", ".txnindex"] {
                    let _ = fs::remove_file(seg_path(&f.dir, 2, s));
                }
                fs::write(seg_path(&f.dir, 0, ".txnindex"), &new_index).unwrap();
                fs::write(seg_path(&f.dir, 0, ".log.swap"), &segment_log).unwrap();
            }
            // Not committed: only the index swap exists; the old segments stay.
            _ => {
                fs::write(seg_path(&f.dir, 0, ".txnindex.swap"), [1u8; 34]).unwrap();
            }
        }
        let (log, _) = reopen(&f.dir, compacted_config(|_| {}), opts(true, 5, 0));
        let flat: Vec<AbortedTxn> = txn_indexes(&log).into_iter().flat_map(|(_, e)| e).collect();
        assert_eq!(flat, want, "stage {stage}");
        if stage < 2 {
            assert_eq!(common::bases(&log), vec![0, 4], "stage {stage}");
        } else {
            assert_eq!(common::bases(&log), vec![0, 2, 4], "stage {stage}");
        }
        assert!(!seg_path(&f.dir, 0, ".txnindex.swap").exists());
    }
}
