//! `Log` integration tests: a crash at every point of the cleaner's swap leaves a log that
//! opens to either the segments before the cleaning or those after it, never a mix, never a
//! lost or duplicated offset (Kafka's `.cleaned` / `.swap` protocol; see `log/swap.rs`).
//!
//! Each crash state is built from the files of one log before and after a cleaning that
//! rewrote all its inactive segments into one, as the cleaner's steps leave them.

mod common;
mod log_cleaner_common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{fixture, open_new, opts, reopen, NOW, TS};
use log_cleaner_common::{append_keyed, cleaner, compacted_config, read_records, Kv};
use rillet_core::log::{LogConfig, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX};
use rillet_core::record::Compression;

type Files = BTreeMap<String, Vec<u8>>;

fn files_of(dir: &Path) -> Files {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn write_files(dir: &Path, files: &Files) {
    fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

fn name(base: i64, suffix: &str) -> String {
    format!("{base:020}{suffix}")
}

struct Scenario {
    config: LogConfig,
    before: Files,
    after: Files,
    before_records: Vec<Kv>,
    after_records: Vec<Kv>,
    /// Base offsets of the inactive segments the cleaning replaced.
    old_bases: Vec<i64>,
    log_end: i64,
}

/// A compacted log of several segments, closed cleanly, then cleaned into one segment.
fn scenario(c: Compression) -> Scenario {
    let f = fixture();
    let config = compacted_config(|cfg| cfg.segment_bytes = 600);
    let mut log = open_new(&f.dir, config.clone());
    for r in 0..16i64 {
        let recs: Vec<(String, Option<String>)> = (0..6)
            .map(|i| (format!("k{}", (r + i) % 5), Some(format!("v{r}.{i}"))))
            .collect();
        append_keyed(&mut log, &recs, TS + r, c);
    }
    log.roll(NOW).unwrap();
    let old_bases: Vec<i64> = log
        .segments()
        .map(|s| s.base_offset())
        .filter(|&b| b != log.active_segment_base_offset())
        .collect();
    assert!(old_bases.len() >= 3, "{old_bases:?}");
    let log_end = log.log_end_offset();
    let before_records = read_records(&log);
    log.close().unwrap();
    let before = files_of(&f.dir);
    // Room for every old segment in one group.
    log.update_config(LogConfig {
        segment_bytes: 1 << 20,
        ..config.clone()
    })
    .unwrap();
    log.clean(&cleaner(), None, None, NOW).unwrap();
    assert_eq!(log.segment_count(), 2);
    let after_records = read_records(&log);
    assert!(after_records.len() < before_records.len());
    log.close().unwrap();
    let after = files_of(&f.dir);
    Scenario {
        config,
        before,
        after,
        before_records,
        after_records,
        old_bases,
        log_end,
    }
}

/// The new segment's three files under `suffix` + `extra` names, from the cleaned log.
fn new_segment(s: &Scenario, log_extra: &str, index_extra: &str) -> Files {
    let mut out = Files::new();
    for (suffix, extra) in [
        (".log", log_extra),
        (".index", index_extra),
        (".timeindex", index_extra),
    ] {
        out.insert(
            format!("{}{extra}", name(0, suffix)),
            s.after[&name(0, suffix)].clone(),
        );
    }
    out
}

/// The files of the old segments, except those based in `deleted`.
fn old_segments_without(s: &Scenario, deleted: &[i64]) -> Files {
    s.before
        .iter()
        .filter(|(n, _)| !deleted.iter().any(|b| n.starts_with(&format!("{b:020}."))))
        .map(|(n, b)| (n.clone(), b.clone()))
        .collect()
}

/// Open the crash state in a fresh directory, both after a clean and an unclean shutdown,
/// and check it reads as `want`, with no temporary file left behind.
fn check(s: &Scenario, state: &Files, want: &[Kv], what: &str) {
    for clean in [true, false] {
        let f = fixture();
        write_files(&f.dir, state);
        let (log, _) = reopen(&f.dir, s.config.clone(), opts(clean, 0, 0));
        assert_eq!(read_records(&log), want, "{what} (clean shutdown: {clean})");
        assert_eq!(log.log_end_offset(), s.log_end, "{what}");
        let offsets: Vec<i64> = read_records(&log).iter().map(|r| r.offset).collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "{what}: {offsets:?}"
        );
        let leftovers: Vec<String> = files_of(&f.dir)
            .into_keys()
            .filter(|n| n.ends_with(CLEANED_FILE_SUFFIX) || n.ends_with(SWAP_FILE_SUFFIX))
            .collect();
        assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
        for seg in log.segments() {
            for p in [seg.offset_index().path(), seg.time_index().path()] {
                assert!(p.exists(), "{what}: {} missing", p.display());
            }
        }
        drop(log);
    }
}

#[test]
fn a_crash_at_any_step_of_a_swap_opens_to_before_or_after() {
    for c in [Compression::None, Compression::Zstd, Compression::Gzip] {
        let s = scenario(c);
        let (cleaned, swap) = (CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX);

        // 1. Killed while writing the .cleaned files (whole or torn): the old segments stand.
        let mut state = s.before.clone();
        state.extend(new_segment(&s, cleaned, cleaned));
        check(&s, &state, &s.before_records, "whole .cleaned files");
        let mut torn = s.before.clone();
        let mut part = new_segment(&s, cleaned, cleaned);
        let log = part
            .get_mut(&format!("{}{cleaned}", name(0, ".log")))
            .unwrap();
        log.truncate(log.len() / 2);
        torn.extend(part);
        check(&s, &torn, &s.before_records, "torn .cleaned log");

        // 2. Killed between renaming the indexes and the log to .swap: not committed yet.
        let mut state = s.before.clone();
        state.extend(new_segment(&s, cleaned, swap));
        check(
            &s,
            &state,
            &s.before_records,
            "index swaps, log still .cleaned",
        );

        // 3. The .log.swap exists: the swap is committed, whatever else remains.
        let mut state = s.before.clone();
        state.extend(new_segment(&s, swap, swap));
        check(
            &s,
            &state,
            &s.after_records,
            "swap files, old segments intact",
        );
        for k in 1..=s.old_bases.len() {
            let mut state = old_segments_without(&s, &s.old_bases[..k]);
            state.extend(new_segment(&s, swap, swap));
            check(
                &s,
                &state,
                &s.after_records,
                &format!("{k} old segments deleted"),
            );
        }

        // 4. Killed while renaming to the final names: indexes renamed, or the log too.
        let mut state = old_segments_without(&s, &s.old_bases);
        state.extend(new_segment(&s, swap, ""));
        check(
            &s,
            &state,
            &s.after_records,
            "indexes renamed, log still .swap",
        );
        let mut state = old_segments_without(&s, &s.old_bases);
        state.extend(new_segment(&s, "", swap));
        check(
            &s,
            &state,
            &s.after_records,
            "log renamed, index swaps left",
        );

        // 5. Done.
        check(&s, &s.after, &s.after_records, "completed swap");
    }
}

#[test]
fn a_swap_replaces_only_the_segments_in_its_offset_range() {
    let s = scenario(Compression::Lz4);
    // The swap file's offsets end where the group ended: the active segment after it, and
    // anything based there or later, is not touched.
    let mut state = s.before.clone();
    state.extend(new_segment(&s, SWAP_FILE_SUFFIX, SWAP_FILE_SUFFIX));
    let f = fixture();
    write_files(&f.dir, &state);
    let (log, _) = reopen(&f.dir, s.config.clone(), opts(true, 0, 0));
    let bases: Vec<i64> = log.segments().map(|seg| seg.base_offset()).collect();
    assert_eq!(bases, vec![0, s.log_end]);
    let files: Vec<String> = files_of(&f.dir).into_keys().collect();
    assert!(files.contains(&name(s.log_end, ".log")));
    for b in &s.old_bases[1..] {
        assert!(!files.contains(&name(*b, ".log")), "{b} was not replaced");
    }
}
