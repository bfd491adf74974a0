//! `Log` integration tests: compaction (the log cleaner). The newest record per key survives
//! at its offset, tombstones follow KIP-534's delete horizon, the active segment and what
//! lies past the high watermark or inside `min.compaction.lag.ms` are left alone, groups fit a
//! segment, a full offset map cleans only what it covered, and a log that changes during a
//! cleaning is never overwritten.
//!
//! Every test works in its own temporary directory with fixed clocks (`NOW`).

mod common;
mod log_cleaner_common;

use common::{config_with, fixture, open_new, opts, reopen, NOW, TS};
use log_cleaner_common::{
    append_keyed, batches, cleaner, compacted_config, keyed_batch, model_after_clean, offsets,
    read_records, Kv,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{CleanerConfig, CleaningAbort, CleaningJob, Log};
use rillet_core::record::{BatchBuilder, Compression};
use rillet_core::Error;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// A log of `rounds` batches of 10 records over keys `key-0..key-{keys}`, rolled so the
/// active segment is empty. Returns the log and every record written.
fn churned_log(dir: &std::path::Path, c: Compression, rounds: i64, keys: i64) -> (Log, Vec<Kv>) {
    let mut log = open_new(dir, compacted_config(|cfg| cfg.segment_bytes = 1_000));
    let mut written = Vec::new();
    for r in 0..rounds {
        let recs: Vec<(String, Option<String>)> = (0..10)
            .map(|i| {
                let k = (r * 7 + i * 3) % keys;
                (format!("key-{k}"), Some(format!("v{r}-{i}")))
            })
            .collect();
        written.extend(append_keyed(&mut log, &recs, TS + r, c));
    }
    log.roll(NOW).unwrap();
    (log, written)
}

#[test]
fn the_newest_record_per_key_survives_at_its_offset_in_every_codec() {
    for c in CODECS {
        let f = fixture();
        let (mut log, written) = churned_log(&f.dir, c, 30, 13);
        let before: Vec<(i64, i64)> = batches(&log).iter().map(|b| (b.0, b.1)).collect();
        let segments_before = log.segment_count();
        assert!(segments_before > 2, "{c:?}: {segments_before} segments");
        let epochs = log.epoch_cache().entries().to_vec();
        let stats = log.clean(&cleaner(), None, None, NOW).unwrap();
        assert!(!stats.aborted);
        assert_eq!(stats.end_offset, 300, "{c:?}");
        assert_eq!(read_records(&log), model_after_clean(&written, 300));
        assert_eq!(stats.messages_read, 300);
        assert_eq!(stats.messages_written, 13);
        assert_eq!(stats.records_removed(), 287);
        assert!(stats.bytes_written < stats.bytes_read);
        // Batch boundaries survive: every batch left spans the offsets of one written.
        for b in batches(&log) {
            assert!(before.contains(&(b.0, b.1)), "{c:?}: batch {b:?} is new");
        }
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(log.log_end_offset(), 300);
        assert_eq!(log.epoch_cache().entries(), &epochs[..]);
        // Cleaning again finds nothing more to remove, and merges the shrunken segments:
        // groups are sized by the segments' sizes before a cleaning, as Kafka's are.
        let again = log.clean(&cleaner(), Some(300), None, NOW).unwrap();
        assert_eq!(again.records_removed(), 0);
        assert_eq!(log.segment_count(), 2, "{c:?}"); // one cleaned, the empty active one
        assert_eq!(read_records(&log), model_after_clean(&written, 300));
    }
}

#[test]
fn reads_lookups_and_reopening_work_on_cleaned_segments() {
    let f = fixture();
    let (mut log, written) = churned_log(&f.dir, Compression::Zstd, 40, 9);
    log.clean(&cleaner(), None, None, NOW).unwrap();
    let want = model_after_clean(&written, 400);
    // A read from any offset starts at the first record at or after it.
    for o in 0..400 {
        let got = log_cleaner_common::records_from(&log, o);
        let expect: Vec<Kv> = want.iter().filter(|r| r.offset >= o).cloned().collect();
        assert_eq!(got, expect, "read from {o}");
    }
    // Timestamp lookups find the first surviving record at or after the time.
    for r in &want {
        let found = log.fetch_offset_by_timestamp(r.timestamp).unwrap().unwrap();
        assert!(found.offset <= r.offset && found.timestamp == r.timestamp);
    }
    let cfg = log.config().clone();
    log.close().unwrap();
    drop(log);
    for clean in [true, false] {
        let (log, info) = reopen(&f.dir, cfg.clone(), opts(clean, 0, 0));
        assert_eq!(info.truncated_bytes, 0);
        assert_eq!(read_records(&log), want, "clean shutdown: {clean}");
        assert_eq!(log.log_end_offset(), 400);
        drop(log);
    }
}

#[test]
fn tombstones_get_a_delete_horizon_and_go_once_it_has_passed() {
    for c in CODECS {
        let f = fixture();
        let mut log = open_new(
            &f.dir,
            compacted_config(|cfg| cfg.delete_retention_ms = 1_000),
        );
        let put = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));
        append_keyed(&mut log, &[put("a", Some("1")), put("b", Some("1"))], TS, c);
        append_keyed(&mut log, &[put("a", None), put("c", Some("1"))], TS, c);
        log.roll(NOW).unwrap();
        let first = log.clean(&cleaner(), None, None, NOW).unwrap();
        assert_eq!(first.latest_delete_horizon_ms, NOW + 1_000);
        let recs = read_records(&log);
        let keys: Vec<(&str, bool)> = recs
            .iter()
            .map(|r| (r.key.as_deref().unwrap(), r.value.is_some()))
            .collect();
        assert_eq!(keys, vec![("b", true), ("a", false), ("c", true)], "{c:?}");
        // The tombstone's timestamp reads as written, though its batch's base moved.
        assert_eq!(recs[1].timestamp, TS);

        // Before the horizon a cleaning keeps it; at the horizon it goes.
        let early = log.clean(&cleaner(), Some(4), None, NOW + 999).unwrap();
        assert_eq!(early.tombstones_removed, 0);
        assert_eq!(read_records(&log).len(), 3);
        let late = log.clean(&cleaner(), Some(4), None, NOW + 1_000).unwrap();
        assert_eq!(late.tombstones_removed, 1);
        assert_eq!(late.latest_delete_horizon_ms, -1);
        let left: Vec<i64> = read_records(&log).iter().map(|r| r.offset).collect();
        assert_eq!(left, vec![1, 3]);
    }
}

#[test]
fn the_active_segment_and_offsets_past_the_high_watermark_stay_untouched() {
    let f = fixture();
    let (mut log, written) = churned_log(&f.dir, Compression::None, 20, 5);
    // More churn in the active segment.
    let tail: Vec<(String, Option<String>)> = (0..10)
        .map(|i| (format!("key-{}", i % 5), Some(format!("tail-{i}"))))
        .collect();
    let tail_written = append_keyed(&mut log, &tail, TS + 99, Compression::None);
    let active = log.active_segment_base_offset();
    let hw = 120;
    let info = log.cleanable_offsets(None, Some(hw), NOW).unwrap();
    let seg_of_hw = log
        .segments()
        .map(|s| s.base_offset())
        .filter(|&b| b <= hw)
        .max()
        .unwrap();
    assert_eq!(info.first_uncleanable_offset, seg_of_hw);
    let stats = log.clean(&cleaner(), None, Some(hw), NOW).unwrap();
    assert_eq!(stats.end_offset, seg_of_hw);
    let all: Vec<Kv> = written.iter().chain(&tail_written).cloned().collect();
    let got = read_records(&log);
    // Everything from the segment holding the high watermark on is as written.
    let untouched: Vec<Kv> = all
        .iter()
        .filter(|r| r.offset >= seg_of_hw)
        .cloned()
        .collect();
    let got_untouched: Vec<Kv> = got
        .iter()
        .filter(|r| r.offset >= seg_of_hw)
        .cloned()
        .collect();
    assert_eq!(got_untouched, untouched);
    assert!(got.iter().any(|r| r.offset >= active));
    // Below it, one record per key at most, each the newest below the cleaned end.
    let below: Vec<Kv> = got
        .iter()
        .filter(|r| r.offset < seg_of_hw)
        .cloned()
        .collect();
    let model: Vec<Kv> = model_after_clean(&all, seg_of_hw)
        .into_iter()
        .filter(|r| r.offset < seg_of_hw)
        .collect();
    assert_eq!(below, model);
}

#[test]
fn min_compaction_lag_keeps_recent_segments_dirty() {
    let f = fixture();
    let mut log = open_new(
        &f.dir,
        compacted_config(|cfg| {
            cfg.segment_bytes = 400;
            cfg.min_compaction_lag_ms = 10_000;
        }),
    );
    let mut written = Vec::new();
    // Old records, then records 5 s old (inside the 10 s lag).
    for (i, ts) in [
        (0, NOW - 60_000),
        (1, NOW - 60_000),
        (2, NOW - 5_000),
        (3, NOW - 5_000),
    ] {
        let recs = vec![("k".to_string(), Some(format!("v{i}")))];
        written.extend(append_keyed(&mut log, &recs, ts, Compression::None));
        log.roll(NOW).unwrap();
    }
    let info = log.cleanable_offsets(None, None, NOW).unwrap();
    assert_eq!(info.first_uncleanable_offset, 2);
    log.clean(&cleaner(), None, None, NOW).unwrap();
    assert_eq!(offsets(&read_records(&log)), vec![1, 2, 3]);
    // Once the lag has passed, everything below the active segment is cleanable.
    let later = log.clean(&cleaner(), Some(2), None, NOW + 10_000).unwrap();
    assert_eq!(later.end_offset, 4);
    assert_eq!(offsets(&read_records(&log)), vec![3]);
    assert_eq!(written.len(), 4);
}

#[test]
fn dirty_ratio_and_max_compaction_lag() {
    let f = fixture();
    let (log, _) = churned_log(&f.dir, Compression::None, 20, 5);
    let sizes: Vec<(i64, u64)> = log
        .segments()
        .map(|s| (s.base_offset(), s.size()))
        .collect();
    let total: u64 = sizes.iter().map(|s| s.1).sum();
    let never = log.cleanable_offsets(None, None, NOW).unwrap();
    assert_eq!(never.first_dirty_offset, 0);
    assert_eq!(never.clean_bytes, 0);
    assert_eq!(never.cleanable_bytes, total);
    assert_eq!(never.cleanable_ratio(), 1.0);
    assert!(never.should_clean(0.5));
    assert!(!never.force_update_checkpoint);
    // A checkpoint at a segment boundary splits the bytes there.
    let (b, _) = sizes[3];
    let mid = log.cleanable_offsets(Some(b), None, NOW).unwrap();
    let before: u64 = sizes.iter().filter(|s| s.0 < b).map(|s| s.1).sum();
    assert_eq!(
        (mid.clean_bytes, mid.cleanable_bytes),
        (before, total - before)
    );
    // A checkpoint outside the log is reset to the log start.
    let bad = log.cleanable_offsets(Some(10_000), None, NOW).unwrap();
    assert_eq!(
        (bad.first_dirty_offset, bad.force_update_checkpoint),
        (0, true)
    );
    // Nothing dirty: not worth cleaning, whatever the ratio threshold.
    let done = log.cleanable_offsets(Some(200), None, NOW).unwrap();
    assert_eq!(done.cleanable_bytes, 0);
    assert!(!done.should_clean(0.0));
    assert_eq!(done.max_compaction_delay_ms, 0);

    // max.compaction.lag.ms: records first written at TS are overdue by (NOW - lag) - TS.
    let f2 = fixture();
    let (mut log, _) = churned_log(&f2.dir, Compression::None, 20, 5);
    log.update_config(rillet_core::log::LogConfig {
        max_compaction_lag_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    let overdue = log.cleanable_offsets(Some(150), None, NOW).unwrap();
    // The segment holding offset 150 starts with the batch of round base / 10.
    let base = log
        .segments()
        .map(|s| s.base_offset())
        .filter(|&b| b <= 150)
        .max()
        .unwrap();
    assert_eq!(
        overdue.max_compaction_delay_ms,
        NOW - 1_000 - (TS + base / 10)
    );
    assert!(overdue.needs_compaction_now());
    assert!(overdue.should_clean(0.99));
}

#[test]
fn a_full_offset_map_cleans_only_what_it_covered() {
    let f = fixture();
    let (mut log, written) = churned_log(&f.dir, Compression::Lz4, 30, 300);
    // Room for 2 slots x 0.9 per ... a few dozen keys: the map fills after a few batches.
    let small = CleanerConfig {
        dedupe_buffer_size: 24 * 40,
        ..CleanerConfig::default()
    };
    let mut checkpoint = None;
    let mut passes = 0;
    loop {
        let stats = log.clean(&small, checkpoint, None, NOW).unwrap();
        passes += 1;
        assert!(stats.end_offset > stats.first_dirty_offset);
        // Whatever the map did not cover is left as written.
        let got = read_records(&log);
        let untouched: Vec<Kv> = written
            .iter()
            .filter(|r| r.offset >= stats.end_offset)
            .cloned()
            .collect();
        let got_after: Vec<Kv> = got
            .iter()
            .filter(|r| r.offset >= stats.end_offset)
            .cloned()
            .collect();
        assert_eq!(got_after, untouched);
        checkpoint = Some(stats.end_offset);
        if stats.end_offset == 300 {
            break;
        }
        assert!(passes < 50);
    }
    assert!(passes > 2);
    assert_eq!(read_records(&log), model_after_clean(&written, 300));
}

#[test]
fn a_map_too_small_for_one_batch_is_a_config_error() {
    let f = fixture();
    let (mut log, _) = churned_log(&f.dir, Compression::None, 3, 30);
    let tiny = CleanerConfig {
        dedupe_buffer_size: 24 * 4,
        ..CleanerConfig::default()
    };
    let err = log.clean(&tiny, None, None, NOW).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert_eq!(err.kafka_name(), "INVALID_CONFIG");
    // The log is untouched and may be cleaned again.
    assert_eq!(read_records(&log).len(), 30);
    log.clean(&cleaner(), None, None, NOW).unwrap();
}

#[test]
fn groups_fit_one_segment_and_are_indexed() {
    let f = fixture();
    let (mut log, written) = churned_log(&f.dir, Compression::None, 60, 400);
    let seg_bytes = log.config().segment_bytes;
    let before = log.segment_count();
    log.update_config(rillet_core::log::LogConfig {
        index_interval_bytes: 100,
        ..log.config().clone()
    })
    .unwrap();
    let stats = log.clean(&cleaner(), None, None, NOW).unwrap();
    // Few keys repeat: little is removed, so groups stay near a segment each.
    assert!(stats.records_removed() < 300);
    assert!(log.segment_count() <= before);
    for s in log.segments() {
        assert!(
            s.size() <= seg_bytes,
            "segment {} is {} bytes",
            s.base_offset(),
            s.size()
        );
    }
    let cleaned: Vec<_> = log.segments().filter(|s| s.size() > 0).collect();
    assert!(cleaned.iter().any(|s| s.offset_index().entries() > 0));
    assert_eq!(read_records(&log), model_after_clean(&written, 600));
}

#[test]
fn a_producers_last_batch_is_kept_empty_and_others_are_dropped() {
    let f = fixture();
    let mut log = open_new(&f.dir, compacted_config(|_| {}));
    let mut append = |pid: i64, seq: i32, key: &str| {
        let mut b = BatchBuilder::new(Compression::Zstd);
        b.producer(pid, 0, seq);
        b.append(TS, Some(key.as_bytes()), Some(b"v"), &[]);
        log.append_as_leader(&b.build().unwrap(), 0, NOW, false, AppendOrigin::Client)
            .unwrap();
    };
    append(7, 0, "a"); // 0: superseded by 3, producer 7 writes again: dropped
    append(7, 1, "b"); // 1: superseded by 4, producer 7's last batch: kept empty
    append(-1, -1, "c"); // 2: no producer, superseded by 5: dropped
    append(8, 0, "a"); // 3
    append(8, 1, "b"); // 4
    append(-1, -1, "c"); // 5
    log.roll(NOW).unwrap();
    log.clean(&cleaner(), None, None, NOW).unwrap();
    let b = batches(&log);
    assert_eq!(b, vec![(1, 1, 0), (3, 3, 1), (4, 4, 1), (5, 5, 1)]);
}

#[test]
fn a_groups_last_batch_keeps_the_segment_end() {
    let f = fixture();
    let mut log = open_new(&f.dir, compacted_config(|c| c.segment_bytes = 100_000));
    let put = |k: &str| vec![(k.to_string(), Some("v".to_string()))];
    append_keyed(&mut log, &put("a"), TS, Compression::None);
    append_keyed(&mut log, &put("b"), TS, Compression::None);
    log.roll(NOW).unwrap();
    append_keyed(&mut log, &put("b"), TS, Compression::None);
    log.roll(NOW).unwrap();
    // Two segments that cannot share a group.
    let first = log.segments().next().unwrap().size();
    log.update_config(rillet_core::log::LogConfig {
        segment_bytes: first,
        ..log.config().clone()
    })
    .unwrap();
    log.clean(&cleaner(), None, None, NOW).unwrap();
    // Offset 1 is superseded, but as its group's last batch it stays, emptied.
    assert_eq!(batches(&log), vec![(0, 0, 1), (1, 1, 0), (2, 2, 1)]);
    assert_eq!(offsets(&read_records(&log)), vec![0, 2]);
}

#[test]
fn keyless_records_are_refused_by_compacted_topics_and_dropped_by_the_cleaner() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|_| {}));
    let keyless = {
        let mut b = BatchBuilder::new(Compression::Gzip);
        b.append(TS, Some(b"k"), Some(b"1"), &[]);
        b.append(TS, None, Some(b"no key"), &[]);
        b.build().unwrap()
    };
    // A delete topic takes them...
    log.append_as_leader(&keyless, 0, NOW, false, AppendOrigin::Client)
        .unwrap();
    // ...a compacted one does not, with Kafka's error and message.
    log.update_config(rillet_core::log::LogConfig {
        compact: true,
        ..log.config().clone()
    })
    .unwrap();
    let err = log
        .append_as_leader(&keyless, 0, NOW, false, AppendOrigin::Client)
        .unwrap_err();
    assert_eq!(err.kafka_name(), "INVALID_RECORD");
    assert_eq!(
        err.to_string(),
        "Compacted topic cannot accept message without key in topic partition topic-0."
    );
    assert_eq!(log.log_end_offset(), 2);
    // A replica copies whatever its leader wrote.
    log.append_as_follower(
        &keyed_batch(2, &[(None, Some("x"))], TS, Compression::None),
        NOW,
    )
    .unwrap();
    log.roll(NOW).unwrap();
    let stats = log.clean(&cleaner(), None, None, NOW).unwrap();
    assert_eq!(stats.invalid_messages, 2);
    assert_eq!(offsets(&read_records(&log)), vec![0]);
}

#[test]
fn a_log_that_changes_during_a_cleaning_is_not_overwritten() {
    let f = fixture();
    let (mut log, written) = churned_log(&f.dir, Compression::Snappy, 20, 4);
    let plan = log.begin_cleaning(None, None, NOW).unwrap();
    // One cleaning at a time.
    assert!(matches!(
        log.begin_cleaning(None, None, NOW),
        Err(Error::InvalidRequest(_))
    ));
    let mut job = CleaningJob::new(plan, &cleaner(), CleaningAbort::default()).unwrap();
    let group = job.next_group().unwrap().unwrap();
    let cleaned_name = format!("{:020}.log.cleaned", group.base_offset());
    assert!(f.dir.join(&cleaned_name).exists());
    // A follower truncates meanwhile: the group is discarded, files and all.
    assert!(log.truncate_to(150, NOW).unwrap());
    assert!(!log.replace_segments(group).unwrap());
    job.on_replaced(false);
    assert!(!f.dir.join(&cleaned_name).exists());
    let stats = job.finish();
    assert_eq!(stats.groups_discarded, 1);
    assert_eq!(stats.end_offset, stats.first_dirty_offset);
    log.end_cleaning();
    let kept: Vec<Kv> = written.iter().filter(|r| r.offset < 150).cloned().collect();
    assert_eq!(read_records(&log), kept);
    assert!(log.segment_count() > 2);

    // Retention deleting a segment of the group has the same effect.
    let plan = log.begin_cleaning(None, None, NOW).unwrap();
    let mut job = CleaningJob::new(plan, &cleaner(), CleaningAbort::default()).unwrap();
    let group = job.next_group().unwrap().unwrap();
    let second = log.segments().nth(1).unwrap().base_offset();
    log.maybe_increment_log_start_offset(second).unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 1);
    assert!(!log.replace_segments(group).unwrap());
    log.end_cleaning();

    // An aborted cleaning stops at the next batch and changes nothing.
    let abort = CleaningAbort::default();
    abort.abort();
    let plan = log.begin_cleaning(None, None, NOW).unwrap();
    let mut job = CleaningJob::new(plan, &cleaner(), abort).unwrap();
    assert!(job.next_group().unwrap().is_none());
    let stats = job.finish();
    assert!(stats.aborted);
    log.end_cleaning();
    let files: Vec<String> = std::fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(files.is_empty(), "{files:?}");
}

#[test]
fn a_follower_replicates_a_compacted_log_with_its_gaps() {
    let f = fixture();
    let (mut leader, written) = churned_log(&f.dir, Compression::Gzip, 25, 6);
    leader.clean(&cleaner(), None, None, NOW).unwrap();
    let g = fixture();
    let mut follower = open_new(&g.dir, compacted_config(|cfg| cfg.segment_bytes = 1_000));
    let mut next = 0;
    while next < leader.log_end_offset() {
        let data = log_cleaner_common::fetch_bytes(&leader.read(next, 700, None, true).unwrap());
        let info = follower.append_as_follower(&data, NOW).unwrap();
        next = info.last_offset + 1;
    }
    assert_eq!(follower.log_end_offset(), 250);
    assert_eq!(read_records(&follower), read_records(&leader));
    assert_eq!(read_records(&follower), model_after_clean(&written, 250));
}
