//! `Log` integration tests: Truncation (to an offset, fully to a new start) and advancing the log start offset.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use std::fs;

use common::{
    append, assert_out_of_range, assert_values, bases, batch, batch_with, build_log,
    expected_files, file_len, fixture, opts, read_all, read_batches, reopen, seg_path,
    segment_files, sizes, CHECKPOINT, NOW, TS,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{EpochEntry, MAX_TIMESTAMP};
use rillet_core::record::Compression;
use rillet_core::Error;

#[test]
fn truncate_to_mid_log_across_segments_then_append_again() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 4, 2, |o| TS + o);
    assert_eq!(log.log_end_offset(), 42);
    assert!(!log.truncate_to(42, NOW).unwrap());
    assert!(!log.truncate_to(100, NOW).unwrap());
    assert!(matches!(
        log.truncate_to(-1, NOW),
        Err(Error::InvalidRequest(_))
    ));
    // 13 is inside batch [12-14] of segment [9,18): that batch and everything after goes.
    assert!(log.truncate_to(13, NOW).unwrap());
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(bases(&log), vec![0, 9]);
    assert_eq!(sizes(&log), vec![3 * s, s]);
    assert_eq!(log.active_segment_base_offset(), 9);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9]));
    assert_eq!(file_len(&seg_path(&f.dir, 9, ".log")), s);
    assert!(log.recovery_point() <= 12);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    assert_eq!(log.fetch_offset_by_timestamp(TS + 12).unwrap(), None);
    assert_eq!(
        log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        11
    );

    // Append again, with new values; the segment fills up and rolls as before.
    for _ in 0..5 {
        let first = log.log_end_offset();
        log.append_as_leader(
            &batch_with(first, 3, |o| TS + o, Compression::None, 'w'),
            0,
            NOW,
            false,
            AppendOrigin::Client,
        )
        .unwrap();
    }
    assert_eq!(log.log_end_offset(), 27);
    assert_eq!(bases(&log), vec![0, 9, 18]);
    let tag = |o: i64| if o < 12 { 'v' } else { 'w' };
    assert_values(&read_all(&log), 0, 27, tag);
    for o in 0..27 {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    let ts = log.fetch_offset_by_timestamp(TS + 13).unwrap().unwrap();
    assert_eq!((ts.offset, ts.timestamp), (13, TS + 13));

    // Truncating at a segment's base offset leaves that segment empty and active.
    assert!(log.truncate_to(18, NOW).unwrap());
    assert_eq!(bases(&log), vec![0, 9, 18]);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 0]);
    assert_eq!(log.log_end_offset(), 18);
    append(&mut log, 3);
    assert_values(&read_all(&log), 0, 21, |o| {
        if (12..18).contains(&o) {
            'w'
        } else {
            'v'
        }
    });

    // And it all survives a clean reopen.
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(true, 21, 0));
    assert_eq!(log.log_end_offset(), 21);
    assert_values(&read_all(&log), 0, 21, |o| {
        if (12..18).contains(&o) {
            'w'
        } else {
            'v'
        }
    });
}

#[test]
fn truncate_fully_and_start_at() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    assert!(!log.epoch_cache().entries().is_empty());
    log.truncate_fully_and_start_at(1_000, NOW).unwrap();
    assert_eq!(bases(&log), vec![1_000]);
    assert_eq!(sizes(&log), vec![0]);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.recovery_point()
        ),
        (1_000, 1_000, 1_000)
    );
    assert_eq!(segment_files(&f.dir), expected_files(&[1_000]));
    assert!(log.epoch_cache().entries().is_empty());
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n0\n"
    );
    assert_out_of_range(log.read(0, u64::MAX, None, false), 0, 1_000, 1_000);
    assert_out_of_range(log.read(999, u64::MAX, None, false), 999, 1_000, 1_000);
    assert!(log
        .read(1_000, u64::MAX, None, false)
        .unwrap()
        .regions
        .is_empty());
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap(), None);
    let first = log.log_end_offset();
    let info = log
        .append_as_leader(&batch(first, 3), 5, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (1_000, 1_002));
    assert_values(&read_all(&log), 1_000, 1_003, |_| 'v');
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 5,
            start_offset: 1_000
        }]
    );
    // Restarting below the current log start is allowed too (a follower resetting).
    log.truncate_fully_and_start_at(7, NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 7));
    assert_eq!(segment_files(&f.dir), expected_files(&[7]));
    assert!(matches!(
        log.truncate_fully_and_start_at(-1, NOW),
        Err(Error::InvalidRequest(_))
    ));
    // Truncating below the log start restarts the log there.
    append(&mut log, 3);
    log.maybe_increment_log_start_offset(9).unwrap();
    assert!(log.truncate_to(8, NOW).unwrap());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (8, 8));
    assert_eq!(bases(&log), vec![8]);
}

#[test]
fn maybe_increment_log_start_offset_then_read_below_is_out_of_range() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    assert!(log.maybe_increment_log_start_offset(10).unwrap());
    assert_eq!(log.log_start_offset(), 10);
    assert_out_of_range(log.read(9, u64::MAX, None, false), 9, 10, 21);
    assert_out_of_range(log.read(0, u64::MAX, None, true), 0, 10, 21);
    // At the log start: the batch holding it, which may start below it.
    let got = read_batches(&log, 10, u64::MAX, None, false);
    assert_eq!(got[0].base, 9);
    // Never moves back; never past the log end.
    assert!(!log.maybe_increment_log_start_offset(5).unwrap());
    assert!(!log.maybe_increment_log_start_offset(10).unwrap());
    assert_out_of_range(log.maybe_increment_log_start_offset(22), 22, 10, 21);
    assert_eq!(log.log_start_offset(), 10);
    // Up to the log end is fine: the log is then logically empty.
    assert!(log.maybe_increment_log_start_offset(21).unwrap());
    assert!(log
        .read(21, u64::MAX, None, true)
        .unwrap()
        .regions
        .is_empty());
    assert_out_of_range(log.read(20, u64::MAX, None, true), 20, 21, 21);
    // Segments are still all there until retention runs.
    assert_eq!(bases(&log), vec![0, 9, 18]);
}
