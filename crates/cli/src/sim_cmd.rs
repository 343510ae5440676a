//! `aerotp sim`: simulate transfers of one scenario in virtual time and summarise them.
//!
//! The JSON output (`--json`) is a contract other tools check: one object with at least
//! mode, ber, loss, runs, complete_runs, delivered_bytes, goodput_bps, mean_delay_s,
//! overhead_bytes, setup_delay_s (means over runs). See docs/simulator.md.

use std::time::{Duration, Instant};

use aerotp_link::{format_rate, parse_duration, parse_rate};
use aerotp_proto::FecSetting;
use aerotp_sim::{parse_size, run_many, Scenario, SimMode, Summary, Topology};
use anyhow::{bail, Context};

/// Simulate file transfers over an impaired link in virtual time (deterministic: the same
/// seed gives the same result).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transfer mode: reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack,
    /// unreliable, datagram, or udp (plain UDP baseline).
    #[arg(long, value_parser = mode_arg)]
    mode: SimMode,
    /// Bit-error rate of the impaired link (both directions), in [0, 1).
    #[arg(long, value_parser = ber_arg)]
    ber: f64,
    /// Random packet loss probability of the impaired link (both directions), in [0, 1].
    #[arg(long, default_value_t = 0.0, value_parser = loss_arg)]
    loss: f64,
    /// Rate of the impaired link and AeroTP's sending rate: 5mbit, 10Mbps, 2.4kbit.
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    /// One-way propagation delay of the impaired link: 10ms, 0s, 1.5s.
    #[arg(long, default_value = "10ms", value_parser = duration_arg)]
    delay: Duration,
    /// File size: 1MB (= 1 000 000 bytes), 500kB, 1MiB, 4096.
    #[arg(long, default_value = "1MB", value_parser = size_arg)]
    size: usize,
    /// Largest datagram (UDP payload) in bytes.
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// FEC: off, auto, N (papers' 32-bit words per TPDU, 0-256) or pN (parity bytes per
    /// codeword). Default: auto for quasi-reliable and the hybrid modes, off otherwise.
    #[arg(long, value_parser = fec_arg)]
    fec: Option<FecSetting>,
    /// ACKs aggregated per MACK (1-365).
    #[arg(long, default_value_t = 32)]
    mack: u16,
    /// Number of runs (different seeds), spread over all cores.
    #[arg(long, default_value_t = 20, value_parser = runs_arg)]
    runs: usize,
    /// Base seed; run i uses a seed derived from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// two-node (one impaired link) or papers (10 Gb/s LAN - impaired link - 10 Gb/s LAN).
    #[arg(long, default_value = "papers", value_parser = topology_arg)]
    topology: Topology,
    /// Virtual-time cap per run; a run that reaches it is incomplete.
    #[arg(long, default_value = "600s", value_parser = duration_arg)]
    cap: Duration,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn mode_arg(s: &str) -> Result<SimMode, String> {
    s.parse().map_err(|e: aerotp_sim::SimError| e.to_string())
}
fn topology_arg(s: &str) -> Result<Topology, String> {
    s.parse().map_err(|e: aerotp_sim::SimError| e.to_string())
}
fn rate_arg(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}
fn duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}
fn size_arg(s: &str) -> Result<usize, String> {
    parse_size(s).map_err(|e| e.to_string())
}
fn fec_arg(s: &str) -> Result<FecSetting, String> {
    FecSetting::parse(s).map_err(|e| e.to_string())
}
fn runs_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("runs must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a number of runs")),
    }
}
fn ber_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(b) if (0.0..1.0).contains(&b) => Ok(b),
        Ok(b) => Err(format!("BER {b} is out of range: give a value in [0, 1)")),
        Err(_) => Err(format!("'{s}' is not a number (e.g. 1e-5)")),
    }
}
fn loss_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        Ok(p) => Err(format!(
            "loss {p} is out of range: give a probability in [0, 1]"
        )),
        Err(_) => Err(format!("'{s}' is not a number (e.g. 0.05)")),
    }
}

impl Args {
    fn scenario(&self) -> Scenario {
        Scenario {
            mode: self.mode,
            size: self.size,
            mtu: self.mtu,
            fec: self.fec,
            mack: self.mack,
            topology: self.topology,
            cap: self.cap,
            timeline: false,
            ..Scenario::default()
        }
        .with_rate(self.rate)
        .with_links(|l| {
            l.ber = self.ber;
            l.loss = self.loss;
            l.delay = self.delay;
        })
    }
}

/// The JSON object `aerotp sim --json` prints.
pub fn to_json(sum: &Summary, wall: Duration) -> serde_json::Value {
    let mut v = serde_json::to_value(sum).expect("summary serialises");
    v["wall_s"] = serde_json::json!(wall.as_secs_f64());
    v
}

fn fmt_opt(v: Option<f64>, scale: f64, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.3} {unit}", x * scale))
}

fn table(sum: &Summary, wall: Duration) -> String {
    let rows = [
        ("mode", sum.mode.clone()),
        ("topology", sum.topology.clone()),
        (
            "link",
            format!(
                "{}, {} ms, BER {}, loss {}",
                format_rate(sum.rate_bps),
                sum.delay_s * 1e3,
                sum.ber,
                sum.loss
            ),
        ),
        ("file", format!("{} bytes, MTU {}", sum.size, sum.mtu)),
        (
            "fec",
            format!(
                "{} (parity {:.1} B/codeword = {:.1} words/TPDU at the end)",
                sum.fec, sum.fec_parity, sum.fec_words
            ),
        ),
        ("mack", sum.mack.to_string()),
        (
            "runs",
            format!("{} (complete {})", sum.runs, sum.complete_runs),
        ),
        (
            "delivered",
            format!(
                "{:.0} bytes (min {:.0}, max {:.0})",
                sum.delivered_bytes, sum.delivered.min, sum.delivered.max
            ),
        ),
        (
            "goodput",
            format!(
                "{:.3} Mb/s (min {:.3}, max {:.3}, stddev {:.3}, ±{:.3} 95 % CI)",
                sum.goodput.mean / 1e6,
                sum.goodput.min / 1e6,
                sum.goodput.max / 1e6,
                sum.goodput.stddev / 1e6,
                sum.goodput.ci95 / 1e6
            ),
        ),
        ("mean delay", fmt_opt(sum.mean_delay_s, 1e3, "ms")),
        ("setup delay", fmt_opt(sum.setup_delay_s, 1e3, "ms")),
        ("overhead", format!("{:.0} bytes", sum.overhead_bytes)),
        (
            "retransmissions",
            format!("{:.1} TPDUs", sum.retransmissions),
        ),
        ("FEC-corrected", format!("{:.1} TPDUs", sum.tpdus_corrected)),
        ("lost", format!("{:.1} TPDUs", sum.tpdus_lost)),
        ("virtual time", format!("{:.3} s per run", sum.elapsed_s)),
        ("wall time", format!("{:.3} s", wall.as_secs_f64())),
    ];
    rows.iter().map(|(k, v)| format!("{k:<16} {v}\n")).collect()
}

/// Runs the command; the text it prints is returned for tests.
pub fn execute(args: &Args) -> anyhow::Result<String> {
    let s = args.scenario();
    if let Err(e) = s.validate() {
        bail!("{e}");
    }
    let t = Instant::now();
    let sum = run_many(&s, args.runs, args.seed).context("simulation")?;
    let wall = t.elapsed();
    Ok(if args.json {
        format!("{}\n", to_json(&sum, wall))
    } else {
        table(&sum, wall)
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    print!("{}", execute(&args)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn parse(s: &str) -> Result<Args, clap::Error> {
        T::try_parse_from(std::iter::once("sim").chain(s.split_whitespace())).map(|t| t.a)
    }

    #[test]
    fn json_has_the_contract_keys() {
        let a = parse("--mode reliable --ber 1e-5 --size 40kB --runs 2 --topology two-node --json")
            .unwrap();
        let out = execute(&a).unwrap();
        assert_eq!(out.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        for k in [
            "mode",
            "ber",
            "loss",
            "runs",
            "complete_runs",
            "delivered_bytes",
            "goodput_bps",
            "mean_delay_s",
            "overhead_bytes",
            "setup_delay_s",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["mode"], "reliable");
        assert_eq!(v["runs"], 2);
        assert_eq!(v["complete_runs"], 2);
        assert_eq!(v["delivered_bytes"].as_f64().unwrap(), 40_000.0);
        assert!(v["goodput_bps"].as_f64().unwrap() < 5e6);
    }

    #[test]
    fn bad_flags_are_rejected() {
        for bad in [
            "--mode reliable --ber 1",
            "--mode reliable --ber -0.1",
            "--mode tcp --ber 0",
            "--mode reliable --ber 0 --size 0",
            "--mode reliable --ber 0 --runs 0",
            "--mode reliable --ber 0 --rate fast",
            "--mode reliable --ber 0 --delay soon",
            "--mode reliable --ber 0 --fec 300",
            "--mode reliable --ber 0 --topology ring",
            "--mode reliable --ber 0 --loss 2",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // Values clap accepts but the scenario does not.
        let a = parse("--mode reliable --ber 0 --mack 400").unwrap();
        let e = execute(&a).unwrap_err().to_string();
        assert!(e.contains("MACK"), "{e}");
    }

    #[test]
    fn table_is_readable() {
        let a = parse("--mode udp --ber 0 --size 20kB --runs 1").unwrap();
        let out = execute(&a).unwrap();
        assert!(out.contains("goodput") && out.contains("udp"), "{out}");
    }
}
