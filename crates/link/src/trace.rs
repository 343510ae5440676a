//! Time-varying links: rate, delay, BER and loss replayed from a CSV trace (a recorded
//! flight profile, a link budget over range).
//!
//! File format (see `docs/link-model.md` and `docs/traces.md`): a header line naming the
//! columns, then one row per change. `time_s` is required; any of `rate_bps`, `delay_ms`,
//! `ber`, `loss` may follow, in any order. A row applies from its time until the next row's
//! (a step function); an empty cell keeps the link's configured value for that quantity.
//! Lines starting with `#` and blank lines are ignored. Times must increase strictly; the
//! first row may start after 0 (before it, the configured values apply).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LinkError;

/// One row of a trace: the values in force from `at` on (`None` = the configured value).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TraceRow {
    /// When this row starts, relative to the link's epoch.
    pub at: Duration,
    /// Link rate in bit/s (> 0).
    pub rate_bps: Option<u64>,
    /// One-way propagation delay.
    pub delay: Option<Duration>,
    /// Bit-error rate, in [0, 1).
    pub ber: Option<f64>,
    /// Random packet loss probability, in [0, 1].
    pub loss: Option<f64>,
}

/// A trace as it appears in a config: the file it came from, whether it repeats, and its rows.
///
/// In TOML/JSON a trace is either a file name (`trace = "flight.csv"`) or a table
/// (`trace = { file = "flight.csv", repeat = true }`). Deserialising records the file name
/// only; [`Trace::load`] (called by the scenario loader, relative to the scenario file, and by
/// the drivers' `--trace` flag) reads the rows. A link refuses a trace without rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Where the rows came from (for messages and for serialising back).
    pub file: Option<PathBuf>,
    /// After one cycle ([`Trace::period`]), start again from the first row.
    pub repeat: bool,
    /// The rows, in increasing time.
    pub rows: Vec<TraceRow>,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum TraceForm {
    File(PathBuf),
    Table {
        file: PathBuf,
        #[serde(default)]
        repeat: bool,
    },
}

impl Serialize for Trace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let file = self.file.clone().unwrap_or_default();
        if self.repeat {
            TraceForm::Table { file, repeat: true }.serialize(s)
        } else {
            TraceForm::File(file).serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Trace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Trace, D::Error> {
        let (file, repeat) = match TraceForm::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a trace is a CSV file name, \"flight.csv\", or a table { file = \"flight.csv\", repeat = true }",
            )
        })? {
            TraceForm::File(f) => (f, false),
            TraceForm::Table { file, repeat } => (file, repeat),
        };
        Ok(Trace {
            file: Some(file),
            repeat,
            rows: Vec::new(),
        })
    }
}

fn bad(file: &str, line: usize, problem: impl Into<String>) -> LinkError {
    LinkError::Parse {
        what: "trace",
        input: format!("{file}:{line}"),
        problem: problem.into(),
    }
}

impl Trace {
    /// Parses CSV text; `origin` names the file in errors.
    pub fn from_csv_str(text: &str, origin: &str) -> Result<Trace, LinkError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let (hline, header) = lines.next().ok_or_else(|| {
            bad(
                origin,
                1,
                "is empty; it needs a header line such as time_s,rate_bps,delay_ms,ber,loss",
            )
        })?;
        let cols = columns(origin, hline, header)?;
        let mut rows: Vec<TraceRow> = Vec::new();
        for (n, line) in lines {
            let row = parse_row(origin, n, &cols, line)?;
            if let Some(prev) = rows.last() {
                if row.at <= prev.at {
                    return Err(bad(
                        origin,
                        n,
                        format!(
                            "time_s {} is not after the previous row's {}",
                            row.at.as_secs_f64(),
                            prev.at.as_secs_f64()
                        ),
                    ));
                }
            }
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(bad(origin, hline, "has a header but no rows"));
        }
        Ok(Trace {
            file: None,
            repeat: false,
            rows,
        })
    }

    /// Reads the rows of `self.file`, resolved against `base_dir` when relative.
    pub fn load(&mut self, base_dir: &Path) -> Result<(), LinkError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let path = if file.is_absolute() {
            file.clone()
        } else {
            base_dir.join(file)
        };
        let text = std::fs::read_to_string(&path).map_err(|e| LinkError::Parse {
            what: "trace",
            input: path.display().to_string(),
            problem: format!("cannot be read: {e}"),
        })?;
        let parsed = Trace::from_csv_str(&text, &path.display().to_string())?;
        self.rows = parsed.rows;
        Ok(())
    }

    /// Reads a trace file (for a `--trace FILE` flag).
    pub fn from_file(path: &Path, repeat: bool) -> Result<Trace, LinkError> {
        let mut t = Trace {
            file: Some(path.to_path_buf()),
            repeat,
            rows: Vec::new(),
        };
        t.load(Path::new("."))?;
        Ok(t)
    }

    /// Length of one cycle of a repeating trace: the last row's time plus the gap between
    /// the first two rows (or 1 s when there is one row), so the last row lasts as long as
    /// the first did.
    pub fn period(&self) -> Duration {
        let last = self.rows.last().map_or(Duration::ZERO, |r| r.at);
        let step = match self.rows.as_slice() {
            [a, b, ..] => b.at - a.at,
            _ => Duration::from_secs(1),
        };
        last + step
    }

    /// The row in force at `now` (`None` before the first row).
    pub fn row_at(&self, now: Duration) -> Option<&TraceRow> {
        let t = if self.repeat {
            let p = self.period().as_nanos().max(1);
            Duration::from_nanos((now.as_nanos() % p) as u64)
        } else {
            now
        };
        let i = self.rows.partition_point(|r| r.at <= t);
        if i == 0 {
            // Before the first row. A repeating trace wraps to the last row of the previous
            // cycle once the first cycle has run.
            if self.repeat && now >= self.period() {
                return self.rows.last();
            }
            return None;
        }
        self.rows.get(i - 1)
    }

    /// The first time after `now` at which the row in force may change (`None`: it holds
    /// forever). Always later than `now`.
    fn next_change(&self, now: Duration) -> Option<Duration> {
        if !self.repeat {
            let i = self.rows.partition_point(|r| r.at <= now);
            return self.rows.get(i).map(|r| r.at);
        }
        let p = self.period().as_nanos().max(1);
        let into = now.as_nanos() % p;
        let cycle = now.as_nanos() - into;
        let i = self.rows.partition_point(|r| r.at.as_nanos() <= into);
        let next = cycle + self.rows.get(i).map_or(p, |r| r.at.as_nanos());
        Some(Duration::from_nanos(
            u64::try_from(next).unwrap_or(u64::MAX),
        ))
    }

    /// The intervals `[start, end)` that cover `[from, to)`, each with the row in force
    /// throughout (`None`: before the first row, the configured values). For time averages
    /// over a trace (the simulator's ceiling); nothing is collected, one interval per row
    /// change.
    pub fn spans(
        &self,
        from: Duration,
        to: Duration,
    ) -> impl Iterator<Item = (Duration, Duration, Option<&TraceRow>)> + '_ {
        let mut at = from;
        std::iter::from_fn(move || {
            if at >= to {
                return None;
            }
            let start = at;
            // A change past u64 nanoseconds (584 years) saturates: take the rest at once
            // rather than never move.
            let end = match self.next_change(start) {
                Some(n) if n > start => n.min(to),
                _ => to,
            };
            at = end;
            Some((start, end, self.row_at(start)))
        })
    }

    /// The lowest rate any row gives (`None` if no row gives one).
    pub fn min_rate_bps(&self) -> Option<u64> {
        self.rows.iter().filter_map(|r| r.rate_bps).min()
    }

    /// Checks that rows were loaded and are in increasing time.
    pub fn validate(&self) -> Result<(), LinkError> {
        if self.rows.is_empty() {
            return Err(LinkError::InvalidConfig {
                field: "trace",
                problem: format!(
                    "{} has no rows loaded; load it with Trace::load or give a CSV with rows",
                    self.file
                        .as_ref()
                        .map_or_else(|| "the trace".to_string(), |f| f.display().to_string())
                ),
            });
        }
        if self.rows.windows(2).any(|w| w[1].at <= w[0].at) {
            return Err(LinkError::InvalidConfig {
                field: "trace",
                problem: "rows must be in strictly increasing time".into(),
            });
        }
        Ok(())
    }
}

/// The columns a trace's header line (`hline`) names: known ones, each once, `time_s` among
/// them.
fn columns<'a>(origin: &str, hline: usize, header: &'a str) -> Result<Vec<&'a str>, LinkError> {
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    const KNOWN: [&str; 5] = ["time_s", "rate_bps", "delay_ms", "ber", "loss"];
    for (i, c) in cols.iter().enumerate() {
        if !KNOWN.contains(c) {
            return Err(bad(
                origin,
                hline,
                format!("unknown column {c:?}; the columns are time_s (required), rate_bps, delay_ms, ber, loss"),
            ));
        }
        if cols[..i].contains(c) {
            return Err(bad(origin, hline, format!("column {c:?} appears twice")));
        }
    }
    if !cols.contains(&"time_s") {
        return Err(bad(
            origin,
            hline,
            "has no time_s column (seconds since the link's epoch)",
        ));
    }
    Ok(cols)
}

/// One row of a trace (line `n`): a cell per column, empty cells keeping the configured value
/// (all but `time_s`).
fn parse_row(origin: &str, n: usize, cols: &[&str], line: &str) -> Result<TraceRow, LinkError> {
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    if cells.len() != cols.len() {
        return Err(bad(
            origin,
            n,
            format!(
                "has {} cells; the header has {} columns",
                cells.len(),
                cols.len()
            ),
        ));
    }
    let mut row = TraceRow::default();
    for (c, v) in cols.iter().zip(&cells) {
        if v.is_empty() {
            if *c == "time_s" {
                return Err(bad(origin, n, "time_s is empty; every row needs a time"));
            }
            continue;
        }
        let x: f64 = v
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| bad(origin, n, format!("{c} {v:?} is not a number")))?;
        set_cell(&mut row, origin, n, c, v, x)?;
    }
    Ok(row)
}

/// Column `c` of `row` from its cell `v` (the number `x`), within the column's range.
fn set_cell(
    row: &mut TraceRow,
    origin: &str,
    n: usize,
    c: &str,
    v: &str,
    x: f64,
) -> Result<(), LinkError> {
    match c {
        "time_s" | "delay_ms" => {
            if !(0.0..=1e9).contains(&x) {
                return Err(bad(origin, n, format!("{c} {v} must be between 0 and 1e9")));
            }
            let d = if c == "time_s" {
                Duration::from_secs_f64(x)
            } else {
                Duration::from_secs_f64(x / 1e3)
            };
            if c == "time_s" {
                row.at = d;
            } else {
                row.delay = Some(d);
            }
        }
        "rate_bps" => {
            if !(1.0..=1e12).contains(&x) || x.fract() != 0.0 {
                return Err(bad(
                    origin,
                    n,
                    format!("rate_bps {v} must be a whole number of bit/s in [1, 1e12]"),
                ));
            }
            row.rate_bps = Some(x as u64);
        }
        "ber" => {
            if !(0.0..1.0).contains(&x) {
                return Err(bad(origin, n, format!("ber {v} must be in [0, 1)")));
            }
            row.ber = Some(x);
        }
        _ => {
            if !(0.0..=1.0).contains(&x) {
                return Err(bad(origin, n, format!("loss {v} must be in [0, 1]")));
            }
            row.loss = Some(x);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_columns_in_any_order_with_gaps() {
        let t = Trace::from_csv_str(
            "# a flight\ntime_s,ber,rate_bps,delay_ms\n0,1e-6,5000000,10\n30,,2000000,\n60.5,1e-4,,250\n",
            "f.csv",
        )
        .unwrap();
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[1].rate_bps, Some(2_000_000));
        assert_eq!(t.rows[1].ber, None);
        assert_eq!(t.rows[2].delay, Some(Duration::from_millis(250)));
        assert_eq!(
            t.row_at(Duration::from_secs(45)).unwrap().at,
            Duration::from_secs(30)
        );
        assert!(t.row_at(Duration::from_secs(1000)).unwrap().ber == Some(1e-4));
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        for (text, needle) in [
            ("", "empty"),
            ("time_s,speed\n0,1\n", "unknown column \"speed\""),
            ("rate_bps\n5\n", "no time_s"),
            ("time_s,ber\n0,2\n", "ber 2 must be in [0, 1)"),
            ("time_s,loss\n0,-1\n", "loss -1"),
            ("time_s,rate_bps\n0,0\n", "rate_bps 0"),
            ("time_s,ber\n1,0\n1,0\n", "not after"),
            ("time_s,ber\n0\n", "1 cells"),
            ("time_s,ber\n0,x\n", "not a number"),
            ("time_s,ber\n", "no rows"),
            ("time_s,time_s\n0,0\n", "twice"),
        ] {
            let e = Trace::from_csv_str(text, "f.csv").unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("f.csv"), "{text:?}: {e}");
        }
    }

    #[test]
    fn repeating_trace_wraps() {
        let mut t = Trace::from_csv_str("time_s,loss\n0,0\n10,0.5\n", "f").unwrap();
        t.repeat = true;
        assert_eq!(t.period(), Duration::from_secs(20));
        assert_eq!(t.row_at(Duration::from_secs(25)).unwrap().loss, Some(0.0));
        assert_eq!(t.row_at(Duration::from_secs(35)).unwrap().loss, Some(0.5));
    }
}
