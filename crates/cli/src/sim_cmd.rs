//! `aerotp sim`: simulate transfers of one scenario in virtual time and summarise them.
//!
//! The JSON output (`--json`) is a contract other tools check: one object with at least
//! mode, ber, loss, runs, complete_runs, delivered_bytes, goodput_bps, mean_delay_s,
//! overhead_bytes, setup_delay_s (means over runs), and retransmissions,
//! spurious_retransmissions, wire_bytes_forward, wire_bytes_reverse, ceiling_bps,
//! message_delay, queue_delay{n,p50,p99,max,mean} (seconds, at the forward bottleneck) and
//! queue_drops. With `--senders N` (several senders on the same links) it adds `senders`
//! (each sender's goodput_bps, delivered_bytes, start_s, finish_s, ...) and `jain`. See
//! docs/simulator.md.

mod senders;

use std::time::{Duration, Instant};

use aerotp_link::format_rate;
use aerotp_proto::FecSetting;
use aerotp_sim::{
    parse_size, run_many, run_once_tapped, run_seed, Scenario, SimMode, Summary, Topology, Workload,
};
use anyhow::{bail, Context};

use crate::link_flags::LinkFlags;
use crate::rate_flags::{resolve_rate, RateArg, RateDefault};

/// Simulate file transfers over an impaired link in virtual time (deterministic: the same
/// seed gives the same result).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transfer mode: reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack,
    /// unreliable, datagram, or udp (plain UDP baseline).
    #[arg(long, value_parser = mode_arg)]
    mode: SimMode,
    /// The network: a scenario file and/or link flags (every path's forward and reverse
    /// link). `--rate` sets every link's rate and the sending rate.
    #[command(flatten)]
    link: LinkFlags,
    /// AeroTP's sending rate (UDP's pacing rate), or `auto`: AeroTP discovers it from the
    /// acknowledgements (docs/rate.md; UDP then paces at the links' rate). Default: `--rate`
    /// if given, else the sum of the paths' forward rates (5mbit without a scenario).
    #[arg(long, value_parser = crate::rate_flags::rate_or_auto_arg)]
    send_rate: Option<RateArg>,
    /// Discover AeroTP's rate (as `--send-rate auto`) but never above this; not with a fixed
    /// `--send-rate R`.
    #[arg(long, value_parser = crate::common::rate_arg)]
    max_rate: Option<u64>,
    /// A radio beside the sender says each forward link's rate whenever its trace changes it
    /// (and its configured rate at the start), as a DLEP modem says Current Data Rate
    /// (docs/dlep.md): the path's rate is capped by it at once, fixed or discovered.
    #[arg(long)]
    radio_follows_trace: bool,
    /// What the applications do: bulk (the file, default),
    /// messages[,size=200,interval=100ms,count=100|duration=10s],
    /// stream[,rate=1mbit,duration=10s,chunk=1000],
    /// request-response[,request=200,response=2000,count=10,interval=1s].
    #[arg(long, default_value = "bulk", value_parser = workload_arg)]
    workload: Workload,
    /// File size: 1MB (= 1 000 000 bytes), 500kB, 1MiB, 4096.
    #[arg(long, default_value = "1MB", value_parser = size_arg)]
    size: usize,
    /// Largest datagram (UDP payload) in bytes.
    #[arg(long, default_value_t = 1500, value_parser = crate::common::mtu_arg)]
    mtu: usize,
    /// FEC: off, auto, N (papers' 32-bit words per TPDU, 0-256) or pN (parity bytes per
    /// codeword). Default: auto in every mode but unreliable, datagram and udp (off there).
    #[arg(long, value_parser = fec_arg)]
    fec: Option<FecSetting>,
    #[command(flatten)]
    erasure: crate::erasure_flags::ErasureArgs,
    /// ACKs aggregated per MACK (1-365).
    #[arg(long, default_value_t = 32, value_parser = crate::common::mack_arg)]
    mack: u16,
    /// Number of runs (different seeds), spread over all cores.
    #[arg(long, default_value_t = 20, value_parser = runs_arg)]
    runs: usize,
    /// Base seed; run i uses a seed derived from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write a pcapng capture of run 0 (the first seed) to FILE: interface "sent" holds every
    /// datagram either endpoint sent, "arrived" every datagram the link delivered, stamped in
    /// virtual time (docs/capture.md). Run 0 is the same run as in the summary.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Write an event trace of every run to DIR/run-<i>-seed-<seed>.sqlog (qlog-style JSON-SEQ,
    /// virtual time, both endpoints: TPDUs sent and received with their fields, RTT, losses,
    /// FEC, state; docs/qlog.md). `aerotp trace FILE` draws one.
    #[arg(long, value_name = "DIR")]
    qlog: Option<std::path::PathBuf>,
    /// Write run 0's delivery timeline to FILE as CSV: `time_s,delivered_bytes` at every
    /// read of the receiving application (for plots, and to measure a stall or a recovery).
    #[arg(long, value_name = "FILE")]
    timeline: Option<std::path::PathBuf>,
    /// two-node (one impaired link) or papers (10 Gb/s LAN - impaired link - 10 Gb/s LAN).
    #[arg(long, default_value = "papers", value_parser = topology_arg)]
    topology: Topology,
    /// With several paths, spread the datagrams below the engine in proportion to the paths'
    /// rates, as Linux teql stripes a link (seed 003's set-up), instead of the engine using
    /// each path itself (default: one peer address per path, the rate shared by what each
    /// delivers, dead paths declared down and probed; docs/spec.md §9).
    #[arg(long)]
    stripe_below: bool,
    /// Virtual-time cap per run; a run that reaches it is incomplete.
    #[arg(long, default_value = "600s", value_parser = crate::common::duration_arg)]
    cap: Duration,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    senders: senders::SendersArgs,
}

fn mode_arg(s: &str) -> Result<SimMode, String> {
    s.parse().map_err(|e: aerotp_sim::SimError| e.to_string())
}
fn topology_arg(s: &str) -> Result<Topology, String> {
    s.parse().map_err(|e: aerotp_sim::SimError| e.to_string())
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
fn workload_arg(s: &str) -> Result<Workload, String> {
    Workload::parse(s).map_err(|e| e.to_string())
}

impl Args {
    fn scenario(&self) -> anyhow::Result<Scenario> {
        let network = self.link.network()?;
        let mut s = Scenario {
            mode: self.mode,
            network,
            size: self.size,
            mtu: self.mtu,
            fec: self.fec,
            erasure: self.erasure.choice(),
            mack: self.mack,
            topology: self.topology,
            cap: self.cap,
            timeline: false,
            radio_follows_trace: self.radio_follows_trace,
            workload: self.workload.clone(),
            striping: if self.stripe_below {
                aerotp_sim::Striping::Below
            } else {
                aerotp_sim::Striping::Engine
            },
            ..Scenario::default()
        };
        let links = self.link.rate.unwrap_or_else(|| s.forward_rate_sum());
        (s.rate_control, s.rate_bps) = match s.mode {
            // Plain UDP paces at a fixed rate, the links' unless one is given.
            SimMode::Udp => match self.send_rate {
                Some(RateArg::Fixed(r)) => (aerotp_proto::RateControl::Fixed, r),
                _ => (aerotp_proto::RateControl::Fixed, links),
            },
            SimMode::Aero(mode) => resolve_rate(
                mode,
                "--send-rate",
                self.send_rate,
                self.max_rate,
                RateDefault::Fixed(links),
            )?,
        };
        Ok(s)
    }

    /// Several senders to run, or `None` for one; what cannot be combined with them.
    fn sender_spec(&self, s: &Scenario) -> Result<Option<aerotp_sim::Senders>, String> {
        self.senders.spec(
            s,
            &[
                ("--pcap", self.pcap.is_some()),
                ("--qlog", self.qlog.is_some()),
                ("--timeline", self.timeline.is_some()),
            ],
        )
    }
}

/// The JSON object `aerotp sim --json` prints.
pub fn to_json(sum: &Summary, wall: Duration) -> serde_json::Value {
    let mut v = serde_json::to_value(sum).expect("summary serialises");
    v["wall_s"] = serde_json::json!(wall.as_secs_f64());
    // With several paths used by the engine, each run's outages and down declarations per
    // path (the summary's `path_states` counts them over the runs).
    if sum.results.iter().any(|r| !r.paths.is_empty()) {
        let runs: Vec<_> = sum
            .results
            .iter()
            .map(|r| serde_json::json!({ "seed": r.seed, "paths": r.paths }))
            .collect();
        v["path_runs"] = runs.into();
    }
    v
}

fn fmt_opt(v: Option<f64>, scale: f64, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.3} {unit}", x * scale))
}

/// The table `aerotp sim` prints: the scenario, what was delivered, what it cost.
fn table(sum: &Summary, wall: Duration) -> String {
    scenario_rows(sum)
        .into_iter()
        .chain(delivery_rows(sum))
        .chain(cost_rows(sum, wall))
        .map(|(k, v)| format!("{k:<16} {v}\n"))
        .collect()
}

/// The table's rows that say what was simulated.
fn scenario_rows(sum: &Summary) -> Vec<(&'static str, String)> {
    vec![
        ("mode", sum.mode.clone()),
        ("topology", sum.topology.clone()),
        (
            "link",
            format!(
                "{} path(s); path 0 forward {} ms, BER {}, loss {}",
                sum.paths,
                sum.delay_s * 1e3,
                sum.ber,
                sum.loss
            ),
        ),
        ("send rate", format_rate(sum.rate_bps)),
        ("workload", sum.workload.clone()),
        ("file", format!("{} bytes, MTU {}", sum.size, sum.mtu)),
        (
            "fec",
            format!(
                "{} (parity {:.1} B/codeword = {:.1} words/TPDU at the end)",
                sum.fec, sum.fec_parity, sum.fec_words
            ),
        ),
        ("mack", sum.mack.to_string()),
    ]
}

/// The table's rows that say what was delivered, how fast and with what delay.
fn delivery_rows(sum: &Summary) -> Vec<(&'static str, String)> {
    vec![
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
        ("ceiling", format!("{:.3} Mb/s", sum.ceiling_bps / 1e6)),
        (
            "queue delay",
            format!("{} at the forward bottleneck, all runs", sum.queue_delay),
        ),
        (
            "queue drops",
            format!(
                "{:.1} forward, {:.1} reverse per run (reverse delay p99 {:.3} ms)",
                sum.queue_drops,
                sum.queue_drops_reverse,
                sum.queue_delay_reverse.p99 * 1e3
            ),
        ),
        ("mean delay", fmt_opt(sum.mean_delay_s, 1e3, "ms")),
        (
            "message delay",
            sum.message_delay.map_or_else(
                || "-".into(),
                |d| {
                    format!(
                        "p50 {:.3} ms, p90 {:.3}, p99 {:.3}, max {:.3} ({} messages, all runs)",
                        d.p50 * 1e3,
                        d.p90 * 1e3,
                        d.p99 * 1e3,
                        d.max * 1e3,
                        d.n
                    )
                },
            ),
        ),
        ("setup delay", fmt_opt(sum.setup_delay_s, 1e3, "ms")),
    ]
}

/// The table's rows that say what the delivery cost: overhead, retransmissions, repair,
/// time.
fn cost_rows(sum: &Summary, wall: Duration) -> Vec<(&'static str, String)> {
    vec![
        ("overhead", format!("{:.0} bytes", sum.overhead_bytes)),
        (
            "retransmissions",
            format!(
                "{:.1} TPDUs ({:.1} spurious)",
                sum.retransmissions, sum.spurious_retransmissions
            ),
        ),
        (
            "wire bytes",
            format!(
                "{:.0} forward, {:.0} reverse",
                sum.wire_bytes_forward, sum.wire_bytes_reverse
            ),
        ),
        ("FEC-corrected", format!("{:.1} TPDUs", sum.tpdus_corrected)),
        ("lost", format!("{:.1} TPDUs", sum.tpdus_lost)),
        (
            "erasure",
            format!(
                "{:.1} lost on the link, {:.1} rebuilt, {:.1} repair TPDUs sent",
                sum.wire_lost, sum.tpdus_rebuilt, sum.repairs_sent
            ),
        ),
        ("max delay", fmt_opt(sum.max_delay_s, 1e3, "ms")),
        ("virtual time", format!("{:.3} s per run", sum.elapsed_s)),
        ("wall time", format!("{:.3} s", wall.as_secs_f64())),
    ]
}

/// Runs the command; the text it prints is returned for tests.
pub fn execute(args: &Args) -> anyhow::Result<String> {
    let s = args.scenario()?;
    if let Err(e) = s.validate() {
        bail!("{e}");
    }
    if let Some(spec) = args.sender_spec(&s).map_err(anyhow::Error::msg)? {
        return execute_senders(args, &s, &spec);
    }
    // Created before anything runs: an unwritable file stops the command at once.
    let capture = match &args.pcap {
        Some(p) => Some(
            aerotp_capture::SimCapture::create(p)
                .with_context(|| format!("--pcap {}", p.display()))?,
        ),
        None => None,
    };
    if let Some(d) = &args.qlog {
        crate::qlog_tap::prepare_dir(d)?;
    }
    // Created before anything runs, as the capture.
    let timeline = match &args.timeline {
        Some(p) => Some((
            p,
            std::fs::File::create(p).with_context(|| format!("--timeline {}", p.display()))?,
        )),
        None => None,
    };
    let t = Instant::now();
    let sum = run_many(&s, args.runs, args.seed).context("simulation")?;
    let wall = t.elapsed();
    let mut out = if args.json {
        format!("{}\n", to_json(&sum, wall))
    } else {
        table(&sum, wall)
    };
    // The JSON output stays one object on stdout; the lines about the files go to stderr
    // then.
    let mut note = |line: String| {
        if args.json {
            eprint!("{line}");
        } else {
            out.push_str(&line);
        }
    };
    if let Some((path, file)) = timeline {
        note(write_timeline(args, &s, path, file)?);
    }
    if let Some(mut cap) = capture {
        // Run 0 again with the hook: same scenario and seed, so the same run, bit for bit.
        run_once_tapped(&s, run_seed(args.seed, 0), &mut cap);
        let n = cap.finish()?;
        note(format!(
            "capture {}: {n} packets (run 0, seed {})\n",
            args.pcap
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
            run_seed(args.seed, 0)
        ));
    }
    if let Some(dir) = &args.qlog {
        note(write_qlogs(args, &s, dir)?);
    }
    Ok(out)
}

/// Runs run 0 again keeping its timeline (the same run, bit for bit) and writes it to
/// `file` (`--timeline path`) as CSV; the line that says so.
fn write_timeline(
    args: &Args,
    s: &Scenario,
    path: &std::path::Path,
    file: std::fs::File,
) -> anyhow::Result<String> {
    use std::io::Write;
    let traced = Scenario {
        timeline: true,
        ..s.clone()
    };
    let r = aerotp_sim::run_once(&traced, run_seed(args.seed, 0));
    let mut w = std::io::BufWriter::new(file);
    writeln!(w, "time_s,delivered_bytes")?;
    for (t, b) in &r.timeline {
        writeln!(w, "{t:.6},{b}")?;
    }
    w.flush()
        .with_context(|| format!("--timeline {}", path.display()))?;
    Ok(format!(
        "timeline {}: {} points (run 0)\n",
        path.display(),
        r.timeline.len()
    ))
}

/// Runs several senders on the scenario's links (`--senders N`); the text it prints.
fn execute_senders(
    args: &Args,
    s: &Scenario,
    spec: &aerotp_sim::Senders,
) -> anyhow::Result<String> {
    let t = Instant::now();
    let sum = aerotp_sim::run_many_senders(s, spec, args.runs, args.seed).context("simulation")?;
    let wall = t.elapsed();
    Ok(if args.json {
        format!("{}\n", senders::to_json(&sum, wall))
    } else {
        table(&sum.total, wall) + &senders::table(&sum)
    })
}

/// Runs every run again with the trace hook (same scenario and seeds: the same runs).
fn write_qlogs(
    args: &Args,
    s: &aerotp_sim::Scenario,
    dir: &std::path::Path,
) -> anyhow::Result<String> {
    let title = std::env::args().collect::<Vec<_>>().join(" ");
    let (mut events, mut dropped) = (0, 0);
    for i in 0..args.runs {
        let seed = run_seed(args.seed, i);
        let path = dir.join(format!("run-{i}-seed-{seed}.sqlog"));
        let mut q = crate::qlog_tap::SimQlog::create(path, &title)?;
        run_once_tapped(s, seed, &mut q);
        let st = q.finish()?;
        events += st.events;
        dropped += st.dropped;
    }
    Ok(format!(
        "qlog {}: {} traces, {events} events{}\n",
        dir.display(),
        args.runs,
        if dropped > 0 {
            format!(", {dropped} not written (byte bound)")
        } else {
            String::new()
        }
    ))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Senders that cannot be combined with the rest of the command line are a usage error
    // (exit 2, as clap's own); a scenario that cannot be built is reported by `execute`.
    if let Ok(s) = args.scenario() {
        if let Err(e) = args.sender_spec(&s) {
            clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{e}\n")).exit();
        }
    }
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
    fn send_rate_auto_discovers_and_bad_rates_are_refused() {
        let s = parse("--mode reliable --send-rate auto")
            .unwrap()
            .scenario()
            .unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (
                aerotp_proto::RateControl::Discover,
                aerotp_proto::DEFAULT_RATE_CAP_BPS
            )
        );
        let s = parse("--mode hybrid-nack-mack --max-rate 2mbit")
            .unwrap()
            .scenario()
            .unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (aerotp_proto::RateControl::Discover, 2_000_000)
        );
        let s = parse("--mode reliable").unwrap().scenario().unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (aerotp_proto::RateControl::Fixed, 5_000_000)
        );
        // Plain UDP has nothing to discover with: it paces at the links' rate.
        let s = parse("--mode udp --send-rate auto")
            .unwrap()
            .scenario()
            .unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (aerotp_proto::RateControl::Fixed, 5_000_000)
        );
        for bad in [
            "--send-rate fast",
            "--send-rate 10",
            "--max-rate auto",
            "--max-rate 0",
        ] {
            assert!(parse(&format!("--mode reliable {bad}")).is_err(), "{bad}");
        }
        let e = parse("--mode near-reliable --send-rate auto")
            .unwrap()
            .scenario()
            .unwrap_err();
        assert!(e.to_string().contains("--max-rate"), "{e}");
        let e = parse("--mode reliable --send-rate 2mbit --max-rate 3mbit")
            .unwrap()
            .scenario()
            .unwrap_err();
        assert!(e.to_string().contains("give one of them"), "{e}");
    }

    #[test]
    fn json_has_the_contract_keys() {
        // FEC off: the ceiling below is the one without parity.
        let a = parse(
            "--mode reliable --fec off --ber 1e-5 --size 40kB --runs 2 --topology two-node --json",
        )
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
            "retransmissions",
            "spurious_retransmissions",
            "wire_bytes_forward",
            "wire_bytes_reverse",
            "ceiling_bps",
            "message_delay",
            "workload",
            "paths",
            "queue_delay",
            "queue_drops",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        let fwd = v["wire_bytes_forward"].as_f64().unwrap();
        let rev = v["wire_bytes_reverse"].as_f64().unwrap();
        assert!(fwd > 40_000.0 && rev > 0.0 && rev < fwd, "{v}");
        // 5 Mb/s × 1476/1528 × (1 − 1e-5)^(8·1528).
        let ceiling = 5e6 * 1476.0 / 1528.0 * (1.0f64 - 1e-5).powi(8 * 1528);
        assert!(
            (v["ceiling_bps"].as_f64().unwrap() - ceiling).abs() < 1.0,
            "{v}"
        );
        assert!(v["message_delay"].is_null());
        // A sender paced at the link's rate keeps the bottleneck's queue short: at most a
        // few datagrams' serialisation (2.4 ms each at 5 Mb/s), and never full.
        let q = &v["queue_delay"];
        let (p50, p99, max) = (q["p50"].as_f64(), q["p99"].as_f64(), q["max"].as_f64());
        assert!(p50.unwrap() <= p99.unwrap() && p99 <= max, "{q}");
        assert!(max.unwrap() < 0.1 && q["n"].as_u64().unwrap() > 50, "{q}");
        assert_eq!(v["queue_drops"], 0.0);
        assert_eq!(v["mode"], "reliable");
        assert_eq!(v["runs"], 2);
        assert_eq!(v["complete_runs"], 2);
        assert_eq!(v["delivered_bytes"].as_f64().unwrap(), 40_000.0);
        assert!(v["goodput_bps"].as_f64().unwrap() < 5e6);
    }

    #[test]
    fn bad_flags_are_rejected() {
        // --ber is optional now (default 0).
        assert!(parse("--mode reliable").is_ok());
        for bad in [
            "--mode reliable --workload telemetry",
            "--mode reliable --reverse-delay soon",
            "--mode reliable --burst good=2s",
            "--mode reliable --send-rate 0",
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
            "--mode reliable --ber 0 --mack 400",
            "--mode reliable --ber 0 --mtu 0",
            "--mode reliable --ber 0 --cap 99999h",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // The flag's own parser names it and the range (before the scenario's check).
        let e = parse("--mode reliable --ber 0 --mack 400")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mack") && e.contains("1 to 365"), "{e}");
    }

    #[test]
    fn scenario_file_flags_and_workloads() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("two.toml");
        std::fs::write(
            &file,
            "[[path]]\nforward = { rate_bps = \"3mbit\", delay = \"10ms\" }\n\
             [[path]]\nforward = { rate_bps = \"2mbit\", delay = \"30ms\" }\n\
             reverse = { rate_bps = \"256kbit\" }\n",
        )
        .unwrap();
        let f = file.display();
        let json = |extra: &str| -> serde_json::Value {
            let a = parse(&format!(
                "--mode reliable --size 60kB --runs 2 --topology two-node --json {extra}"
            ))
            .unwrap();
            serde_json::from_str(&execute(&a).unwrap()).unwrap()
        };
        // The sending rate defaults to the sum of the forward rates; --rate sets both.
        let v = json(&format!("--scenario {f}"));
        assert_eq!(v["paths"], 2);
        assert_eq!(v["rate_bps"], 5_000_000);
        assert_eq!(v["complete_runs"], 2, "{v}");
        let v = json(&format!("--scenario {f} --rate 1mbit"));
        assert_eq!(v["rate_bps"], 1_000_000);
        let v = json(&format!("--scenario {f} --send-rate 4mbit --ber 1e-6"));
        assert_eq!(v["rate_bps"], 4_000_000);
        assert_eq!(v["ber"].as_f64(), Some(1e-6));
        // A bad file names the file and the key.
        std::fs::write(&file, "[[path]]\nforward = { ber = 2 }\n").unwrap();
        let a = parse(&format!("--mode reliable --scenario {f}")).unwrap();
        let e = execute(&a).unwrap_err().to_string();
        assert!(
            e.contains("two.toml") && e.contains("path[0].forward.ber"),
            "{e}"
        );
        // Messages report delays per message; the reverse link's delay adds nothing to a
        // one-way delay.
        let v = json("--workload messages,size=100,interval=50ms,count=10 --reverse-delay 200ms");
        assert_eq!(v["workload"], "messages,size=100,interval=50ms,count=10");
        let d = &v["message_delay"];
        assert_eq!(d["n"], 20);
        let p50 = d["p50"].as_f64().unwrap();
        assert!(p50 > 0.010 && p50 < 0.011, "{v}");
    }

    #[test]
    fn table_is_readable() {
        let a = parse("--mode udp --ber 0 --size 20kB --runs 1").unwrap();
        let out = execute(&a).unwrap();
        assert!(out.contains("goodput") && out.contains("udp"), "{out}");
    }
}
