//! Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`):
//!
//! ```text
//! 0                    version
//! 2                    number of entries
//! my-topic 0 1042      topic partition offset
//! my-topic 1 77
//! ```
//!
//! Written atomically: a `.tmp` sibling is written and fsynced, renamed over the file, and
//! the directory fsynced, so a crash leaves either the old file or the new one.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, IoContext, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

const VERSION: i32 = 0;

pub fn write_offset_checkpoint(path: &Path, entries: &[CheckpointEntry]) -> Result<()> {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for e in entries {
        if e.topic.is_empty() || e.topic.contains(char::is_whitespace) {
            return Err(Error::InvalidRequest(format!(
                "topic name {:?} cannot be checkpointed",
                e.topic
            )));
        }
        text.push_str(&format!("{} {} {}\n", e.topic, e.partition, e.offset));
    }
    atomic_write(path, text.as_bytes())
}

pub fn read_offset_checkpoint(path: &Path) -> Result<Vec<CheckpointEntry>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::storage(format!("reading {}", path.display()), e)),
    };
    let malformed = |why: &str| {
        Error::storage(
            format!("reading {}", path.display()),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("malformed checkpoint file: {why}"),
            ),
        )
    };
    let mut lines = text.lines();
    let version: i32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| malformed("no version"))?;
    if version != VERSION {
        return Err(malformed(&format!("unknown version {version}")));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| malformed("no entry count"))?;
    let mut out = Vec::with_capacity(count.min(1 << 16));
    for line in lines.by_ref().take(count) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [topic, partition, offset] = parts[..] else {
            return Err(malformed(&format!("bad line {line:?}")));
        };
        let partition = partition
            .parse()
            .map_err(|_| malformed(&format!("bad partition in {line:?}")))?;
        let offset = offset
            .parse()
            .map_err(|_| malformed(&format!("bad offset in {line:?}")))?;
        out.push(CheckpointEntry {
            topic: topic.to_string(),
            partition,
            offset,
        });
    }
    if out.len() != count || lines.any(|l| !l.trim().is_empty()) {
        return Err(malformed(&format!("expected {count} entries")));
    }
    Ok(out)
}

/// Replace `path` with `data` so that a crash leaves the old or the new content, whole.
pub fn atomic_write(path: &Path, data: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    {
        let mut f = File::create(tmp).ctx("creating", tmp)?;
        f.write_all(data).ctx("writing", tmp)?;
        f.sync_all().ctx("fsyncing", tmp)?;
    }
    fs::rename(tmp, path).ctx("renaming over", path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsyncing directory", dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_reject_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recovery-point-offset-checkpoint");
        assert!(read_offset_checkpoint(&p).unwrap().is_empty());
        let entries = vec![
            CheckpointEntry {
                topic: "a".into(),
                partition: 0,
                offset: 5,
            },
            CheckpointEntry {
                topic: "b.c_d-e".into(),
                partition: 12,
                offset: 1 << 40,
            },
        ];
        write_offset_checkpoint(&p, &entries).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "0\n2\na 0 5\nb.c_d-e 12 1099511627776\n"
        );
        assert_eq!(read_offset_checkpoint(&p).unwrap(), entries);
        fs::write(&p, "0\n3\na 0 5\n").unwrap();
        assert!(read_offset_checkpoint(&p).is_err());
        fs::write(&p, "1\n0\n").unwrap();
        assert!(read_offset_checkpoint(&p).is_err());
    }
}
