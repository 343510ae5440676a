//! `aerotp bench lossy|setup|outage|multipath`: side-by-side benchmarks in the TUN lab (root): kernel TCP
//! (cubic, reno, bbr), QUIC, plain UDP and AeroTP over the same emulated link
//! (`aerotp-labbench`; results in docs/results/lab.md).

use std::path::PathBuf;
use std::time::Duration;

use aerotp_labbench::{lossy, multipath, outage, setup, Proto};
use aerotp_net::Mode;

use crate::common::*;

fn protocols_arg(s: &str) -> Result<Vec<Proto>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| Proto::parse(p.trim()).map_err(|e| e.to_string()))
        .collect()
}

fn list_arg(s: &str) -> Result<Vec<f64>, String> {
    s.split(',')
        .map(|v| {
            let x: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("'{v}' is not a number"))?;
            if (0.0..1.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!("{x} is outside [0, 1)"))
            }
        })
        .collect()
}

/// Options shared by the three benches.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Directory for CSV, PNG and the Markdown tables (`<bench>.md`).
    #[arg(long, default_value = "docs/results/lab")]
    out: PathBuf,
    /// Write no files.
    #[arg(long)]
    no_files: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Seed of the lab links (every protocol at a point gets the same one).
    #[arg(long)]
    seed: Option<u64>,
    /// A small, fast version.
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, clap::Args)]
pub struct LossyArgs {
    /// Link rate (both directions).
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    /// One-way delay (both directions).
    #[arg(long, default_value = "10ms", value_parser = duration_arg)]
    delay: Duration,
    /// Bytes per transfer.
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Bit-error rates, comma separated (both directions).
    #[arg(long)]
    ber: Option<String>,
    /// Longest one transfer may take.
    #[arg(long, value_parser = duration_arg)]
    cap: Option<Duration>,
    /// Runs per point.
    #[arg(long)]
    runs: Option<u32>,
    /// Protocols, comma separated: tcp-cubic, tcp-reno, tcp-bbr, quic, udp, aerotp-<mode>.
    #[arg(long)]
    protocols: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    #[arg(long, default_value = "10mbit", value_parser = rate_arg)]
    rate: u64,
    #[arg(long, default_value = "5ms", value_parser = duration_arg)]
    delay: Duration,
    /// Packet loss probabilities, comma separated (both directions).
    #[arg(long)]
    loss: Option<String>,
    /// Trials per point.
    #[arg(long)]
    trials: Option<u32>,
    /// Longest one trial may take.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    cap: Duration,
    /// AeroTP mode.
    #[arg(long, default_value = "reliable", value_parser = mode_arg)]
    mode: Mode,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
pub struct OutageArgs {
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    #[arg(long, default_value = "10ms", value_parser = duration_arg)]
    delay: Duration,
    /// Outage length (both directions).
    #[arg(long, value_parser = duration_arg)]
    outage: Option<Duration>,
    /// Time from the start of the transfer to the outage.
    #[arg(long, default_value = "3s", value_parser = duration_arg)]
    before: Duration,
    /// Data left to send after the outage, as time at the link rate.
    #[arg(long, default_value = "5s", value_parser = duration_arg)]
    after: Duration,
    #[arg(long)]
    protocols: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
pub struct MultipathArgs {
    /// Number of alike paths (lab path i: 10.77.i.1 <-> 10.77.i.2), 1 to 16.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=16))]
    paths: u64,
    /// Rate of each path, each direction.
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    /// One-way delay of each path.
    #[arg(long, default_value = "10ms", value_parser = duration_arg)]
    delay: Duration,
    /// Bit-error rate of each path, both directions, in [0, 1).
    #[arg(long, default_value = "1e-5", value_parser = ber_arg)]
    ber: f64,
    /// Bytes per transfer.
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Runs per protocol.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: Option<u32>,
    /// Longest one transfer may take.
    #[arg(long, default_value = "120s", value_parser = duration_arg)]
    cap: Duration,
    /// Protocols, comma separated: tcp-cubic, tcp-bbr, mptcp-cubic, mptcp-bbr, …
    #[arg(long)]
    protocols: Option<String>,
    #[command(flatten)]
    common: Common,
}

fn ber_arg(s: &str) -> Result<f64, String> {
    match list_arg(s)?.as_slice() {
        [x] => Ok(*x),
        _ => Err(format!("'{s}': one bit-error rate in [0, 1)")),
    }
}

pub fn multipath(a: MultipathArgs) -> i32 {
    let d = multipath::Config::default();
    let q = a.common.quick;
    let cfg = multipath::Config {
        paths: a.paths as usize,
        rate_bps: a.rate,
        delay: a.delay,
        ber: a.ber,
        size: a.size.unwrap_or(if q { 2_000_000 } else { d.size }),
        runs: a.runs.unwrap_or(if q { 1 } else { d.runs }),
        seed: a.common.seed.unwrap_or(d.seed),
        cap: a.cap,
        protocols: match a.protocols.as_deref().map(protocols_arg).transpose() {
            Ok(v) => v.unwrap_or(d.protocols),
            Err(e) => return usage("multipath", "--protocols", &e),
        },
    };
    let r = match multipath::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aerotp bench multipath: {e:#}");
            return EXIT_LOCAL;
        }
    };
    eprintln!(
        "\n{}",
        multipath::markdown(&cfg, &r, &aerotp_labbench::command_line())
    );
    finish(&a.common, "multipath", &r.points, |dir, cmd| {
        multipath::write(&cfg, &r, dir, cmd)
    })
}

fn usage(what: &str, flag: &str, e: &str) -> i32 {
    eprintln!("aerotp bench {what}: {flag}: {e}");
    EXIT_USAGE
}

fn finish<T: serde::Serialize>(
    c: &Common,
    what: &str,
    summary: &T,
    write: impl FnOnce(&std::path::Path, &str) -> anyhow::Result<()>,
) -> i32 {
    if !c.no_files {
        if let Err(e) = write(&c.out, &aerotp_labbench::command_line()) {
            eprintln!("aerotp bench {what}: writing results: {e:#}");
            return EXIT_LOCAL;
        }
        eprintln!("results in {}/{what}*", c.out.display());
    }
    if c.json {
        match serde_json::to_string_pretty(summary) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("aerotp bench {what}: {e}");
                return EXIT_LOCAL;
            }
        }
    }
    EXIT_OK
}

pub fn lossy(a: LossyArgs) -> i32 {
    let d = lossy::Config::default();
    let q = a.common.quick;
    let cfg = lossy::Config {
        rate_bps: a.rate,
        delay: a.delay,
        size: a.size.unwrap_or(if q { 200_000 } else { d.size }),
        bers: match a.ber.as_deref().map(list_arg).transpose() {
            Ok(v) => v.unwrap_or(if q { vec![0.0, 1e-5, 1e-4] } else { d.bers }),
            Err(e) => return usage("lossy", "--ber", &e),
        },
        cap: a
            .cap
            .unwrap_or(if q { Duration::from_secs(15) } else { d.cap }),
        runs: a.runs.unwrap_or(if q { 1 } else { d.runs }),
        seed: a.common.seed.unwrap_or(d.seed),
        protocols: match a.protocols.as_deref().map(protocols_arg).transpose() {
            Ok(v) => v.unwrap_or(d.protocols),
            Err(e) => return usage("lossy", "--protocols", &e),
        },
    };
    let r = match lossy::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aerotp bench lossy: {e:#}");
            return EXIT_LOCAL;
        }
    };
    eprintln!(
        "\n{}",
        lossy::markdown(&cfg, &r, &aerotp_labbench::command_line())
    );
    finish(&a.common, "lossy", &r.points, |dir, cmd| {
        lossy::write(&cfg, &r, dir, cmd)
    })
}

pub fn setup(a: SetupArgs) -> i32 {
    let d = setup::Config::default();
    let q = a.common.quick;
    let cfg = setup::Config {
        rate_bps: a.rate,
        delay: a.delay,
        losses: match a.loss.as_deref().map(list_arg).transpose() {
            Ok(v) => v.unwrap_or(if q { vec![0.0, 0.2] } else { d.losses }),
            Err(e) => return usage("setup", "--loss", &e),
        },
        trials: a.trials.unwrap_or(if q { 10 } else { d.trials }),
        cap: a.cap,
        seed: a.common.seed.unwrap_or(d.seed),
        mode: a.mode,
    };
    let r = match setup::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aerotp bench setup: {e:#}");
            return EXIT_LOCAL;
        }
    };
    eprintln!(
        "\n{}",
        setup::markdown(&cfg, &r, &aerotp_labbench::command_line())
    );
    finish(&a.common, "setup", &r.points, |dir, cmd| {
        setup::write(&cfg, &r, dir, cmd)
    })
}

pub fn outage(a: OutageArgs) -> i32 {
    let d = outage::Config::default();
    let q = a.common.quick;
    let cfg = outage::Config {
        rate_bps: a.rate,
        delay: a.delay,
        before: a.before,
        outage: a
            .outage
            .unwrap_or(if q { Duration::from_secs(5) } else { d.outage }),
        after: a.after,
        seed: a.common.seed.unwrap_or(d.seed),
        protocols: match a.protocols.as_deref().map(protocols_arg).transpose() {
            Ok(v) => v.unwrap_or(d.protocols),
            Err(e) => return usage("outage", "--protocols", &e),
        },
    };
    let r = match outage::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aerotp bench outage: {e:#}");
            return EXIT_LOCAL;
        }
    };
    eprintln!(
        "\n{}",
        outage::markdown(&cfg, &r, &aerotp_labbench::command_line())
    );
    finish(&a.common, "outage", &r.rows, |dir, cmd| {
        outage::write(&cfg, &r, dir, cmd)
    })
}
