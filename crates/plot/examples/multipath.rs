//! Draws the engine-multipath figures of docs/results/multipath.md from the CSV files
//! `bench/multipath_figures.py --plots DIR` writes:
//!
//! ```sh
//! python3 bench/multipath_figures.py --plots docs/results/multipath
//! cargo run --release -p aerotp-plot --example multipath -- docs/results/multipath
//! ```
//!
//! `offered.png`: delivered against offered rate for one, two and three channels (seed 003's
//! Figs. 3–5); `blackouts.png`: delivery over time through 10-, 20- and 30-minute blackouts;
//! `failover.png`: delivery over time as one of three paths dies, the engine's striping
//! against striping below it. With `lab-timelines.csv` there (`bench/seed003_lab_figures.py
//! --csv DIR`), also `lab-sessions.png` and `lab-blackouts.png`: seed 003 in the lab; with
//! `lab-offered-47min.csv` there, `lab-offered-47min.png` (delivered against offered rate in
//! the lab's 47-minute sessions, one, two and three channels, each seed) and
//! `lab-offered-delay-47min.png` (mean delay against offered rate).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Named lines of (x, y) points.
type Lines = Vec<(String, Vec<(f64, f64)>)>;

/// Rows of a CSV file with a header, as numbers.
fn rows(path: &Path) -> Result<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let cells: Result<Vec<f64>, _> = line.split(',').map(str::parse::<f64>).collect();
        out.push(cells.with_context(|| format!("{} line {}", path.display(), i + 1))?);
    }
    Ok(out)
}

/// A delivery timeline (`time_s,delivered_bytes`) as (minutes or seconds, MB).
fn timeline(path: &Path, per: f64) -> Result<Vec<(f64, f64)>> {
    Ok(rows(path)?
        .into_iter()
        .map(|r| (r[0] / per, r[1] / 1e6))
        .collect())
}

fn main() -> Result<()> {
    let dir: PathBuf = match std::env::args().nth(1) {
        Some(d) => d.into(),
        None => bail!("usage: multipath DIR (the --plots DIR of bench/multipath_figures.py)"),
    };
    let offered = rows(&dir.join("offered.csv"))?;
    let mut series = Vec::new();
    for n in 1..=3 {
        let points: Vec<(f64, f64)> = offered
            .iter()
            .filter(|r| r[1] as usize == n)
            .map(|r| (r[0], r[2]))
            .collect();
        series.push(aerotp_plot::Series {
            name: format!("{n} channel{}", if n > 1 { "s" } else { "" }),
            points,
            peer: false,
        });
    }
    let diagonal: Vec<(f64, f64)> = offered.iter().map(|r| (r[0], r[0])).collect();
    series.push(aerotp_plot::Series {
        name: "offered".into(),
        points: diagonal,
        peer: true,
    });
    aerotp_plot::draw(
        &dir.join("offered.png"),
        &aerotp_plot::Chart {
            title: "Seed 003: AeroTP over 2.4 kb/s Iridium channels, 47 min (cf. Figs. 3-5)",
            x_label: "offered rate, b/s",
            y_label: "delivered, b/s",
            series,
            y_from_zero: true,
            x_sci: false,
            legend_low: false,
        },
    )?;
    let blackouts: Result<Lines> = [10, 20, 30]
        .iter()
        .map(|m| {
            Ok((
                format!("{m}-minute blackout from 5 min"),
                timeline(&dir.join(format!("blackout-{m}.csv")), 60.0)?,
            ))
        })
        .collect();
    aerotp_plot::xy(
        &dir.join("blackouts.png"),
        "Seed 003 with total blackouts: 600 kB, reliable (run 0)",
        "time, min",
        "delivered, MB",
        &blackouts?,
        &[5.0],
    )?;
    let failover = vec![
        (
            "engine multipath".to_owned(),
            timeline(&dir.join("failover-engine.csv"), 1.0)?,
        ),
        (
            "striping below the engine".to_owned(),
            timeline(&dir.join("failover-below.csv"), 1.0)?,
        ),
    ];
    aerotp_plot::xy(
        &dir.join("failover.png"),
        "Three 1 Mb/s paths, one dies at 5 s: 4 MB, reliable (run 0)",
        "time, s",
        "delivered, MB",
        &failover,
        &[5.0],
    )?;
    println!(
        "wrote offered.png, blackouts.png, failover.png in {}",
        dir.display()
    );
    lab(&dir)
}

/// The lab's seed 003 timelines (`lab-timelines.csv` of `bench/seed003_lab_figures.py
/// --csv DIR`: `time_s` then one column per run), if there: `lab-sessions.png` (the
/// 47-minute sessions) and `lab-blackouts.png`.
fn lab(dir: &Path) -> Result<()> {
    let path = dir.join("lab-timelines.csv");
    if !path.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let names: Vec<String> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect();
    let data = rows(&path)?;
    let column =
        |i: usize| -> Vec<(f64, f64)> { data.iter().map(|r| (r[0] / 60.0, r[i] / 1e6)).collect() };
    let pick = |blackout: bool| -> Lines {
        (1..names.len())
            .filter(|&i| names[i].starts_with("blackout") == blackout)
            .map(|i| (names[i].clone(), column(i)))
            .collect()
    };
    aerotp_plot::xy(
        &dir.join("lab-sessions.png"),
        "Seed 003 in the lab: three 2.4 kb/s channels with call drops, bulk",
        "time, min",
        "delivered, MB",
        &pick(false),
        &[47.0],
    )?;
    aerotp_plot::xy(
        &dir.join("lab-blackouts.png"),
        "Seed 003 in the lab, total blackouts from 5 min: 600 kB, reliable",
        "time, min",
        "delivered, MB",
        &pick(true),
        &[5.0, 15.0, 25.0, 35.0],
    )?;
    println!(
        "wrote lab-sessions.png, lab-blackouts.png in {}",
        dir.display()
    );
    lab_offered(dir)
}

/// The columns `names` of a CSV file with a header, as numbers (other columns may be text).
fn columns(path: &Path, names: &[&str]) -> Result<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let idx: Vec<usize> = names
        .iter()
        .map(|n| {
            head.iter()
                .position(|h| h.trim() == *n)
                .with_context(|| format!("{}: no column {n}", path.display()))
        })
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        let row: Result<Vec<f64>, _> = idx
            .iter()
            .map(|&j| cells.get(j).unwrap_or(&"").trim().parse::<f64>())
            .collect();
        out.push(row.with_context(|| format!("{} line {}", path.display(), i + 2))?);
    }
    Ok(out)
}

/// The lab's 47-minute offered-rate sweep (`lab-offered-47min.csv` of
/// `bench/seed003_lab_figures.py --csv DIR`), if there: delivered and mean delay against
/// offered rate, one line per channel count and seed.
fn lab_offered(dir: &Path) -> Result<()> {
    let path = dir.join("lab-offered-47min.csv");
    if !path.exists() {
        return Ok(());
    }
    let data = columns(
        &path,
        &[
            "channels",
            "seed",
            "offered_bps",
            "delivered_bps",
            "mean_delay_s",
        ],
    )?;
    let mut seeds: Vec<i64> = data.iter().map(|r| r[1] as i64).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let lines = |y: usize| -> Vec<aerotp_plot::Series> {
        let mut out = Vec::new();
        for n in 1..=3 {
            for &s in &seeds {
                let mut points: Vec<(f64, f64)> = data
                    .iter()
                    .filter(|r| r[0] as usize == n && r[1] as i64 == s)
                    .map(|r| (r[2], r[y]))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                out.push(aerotp_plot::Series {
                    name: format!("{n} channel{}, seed {s}", if n > 1 { "s" } else { "" }),
                    points,
                    peer: false,
                });
            }
        }
        out
    };
    let mut delivered = lines(3);
    let mut offered: Vec<(f64, f64)> = data.iter().map(|r| (r[2], r[2])).collect();
    offered.sort_by(|a, b| a.0.total_cmp(&b.0));
    offered.dedup();
    delivered.push(aerotp_plot::Series {
        name: "offered".into(),
        points: offered,
        peer: true,
    });
    aerotp_plot::draw(
        &dir.join("lab-offered-47min.png"),
        &aerotp_plot::Chart {
            title:
                "Seed 003 in the lab: AeroTP over 2.4 kb/s Iridium channels, 47 min (cf. Figs. 3-5)",
            x_label: "offered rate, b/s",
            y_label: "delivered, b/s",
            series: delivered,
            y_from_zero: true,
            x_sci: false,
            legend_low: false,
        },
    )?;
    aerotp_plot::draw(
        &dir.join("lab-offered-delay-47min.png"),
        &aerotp_plot::Chart {
            title: "Seed 003 in the lab: mean delay from offer to delivery, 47 min",
            x_label: "offered rate, b/s",
            y_label: "mean delay, s",
            series: lines(4),
            y_from_zero: true,
            x_sci: false,
            legend_low: false,
        },
    )?;
    println!(
        "wrote lab-offered-47min.png, lab-offered-delay-47min.png in {}",
        dir.display()
    );
    Ok(())
}
