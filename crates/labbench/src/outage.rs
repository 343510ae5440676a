//! `outage`: a transfer across a long outage (both directions down), kernel TCP against every
//! reliable AeroTP mode: bytes lost, whether the connection survived, and how long after the
//! link's return the receiver gets data at full rate again (receive rate over a sliding 200 ms
//! window ≥ 90 % of the link rate, counting application payload bytes).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aerotp_lab::link::Outage;
use anyhow::{Context, Result};
use serde::Serialize;

use crate::transfer::{self, Proto, Spec};

/// Sliding window of the rate measurement.
pub const WINDOW: Duration = Duration::from_millis(200);
/// Share of the link rate that counts as full rate.
pub const FULL: f64 = 0.9;

#[derive(Debug, Clone)]
pub struct Config {
    pub rate_bps: u64,
    pub delay: Duration,
    /// The outage starts this long after the lab (and the transfer) starts.
    pub before: Duration,
    pub outage: Duration,
    /// Data for this long at the link rate is left to send after the outage.
    pub after: Duration,
    pub seed: u64,
    pub protocols: Vec<Proto>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rate_bps: 5_000_000,
            delay: Duration::from_millis(10),
            before: Duration::from_secs(3),
            outage: Duration::from_secs(60),
            after: Duration::from_secs(5),
            seed: 11,
            protocols: default_protocols(),
        }
    }
}

pub fn default_protocols() -> Vec<Proto> {
    [
        "tcp-cubic",
        "aerotp-reliable",
        "aerotp-near-reliable",
        "aerotp-hybrid-nack-mack",
    ]
    .iter()
    .map(|s| Proto::parse(s).expect("known protocol"))
    .collect()
}

impl Config {
    /// Bytes to send: the link rate over `before + after` (the sender's buffer absorbs the
    /// outage).
    pub fn size(&self) -> u64 {
        (self.rate_bps as f64 / 8.0 * (self.before + self.after).as_secs_f64()) as u64
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub protocol: String,
    pub size: u64,
    pub delivered_bytes: u64,
    pub bytes_lost: u64,
    pub survived: bool,
    /// Link return → first new data at the receiver.
    pub first_data_after_s: Option<f64>,
    /// Link return → 200 ms receive rate ≥ 90 % of the link rate.
    pub full_rate_after_s: Option<f64>,
    /// Highest 200 ms receive rate after the return, b/s.
    pub peak_after_bps: f64,
    pub elapsed_s: f64,
    pub error: Option<String>,
    pub aero: Option<transfer::AeroStats>,
    /// Receive rate timeline: (s relative to the link's return, b/s over the last 200 ms).
    #[serde(skip)]
    pub timeline: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub wall_s: f64,
    /// Upper bound of the error on the link's return time (lab epoch not exported).
    pub epoch_uncertainty_s: f64,
}

/// From arrivals `(t, bytes)`: (first arrival ≥ `back`, first t ≥ `back` whose window rate
/// ≥ `threshold` b/s, peak window rate after `back`, timeline).
#[allow(clippy::type_complexity)]
pub fn recovery(
    arrivals: &[(Instant, u32)],
    back: Instant,
    threshold_bps: f64,
) -> (Option<f64>, Option<f64>, f64, Vec<(f64, f64)>) {
    let rel = |t: Instant| -> f64 {
        if t >= back {
            t.duration_since(back).as_secs_f64()
        } else {
            -back.duration_since(t).as_secs_f64()
        }
    };
    let w = WINDOW.as_secs_f64();
    let mut first = None;
    let mut full = None;
    let mut peak = 0.0f64;
    let mut timeline = Vec::with_capacity(arrivals.len());
    let mut lo = 0;
    let mut sum: u64 = 0;
    for (hi, &(t, b)) in arrivals.iter().enumerate() {
        sum += u64::from(b);
        while arrivals[lo].0 + WINDOW <= t {
            sum -= u64::from(arrivals[lo].1);
            lo += 1;
        }
        let _ = hi;
        let rate = sum as f64 * 8.0 / w;
        let x = rel(t);
        timeline.push((x, rate));
        if t >= back {
            first.get_or_insert(x);
            peak = peak.max(rate);
            // Only windows that lie wholly after the return count.
            if full.is_none() && rate >= threshold_bps && t >= back + WINDOW {
                full = Some(x);
            }
        }
    }
    (first, full, peak, timeline)
}

pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Report> {
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut uncertainty = 0.0f64;
    for &proto in &cfg.protocols {
        let mut link = crate::link(cfg.rate_bps, cfg.delay);
        link.outages = vec![Outage {
            start: cfg.before,
            duration: cfg.outage,
        }];
        let before = Instant::now();
        let lab = crate::lab(&link, cfg.seed)?;
        // The lab's epoch is taken inside `Lab::start`, just before its forwarding threads
        // start: within [before, after]; `after` is the closer bound.
        let after = Instant::now();
        uncertainty = uncertainty.max((after - before).as_secs_f64());
        let back = after + cfg.before + cfg.outage;
        let spec = Spec {
            size: cfg.size(),
            rate_bps: cfg.rate_bps,
            cap: cfg.before + cfg.outage + Duration::from_secs(120),
            port: 5003,
            timeline: true,
            extra_paths: Vec::new(),
        };
        let o = transfer::run(&lab, proto, spec).with_context(|| proto.name())?;
        lab.stop().context("lab teardown")?;
        let (first, full, peak, timeline) = recovery(&o.arrivals, back, FULL * cfg.rate_bps as f64);
        let row = Row {
            protocol: o.protocol.clone(),
            size: o.size,
            delivered_bytes: o.delivered,
            bytes_lost: o.size - o.delivered,
            survived: o.complete && o.error.is_none(),
            first_data_after_s: first,
            full_rate_after_s: full,
            peak_after_bps: peak,
            elapsed_s: o.elapsed_s(),
            error: o.error.clone(),
            aero: o.aero.clone(),
            timeline,
        };
        progress(&format!(
            "{:<24} lost {:>8} B survived {:<5} first data +{} s, full rate +{} s, peak {:.2} Mb/s{}",
            row.protocol,
            row.bytes_lost,
            row.survived,
            row.first_data_after_s.map_or("-".into(), |v| format!("{v:.3}")),
            row.full_rate_after_s.map_or("-".into(), |v| format!("{v:.3}")),
            row.peak_after_bps / 1e6,
            row.error.as_deref().map_or(String::new(), |e| format!(" ({e})"))
        ));
        rows.push(row);
    }
    Ok(Report {
        rows,
        wall_s: t0.elapsed().as_secs_f64(),
        epoch_uncertainty_s: uncertainty,
    })
}

pub fn markdown(cfg: &Config, r: &Report, command: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Command: `{command}`  ");
    let _ = writeln!(
        s,
        "Link {} Mb/s, {} ms one-way; outage of {} s in both directions starting {} s after the transfer; {} B sent; full rate = {:.0} % of the link over a sliding {} ms window (payload bytes at the receiver); link-return time known within {:.1} ms; wall time {:.0} s.\n",
        cfg.rate_bps as f64 / 1e6,
        cfg.delay.as_millis(),
        cfg.outage.as_secs_f64(),
        cfg.before.as_secs_f64(),
        cfg.size(),
        FULL * 100.0,
        WINDOW.as_millis(),
        r.epoch_uncertainty_s * 1e3,
        r.wall_s
    );
    s.push_str("| protocol | bytes lost | survived | first data after return, s | full rate after return, s | peak rate after, Mb/s | elapsed, s |\n|---|---:|---|---:|---:|---:|---:|\n");
    let f = |v: Option<f64>| v.map_or_else(|| "never".into(), |x| format!("{x:.3}"));
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.1} |",
            row.protocol,
            row.bytes_lost,
            if row.survived { "yes" } else { "no" },
            f(row.first_data_after_s),
            f(row.full_rate_after_s),
            row.peak_after_bps / 1e6,
            row.elapsed_s
        );
    }
    s
}

/// Writes `outage.csv`, `outage.md`, `outage_timeline.png`.
pub fn write(cfg: &Config, r: &Report, dir: &Path, command: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from(
        "protocol,size,delivered_bytes,bytes_lost,survived,first_data_after_s,full_rate_after_s,peak_after_bps,elapsed_s,error\n",
    );
    let o = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.4}"));
    for row in &r.rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{:.0},{:.3},\"{}\"",
            row.protocol,
            row.size,
            row.delivered_bytes,
            row.bytes_lost,
            row.survived,
            o(row.first_data_after_s),
            o(row.full_rate_after_s),
            row.peak_after_bps,
            row.elapsed_s,
            row.error.clone().unwrap_or_default().replace('"', "'")
        );
    }
    std::fs::write(dir.join("outage.csv"), csv)?;
    std::fs::write(dir.join("outage.md"), markdown(cfg, r, command))?;
    let span = cfg.after.as_secs_f64() + 2.0;
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .rows
        .iter()
        .map(|row| {
            (
                row.protocol.clone(),
                row.timeline
                    .iter()
                    .filter(|(x, _)| (-1.0..=span).contains(x))
                    .map(|&(x, y)| (x, y / 1e6))
                    .collect(),
            )
        })
        .collect();
    aerotp_plot::xy(
        &dir.join("outage_timeline.png"),
        "Receive rate (200 ms window) around the link's return (t = 0)",
        "s after the link's return",
        "Mb/s",
        &series,
        &[0.0],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_finds_the_first_full_window_after_the_return() {
        let t0 = Instant::now();
        let back = t0 + Duration::from_secs(1);
        // 1250 B every 2 ms = 5 Mb/s before 0.5 s, nothing until 1.3 s, then 5 Mb/s.
        let mut a = Vec::new();
        for k in 0..250u64 {
            a.push((t0 + Duration::from_millis(2 * k), 1250));
        }
        for k in 0..500u64 {
            a.push((t0 + Duration::from_millis(1300 + 2 * k), 1250));
        }
        let (first, full, peak, _) = recovery(&a, back, 0.9 * 5e6);
        assert!((first.unwrap() - 0.3).abs() < 1e-6);
        // Window (t−0.2, t] holds ≥ 90 % of 5 Mb/s × 0.2 s = 112 500 B (90 arrivals) from
        // t = 1.3 + 0.178 s on.
        let full = full.unwrap();
        assert!((full - 0.478).abs() < 0.003, "{full}");
        assert!((4.9e6..=5.1e6).contains(&peak), "{peak}");
    }
}
