//! `points.jsonl`: every finished point, one JSON line each, appended as soon as the point
//! is done, so an interrupted run (Ctrl-C, a killed job) loses at most the points in
//! flight, and a rerun skips every point already there. Lines are keyed by the point's
//! hash (`grid::point_key`); a line cut short by the interruption is ignored.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::row::Row;

/// The file name in the output folder.
pub const FILE: &str = "points.jsonl";

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    key: String,
    experiment: String,
    series: String,
    x: f64,
    metrics: std::collections::BTreeMap<String, f64>,
}

/// The results file of one output folder, open for appending.
#[derive(Debug)]
pub struct Store {
    file: Mutex<File>,
}

impl Store {
    /// Opens (creating) `dir/points.jsonl` and reads the points already in it (none when
    /// `fresh`, which empties the file).
    pub fn open(dir: &Path, fresh: bool) -> anyhow::Result<(Store, HashMap<String, Row>)> {
        let path = dir.join(FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut done = HashMap::new();
        if fresh {
            file.set_len(0)
                .with_context(|| format!("emptying {}", path.display()))?;
        } else {
            let mut text = String::new();
            file.read_to_string(&mut text)
                .with_context(|| format!("reading {}", path.display()))?;
            done = parse(&text);
            // After a cut line, start the next one on a line of its own.
            if !text.is_empty() && !text.ends_with('\n') {
                file.seek(SeekFrom::End(0))?;
                file.write_all(b"\n")?;
            }
        }
        Ok((
            Store {
                file: Mutex::new(file),
            },
            done,
        ))
    }

    /// The points in `dir/points.jsonl` (none when there is no such file), without opening
    /// it for writing (the shards of a merge).
    pub fn read(dir: &Path) -> anyhow::Result<HashMap<String, Row>> {
        let path = dir.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(parse(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Appends one finished point (one write of one whole line).
    pub fn append(&self, key: &str, row: &Row) -> anyhow::Result<()> {
        let mut s = serde_json::to_string(&Line {
            key: key.to_owned(),
            experiment: row.experiment.clone(),
            series: row.series.clone(),
            x: row.x,
            metrics: row.metrics.clone(),
        })?;
        s.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(s.as_bytes())?;
        f.flush()?;
        Ok(())
    }
}

/// The points of a `points.jsonl` text by key.
fn parse(text: &str) -> HashMap<String, Row> {
    let mut done = HashMap::new();
    for line in text.lines() {
        // A line cut short by an interruption does not parse: that point reruns.
        if let Ok(l) = serde_json::from_str::<Line>(line) {
            done.insert(
                l.key,
                Row {
                    experiment: l.experiment,
                    series: l.series,
                    source: super::row::SIM_SOURCE.into(),
                    x: l.x,
                    metrics: l.metrics,
                },
            );
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_exactly_and_cut_lines_are_skipped() {
        let dir = std::env::temp_dir().join(format!("aerotp-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join(FILE));
        let row = |x: f64| Row {
            experiment: "e".into(),
            series: "s, with \"quotes\"".into(),
            source: super::super::row::SIM_SOURCE.into(),
            x,
            metrics: [
                ("goodput_bps".to_string(), 4_529_123.456_789_012),
                ("mean_delay_s".to_string(), 0.1 + 0.2),
                ("tiny".to_string(), 1.234_567_890_123_456e-300),
            ]
            .into(),
        };
        {
            let (st, done) = Store::open(&dir, false).unwrap();
            assert!(done.is_empty());
            st.append("k1", &row(1e-5)).unwrap();
            st.append("k2", &row(0.3)).unwrap();
        }
        // An interruption in the middle of a line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(FILE))
            .unwrap();
        f.write_all(b"{\"key\":\"k3\",\"exper").unwrap();
        drop(f);
        let (st, done) = Store::open(&dir, false).unwrap();
        assert_eq!(done.len(), 2);
        assert_eq!(done["k1"], row(1e-5));
        assert_eq!(done["k2"], row(0.3));
        st.append("k3", &row(2.0)).unwrap();
        let (_, done) = Store::open(&dir, false).unwrap();
        assert_eq!(done.len(), 3);
        assert_eq!(done["k3"], row(2.0));
        let (_, done) = Store::open(&dir, true).unwrap();
        assert!(done.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
