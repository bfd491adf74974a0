//! `Log` integration tests: Reads of whole batches (max bytes, min one batch, max offset, out of range, regions that outlive a deleted segment) and lookups by timestamp.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use common::{
    append_ts, assert_out_of_range, assert_values, bases, batch_size, batch_with, build_log,
    config, config_with, decode, fetch_bytes, fixture, open_new, opts, read_batches, records,
    reopen, seg_path, BatchInfo, NOW, TS,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{Log, LogConfig, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use rillet_core::record::Compression;
use rillet_core::Error;

#[test]
fn read_from_every_offset_returns_whole_batches_from_the_one_holding_it() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let leo = log.log_end_offset();
    assert_eq!(leo, 24);
    for o in 0..leo {
        let info = log.read(o, u64::MAX, None, false).unwrap();
        // One region per segment from the one holding `o`: the read crosses segment boundaries.
        let seg_base = 9 * (o / 9);
        assert_eq!(
            info.regions.len() as i64,
            3 - o / 9,
            "regions for a read at {o}"
        );
        let batch_base = 3 * (o / 3);
        assert_eq!(info.fetch_offset_metadata.message_offset, o);
        assert_eq!(info.fetch_offset_metadata.segment_base_offset, seg_base);
        assert_eq!(
            info.fetch_offset_metadata.relative_position,
            (batch_base - seg_base) as u64 / 3 * s
        );
        let batches = decode(&fetch_bytes(&info));
        assert!(
            batches[0].base <= o && o <= batches[0].last,
            "read at {o} starts at batch {}",
            batches[0].base
        );
        assert_eq!(batches[0].base, batch_base);
        assert!(batches.iter().all(|b| b.size as u64 == s && b.epoch == 0));
        assert_values(&records(&batches), batch_base, leo, |_| 'v');
    }
}

#[test]
fn read_respects_max_bytes_and_min_one_batch() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let bases_of = |b: &[BatchInfo]| b.iter().map(|b| b.base).collect::<Vec<_>>();

    // Only whole batches that fit.
    assert_eq!(
        bases_of(&read_batches(&log, 0, 2 * s + s / 2, None, false)),
        vec![0, 3]
    );
    assert_eq!(
        bases_of(&read_batches(&log, 0, 2 * s, None, false)),
        vec![0, 3]
    );
    assert_eq!(
        bases_of(&read_batches(&log, 4, 2 * s - 1, None, false)),
        vec![3]
    );
    // Across a segment boundary, the budget carries over.
    assert_eq!(
        bases_of(&read_batches(&log, 3, 4 * s, None, false)),
        vec![3, 6, 9, 12]
    );
    let info = log.read(3, 4 * s, None, false).unwrap();
    assert_eq!(info.regions.len(), 2);
    assert_eq!(info.size(), 4 * s);
    // Less than a batch: nothing, unless min_one_batch.
    let info = log.read(0, s - 1, None, false).unwrap();
    assert_eq!(info.size(), 0);
    assert!(info.regions.is_empty());
    assert_eq!(bases_of(&read_batches(&log, 0, s - 1, None, true)), vec![0]);
    assert_eq!(bases_of(&read_batches(&log, 10, 0, None, true)), vec![9]);
    // min_one_batch only matters for the first batch.
    assert_eq!(bases_of(&read_batches(&log, 0, s + 1, None, true)), vec![0]);

    // A batch far bigger than max_bytes comes whole with min_one_batch.
    log.update_config(LogConfig {
        segment_bytes: 1 << 20,
        ..log.config().clone()
    })
    .unwrap();
    let big_first = log.log_end_offset();
    let big = batch_with(big_first, 50, |o| TS + o, Compression::None, 'v');
    log.append_as_leader(&big, 0, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(bases(&log), vec![0, 9, 18]);
    let info = log.read(big_first + 7, 100, None, true).unwrap();
    assert_eq!(info.size(), big.len() as u64);
    let got = decode(&fetch_bytes(&info));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].base, got[0].last), (big_first, big_first + 49));
    assert_eq!(log.read(big_first + 7, 100, None, false).unwrap().size(), 0);
    // A read that fills up before the big batch stops before it, never cutting it.
    let got = read_batches(&log, 18, 2 * s + 100, None, false);
    assert_eq!(bases_of(&got), vec![18, 21]);
}

#[test]
fn read_with_max_offset_excludes_batches_reaching_it() {
    let f = fixture();
    let (log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let last_offsets = |start: i64, hw: i64| -> Vec<i64> {
        read_batches(&log, start, u64::MAX, Some(hw), false)
            .iter()
            .map(|b| b.last)
            .collect()
    };
    // Batches are [0-2] [3-5] [6-8] | [9-11] ... ; a batch is served only if last < max_offset.
    assert_eq!(last_offsets(0, 6), vec![2, 5]);
    assert_eq!(last_offsets(0, 5), vec![2]);
    assert_eq!(last_offsets(0, 3), vec![2]);
    assert_eq!(last_offsets(0, 2), Vec::<i64>::new());
    assert_eq!(last_offsets(0, 0), Vec::<i64>::new());
    assert_eq!(last_offsets(4, 5), Vec::<i64>::new());
    // Across segment boundaries.
    assert_eq!(last_offsets(0, 13), vec![2, 5, 8, 11]);
    assert_eq!(last_offsets(7, 21), vec![8, 11, 14, 17, 20]);
    assert_eq!(last_offsets(9, 9), Vec::<i64>::new());
    // A max_offset past the log end is the log end.
    assert_eq!(last_offsets(15, 1000), vec![17, 20, 23]);
    assert_eq!(last_offsets(15, 24), vec![17, 20, 23]);
    assert_eq!(last_offsets(15, 23), vec![17, 20]);
    // With max_bytes too: the tighter limit wins, min_one_batch does not override max_offset.
    let got = read_batches(&log, 0, 1, Some(6), true);
    assert_eq!(got.iter().map(|b| b.last).collect::<Vec<_>>(), vec![2]);
    assert!(log.read(3, 1, Some(5), true).unwrap().regions.is_empty());
}

#[test]
fn read_out_of_range_and_at_log_end() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 1, 1, |o| TS + o);
    assert_eq!(log.log_end_offset(), 12);
    assert_out_of_range(log.read(13, u64::MAX, None, false), 13, 0, 12);
    assert_out_of_range(log.read(1_000, u64::MAX, None, true), 1_000, 0, 12);
    assert_out_of_range(log.read(-1, u64::MAX, None, false), -1, 0, 12);
    // At the log end: nothing, positioned at the end of the active segment.
    let info = log.read(12, u64::MAX, None, true).unwrap();
    assert!(info.regions.is_empty());
    assert_eq!(info.fetch_offset_metadata.message_offset, 12);
    assert_eq!(info.fetch_offset_metadata.segment_base_offset, 9);
    assert_eq!(info.fetch_offset_metadata.relative_position, s);
    assert_eq!(log.log_end_offset_metadata(), info.fetch_offset_metadata);
    // Below the log start.
    assert!(log.maybe_increment_log_start_offset(4).unwrap());
    assert_out_of_range(log.read(3, u64::MAX, None, false), 3, 4, 12);
    assert_out_of_range(log.read(0, u64::MAX, None, true), 0, 4, 12);
    assert_eq!(read_batches(&log, 4, u64::MAX, None, false)[0].base, 3);
    // An empty log: offset 0 is the log end.
    let g = fixture();
    let log = open_new(&g.dir, config());
    assert!(log.read(0, 100, None, true).unwrap().regions.is_empty());
    assert_out_of_range(log.read(1, 100, None, true), 1, 0, 0);
}

#[test]
fn read_regions_outlive_deleted_segments() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    let info = log.read(0, u64::MAX, None, false).unwrap();
    log.truncate_fully_and_start_at(100, NOW).unwrap();
    assert!(!seg_path(&f.dir, 0, ".log").exists());
    assert_values(&records(&decode(&fetch_bytes(&info))), 0, 21, |_| 'v');
}

#[test]
fn offset_for_timestamp_special_values() {
    let f = fixture();
    // The batch holding offset 10 is a byte bigger (its timestamp delta needs two bytes).
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.segment_bytes = 3 * batch_size(3) + 1),
    );
    // An empty log.
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (earliest.timestamp, earliest.offset, earliest.leader_epoch),
        (-1, 0, None)
    );
    let latest = log
        .fetch_offset_by_timestamp(LATEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.timestamp, latest.offset, latest.leader_epoch),
        (-1, 0, None)
    );
    assert_eq!(log.fetch_offset_by_timestamp(MAX_TIMESTAMP).unwrap(), None);
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap(), None);

    // Timestamps by offset: the max (5000) is at offset 10, in the second segment.
    let ts_of = |o: i64| if o == 10 { 5000 } else { 1000 + o };
    for k in 0..6 {
        let epoch = if k < 4 { 2 } else { 4 };
        log.append_as_leader(
            &batch_with(3 * k, 3, ts_of, Compression::None, 'v'),
            epoch,
            NOW,
            false,
            AppendOrigin::Client,
        )
        .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 9]);
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (earliest.timestamp, earliest.offset, earliest.leader_epoch),
        (-1, 0, Some(2))
    );
    let latest = log
        .fetch_offset_by_timestamp(LATEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.timestamp, latest.offset, latest.leader_epoch),
        (-1, 18, Some(4))
    );
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (max.timestamp, max.offset, max.leader_epoch),
        (5000, 10, Some(2))
    );
    // EARLIEST follows the log start offset.
    log.maybe_increment_log_start_offset(13).unwrap();
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((earliest.offset, earliest.leader_epoch), (13, Some(4)));
    // Other negative timestamps are not lookups.
    assert!(matches!(
        log.fetch_offset_by_timestamp(-4),
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        log.fetch_offset_by_timestamp(i64::MIN),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn offset_for_timestamp_search_across_segments_and_zstd_batches() {
    let f = fixture();
    // 40 records in zstd batches of 5, record o timestamped 1000 + 10 * o.
    let ts_of = |o: i64| 1000 + 10 * o;
    let data: Vec<Vec<u8>> = (0..8)
        .map(|k| batch_with(5 * k, 5, ts_of, Compression::Zstd, 'v'))
        .collect();
    let max = data.iter().map(|d| d.len()).max().unwrap() as u64;
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 2 * max + 1));
    for d in &data {
        log.append_as_leader(d, 7, NOW, false, AppendOrigin::Client)
            .unwrap();
    }
    assert!(
        log.segment_count() >= 3,
        "expected several segments, got {:?}",
        bases(&log)
    );
    assert!(log.segments().all(|s| s.size() > 0));
    let check = |log: &Log| {
        for t in 0..=1400 {
            let got = log.fetch_offset_by_timestamp(t).unwrap();
            let want_offset = if t <= 1000 { 0 } else { (t - 1000 + 9) / 10 };
            if want_offset >= 40 {
                assert_eq!(got, None, "lookup of {t}");
            } else {
                let got = got.unwrap_or_else(|| panic!("lookup of {t} found nothing"));
                assert_eq!(
                    (got.offset, got.timestamp, got.leader_epoch),
                    (want_offset, ts_of(want_offset), Some(7)),
                    "lookup of {t}"
                );
            }
        }
    };
    check(&log);
    // The same after a clean reopen (timestamps come back from the time indexes).
    log.close().unwrap();
    let leo = log.log_end_offset();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(true, leo, 0));
    check(&log);
    let max_ts = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max_ts.offset, max_ts.timestamp), (39, 1390));
}

#[test]
fn offset_for_timestamp_with_out_of_order_timestamps() {
    let f = fixture();
    // Offsets 0..8, two records per batch, two batches per segment (big timestamp deltas make
    // three of the batches a byte bigger).
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.segment_bytes = 2 * batch_size(2) + 2),
    );
    let ts = [100, 400, 200, 300, 500, 150, 450, 460];
    for k in 0..4 {
        log.append_as_leader(
            &batch_with(2 * k, 2, |o| ts[o as usize], Compression::None, 'v'),
            0,
            NOW,
            false,
            AppendOrigin::Client,
        )
        .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 4]);
    // The first offset whose timestamp is >= the target.
    for (target, want) in [
        (0, Some(0)),
        (100, Some(0)),
        (101, Some(1)),
        (250, Some(1)),
        (400, Some(1)),
        (401, Some(4)),
        (455, Some(4)),
        (500, Some(4)),
        (501, None),
    ] {
        let got = log
            .fetch_offset_by_timestamp(target)
            .unwrap()
            .map(|t| (t.offset, t.timestamp));
        assert_eq!(
            got,
            want.map(|o: i64| (o, ts[o as usize])),
            "lookup of {target}"
        );
    }
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max.offset, max.timestamp), (4, 500));
}

#[test]

fn offset_for_max_timestamp_ties_resolve_to_the_earliest_offset() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = batch_size(2)));
    // One batch per segment, all with the same max timestamp.
    for _ in 0..3 {
        append_ts(&mut log, 2, 777);
    }
    assert_eq!(bases(&log), vec![0, 2, 4]);
    // Within one segment the first record with the max timestamp is returned (offset 0 of 0-1);
    // across segments Kafka (`segments.maxBy(_.maxTimestampSoFar)`) also keeps the first.
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max.offset, max.timestamp), (0, 777));
}

#[test]
fn offset_for_timestamp_ignores_records_below_the_log_start() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    log.maybe_increment_log_start_offset(13).unwrap();
    // Segment 0 holds timestamps >= TS but all its offsets are below the log start.
    let found = log.fetch_offset_by_timestamp(TS).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (13, TS + 13));
    let found = log.fetch_offset_by_timestamp(TS + 12).unwrap().unwrap();
    assert_eq!(found.offset, 13);
    let found = log.fetch_offset_by_timestamp(TS + 15).unwrap().unwrap();
    assert_eq!(found.offset, 15);
}

#[test]
fn offset_for_max_timestamp_ignores_records_below_the_log_start() {
    let f = fixture();
    // The largest timestamp is in the first segment.
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| if o < 9 { TS + 1_000 } else { TS + o });
    log.maybe_increment_log_start_offset(13).unwrap();
    let found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP).unwrap();
    assert_eq!(found.map(|t| (t.offset, t.timestamp)), Some((20, TS + 20)));
}
