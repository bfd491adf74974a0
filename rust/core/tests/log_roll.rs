//! `Log` integration tests: Rolling segments: on size, on age (record timestamps and jitter), on a full index, by hand; segment file names and trimmed indexes.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use common::{
    append, append_ts, assert_values, bases, batch_size, batch_with, config, config_with,
    expected_files, file_len, fixture, log_file_batches, offset_index_file, open_new, opts,
    read_all, reopen, seg_path, segment_files, sizes, time_index_file, NOW, TS,
};
use rillet_core::log::log_file_name;
use rillet_core::log::AppendOrigin;
use rillet_core::record::Compression;

#[test]
fn roll_on_segment_bytes() {
    let f = fixture();
    let s = batch_size(3);
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 3 * s));
    for k in 0..10 {
        let info = append(&mut log, 3);
        assert_eq!(
            (
                info.first_offset,
                info.last_offset,
                info.record_count,
                info.batch_count
            ),
            (3 * k, 3 * k + 2, 3, 1)
        );
    }
    // size + batch > segment_bytes rolls: three batches fit exactly, the fourth rolls.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 3 * s, s]);
    assert_eq!(log.size_in_bytes(), 10 * s);
    assert_eq!(log.active_segment_base_offset(), 27);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9, 18, 27]));
    for seg in log.segments() {
        assert_eq!(file_len(seg.log_path()), seg.size());
    }
    assert_values(&read_all(&log), 0, 30, |_| 'v');

    // A segment_bytes that is not a multiple of the batch size: a batch never straddles.
    let g = fixture();
    let mut log = open_new(&g.dir, config_with(|c| c.segment_bytes = 3 * s - 1));
    for _ in 0..5 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 6, 12]);
    assert!(log.segments().all(|seg| seg.size() < 3 * s));
}

#[test]
fn explicit_roll_starts_a_segment_at_the_log_end_and_is_idempotent_when_empty() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    log.roll(NOW).unwrap(); // empty active segment at the log end: no-op
    assert_eq!(bases(&log), vec![0]);
    append(&mut log, 4);
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 4]);
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 4]);
    assert_eq!(sizes(&log), vec![batch_size(4), 0]);
    append(&mut log, 2);
    assert_eq!(sizes(&log), vec![batch_size(4), batch_size(2)]);
    assert_values(&read_all(&log), 0, 6, |_| 'v');
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 4]));
}

#[test]
fn roll_on_segment_ms_uses_record_timestamps_and_jitter() {
    let f = fixture();
    let cfg = config_with(|c| {
        c.segment_ms = 100;
        c.segment_jitter_ms = 10;
    });
    let mut log = open_new(&f.dir, cfg.clone());
    // Roll when (new batch's max timestamp - first batch's max timestamp) > 100 - 10.
    for (ts, want_active) in [
        (1000, 0), // offset 0: starts the clock
        (1050, 0),
        (1090, 0), // exactly 90: no roll
        (1091, 3), // 91 > 90: roll, offset 3 starts a new clock at 1091
        (1000, 3), // older than the clock: never rolls
        (1181, 3), // 90
        (1182, 6), // 91: roll
    ] {
        append_ts(&mut log, 1, ts);
        assert_eq!(
            log.active_segment_base_offset(),
            want_active,
            "after appending ts {ts}"
        );
    }
    assert_eq!(bases(&log), vec![0, 3, 6]);
    // now_ms plays no part while records carry timestamps.
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, 1, |_| 1182, Compression::None, 'v'),
        0,
        NOW + 1_000_000,
        false,
        AppendOrigin::Client,
    )
    .unwrap();
    assert_eq!(bases(&log), vec![0, 3, 6]);

    // The clock survives a clean reopen: it is read back from the active segment's first batch.
    log.close().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let (mut log, _) = reopen(&f.dir, cfg.clone(), opts(true, leo, 0));
    append_ts(&mut log, 1, 1272); // 90 after 1182
    assert_eq!(log.active_segment_base_offset(), 6);
    append_ts(&mut log, 1, 1273); // 91
    assert_eq!(bases(&log), vec![0, 3, 6, 9]);
    assert_values(&read_all(&log), 0, 10, |_| 'v');

    // The clock starts at the first batch's *max* timestamp (Kafka's rollingBasedTimestamp).
    let g = fixture();
    let mut log = open_new(&g.dir, cfg);
    log.append_as_leader(
        &batch_with(0, 2, |o| 2000 + 50 * o, Compression::None, 'v'),
        0,
        NOW,
        false,
        AppendOrigin::Client,
    )
    .unwrap();
    append_ts(&mut log, 1, 2140); // 2140 - 2050 = 90
    assert_eq!(bases(&log), vec![0]);
    append_ts(&mut log, 1, 2141);
    assert_eq!(bases(&log), vec![0, 3]);
}

#[test]
fn roll_on_full_offset_index() {
    let f = fixture();
    // 24 bytes: 3 offset-index entries, 2 time-index entries. Constant timestamps add only one
    // time-index entry per segment, so the offset index fills first: an entry for every batch
    // but the first makes a segment of 4 batches.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    for _ in 0..10 {
        append_ts(&mut log, 2, TS);
    }
    assert_eq!(bases(&log), vec![0, 8, 16]);
    let s = batch_size(2);
    assert_eq!(sizes(&log), vec![4 * s, 4 * s, 2 * s]);
    for base in [0, 8] {
        assert_eq!(file_len(&seg_path(&f.dir, base, ".index")), 3 * 8);
        assert_eq!(file_len(&seg_path(&f.dir, base, ".timeindex")), 12);
        assert_eq!(
            offset_index_file(&seg_path(&f.dir, base, ".index")),
            vec![(3, s as u32), (5, 2 * s as u32), (7, 3 * s as u32)]
        );
        // The only time entry: the max timestamp, first reached by the first batch (offsets 0-1).
        assert_eq!(
            time_index_file(&seg_path(&f.dir, base, ".timeindex")),
            vec![(TS, 1)]
        );
    }
    assert_values(&read_all(&log), 0, 20, |_| 'v');
}

#[test]
fn roll_on_full_time_index() {
    let f = fixture();
    // 24 bytes again, but increasing timestamps: every index point adds a time entry too, so the
    // 2-entry time index fills after the third batch and the fourth rolls.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    for _ in 0..7 {
        append(&mut log, 2);
    }
    assert_eq!(bases(&log), vec![0, 6, 12]);
    let s = batch_size(2) as u32;
    for base in [0i64, 6] {
        assert_eq!(file_len(&seg_path(&f.dir, base, ".index")), 2 * 8);
        assert_eq!(file_len(&seg_path(&f.dir, base, ".timeindex")), 2 * 12);
        assert_eq!(
            offset_index_file(&seg_path(&f.dir, base, ".index")),
            vec![(3, s), (5, 2 * s)]
        );
        assert_eq!(
            time_index_file(&seg_path(&f.dir, base, ".timeindex")),
            vec![(TS + base + 3, 3), (TS + base + 5, 5)]
        );
    }
    assert_values(&read_all(&log), 0, 14, |_| 'v');
}

#[test]
fn segment_files_are_named_by_20_digit_base_offsets() {
    let f = fixture();
    let s = batch_size(3);
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 2 * s));
    assert_eq!(segment_files(&f.dir), expected_files(&[0]));
    assert!(f.dir.join("00000000000000000000.log").is_file());
    assert!(f.dir.join("00000000000000000000.index").is_file());
    assert!(f.dir.join("00000000000000000000.timeindex").is_file());
    for _ in 0..9 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 6, 12, 18, 24]);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 6, 12, 18, 24]));
    assert!(f.dir.join("00000000000000000024.log").is_file());
    assert_eq!(log_file_name(24), "00000000000000000024.log");
    for seg in log.segments() {
        assert_eq!(seg.log_path(), seg_path(&f.dir, seg.base_offset(), ".log"));
    }

    log.truncate_fully_and_start_at(87_654_321, NOW).unwrap();
    assert_eq!(
        segment_files(&f.dir),
        vec![
            "00000000000087654321.index",
            "00000000000087654321.log",
            "00000000000087654321.timeindex"
        ]
    );
    append(&mut log, 3);
    append(&mut log, 3);
    append(&mut log, 3);
    assert_eq!(bases(&log), vec![87_654_321, 87_654_327]);
    assert!(f.dir.join("00000000000087654327.log").is_file());
}

#[test]
fn rolled_segment_indexes_are_trimmed_to_their_entries() {
    let f = fixture();
    let s = batch_size(3);
    let cfg = config_with(|c| c.segment_bytes = 4 * s);
    let mut log = open_new(&f.dir, cfg.clone());
    for _ in 0..10 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 12, 24]);
    for base in [0i64, 12] {
        let batches = log_file_batches(&seg_path(&f.dir, base, ".log"));
        assert_eq!(batches.len(), 4);
        // index_interval_bytes = 0: an entry (last offset, position) for every batch but the first.
        let want: Vec<(u32, u32)> = batches[1..]
            .iter()
            .map(|(p, h)| ((h.last_offset() - base) as u32, *p as u32))
            .collect();
        let got = offset_index_file(&seg_path(&f.dir, base, ".index"));
        assert_eq!(got, want);
        assert_eq!(
            file_len(&seg_path(&f.dir, base, ".index")),
            want.len() as u64 * 8
        );
        // Increasing timestamps: one time entry per index point, the last being the max.
        let want_t: Vec<(i64, u32)> = batches[1..]
            .iter()
            .map(|(_, h)| (h.max_timestamp, (h.last_offset() - base) as u32))
            .collect();
        let got_t = time_index_file(&seg_path(&f.dir, base, ".timeindex"));
        assert_eq!(got_t, want_t);
        assert_eq!(
            file_len(&seg_path(&f.dir, base, ".timeindex")),
            want_t.len() as u64 * 12
        );
        assert_eq!(got_t.last().unwrap().0, TS + base + 11);
    }
    // The active segment's indexes stay preallocated to segment.index.bytes (whole entries).
    assert_eq!(file_len(&seg_path(&f.dir, 24, ".index")), 4096);
    assert_eq!(
        file_len(&seg_path(&f.dir, 24, ".timeindex")),
        4096 / 12 * 12
    );

    // A segment with a single batch has no offset-index entry and one (final) time entry.
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 12, 24, 30]);
    assert_eq!(file_len(&seg_path(&f.dir, 24, ".index")), 8); // batches at 24 and 27: one entry
    append(&mut log, 3);
    log.roll(NOW).unwrap();
    assert_eq!(file_len(&seg_path(&f.dir, 30, ".index")), 0);
    assert_eq!(
        time_index_file(&seg_path(&f.dir, 30, ".timeindex")),
        vec![(TS + 32, 2)]
    );
    // Inactive segments pass their own sanity check.
    let segs: Vec<_> = log.segments().collect();
    for w in segs.windows(2) {
        w[0].sanity_check(w[1].base_offset() - 1).unwrap();
    }
}
