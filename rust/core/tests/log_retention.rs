//! `Log` integration tests: Retention: by time and by size, never past the high watermark, and segments below the log start offset.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use common::{
    append, assert_out_of_range, assert_values, bases, build_log, expected_files, fixture,
    read_all, read_batches, segment_files, sizes, NOW, TS,
};
use rillet_core::log::{EpochEntry, LogConfig, EARLIEST_TIMESTAMP};

#[test]
fn retention_by_time_deletes_expired_prefix_and_advances_log_start() {
    let f = fixture();
    // Segments (9 offsets each): two old ones, two recent ones, an active one.
    let ts_of = |o: i64| match o / 9 {
        0 => NOW - 10_000,
        1 => NOW - 9_000,
        2 => NOW - 100,
        3 => NOW - 8_000, // old again, but behind a recent segment
        _ => NOW - 50,
    };
    let (mut log, _s) = build_log(&f.dir, 4, 1, ts_of);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(bases(&log), vec![0, 9, 18, 27, 36]);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.log_start_offset(), 18);
    assert!(log.recovery_point() >= 18);
    assert_eq!(segment_files(&f.dir), expected_files(&[18, 27, 36]));
    assert_out_of_range(log.read(17, u64::MAX, None, false), 17, 18, 39);
    assert_values(&read_all(&log), 18, 39, |_| 'v');
    assert_eq!(
        log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        18
    );
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 0,
            start_offset: 18
        }]
    );
    // Nothing more is expired.
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    // The boundary: a segment goes when now - its newest timestamp > retention.ms, not ==.
    assert_eq!(log.delete_old_segments(NOW - 100 + 1_000, None).unwrap(), 0);
    assert_eq!(log.delete_old_segments(NOW - 100 + 1_001, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![36]);
    assert_eq!(log.log_start_offset(), 36);
}

#[test]
fn retention_by_time_of_everything_keeps_an_empty_active_segment() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |_| NOW - 100_000);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    let leo = log.log_end_offset();
    assert_eq!(leo, 24);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 3);
    // The log always has a segment: a fresh, empty one at the log end.
    assert_eq!(bases(&log), vec![leo]);
    assert_eq!(sizes(&log), vec![0]);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), leo);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(segment_files(&f.dir), expected_files(&[leo]));
    assert!(log
        .read(leo, u64::MAX, None, true)
        .unwrap()
        .regions
        .is_empty());
    assert_out_of_range(log.read(leo - 1, u64::MAX, None, false), leo - 1, leo, leo);
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 0,
            start_offset: leo
        }]
    );
    // The empty active segment is never deleted.
    assert_eq!(log.delete_old_segments(NOW + 10_000_000, None).unwrap(), 0);
    assert_eq!(bases(&log), vec![leo]);
    // Appends carry on from the old log end.
    let info = append(&mut log, 3);
    assert_eq!(info.first_offset, leo);
    assert_values(&read_all(&log), leo, leo + 3, |_| 'v');
}

#[test]
fn retention_by_size() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 4, 1, |o| TS + o);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 3 * s, 3 * s, s]);
    // 13s in total; keep at most 7s: drop segments while the rest still holds >= 7s.
    log.update_config(LogConfig {
        retention_bytes: (7 * s) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.size_in_bytes(), 7 * s);
    assert_eq!(log.log_start_offset(), 18);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    // Kafka's rule: a segment goes only if the rest still holds retention.bytes.
    log.update_config(LogConfig {
        retention_bytes: (4 * s + 1) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    log.update_config(LogConfig {
        retention_bytes: (4 * s) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 1);
    assert_eq!(log.size_in_bytes(), 4 * s);
    assert_eq!(bases(&log), vec![27, 36]);
    assert_eq!(log.log_start_offset(), 27);
    assert_values(&read_all(&log), 27, 39, |_| 'v');
    // retention.bytes = 0 deletes everything, active segment included, and leaves an empty one.
    log.update_config(LogConfig {
        retention_bytes: 0,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![39]);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_in_bytes()
        ),
        (39, 39, 0)
    );
}

#[test]
fn retention_only_deletes_segments_below_the_high_watermark() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 4, 1, |_| NOW - 100_000);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    // Segments [0,9) [9,18) [18,27) [27,36) [36,39): all expired.
    assert_eq!(log.delete_old_segments(NOW, Some(0)).unwrap(), 0);
    assert_eq!(log.delete_old_segments(NOW, Some(8)).unwrap(), 0);
    assert_eq!(bases(&log), vec![0, 9, 18, 27, 36]);
    assert_eq!(log.delete_old_segments(NOW, Some(9)).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 9);
    assert_eq!(log.delete_old_segments(NOW, Some(26)).unwrap(), 1);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.log_start_offset(), 18);
    // The active segment is not below a high watermark inside it.
    assert_eq!(log.delete_old_segments(NOW, Some(38)).unwrap(), 2);
    assert_eq!(bases(&log), vec![36]);
    assert_eq!(log.log_start_offset(), 36);
    assert_values(&read_all(&log), 36, 39, |_| 'v');
    // A high watermark past the log end is the log end.
    assert_eq!(log.delete_old_segments(NOW, Some(1_000)).unwrap(), 1);
    assert_eq!(bases(&log), vec![39]);
    assert_eq!(log.log_start_offset(), 39);
}

#[test]
fn retention_deletes_segments_wholly_below_the_log_start_offset() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 3, 1, |o| TS + o);
    assert!(log.maybe_increment_log_start_offset(20).unwrap());
    // Nothing is deleted until retention runs.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27]);
    // The log start stays where it was raised to, inside the first remaining segment.
    assert_eq!(log.log_start_offset(), 20);
    assert_out_of_range(log.read(19, u64::MAX, None, false), 19, 20, 30);
    assert_eq!(read_batches(&log, 20, u64::MAX, None, false)[0].base, 18);
    // Raised to the exact base of a segment: the one before goes.
    assert!(log.maybe_increment_log_start_offset(27).unwrap());
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 1);
    assert_eq!(bases(&log), vec![27]);
    assert_eq!(log.log_start_offset(), 27);
}
