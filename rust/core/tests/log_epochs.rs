//! `Log` integration tests: The leader-epoch cache through the log, its checkpoint file, and follower appends that keep the leader's offsets and epochs.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use std::fs;

use common::{
    assert_values, batch, batch_size, config_with, fixture, open_new, opts, read_batches, records,
    reopen, seg_path, snapshot, CHECKPOINT, NOW, TS,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{EpochEntry, LogAppendInfo};
use rillet_core::record::{BatchBuilder, Compression};
use rillet_core::{Error, Result};

#[test]
fn leader_epoch_cache_through_the_log() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 2 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for epoch in [1, 1, 3] {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), epoch, NOW, false, AppendOrigin::Client)
            .unwrap();
    }
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n3 6\n"
    );
    // The epoch is stamped into every batch.
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| b.epoch).collect::<Vec<_>>(),
        vec![1, 1, 3]
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(1, log.log_end_offset()),
        (1, 6)
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(3, log.log_end_offset()),
        (3, 9)
    );
    assert_eq!(log.epoch_cache().epoch_for_offset(5), Some(1));
    // An older epoch is stamped but does not enter the cache.
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 2, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 4, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6), e(4, 12)]);

    // Truncation inside epoch 3 keeps it; truncation at its start removes it.
    assert!(log.truncate_to(10, NOW).unwrap());
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    assert!(log.truncate_to(6, NOW).unwrap());
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n1\n1 0\n"
    );
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 5, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n5 6\n"
    );

    // Reopening (clean, and unclean) keeps it.
    log.close().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, leo, 0));
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n5 6\n"
    );
}

#[test]
fn malformed_epoch_checkpoint_is_rebuilt_from_the_batches() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 2 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for epoch in [1, 1, 3, 3, 6] {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), epoch, NOW, false, AppendOrigin::Client)
            .unwrap();
    }
    log.close().unwrap();
    drop(log);
    fs::write(f.dir.join(CHECKPOINT), "0\n2\n3 0\n1 6\n").unwrap();
    let (log, _) = reopen(&f.dir, cfg, opts(true, 15, 0));
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6), e(6, 12)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n3\n1 0\n3 6\n6 12\n"
    );
}

fn leader_batch(base: i64, n: usize, epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.base_offset(base).partition_leader_epoch(epoch);
    for o in base..base + n as i64 {
        b.append(
            TS + o,
            Some(format!("k{o:08}").as_bytes()),
            Some(format!("v{o:08}").as_bytes()),
            &[],
        );
    }
    b.build().unwrap()
}

#[test]
fn append_as_follower_keeps_offsets_and_epochs() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 3 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    let info = log.append_as_follower(&leader_batch(0, 3, 5), NOW).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.record_count),
        (0, 2, 3)
    );
    let mut two = leader_batch(3, 3, 5);
    two.extend_from_slice(&leader_batch(6, 3, 7));
    let info = log.append_as_follower(&two, NOW).unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.batch_count,
            info.max_timestamp
        ),
        (3, 8, 2, TS + 8)
    );
    assert_eq!(log.log_end_offset(), 9);
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| (b.base, b.epoch)).collect::<Vec<_>>(),
        vec![(0, 5), (3, 5), (6, 7)]
    );
    assert_values(&records(&got), 0, 9, |_| 'v');
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(5, 0), e(7, 6)]);
    // The bytes are stored exactly as the leader sent them.
    assert_eq!(
        fs::read(seg_path(&f.dir, 0, ".log")).unwrap(),
        [leader_batch(0, 3, 5), two.clone()].concat()
    );

    // A batch starting below the log end is refused, whole appends included.
    let invalid = |r: Result<LogAppendInfo>| matches!(r, Err(Error::InvalidRecord(_)));
    let before = snapshot(&log);
    assert!(invalid(log.append_as_follower(&leader_batch(4, 3, 7), NOW)));
    assert!(invalid(log.append_as_follower(&leader_batch(8, 3, 7), NOW)));
    assert!(invalid(log.append_as_follower(&leader_batch(0, 3, 7), NOW)));
    let mut bad = leader_batch(9, 3, 7);
    bad.extend_from_slice(&leader_batch(11, 3, 7)); // overlaps the first
    assert!(invalid(log.append_as_follower(&bad, NOW)));
    assert_eq!(snapshot(&log), before);

    // A gap above the log end is accepted; offsets are kept.
    let info = log
        .append_as_follower(&leader_batch(20, 3, 8), NOW)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (20, 22));
    assert_eq!(log.log_end_offset(), 23);
    assert_eq!(read_batches(&log, 12, u64::MAX, None, false)[0].base, 20);
    assert_eq!(log.epoch_cache().entries(), &[e(5, 0), e(7, 6), e(8, 20)]);
    // A follower's batches survive an unclean reopen with offsets and epochs intact.
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(log.log_end_offset(), 23);
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| (b.base, b.epoch)).collect::<Vec<_>>(),
        vec![(0, 5), (3, 5), (6, 7), (20, 8)]
    );
}

#[test]
fn a_new_leader_marks_where_its_epoch_starts_before_writing() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|_| {}));
    log.append_as_leader(&batch(0, 3), 1, NOW, false, AppendOrigin::Client)
        .unwrap();
    // Elected at epoch 4 with nothing written yet: the epoch starts at the log end.
    assert!(log.assign_epoch_start_offset(4, 3).unwrap());
    assert!(!log.assign_epoch_start_offset(4, 3).unwrap());
    assert!(!log.assign_epoch_start_offset(2, 3).unwrap());
    // A follower that wrote epoch-2 records learns that epoch 1 ended at 3.
    assert_eq!(
        log.epoch_cache().end_offset_for(2, log.log_end_offset()),
        (1, 3)
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(4, log.log_end_offset()),
        (4, 3)
    );
    // The epoch's first batch keeps the entry.
    log.append_as_leader(&batch(3, 2), 4, NOW, false, AppendOrigin::Client)
        .unwrap();
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(4, 3)]);
    // Not past the log end.
    assert!(matches!(
        log.assign_epoch_start_offset(5, 99),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn truncating_at_the_log_end_drops_an_epoch_begun_there_without_records() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|_| {}));
    log.append_as_leader(&batch(0, 3), 1, NOW, false, AppendOrigin::Client)
        .unwrap();
    // Led epoch 2 briefly, wrote nothing, then followed a leader of epoch 3.
    log.assign_epoch_start_offset(2, 3).unwrap();
    assert!(!log.truncate_to(3, NOW).unwrap());
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0)]);
    assert_eq!(log.log_end_offset(), 3);
}
