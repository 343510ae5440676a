//! `multipath`: the same file over N emulated paths of the TUN lab (each path its own TUN pair,
//! subnet 10.77.i.0/30 and link), by kernel MPTCP — one subflow per path — beside single-path
//! kernel TCP on path 0, the peer the multipath issue asks AeroTP to beat. Each path's links
//! count what they carried, so the table shows how a protocol spread its bytes.
//!
//! MPTCP set-up, per lab (both namespaces are fresh, so nothing leaks into the host): the
//! ground side announces its address on every path after the first (`ip mptcp endpoint add
//! 10.77.i.2 dev atp-ground<i> signal`), both sides allow N subflows and N announced
//! addresses (`ip mptcp limits set`), and the air side's in-kernel path manager opens a subflow
//! to each announced address from its own address on that path (the connected route of
//! 10.77.i.0/30 picks the interface). The initial subflow runs on path 0.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aerotp_lab::{path_ifnames, Lab, LabPath, LabPathsConfig, LinkConfig, Side};
use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::transfer::{self, Proto, Spec};

/// Payload share of a full 1500-byte packet for TCP with timestamps (1448 B of segment data):
/// the ceiling's payload share, the same for every protocol of the table.
pub const TCP_PAYLOAD_SHARE: f64 = 1448.0 / 1500.0;

#[derive(Debug, Clone)]
pub struct Config {
    /// Paths, 1 to [`aerotp_lab::MAX_LAB_PATHS`], all alike.
    pub paths: usize,
    /// Rate of each path, each direction.
    pub rate_bps: u64,
    pub delay: Duration,
    pub ber: f64,
    pub size: u64,
    pub runs: u32,
    pub seed: u64,
    pub cap: Duration,
    pub protocols: Vec<Proto>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            paths: 3,
            rate_bps: 5_000_000,
            delay: Duration::from_millis(10),
            ber: 1e-5,
            size: 10_000_000,
            runs: 3,
            seed: 21,
            cap: Duration::from_secs(120),
            protocols: default_protocols(),
        }
    }
}

pub fn default_protocols() -> Vec<Proto> {
    ["tcp-cubic", "tcp-bbr", "mptcp-cubic", "mptcp-bbr"]
        .iter()
        .map(|s| Proto::parse(s).expect("known protocol"))
        .collect()
}

impl Config {
    /// N × rate × [`TCP_PAYLOAD_SHARE`] × the probability a 1500-byte packet survives the
    /// BER: what the N paths can carry as stream payload.
    pub fn ceiling_bps(&self) -> f64 {
        let survive = (1.0 - self.ber).powf(1500.0 * 8.0);
        self.paths as f64 * self.rate_bps as f64 * TCP_PAYLOAD_SHARE * survive
    }

    fn check(&self) -> Result<()> {
        if self.paths == 0 || self.paths > aerotp_lab::MAX_LAB_PATHS {
            bail!(
                "paths: {} (accepted: 1 to {})",
                self.paths,
                aerotp_lab::MAX_LAB_PATHS
            );
        }
        if self.runs == 0 || self.size == 0 || self.rate_bps == 0 {
            bail!("runs, size and rate must be at least 1");
        }
        if self.protocols.is_empty() {
            bail!(
                "protocols: none given (accepted: tcp-cubic, tcp-bbr, mptcp-cubic, mptcp-bbr, …)"
            );
        }
        if !(0.0..1.0).contains(&self.ber) {
            bail!("ber: {} (accepted: [0, 1))", self.ber);
        }
        Ok(())
    }
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub protocol: String,
    pub run: u32,
    pub seed: u64,
    pub delivered_bytes: u64,
    pub complete: bool,
    pub sha_ok: bool,
    pub goodput_bps: f64,
    /// Bytes each path's forward link delivered (IP packets, all headers).
    pub path_bytes: Vec<u64>,
    /// Packets each path's forward link dropped because a bit error made the IP or transport
    /// checksum fail, summed over the paths.
    pub checksum_drops: u64,
    pub error: Option<String>,
}

/// Per protocol, over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub protocol: String,
    pub runs: u32,
    pub complete_runs: u32,
    pub median_goodput_bps: f64,
    pub median_of_ceiling: f64,
    /// Median share of the forward bytes carried by each path.
    pub path_share: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ceiling_bps: f64,
    pub rows: Vec<Row>,
    pub points: Vec<Point>,
}

/// A lab of `cfg.paths` identical paths; path i's links get their own seeds.
fn lab(cfg: &Config, seed: u64) -> Result<Lab> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let link = LinkConfig {
        rate_bps: cfg.rate_bps,
        delay: cfg.delay,
        ber: cfg.ber,
        ..LinkConfig::default()
    };
    let paths = (0..cfg.paths as u64)
        .map(|i| LabPath {
            forward: link.clone(),
            reverse: link.clone(),
            forward_seed: seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)),
            reverse_seed: seed.wrapping_add(i.wrapping_mul(0x9E37_79B9)) ^ 0x5DEE_CE66,
        })
        .collect();
    Lab::start_paths(LabPathsConfig {
        paths,
        name: Some(format!("mp{n}")),
    })
}

fn ip(lab: &Lab, side: Side, args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .arg("-n")
        .arg(lab.ns(side))
        .args(args)
        .output()
        .context("running ip (iproute2; scripts/lab-deps.sh installs it)")?;
    if !out.status.success() {
        bail!(
            "ip -n {} {}: {}",
            lab.ns(side),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Lets MPTCP open one subflow per path (module doc).
pub fn configure_mptcp(lab: &Lab) -> Result<()> {
    let n = lab.path_count().to_string();
    for side in [Side::Air, Side::Ground] {
        ip(
            lab,
            side,
            &[
                "mptcp",
                "limits",
                "set",
                "subflows",
                &n,
                "add_addr_accepted",
                &n,
            ],
        )?;
    }
    for i in 1..lab.path_count() {
        let addr = lab.ground_addr_of(i).to_string();
        let dev = path_ifnames(i).1;
        ip(
            lab,
            Side::Ground,
            &["mptcp", "endpoint", "add", &addr, "dev", &dev, "signal"],
        )?;
    }
    Ok(())
}

fn one(cfg: &Config, proto: Proto, run: u32, port: u16) -> Result<Row> {
    let seed = cfg.seed.wrapping_add(u64::from(run));
    let lab = lab(cfg, seed)?;
    if matches!(proto, Proto::Mptcp(_)) {
        configure_mptcp(&lab)?;
    }
    // AeroTP spreads one connection over every path itself, at their joint rate; the
    // kernel protocols pace themselves.
    let aero = matches!(proto, Proto::Aero(..));
    let spec = Spec {
        size: cfg.size,
        rate_bps: if aero {
            cfg.rate_bps * cfg.paths as u64
        } else {
            cfg.rate_bps
        },
        cap: cfg.cap,
        port,
        timeline: false,
        extra_paths: if aero {
            (1..lab.path_count())
                .map(|i| lab.ground_addr_of(i))
                .collect()
        } else {
            Vec::new()
        },
    };
    let o = transfer::run(&lab, proto, spec)?;
    let path_bytes: Vec<u64> = lab
        .all_stats()
        .iter()
        .map(|(f, _)| f.delivered_bytes)
        .collect();
    let checksum_drops = (0..lab.path_count())
        .filter_map(|i| lab.path_checksum_drops(i))
        .map(|(f, _)| f)
        .sum();
    lab.stop_all()?;
    Ok(Row {
        protocol: proto.name(),
        run,
        seed,
        delivered_bytes: o.delivered,
        complete: o.complete,
        sha_ok: o.sha_ok,
        goodput_bps: o.goodput_bps(),
        path_bytes,
        checksum_drops,
        error: o.error,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn summarise(cfg: &Config, rows: &[Row]) -> Vec<Point> {
    let ceiling = cfg.ceiling_bps();
    cfg.protocols
        .iter()
        .map(|p| {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.protocol == p.name()).collect();
            let g = median(rs.iter().map(|r| r.goodput_bps).collect());
            let path_share = (0..cfg.paths)
                .map(|i| {
                    median(
                        rs.iter()
                            .map(|r| {
                                let total: u64 = r.path_bytes.iter().sum();
                                r.path_bytes.get(i).copied().unwrap_or(0) as f64
                                    / total.max(1) as f64
                            })
                            .collect(),
                    )
                })
                .collect();
            Point {
                protocol: p.name(),
                runs: rs.len() as u32,
                complete_runs: rs.iter().filter(|r| r.complete).count() as u32,
                median_goodput_bps: g,
                median_of_ceiling: g / ceiling,
                path_share,
            }
        })
        .collect()
}

/// Runs every protocol `cfg.runs` times, run by run (so the machine's load drifts over all
/// protocols alike); `progress` gets a line per transfer.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Report> {
    cfg.check()?;
    let mut rows = Vec::new();
    let mut port = 7100u16;
    for run in 0..cfg.runs {
        for &proto in &cfg.protocols {
            port = port.wrapping_add(1).max(7100);
            let row = one(cfg, proto, run, port)
                .with_context(|| format!("{} run {run}", proto.name()))?;
            progress(&format!(
                "{:<12} run {run}: {:.3} Mb/s ({:.1} % of the ceiling), {} B delivered, \
                 complete {}, SHA-256 {}, bytes per path {:?}{}",
                row.protocol,
                row.goodput_bps / 1e6,
                100.0 * row.goodput_bps / cfg.ceiling_bps(),
                row.delivered_bytes,
                row.complete,
                if row.sha_ok { "ok" } else { "MISMATCH" },
                row.path_bytes,
                row.error
                    .as_deref()
                    .map(|e| format!(", error: {e}"))
                    .unwrap_or_default()
            ));
            rows.push(row);
        }
    }
    let points = summarise(cfg, &rows);
    Ok(Report {
        ceiling_bps: cfg.ceiling_bps(),
        rows,
        points,
    })
}

/// The Markdown table for docs/results/multipath.md.
pub fn markdown(cfg: &Config, r: &Report, command: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} paths of {:.1} Mb/s each way, {} ms one way, BER {:e}; {} MB per transfer, {} \
         runs; ceiling {:.3} Mb/s (paths × rate × 1448/1500 × P(a 1500 B packet survives)).\n\n\
         `{command}`\n",
        cfg.paths,
        cfg.rate_bps as f64 / 1e6,
        cfg.delay.as_millis(),
        cfg.ber,
        cfg.size as f64 / 1e6,
        cfg.runs,
        r.ceiling_bps / 1e6
    );
    let _ = writeln!(
        s,
        "| protocol | complete runs | median goodput, Mb/s | of the ceiling | bytes per path (median share) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for p in &r.points {
        let shares: Vec<String> = p
            .path_share
            .iter()
            .map(|x| format!("{:.0} %", 100.0 * x))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {}/{} | {:.3} | {:.1} % | {} |",
            p.protocol,
            p.complete_runs,
            p.runs,
            p.median_goodput_bps / 1e6,
            100.0 * p.median_of_ceiling,
            shares.join(" / ")
        );
    }
    s
}

/// Writes `multipath_runs.csv` and `multipath.md` into `dir`.
pub fn write(cfg: &Config, r: &Report, dir: &Path, command: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut csv = String::from(
        "protocol,run,seed,delivered_bytes,complete,sha_ok,goodput_bps,checksum_drops,path_bytes,error\n",
    );
    for x in &r.rows {
        let pb: Vec<String> = x.path_bytes.iter().map(u64::to_string).collect();
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{:.0},{},{},{}",
            x.protocol,
            x.run,
            x.seed,
            x.delivered_bytes,
            x.complete,
            x.sha_ok,
            x.goodput_bps,
            x.checksum_drops,
            pb.join(";"),
            x.error.as_deref().unwrap_or("").replace([',', '\n'], " ")
        );
    }
    let f = dir.join("multipath_runs.csv");
    std::fs::write(&f, csv).with_context(|| format!("writing {}", f.display()))?;
    let f = dir.join("multipath.md");
    std::fs::write(&f, markdown(cfg, r, command))
        .with_context(|| format!("writing {}", f.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_follows_its_definition() {
        let c = Config {
            paths: 3,
            rate_bps: 5_000_000,
            ber: 1e-5,
            ..Config::default()
        };
        let want = 3.0 * 5e6 * 1448.0 / 1500.0 * (1.0f64 - 1e-5).powf(12_000.0);
        assert!((c.ceiling_bps() - want).abs() < 1e-6);
        assert!(c.ceiling_bps() < 3.0 * 5e6 * 0.9);
    }

    #[test]
    fn bad_settings_are_refused_with_what_is_accepted() {
        let e = Config {
            paths: 0,
            ..Config::default()
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("1 to 16"), "{e}");
        let e = Config {
            ber: 1.5,
            ..Config::default()
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("[0, 1)"), "{e}");
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
