//! `lossy`: the same data over the same lab link and bit-error rates, every protocol side by
//! side (seeds 000/002 §IV-D, 001 §IV-F, on real kernels).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::transfer::{self, AeroStats, Proto, Spec};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub rate_bps: u64,
    pub delay: Duration,
    pub size: u64,
    pub bers: Vec<f64>,
    pub cap: Duration,
    pub runs: u32,
    pub seed: u64,
    pub protocols: Vec<Proto>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rate_bps: 5_000_000,
            delay: Duration::from_millis(10),
            size: 1_000_000,
            bers: vec![0.0, 1e-6, 1e-5, 3.5e-5, 1e-4],
            cap: Duration::from_secs(60),
            runs: 5,
            seed: 1,
            protocols: crate::default_protocols(),
        }
    }
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub protocol: String,
    pub ber: f64,
    pub run: u32,
    pub seed: u64,
    pub delivered_bytes: u64,
    pub complete: bool,
    pub sha_ok: bool,
    pub goodput_bps: f64,
    pub mean_delay_s: Option<f64>,
    pub elapsed_s: f64,
    pub fwd_corrupted: u64,
    pub fwd_dropped: u64,
    pub error: Option<String>,
    pub aero: Option<AeroStats>,
}

/// One protocol at one BER, over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub protocol: String,
    pub ber: f64,
    pub runs: u32,
    pub complete_runs: u32,
    /// Mean over runs.
    pub delivered_bytes: f64,
    pub goodput_bps: f64,
    pub mean_delay_s: Option<f64>,
    pub elapsed_s: f64,
}

/// All of it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub points: Vec<Point>,
    pub wall_s: f64,
}

/// Runs the bench; `progress` gets one line per transfer.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Report> {
    let t0 = Instant::now();
    let mut rows = Vec::new();
    for (bi, &ber) in cfg.bers.iter().enumerate() {
        for run in 0..cfg.runs {
            let seed = cfg.seed.wrapping_add(1000 * bi as u64 + u64::from(run));
            for &proto in &cfg.protocols {
                let mut link = crate::link(cfg.rate_bps, cfg.delay);
                link.ber = ber;
                let lab = crate::lab(&link, seed)?;
                let spec = Spec {
                    size: cfg.size,
                    rate_bps: cfg.rate_bps,
                    cap: cfg.cap,
                    port: 5001,
                    timeline: false,
                    extra_paths: Vec::new(),
                };
                let o = transfer::run(&lab, proto, spec)
                    .with_context(|| format!("{} at BER {ber:e}", proto.name()))?;
                let (fwd, _) = lab.stop().context("lab teardown")?;
                let row = Row {
                    protocol: o.protocol.clone(),
                    ber,
                    run,
                    seed,
                    delivered_bytes: o.delivered,
                    complete: o.complete,
                    sha_ok: o.sha_ok,
                    goodput_bps: o.goodput_bps(),
                    mean_delay_s: o.mean_delay_s,
                    elapsed_s: o.elapsed_s(),
                    fwd_corrupted: fwd.corrupted_packets,
                    fwd_dropped: fwd.dropped_packets(),
                    error: o.error.clone(),
                    aero: o.aero.clone(),
                };
                progress(&format!(
                    "ber {ber:e} run {run} {:<24} {:>9} B {:>6.3} Mb/s delay {:>7} elapsed {:>6.2} s{}{}",
                    row.protocol,
                    row.delivered_bytes,
                    row.goodput_bps / 1e6,
                    row.mean_delay_s
                        .map_or("-".into(), |d| format!("{:.3}s", d)),
                    row.elapsed_s,
                    if row.complete { "" } else { " INCOMPLETE" },
                    row.error
                        .as_deref()
                        .map_or(String::new(), |e| format!(" ({e})")),
                ));
                rows.push(row);
            }
        }
    }
    let points = summarise(cfg, &rows);
    Ok(Report {
        rows,
        points,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

fn summarise(cfg: &Config, rows: &[Row]) -> Vec<Point> {
    let mut out = Vec::new();
    for &ber in &cfg.bers {
        for p in &cfg.protocols {
            let name = p.name();
            let rs: Vec<&Row> = rows
                .iter()
                .filter(|r| r.protocol == name && r.ber == ber)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let n = rs.len() as f64;
            let delays: Vec<f64> = rs.iter().filter_map(|r| r.mean_delay_s).collect();
            out.push(Point {
                protocol: name,
                ber,
                runs: rs.len() as u32,
                complete_runs: rs.iter().filter(|r| r.complete).count() as u32,
                delivered_bytes: rs.iter().map(|r| r.delivered_bytes as f64).sum::<f64>() / n,
                goodput_bps: rs.iter().map(|r| r.goodput_bps).sum::<f64>() / n,
                mean_delay_s: (!delays.is_empty())
                    .then(|| delays.iter().sum::<f64>() / delays.len() as f64),
                elapsed_s: rs.iter().map(|r| r.elapsed_s).sum::<f64>() / n,
            });
        }
    }
    out
}

/// `0`, `1e-5`, `3.5e-5`.
pub fn ber_label(b: f64) -> String {
    if b == 0.0 {
        "0".into()
    } else {
        format!("{b:e}")
    }
}

fn opt(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.*}", prec, x * scale))
}

/// Markdown tables (goodput, delivered, delay, completeness) for docs/results/lab.md.
pub fn markdown(cfg: &Config, r: &Report, command: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Command: `{command}`  ");
    let _ = writeln!(
        s,
        "Link {} Mb/s, {} ms one-way, both directions; {} B per transfer; time cap {} s; {} run(s) per point; wall time {:.0} s.\n",
        cfg.rate_bps as f64 / 1e6,
        cfg.delay.as_millis(),
        cfg.size,
        cfg.cap.as_secs_f64(),
        cfg.runs,
        r.wall_s
    );
    let header = |s: &mut String, title: &str| {
        let _ = write!(s, "{title}\n\n| protocol |");
        for b in &cfg.bers {
            let _ = write!(s, " BER {} |", ber_label(*b));
        }
        let _ = write!(s, "\n|---|");
        for _ in &cfg.bers {
            let _ = write!(s, "---:|");
        }
        s.push('\n');
    };
    let table = |s: &mut String, title: &str, f: &dyn Fn(&Point) -> String| {
        header(s, title);
        for p in &cfg.protocols {
            let name = p.name();
            let _ = write!(s, "| {name} |");
            for &b in &cfg.bers {
                let cell = r
                    .points
                    .iter()
                    .find(|q| q.protocol == name && q.ber == b)
                    .map_or_else(|| "-".into(), f);
                let _ = write!(s, " {cell} |");
            }
            s.push('\n');
        }
        s.push('\n');
    };
    table(
        &mut s,
        "Goodput, Mb/s (mean over runs; delivered × 8 / (last byte − sender start))",
        &|p| format!("{:.3}", p.goodput_bps / 1e6),
    );
    table(
        &mut s,
        "Runs complete (every byte intact; SHA-256 for stream protocols) / runs",
        &|p| format!("{}/{}", p.complete_runs, p.runs),
    );
    table(&mut s, "Delivered intact bytes (mean over runs)", &|p| {
        format!("{:.0}", p.delivered_bytes)
    });
    table(
        &mut s,
        "Mean one-way delay, ms (application write → read, per 500 B block)",
        &|p| opt(p.mean_delay_s, 1e3, 1),
    );
    table(
        &mut s,
        "Elapsed, s (sender start → receiver sees the end, or the cap)",
        &|p| format!("{:.2}", p.elapsed_s),
    );
    s
}

fn csv_rows(rows: &[Row]) -> String {
    let mut s = String::from(
        "protocol,ber,run,seed,delivered_bytes,complete,sha_ok,goodput_bps,mean_delay_s,elapsed_s,fwd_corrupted,fwd_dropped,aero_outcome,aero_tpdus_sent,aero_retransmitted,aero_timeouts,aero_fec_parity,aero_rx_corrected,aero_rx_corrupted,error\n",
    );
    for r in rows {
        let a = r.aero.clone().unwrap_or_default();
        let _ = writeln!(
            s,
            "{},{:e},{},{},{},{},{},{:.0},{},{:.4},{},{},{},{},{},{},{},{},{},\"{}\"",
            r.protocol,
            r.ber,
            r.run,
            r.seed,
            r.delivered_bytes,
            r.complete,
            r.sha_ok,
            r.goodput_bps,
            r.mean_delay_s.map_or(String::new(), |d| format!("{d:.5}")),
            r.elapsed_s,
            r.fwd_corrupted,
            r.fwd_dropped,
            a.outcome.replace(',', ";"),
            a.tpdus_sent,
            a.tpdus_retransmitted,
            a.timeouts,
            a.fec_parity,
            a.rx_corrected,
            a.rx_corrupted,
            r.error.clone().unwrap_or_default().replace('"', "'"),
        );
    }
    s
}

fn csv_points(points: &[Point]) -> String {
    let mut s = String::from(
        "protocol,ber,runs,complete_runs,delivered_bytes,goodput_bps,mean_delay_s,elapsed_s\n",
    );
    for p in points {
        let _ = writeln!(
            s,
            "{},{:e},{},{},{:.0},{:.0},{},{:.4}",
            p.protocol,
            p.ber,
            p.runs,
            p.complete_runs,
            p.delivered_bytes,
            p.goodput_bps,
            p.mean_delay_s.map_or(String::new(), |d| format!("{d:.5}")),
            p.elapsed_s
        );
    }
    s
}

/// Writes `lossy_runs.csv`, `lossy.csv`, `lossy.md`, `lossy_goodput.png`, `lossy_delivered.png`.
pub fn write(cfg: &Config, r: &Report, dir: &Path, command: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    std::fs::write(dir.join("lossy_runs.csv"), csv_rows(&r.rows))?;
    std::fs::write(dir.join("lossy.csv"), csv_points(&r.points))?;
    std::fs::write(dir.join("lossy.md"), markdown(cfg, r, command))?;
    let labels: Vec<String> = cfg.bers.iter().map(|&b| ber_label(b)).collect();
    let series = |f: &dyn Fn(&Point) -> f64| -> Vec<(String, Vec<f64>)> {
        cfg.protocols
            .iter()
            .map(|p| {
                let name = p.name();
                let ys = cfg
                    .bers
                    .iter()
                    .map(|&b| {
                        r.points
                            .iter()
                            .find(|q| q.protocol == name && q.ber == b)
                            .map_or(f64::NAN, f)
                    })
                    .collect();
                (name, ys)
            })
            .collect()
    };
    aerotp_plot::lines(
        &dir.join("lossy_goodput.png"),
        "Goodput vs BER (lab, real kernels)",
        "bit-error rate",
        "goodput, Mb/s",
        &labels,
        &series(&|p| p.goodput_bps / 1e6),
    )?;
    aerotp_plot::lines(
        &dir.join("lossy_delivered.png"),
        "Delivered intact bytes vs BER",
        "bit-error rate",
        "delivered, % of the data",
        &labels,
        &series(&|p| 100.0 * p.delivered_bytes / cfg.size as f64),
    )?;
    Ok(())
}
