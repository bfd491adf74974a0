//! `Log` integration tests: Appends: bad batches refused whole (nothing written), sizes, multi-batch appends, LogAppendTime, config validation, and large appends validated in parallel.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use common::{
    append, append_ts, assert_values, batch, batch_size, batch_with, config, config_with, fixture,
    open_new, opts, read_all, read_batches, records, reopen, sizes, snapshot, NOW, TS,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{EpochEntry, Log, LogConfig};
use rillet_core::record::{BatchBuilder, Compression, TimestampType};
use rillet_core::Error;

/// A log of two segments with the given config and an append that must fail and change nothing.
fn assert_rejected(data: &[u8], cfg: LogConfig, follower: bool, ok: impl Fn(&Error) -> bool) {
    let f = fixture();
    let mut log = open_new(&f.dir, cfg);
    for _ in 0..3 {
        append(&mut log, 3);
    }
    log.roll(NOW).unwrap();
    append(&mut log, 3);
    let before = snapshot(&log);
    let err = if follower {
        log.append_as_follower(data, NOW).unwrap_err()
    } else {
        log.append_as_leader(data, 0, NOW, false, AppendOrigin::Client)
            .unwrap_err()
    };
    assert!(ok(&err), "unexpected error {err:?}");
    assert_eq!(
        snapshot(&log),
        before,
        "a rejected append changed the log ({err})"
    );
    // The log still works.
    assert_eq!(append(&mut log, 3).first_offset, 12);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}

fn corrupt(e: &Error) -> bool {
    matches!(e, Error::CorruptRecord(_))
}

#[test]
fn bad_append_wrong_crc() {
    let mut data = batch(12, 3);
    let n = data.len();
    data[n - 3] ^= 0x01;
    assert_rejected(&data, config(), false, corrupt);
    assert_rejected(&data, config(), true, corrupt);
    // The stored CRC itself wrong.
    let mut data = batch(12, 3);
    data[17] ^= 0x80;
    assert_rejected(&data, config(), false, corrupt);
}

#[test]
fn bad_append_wrong_magic() {
    for magic in [0u8, 1, 3, 0xFF] {
        let mut data = batch(12, 3);
        data[16] = magic;
        assert_rejected(&data, config(), false, corrupt);
        assert_rejected(&data, config(), true, corrupt);
    }
}

#[test]
fn bad_append_truncated_batch() {
    let data = batch(12, 3);
    for cut in [1, 10, data.len() - 61, data.len() - 12, data.len() - 1] {
        assert_rejected(&data[..data.len() - cut], config(), false, corrupt);
    }
    assert_rejected(&data[..data.len() - 1], config(), true, corrupt);
    // Two batches, the second one cut: the first is not written either.
    let mut two = batch(12, 3);
    two.extend_from_slice(&data[..data.len() - 5]);
    assert_rejected(&two, config(), false, corrupt);
}

#[test]
fn bad_append_lying_length() {
    let data = batch(12, 3);
    let len = i32::from_be_bytes(data[8..12].try_into().unwrap());
    for lie in [len + 1, len + 1000, len - 1, 48, 0, -1, i32::MAX, i32::MIN] {
        let mut bad = data.clone();
        bad[8..12].copy_from_slice(&lie.to_be_bytes());
        assert_rejected(&bad, config(), false, corrupt);
    }
    // A good batch followed by one that lies about its length.
    let mut two = batch(12, 3);
    let mut bad = batch(15, 3);
    bad[8..12].copy_from_slice(&(len + 7).to_be_bytes());
    two.extend_from_slice(&bad);
    assert_rejected(&two, config(), false, corrupt);
    assert_rejected(&two, config(), true, corrupt);
}

#[test]
fn bad_append_second_batch_corrupt_writes_nothing() {
    let mut data = batch(12, 3);
    let mut second = batch(15, 3);
    let n = second.len();
    second[n - 1] ^= 0xFF;
    data.extend_from_slice(&second);
    assert_rejected(&data, config(), false, corrupt);
    assert_rejected(&data, config(), true, corrupt);
}

#[test]
fn bad_append_over_max_message_bytes() {
    let data = batch(12, 3);
    let max = data.len() as u64 - 1;
    let cfg = config_with(|c| c.max_message_bytes = max);
    // Build the log with a limit that fits its batches, then lower it.
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    for _ in 0..4 {
        append(&mut log, 3);
    }
    log.update_config(cfg.clone()).unwrap();
    let before = snapshot(&log);
    for follower in [false, true] {
        let err = if follower {
            log.append_as_follower(&data, NOW).unwrap_err()
        } else {
            log.append_as_leader(&data, 0, NOW, false, AppendOrigin::Client)
                .unwrap_err()
        };
        assert_eq!(err.kafka_name(), "MESSAGE_TOO_LARGE");
        match err {
            Error::RecordTooLarge { size, max: m } => {
                assert_eq!((size, m as u64), (data.len(), max))
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
        assert_eq!(snapshot(&log), before);
    }
    // Exactly max_message_bytes is fine.
    log.update_config(config_with(|c| c.max_message_bytes = data.len() as u64))
        .unwrap();
    assert_eq!(append(&mut log, 3).first_offset, 12);
}

#[test]
fn bad_append_over_segment_bytes() {
    let s = batch_size(3);
    let cfg = config_with(|c| c.segment_bytes = 4 * s);
    let data = batch(12, 60);
    assert!(data.len() as u64 > 4 * s);
    assert_rejected(&data, cfg, false, |e| {
        matches!(e, Error::RecordBatchTooLarge { .. })
    });
}

#[test]
fn bad_append_empty_input() {
    let invalid = |e: &Error| matches!(e, Error::InvalidRecord(_));
    assert_rejected(&[], config(), false, invalid);
    assert_rejected(&[], config(), true, invalid);
}

#[test]
fn bad_append_control_or_log_append_time_batch_from_a_producer() {
    let mut b = BatchBuilder::new(Compression::None);
    b.control(true);
    b.append(TS, Some(b"k"), Some(b"v"), &[]);
    let control = b.build().unwrap();
    assert_rejected(&control, config(), false, |e| {
        matches!(e, Error::InvalidRecord(_))
    });
    let mut b = BatchBuilder::new(Compression::None);
    b.timestamp_type(TimestampType::LogAppendTime);
    b.append(TS, Some(b"k"), Some(b"v"), &[]);
    let lat = b.build().unwrap();
    assert_rejected(&lat, config(), false, |e| {
        matches!(e, Error::InvalidTimestamp(_))
    });
}

#[test]
fn multi_batch_append_that_fills_the_index_leaves_a_consistent_log() {
    let f = fixture();
    // 24-byte indexes: 3 offset entries. Constant timestamps, an entry for every batch but the
    // first: two batches use one entry, an append of three more needs three.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    append_ts(&mut log, 2, TS);
    append_ts(&mut log, 2, TS);
    let before = snapshot(&log);
    let mut data = Vec::new();
    for k in 0..3 {
        data.extend_from_slice(&batch_with(4 + 2 * k, 2, |_| TS, Compression::None, 'v'));
    }
    match log.append_as_leader(&data, 0, NOW, false, AppendOrigin::Client) {
        Ok(info) => {
            assert_eq!((info.first_offset, info.last_offset), (4, 9));
            assert_values(&read_all(&log), 0, 10, |_| 'v');
        }
        Err(e) => assert_eq!(
            snapshot(&log),
            before,
            "a rejected append ({e}) left the log changed"
        ),
    }
    // Either way, what follows must be consistent.
    let leo = log.log_end_offset();
    append_ts(&mut log, 2, TS);
    assert_values(&read_all(&log), 0, leo + 2, |_| 'v');
    let total: u64 = sizes(&log).iter().sum();
    assert_eq!(total, (leo as u64 + 2) / 2 * batch_size(2));
}

#[test]
fn leader_append_of_several_batches_assigns_consecutive_offsets() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    append(&mut log, 2);
    // The producer's base offsets are ignored: the log assigns them from its end.
    let mut data = batch_with(1_000, 3, |o| TS + o, Compression::None, 'x');
    data.extend_from_slice(&batch_with(7, 1, |o| TS + o, Compression::Zstd, 'x'));
    data.extend_from_slice(&batch_with(0, 4, |o| TS + o, Compression::Gzip, 'x'));
    let info = log
        .append_as_leader(&data, 9, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.record_count,
            info.batch_count
        ),
        (2, 9, 8, 3)
    );
    assert_eq!(info.valid_bytes, data.len() as u64);
    assert_eq!(info.log_append_time, -1);
    let got = read_batches(&log, 2, u64::MAX, None, false);
    assert_eq!(
        got.iter()
            .map(|b| (b.base, b.last, b.epoch))
            .collect::<Vec<_>>(),
        vec![(2, 4, 9), (5, 5, 9), (6, 9, 9)]
    );
    assert_eq!(
        records(&got).iter().map(|r| r.offset).collect::<Vec<_>>(),
        (2..10).collect::<Vec<_>>()
    );
    // One epoch entry for the whole append.
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(0, 0), e(9, 2)]);
}

#[test]
fn log_append_time_is_stamped_with_a_valid_crc() {
    let f = fixture();
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.message_timestamp_type = TimestampType::LogAppendTime),
    );
    for (i, c) in [Compression::None, Compression::Zstd, Compression::Lz4]
        .into_iter()
        .enumerate()
    {
        let first = log.log_end_offset();
        let now = NOW + i as i64;
        let info = log
            .append_as_leader(
                &batch_with(first, 3, |o| 1_000 + o, c, 'v'),
                0,
                now,
                false,
                AppendOrigin::Client,
            )
            .unwrap();
        assert_eq!((info.log_append_time, info.max_timestamp), (now, now));
    }
    // `decode` checks every CRC; every record carries its batch's append time.
    let recs = records(&read_batches(&log, 0, u64::MAX, None, false));
    assert_values(&recs, 0, 9, |_| 'v');
    assert_eq!(
        recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
        [NOW; 3]
            .into_iter()
            .chain([NOW + 1; 3])
            .chain([NOW + 2; 3])
            .collect::<Vec<_>>()
    );
    let found = log.fetch_offset_by_timestamp(NOW + 1).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (3, NOW + 1));
    // The stamped batches survive recovery (their CRCs are right on disk too).
    let cfg = log.config().clone();
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(log.log_end_offset(), 9);
}

#[test]
fn invalid_config_is_rejected() {
    let f = fixture();
    let bad = [
        config_with(|c| c.segment_bytes = 13),
        config_with(|c| c.segment_ms = 0),
        config_with(|c| c.segment_jitter_ms = -1),
        config_with(|c| c.segment_index_bytes = 11),
        config_with(|c| c.retention_ms = -2),
        config_with(|c| c.retention_bytes = -2),
    ];
    for cfg in &bad {
        assert!(matches!(
            Log::open(&f.dir, cfg.clone(), opts(true, 0, 0)),
            Err(Error::InvalidConfig(_))
        ));
    }
    let mut log = open_new(&f.dir, config());
    append(&mut log, 3);
    for cfg in bad {
        assert!(matches!(
            log.update_config(cfg),
            Err(Error::InvalidConfig(_))
        ));
    }
    assert_eq!(log.config(), &config());
}

/// Appends of 256 KiB and more are validated on a second core while they are written; a
/// bad one must still leave the log exactly as it was.
fn big_config() -> LogConfig {
    config_with(|c| {
        c.segment_bytes = 64 << 20;
        c.max_message_bytes = 8 << 20;
    })
}

#[test]
fn big_append_is_validated_in_parallel_and_kept_when_good() {
    let f = fixture();
    let mut log = open_new(&f.dir, big_config());
    append(&mut log, 3);
    let data = batch(3, 20_000);
    assert!(data.len() >= 256 * 1024);
    let info = log
        .append_as_leader(&data, 0, NOW, false, AppendOrigin::Client)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 20_002));
    assert_values(&read_all(&log), 0, 20_003, |_| 'v');
}

#[test]
fn big_bad_append_leaves_the_log_unchanged() {
    // A flipped byte in the middle: the CRC fails.
    let mut data = batch(12, 20_000);
    let mid = data.len() / 2;
    data[mid] ^= 0x01;
    assert_rejected(&data, big_config(), false, corrupt);
    // A broken record under a correct CRC: the record check fails.
    let mut data = batch(12, 20_000);
    let last = data.len() - 1;
    data[last] = 0x7f; // the last record's header count now lies
    let crc = crc32c::crc32c(&data[21..]);
    data[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_rejected(&data, big_config(), false, corrupt);
}
