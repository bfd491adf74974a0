//! `Log` integration tests: Opening a log: clean and unclean reopen, torn tails, corrupt batches, missing or garbage indexes, leftover files.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

mod common;

use std::fs;
use std::os::unix::fs::FileExt;

use common::{
    append, assert_out_of_range, assert_values, bases, batch, batch_size, batch_with, build_log,
    config_with, expected_files, file_len, fixture, log_file_batches, offset_index_file, open_new,
    opts, read_all, read_batches, reopen, seg_path, segment_files, sizes, snapshot, CHECKPOINT,
    NOW, TS,
};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{EpochEntry, Log, LogConfig, RecoveryInfo};
use rillet_core::record::Compression;

#[test]
fn clean_reopen_keeps_everything_and_recovers_nothing() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 3, 2, |o| TS + o);
    log.maybe_increment_log_start_offset(4).unwrap();
    log.close().unwrap();
    let before = snapshot(&log);
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    let mut all = Vec::new();
    for seg in log.segments() {
        all.push(fs::read(seg.log_path()).unwrap());
    }
    drop(log);

    let (mut log, info) = reopen(&f.dir, cfg, opts(true, leo, 4));
    assert_eq!(info.recovered_segments, 0);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(snapshot(&log), before);
    assert_eq!(log.recovery_point(), leo);
    let again: Vec<Vec<u8>> = log
        .segments()
        .map(|s| fs::read(s.log_path()).unwrap())
        .collect();
    assert_eq!(again, all);
    for o in 4..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    assert_eq!(
        log.fetch_offset_by_timestamp(TS + 20)
            .unwrap()
            .unwrap()
            .offset,
        20
    );
    // It carries on where it stopped.
    assert_eq!(append(&mut log, 3).first_offset, leo);
    assert_values(&read_all(&log), 3, leo + 3, |_| 'v');
}

#[test]
fn clean_reopen_after_close_rebuilds_no_index() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let (_log, info) = reopen(&f.dir, cfg, opts(true, leo, 0));
    assert_eq!(info, RecoveryInfo::default());
}

#[test]
fn unclean_reopen_rereads_every_segment() {
    let f = fixture();
    let (log, _s) = build_log(&f.dir, 3, 2, |o| TS + o);
    let before = snapshot(&log);
    let (cfg, leo, total, n) = (
        log.config().clone(),
        log.log_end_offset(),
        log.size_in_bytes(),
        log.segment_count(),
    );
    drop(log); // no close(): a crash

    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert_eq!(info.recovered_segments, n);
    assert_eq!(info.recovered_bytes, total);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(snapshot(&log), before);
    assert!(log.recovery_point() <= leo);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    for o in 0..leo {
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
    // Rebuilt indexes of inactive segments are trimmed and right.
    let batches = log_file_batches(&seg_path(&f.dir, 9, ".log"));
    let want: Vec<(u32, u32)> = batches[1..]
        .iter()
        .map(|(p, h)| ((h.last_offset() - 9) as u32, *p as u32))
        .collect();
    assert_eq!(offset_index_file(&seg_path(&f.dir, 9, ".index")), want);
    assert_eq!(append(&mut log, 3).first_offset, leo);
    assert!(log.recovery_point() <= leo);
    log.flush(leo + 3).unwrap();
    assert_eq!(log.recovery_point(), leo + 3);

    // With a recovery point only the segments from the one holding it are re-read.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 20, 0));
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(info.recovered_segments, 2);
    assert_eq!(info.truncated_bytes, 0);
    assert_values(&read_all(&log), 0, leo + 3, |_| 'v');
}

#[test]
fn torn_tail_is_truncated_to_the_last_whole_batch() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 2, 3, |o| TS + o);
    let cfg = log.config().clone();
    assert_eq!(log.log_end_offset(), 27);
    drop(log);
    // Cut the active segment in the middle of its last batch.
    let path = seg_path(&f.dir, 18, ".log");
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(3 * s - s / 2).unwrap();
    drop(file);

    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, s - s / 2);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(log.log_end_offset(), 24);
    assert_eq!(file_len(&path), 2 * s);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 2 * s]);
    assert_values(&read_all(&log), 0, 24, |_| 'v');
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, 3, |o| TS + o, Compression::None, 'w'),
        0,
        NOW,
        false,
        AppendOrigin::Client,
    )
    .unwrap();
    assert_values(&read_all(&log), 0, 27, |o| if o < 24 { 'v' } else { 'w' });

    // Cut inside the header of the only batch of a segment: the segment is left empty.
    let leo = log.log_end_offset();
    log.roll(NOW).unwrap();
    append(&mut log, 3);
    drop(log);
    let path = seg_path(&f.dir, leo, ".log");
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(30)
        .unwrap();
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 30);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(bases(&log), vec![0, 9, 18, leo]);
    assert_eq!(file_len(&path), 0);
}

#[test]
fn garbage_after_the_last_batch_is_cut() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 2, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    for garbage in [vec![0xABu8; 100], vec![0u8; 70], vec![0x7Fu8; 5]] {
        let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&garbage, 2 * s).unwrap();
        drop(file);
        assert_eq!(file_len(&path), 2 * s + garbage.len() as u64);
        let (log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
        assert_eq!(info.truncated_bytes, garbage.len() as u64);
        assert_eq!(log.log_end_offset(), 15);
        assert_eq!(file_len(&path), 2 * s);
        assert_values(&read_all(&log), 0, 15, |_| 'v');
    }
}

#[test]
fn flipped_byte_in_middle_batch_of_active_segment_cuts_it_and_everything_after() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 3, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    let batches = log_file_batches(&path);
    assert_eq!(batches.len(), 3);
    // A byte inside the records of the middle batch (offsets 12-14).
    let at = batches[1].0 + 61 + 5;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    drop(file);

    let (mut log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 2 * s);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(sizes(&log), vec![3 * s, s]);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    assert_eq!(append(&mut log, 3).first_offset, 12);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}

#[test]
fn corrupt_batch_in_an_older_segment_cuts_it_and_deletes_later_segments() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 3 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for k in 0..11 {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), k / 3, NOW, false, AppendOrigin::Client)
            .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    let batches = log_file_batches(&path);
    let at = batches[1].0 + 70;
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0xEE, 0xEE], at).unwrap();
    drop(file);

    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.deleted_segments, 2);
    assert_eq!(info.recovered_segments, 2);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(bases(&log), vec![0, 9]);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9]));
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    // Epochs of the lost batches are gone too.
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(0, 0), e(1, 9)]);
}

/// Close a `build_log(2, 2)` log, delete the given index files, reopen it (clean when
/// `clean`, else from recovery point 0) and check that every deleted file is rebuilt exactly
/// and that reads and timestamp lookups work.
fn check_deleted_indexes_rebuilt(files: &[(i64, &str)], clean: bool) {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let mut saved = Vec::new();
    for &(base, suffix) in files {
        let p = seg_path(&f.dir, base, suffix);
        let bytes = fs::read(&p).unwrap();
        fs::remove_file(&p).unwrap();
        saved.push((p, bytes));
    }

    let (log, info) = reopen(&f.dir, cfg, opts(clean, if clean { leo } else { 0 }, 0));
    if clean {
        assert!(info.rebuilt_indexes >= 1, "{info:?}");
        assert_eq!(info.recovered_segments, 0);
    }
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    for (p, bytes) in &saved {
        let now = fs::read(p).unwrap();
        // An active segment's index is preallocated: compare its entries only.
        assert_eq!(
            &now[..bytes.len().min(now.len())],
            &bytes[..bytes.len().min(now.len())],
            "{}",
            p.display()
        );
        if p.to_str().unwrap().contains("00000000000000000018.") {
            continue;
        }
        assert_eq!(&now, bytes, "{} was not rebuilt as it was", p.display());
    }
    assert_eq!(log.log_end_offset(), leo);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
    assert_values(&read_all(&log), 0, leo, |_| 'v');
}

#[test]
fn deleted_index_of_the_active_segment_is_rebuilt_on_clean_open() {
    check_deleted_indexes_rebuilt(&[(18, ".index")], true);
    check_deleted_indexes_rebuilt(&[(18, ".index"), (18, ".timeindex")], true);
}

#[test]
fn deleted_index_of_an_inactive_segment_is_rebuilt_on_clean_open() {
    check_deleted_indexes_rebuilt(&[(9, ".index")], true);
    check_deleted_indexes_rebuilt(&[(0, ".timeindex")], true);
}

#[test]
fn deleted_index_of_an_inactive_segment_is_rebuilt_on_unclean_open() {
    check_deleted_indexes_rebuilt(&[(9, ".index")], false);
}

#[test]
fn unclean_open_after_lowering_index_interval_bytes() {
    let f = fixture();
    let cfg = config_with(|c| {
        c.segment_bytes = 4 * batch_size(3);
        c.index_interval_bytes = 1 << 20; // no index entries at all
    });
    let mut log = open_new(&f.dir, cfg.clone());
    for _ in 0..10 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 12, 24]);
    assert_eq!(file_len(&seg_path(&f.dir, 0, ".index")), 0);
    drop(log); // crash
    let cfg = LogConfig {
        index_interval_bytes: 0,
        ..cfg
    };
    let (log, info) = Log::open(&f.dir, cfg, opts(false, 0, 0))
        .expect("open after a crash with a new index interval");
    assert_eq!(info.recovered_segments, 3);
    assert_eq!(offset_index_file(&seg_path(&f.dir, 0, ".index")).len(), 3);
    assert_values(&read_all(&log), 0, 30, |_| 'v');
}

#[test]
fn garbage_filled_index_is_rebuilt_on_clean_open() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let index = seg_path(&f.dir, 0, ".index");
    let timeindex = seg_path(&f.dir, 9, ".timeindex");
    let (index_bytes, timeindex_bytes) = (fs::read(&index).unwrap(), fs::read(&timeindex).unwrap());
    fs::write(&index, vec![0xFF; index_bytes.len()]).unwrap();
    fs::write(&timeindex, vec![0xFF; timeindex_bytes.len()]).unwrap();

    let (log, info) = reopen(&f.dir, cfg, opts(true, leo, 0));
    assert!(info.rebuilt_indexes >= 2, "{info:?}");
    assert_eq!(info.recovered_segments, 0);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(fs::read(&index).unwrap(), index_bytes);
    assert_eq!(fs::read(&timeindex).unwrap(), timeindex_bytes);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
}

#[test]
fn reopen_with_a_checkpointed_log_start_offset() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, 21, 11));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (11, 21));
    assert_out_of_range(log.read(10, u64::MAX, None, false), 10, 11, 21);
    drop(log);
    // A log start past the log end empties the log and starts it there.
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, 21, 50));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(bases(&log), vec![50]);
    drop(log);
    // A fresh directory starts at its checkpointed log start.
    let g = fixture();
    let (mut log, _) = reopen(&g.dir, cfg, opts(true, 0, 300));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (300, 300));
    assert_eq!(segment_files(&g.dir), expected_files(&[300]));
    assert_eq!(append(&mut log, 2).first_offset, 300);
}

#[test]
fn open_removes_leftover_files() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 1, 1, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    for name in [
        "00000000000000000050.index",     // no .log
        "00000000000000000050.timeindex", // no .log
        "00000000000000000000.log.deleted",
        "00000000000000000009.index.tmp",
        "leader-epoch-checkpoint.tmp",
    ] {
        fs::write(f.dir.join(name), b"junk").unwrap();
    }
    fs::write(f.dir.join("notes.txt"), b"keep me").unwrap();
    let (log, info) = reopen(&f.dir, cfg, opts(true, 12, 0));
    assert_eq!(info, RecoveryInfo::default());
    assert_eq!(bases(&log), vec![0, 9]);
    let mut names: Vec<String> = fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want = expected_files(&[0, 9]);
    want.push(CHECKPOINT.to_string());
    want.push("notes.txt".to_string());
    // The producer state's snapshots: at the roll to segment 9 and at the close.
    want.push("00000000000000000009.snapshot".to_string());
    want.push("00000000000000000012.snapshot".to_string());
    want.sort();
    assert_eq!(names, want);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
}

#[test]
fn recovery_cuts_a_batch_whose_offsets_go_backwards() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 2, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    // Copy the active segment's first batch (offsets 9-11, valid CRC) to its end.
    let path = seg_path(&f.dir, 9, ".log");
    let bytes = fs::read(&path).unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&bytes[..s as usize], 2 * s).unwrap();
    drop(file);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, s);
    assert_eq!(log.log_end_offset(), 15);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}
