//! `aerotp lab`: two network namespaces joined by an emulated link; run commands in them.
//!
//! Starts the lab, runs `--ground` (first, e.g. a server) and `--air` (or an interactive
//! `--shell`) inside the namespaces, waits for the air command, prints the link statistics,
//! tears everything down and exits with the air command's status. SIGINT/SIGTERM tear the lab
//! down too (in `--shell` mode SIGINT belongs to the shell and is ignored here).

use std::process::ExitStatus;
use std::time::Duration;

use aerotp_lab::link::{parse_duration, parse_outage, parse_rate, LinkConfig, LinkStats, Outage};
use aerotp_lab::{Lab, LabConfig, Side};
use anyhow::{anyhow, Context, Result};
use tokio::signal::unix::{signal, SignalKind};

/// Arguments of `aerotp lab`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Commands run with `sh -c` inside the namespace and see AEROTP_AIR_ADDR, \
AEROTP_GROUND_ADDR and AEROTP_PEER_ADDR.\n\
Example: aerotp lab --rate 2mbit --delay 300ms --ber 1e-5 \\\n  \
--ground 'python3 -m http.server -b $AEROTP_GROUND_ADDR 8000' \\\n  \
--air 'curl -s -o /dev/null -w \"%{time_total}s\\n\" http://$AEROTP_GROUND_ADDR:8000/'"
)]
pub struct Args {
    /// Forward (air → ground) rate, e.g. 5mbit, 250kbit, 1.2Mbps.
    #[arg(long, default_value = "5mbit", value_parser = parse_rate)]
    pub rate: u64,
    /// Reverse (ground → air) rate; default: same as --rate.
    #[arg(long, value_parser = parse_rate)]
    pub reverse_rate: Option<u64>,
    /// One-way propagation delay of both directions, e.g. 10ms, 0.3s.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub delay: Duration,
    /// Bit error rate of both directions, applied to whole IP packets (0 ≤ BER < 1).
    #[arg(long, default_value_t = 0.0)]
    pub ber: f64,
    /// Random packet loss probability of both directions (0 ≤ P ≤ 1).
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Link outage START+DURATION from lab start, both directions, e.g. 5s+2s. Repeatable.
    #[arg(long = "outage", value_parser = parse_outage)]
    pub outages: Vec<Outage>,
    /// Seed of the impairment draws (the reverse link derives its own from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Command run in the air namespace (`sh -c`); the lab ends when it exits.
    #[arg(long, conflicts_with = "shell")]
    pub air: Option<String>,
    /// Command run in the ground namespace first (`sh -c`), e.g. a server; killed at the end.
    #[arg(long)]
    pub ground: Option<String>,
    /// Open an interactive shell ($SHELL, else /bin/sh) in this namespace instead of --air.
    #[arg(long, value_parser = ["air", "ground"])]
    pub shell: Option<String>,
    /// How long to let --ground start (e.g. bind its socket) before --air runs.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub settle: Duration,
    /// Instead of sleeping --settle, wait (at most 15 s) until the ground command accepts TCP
    /// connections on this port of the ground address (probed inside the ground namespace,
    /// so the probe never crosses the link).
    #[arg(long, value_name = "PORT")]
    pub ground_port: Option<u16>,
    /// Tag of the namespace names (aerotp-air-<pid>-<name>); letters, digits, `_`, `.`.
    #[arg(long)]
    pub name: Option<String>,
    /// Also print the final link statistics as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    fn lab_config(&self) -> LabConfig {
        let forward = LinkConfig {
            rate_bps: self.rate,
            delay: self.delay,
            ber: self.ber,
            loss: self.loss,
            outages: self.outages.clone(),
            ..LinkConfig::default()
        };
        let reverse = LinkConfig {
            rate_bps: self.reverse_rate.unwrap_or(self.rate),
            ..forward.clone()
        };
        LabConfig {
            forward,
            reverse,
            seed: self.seed,
            name: self.name.clone(),
        }
    }
}

/// Run `aerotp lab`; returns the process exit code (the air command's status).
pub fn run(args: Args) -> Result<i32> {
    // The runtime gets its own thread so that this works whether or not the caller is
    // already inside a tokio runtime.
    std::thread::Builder::new()
        .name("aerotp-lab".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("building the tokio runtime")?
                .block_on(supervise(args))
        })
        .context("spawning the lab thread")?
        .join()
        .map_err(|_| {
            anyhow!("the lab supervisor panicked (the next `aerotp lab` removes what it left)")
        })?
}

async fn supervise(args: Args) -> Result<i32> {
    // Handlers first, so a Ctrl-C during setup still leads to a clean teardown.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let shell_side = args
        .shell
        .as_deref()
        .map(str::parse::<Side>)
        .transpose()
        .map_err(|e| anyhow!(e))?;

    let lab = Lab::start(args.lab_config())?;
    eprintln!(
        "lab up: air {} ({}) <-> ground {} ({}); forward {} bit/s, reverse {} bit/s, delay {:?}",
        lab.air_ns(),
        lab.air_addr(),
        lab.ground_ns(),
        lab.ground_addr(),
        args.rate,
        args.reverse_rate.unwrap_or(args.rate),
        args.delay,
    );

    let mut ground = match &args.ground {
        Some(cmd) => Some(spawn(&lab, Side::Ground, "sh", &["-c", cmd])?),
        None => None,
    };
    if let Some(child) = ground.as_mut() {
        match args.ground_port {
            Some(port) => wait_for_listener(&lab, child, port).await?,
            None => tokio::time::sleep(args.settle).await,
        }
        if let Some(status) = child.try_wait()? {
            eprintln!("warning: the ground command already exited ({status})");
        }
    }

    let mut air = if let Some(side) = shell_side {
        let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
        eprintln!(
            "shell in {} ({side}); exit it to tear the lab down",
            lab.ns(side)
        );
        Some(spawn(&lab, side, &shell, &[])?)
    } else if let Some(cmd) = &args.air {
        Some(spawn(&lab, Side::Air, "sh", &["-c", cmd])?)
    } else {
        eprintln!(
            "no --air command: the lab runs until Ctrl-C; use `ip netns exec {} CMD` / `ip netns exec {} CMD`",
            lab.air_ns(),
            lab.ground_ns()
        );
        None
    };

    let code = loop {
        tokio::select! {
            status = wait(&mut air) => break exit_code(status?),
            _ = sigint.recv() => {
                // In a shell, Ctrl-C is for the shell's foreground job.
                if shell_side.is_none() {
                    eprintln!("interrupted: tearing the lab down");
                    break 130;
                }
            }
            _ = sigterm.recv() => {
                eprintln!("terminated: tearing the lab down");
                break 143;
            }
        }
    };

    let stats = lab.stats();
    let checksum_drops = lab.checksum_drops();
    // Teardown SIGTERMs (then SIGKILLs) everything still running in the namespaces,
    // the ground command and an interrupted air command included.
    let stopped = lab.stop();
    for (what, child) in [("air", air.as_mut()), ("ground", ground.as_mut())] {
        if let Some(child) = child {
            match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(Ok(status))
                    if what == "ground" && !status.success() && status.code().is_some() =>
                {
                    eprintln!("ground command exited with {status}")
                }
                Ok(_) => {}
                Err(_) => eprintln!("warning: the {what} command did not exit after teardown"),
            }
        }
    }
    print_stats("forward (air -> ground)", &stats.0);
    print_stats("reverse (ground -> air)", &stats.1);
    eprintln!(
        "dropped by the receiving host's TCP/UDP checksum: forward {}, reverse {}",
        checksum_drops.0, checksum_drops.1
    );
    if args.json {
        let json = serde_json::json!({
            "forward": stats.0,
            "reverse": stats.1,
            "checksum_drops": { "forward": checksum_drops.0, "reverse": checksum_drops.1 },
            "exit_code": code,
        });
        println!("{json}");
    }
    stopped.context("lab teardown")?;
    Ok(code)
}

fn spawn(lab: &Lab, side: Side, program: &str, args: &[&str]) -> Result<tokio::process::Child> {
    let peer = match side {
        Side::Air => lab.ground_addr(),
        Side::Ground => lab.air_addr(),
    };
    let mut cmd = lab.command(side, program);
    cmd.args(args)
        .env("AEROTP_AIR_ADDR", lab.air_addr().to_string())
        .env("AEROTP_GROUND_ADDR", lab.ground_addr().to_string())
        .env("AEROTP_PEER_ADDR", peer.to_string());
    tokio::process::Command::from(cmd)
        .spawn()
        .with_context(|| format!("starting `{program}` in {} ({side})", lab.ns(side)))
}

/// Poll-connect to the ground address:port from inside the ground namespace until it
/// accepts, the ground command exits, or 15 s pass.
async fn wait_for_listener(lab: &Lab, ground: &mut tokio::process::Child, port: u16) -> Result<()> {
    const LIMIT: Duration = Duration::from_secs(15);
    let addr = std::net::SocketAddr::from((lab.ground_addr(), port));
    let start = std::time::Instant::now();
    while start.elapsed() < LIMIT {
        let probe = lab.spawn_in(Side::Ground, move || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })?;
        // The probe is local to the ground namespace and bounded by its 200 ms timeout.
        if probe
            .join()
            .map_err(|_| anyhow!("TCP probe thread panicked"))?
        {
            return Ok(());
        }
        if let Some(status) = ground.try_wait()? {
            anyhow::bail!("the ground command exited ({status}) before listening on {addr}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!(
        "nothing listened on {addr} in the ground namespace within {LIMIT:?}: check --ground"
    )
}

/// Wait for the child if there is one; never resolves otherwise.
async fn wait(child: &mut Option<tokio::process::Child>) -> std::io::Result<ExitStatus> {
    match child {
        Some(c) => c.wait().await,
        None => std::future::pending().await,
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn print_stats(label: &str, s: &LinkStats) {
    eprintln!(
        "{label}: offered {} pkt / {} B, delivered {} pkt / {} B, queue drops {}, lost {} \
         (random {}, burst {}, outage {}, header {}), corrupted {} pkt ({} bits flipped)",
        s.offered_packets,
        s.offered_bytes,
        s.delivered_packets,
        s.delivered_bytes,
        s.dropped_packets(),
        s.lost_packets(),
        s.lost_random,
        s.lost_burst,
        s.lost_outage,
        s.lost_header_corrupt,
        s.corrupted_packets,
        s.bits_flipped,
    );
}
