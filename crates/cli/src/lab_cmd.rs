//! `aerotp lab`: two network namespaces joined by an emulated link; run commands in them.
//!
//! Starts the lab, runs `--ground` (first, e.g. a server) and `--air` (or an interactive
//! `--shell`) inside the namespaces, waits for the air command, prints the link statistics,
//! tears everything down and exits with the air command's status. SIGINT/SIGTERM tear the lab
//! down too (in `--shell` mode SIGINT belongs to the shell and is ignored here).

use std::process::ExitStatus;
use std::time::Duration;

use aerotp_emu::{outage_seed, path_seed};
use aerotp_lab::link::{parse_duration, Link, LinkStats, Network};
use aerotp_lab::{Lab, LabPath, LabPathsConfig, Side, MAX_LAB_PATHS};
use anyhow::{anyhow, Context, Result};

use crate::link_flags::LinkFlags;

/// The reverse link of path 0 uses `seed ^ REVERSE_SEED_MIX`, as it always has
/// (`aerotp_lab::LabConfig`); path i > 0 mixes its own path seed the same way.
const REVERSE_SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;
use tokio::signal::unix::{signal, SignalKind};

/// Arguments of `aerotp lab`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Commands run with `sh -c` inside the namespace and see AEROTP_AIR_ADDR, \
AEROTP_GROUND_ADDR and AEROTP_PEER_ADDR (path 0), AEROTP_PATHS (the number of paths) and, \
for every path i, AEROTP_AIR_ADDR_i, AEROTP_GROUND_ADDR_i and AEROTP_PEER_ADDR_i \
(10.77.i.1, 10.77.i.2). See docs/lab.md.\n\
Example: aerotp lab --rate 2mbit --delay 300ms --ber 1e-5 \\\n  \
--ground 'python3 -m http.server -b $AEROTP_GROUND_ADDR 8000' \\\n  \
--air 'curl -s -o /dev/null -w \"%{time_total}s\\n\" http://$AEROTP_GROUND_ADDR:8000/'"
)]
pub struct Args {
    /// The link: a scenario file (one TUN pair per path) and flags that override it.
    /// "Forward" is air → ground, "reverse" ground → air.
    #[command(flatten)]
    pub link: LinkFlags,
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
    #[arg(long, default_value = "500ms", value_parser = settle_arg)]
    pub settle: Duration,
    /// Instead of sleeping --settle, wait (at most 15 s) until the ground command accepts TCP
    /// connections on this port of the ground address (probed inside the ground namespace,
    /// so the probe never crosses the link).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub ground_port: Option<u16>,
    /// Tag of the namespace names (aerotp-air-<pid>-<name>); letters, digits, `_`, `.`.
    #[arg(long, value_parser = lab_name_arg)]
    pub name: Option<String>,
    /// Also print the final link statistics as JSON on stdout (with each path's down
    /// intervals while the lab ran).
    #[arg(long)]
    pub json: bool,
    /// Print each path's down intervals (scheduled outages and the random call drops this
    /// --seed draws, in seconds from the lab's start) up to this time as JSON, and exit
    /// without starting a lab (no root needed): the schedule a lab with the same link and
    /// seed applies, since it depends on the seed and the time only.
    #[arg(long, value_name = "DURATION", value_parser = outages_until_arg,
          conflicts_with_all = ["air", "ground", "shell"])]
    pub outages_until: Option<Duration>,
}

impl Args {
    /// The network and the lab to build from it (the lab's links carry whole IP packets:
    /// no virtual header, no per-packet overhead, as `LinkConfig::default()` has them).
    fn lab_config(&self) -> Result<(Network, LabPathsConfig)> {
        let net = self.link.network()?;
        anyhow::ensure!(
            net.paths.len() <= MAX_LAB_PATHS,
            "the lab has at most {MAX_LAB_PATHS} paths; the scenario has {}",
            net.paths.len()
        );
        let paths = net
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let seed = path_seed(self.seed, i);
                LabPath {
                    forward: p.forward_config(outage_seed(seed)),
                    reverse: p.reverse_config(outage_seed(seed)),
                    forward_seed: seed,
                    reverse_seed: seed ^ REVERSE_SEED_MIX,
                }
            })
            .collect();
        Ok((
            net,
            LabPathsConfig {
                paths,
                name: self.name.clone(),
            },
        ))
    }
}

/// `--name`: the rule `aerotp_lab` applies to namespace tags (1 to 32 letters, digits, `_`,
/// `.`), checked here too so that a bad name is refused as a flag error before the lab's
/// root check, on any account.
fn lab_name_arg(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 32
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Err(format!(
            "'{s}' is not a lab name; use 1 to 32 letters, digits, `_` or `.`"
        ));
    }
    Ok(s.to_owned())
}

/// `--outages-until`: more than 0, at most 30 days.
fn outages_until_arg(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() || d > Duration::from_secs(30 * 86_400) {
        return Err(format!(
            "'{s}': give more than 0 and at most 30 days (e.g. 47min)"
        ));
    }
    Ok(d)
}

/// Each path's down intervals `[start, end)` in seconds from the lab's epoch, for both
/// directions, until `until`: what the lab's links apply (the same configs and seeds as
/// [`Args::lab_config`] gives `Lab::start_paths`).
fn outages_json(
    net: &Network,
    config: &LabPathsConfig,
    until: Duration,
) -> Result<serde_json::Value> {
    let secs = |v: Vec<(Duration, Duration)>| -> Vec<[f64; 2]> {
        v.into_iter()
            .map(|(a, b)| [a.as_secs_f64(), b.as_secs_f64()])
            .collect()
    };
    let paths = net
        .paths
        .iter()
        .zip(&config.paths)
        .enumerate()
        .map(|(i, (p, c))| {
            let f = Link::new(c.forward.clone(), c.forward_seed)?.outage_intervals(until);
            let r = Link::new(c.reverse.clone(), c.reverse_seed)?.outage_intervals(until);
            Ok(serde_json::json!({
                "name": p.display_name(i),
                "forward": secs(f),
                "reverse": secs(r),
            }))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(serde_json::json!({ "until_s": until.as_secs_f64(), "paths": paths }))
}

/// `--settle`: 0s (no wait) to 10min; longer is a typo that would hold the namespaces up.
fn settle_arg(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d > Duration::from_secs(600) {
        return Err(format!("'{s}' is too long; give 0s to 10min (e.g. 500ms)"));
    }
    Ok(d)
}

/// Run `aerotp lab`; returns the process exit code (the air command's status).
pub fn run(args: Args) -> Result<i32> {
    if let Some(until) = args.outages_until {
        let (net, config) = args.lab_config()?;
        println!("{}", outages_json(&net, &config, until)?);
        return Ok(0);
    }
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

    let (net, config) = args.lab_config()?;
    // The links' epoch is taken inside `start_paths`, a little after this.
    let started = std::time::Instant::now();
    let lab = Lab::start_paths(config.clone())?;
    announce(&lab, &net, &config);
    let mut ground = start_ground(&lab, &args).await?;
    let mut air = start_air(&lab, &args, shell_side)?;

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

    let measured = Measured::read(&lab);
    // Teardown SIGTERMs (then SIGKILLs) everything still running in the namespaces,
    // the ground command and an interrupted air command included.
    let stopped = lab.stop();
    await_teardown(air.as_mut(), ground.as_mut()).await;
    let multi = net.paths.len() > 1 || args.link.scenario.is_some();
    measured.print(&net, multi);
    if args.json {
        let m = &measured;
        let mut json = stats_json(&net, &m.stats, &m.checksum_drops, &m.addrs, code, multi);
        let ran = started.elapsed();
        json["elapsed_s"] = ran.as_secs_f64().into();
        if let Ok(o) = outages_json(&net, &config, ran) {
            json["outages"] = o["paths"].clone();
        }
        println!("{json}");
    }
    stopped.context("lab teardown")?;
    Ok(code)
}

/// Says the lab is up: its namespaces and each path's addresses, rates and delays.
fn announce(lab: &Lab, net: &Network, config: &LabPathsConfig) {
    eprintln!("lab up: air {}, ground {}", lab.air_ns(), lab.ground_ns());
    for (i, (p, c)) in net.paths.iter().zip(&config.paths).enumerate() {
        eprintln!(
            "  {}: air {} <-> ground {}; forward {} bit/s, {:?}; reverse {} bit/s, {:?}",
            p.display_name(i),
            lab.air_addr_of(i),
            lab.ground_addr_of(i),
            c.forward.rate_bps,
            c.forward.delay,
            c.reverse.rate_bps,
            c.reverse.delay,
        );
    }
}

/// Starts `--ground`, if given, and gives it time to start (`--ground-port` or `--settle`).
async fn start_ground(lab: &Lab, args: &Args) -> Result<Option<tokio::process::Child>> {
    let mut ground = match &args.ground {
        Some(cmd) => Some(spawn(lab, Side::Ground, "sh", &["-c", cmd])?),
        None => None,
    };
    if let Some(child) = ground.as_mut() {
        match args.ground_port {
            Some(port) => wait_for_listener(lab, child, port).await?,
            None => tokio::time::sleep(args.settle).await,
        }
        if let Some(status) = child.try_wait()? {
            eprintln!("warning: the ground command already exited ({status})");
        }
    }
    Ok(ground)
}

/// Starts the `--shell` or the `--air` command; with neither, the lab runs until Ctrl-C.
fn start_air(
    lab: &Lab,
    args: &Args,
    shell_side: Option<Side>,
) -> Result<Option<tokio::process::Child>> {
    Ok(if let Some(side) = shell_side {
        let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
        eprintln!(
            "shell in {} ({side}); exit it to tear the lab down",
            lab.ns(side)
        );
        Some(spawn(lab, side, &shell, &[])?)
    } else if let Some(cmd) = &args.air {
        Some(spawn(lab, Side::Air, "sh", &["-c", cmd])?)
    } else {
        eprintln!(
            "no --air command: the lab runs until Ctrl-C; use `ip netns exec {} CMD` / `ip netns exec {} CMD`",
            lab.air_ns(),
            lab.ground_ns()
        );
        None
    })
}

/// Waits (2 s at most each) for the air and ground commands the teardown stopped; says so
/// when the ground command failed or one did not exit.
async fn await_teardown(
    air: Option<&mut tokio::process::Child>,
    ground: Option<&mut tokio::process::Child>,
) {
    for (what, child) in [("air", air), ("ground", ground)] {
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
}

/// The lab's counters, read before its teardown.
struct Measured {
    stats: Vec<(LinkStats, LinkStats)>,
    checksum_drops: Vec<(u64, u64)>,
    addrs: Vec<(std::net::IpAddr, std::net::IpAddr)>,
}

impl Measured {
    fn read(lab: &Lab) -> Measured {
        Measured {
            stats: lab.all_stats(),
            checksum_drops: (0..lab.path_count())
                .filter_map(|i| lab.path_checksum_drops(i))
                .collect(),
            addrs: (0..lab.path_count())
                .map(|i| (lab.air_addr_of(i), lab.ground_addr_of(i)))
                .collect(),
        }
    }

    /// Each path's link statistics on stderr (named by path when `multi`).
    fn print(&self, net: &Network, multi: bool) {
        for (i, ((fwd, rev), drops)) in self.stats.iter().zip(&self.checksum_drops).enumerate() {
            let name = if multi {
                format!("{} ", net.paths[i].display_name(i))
            } else {
                String::new()
            };
            print_stats(&format!("{name}forward (air -> ground)"), fwd);
            print_stats(&format!("{name}reverse (ground -> air)"), rev);
            eprintln!(
                "{name}dropped by the receiving host's TCP/UDP checksum: forward {}, reverse {}",
                drops.0, drops.1
            );
        }
    }
}

/// The final JSON: path 0's counters at the top level (the shape a one-path lab always
/// had), and with a scenario or several paths a `paths` list with every path's counters.
fn stats_json(
    net: &Network,
    stats: &[(LinkStats, LinkStats)],
    drops: &[(u64, u64)],
    addrs: &[(std::net::IpAddr, std::net::IpAddr)],
    code: i32,
    multi: bool,
) -> serde_json::Value {
    let mut json = serde_json::json!({
        "forward": stats[0].0,
        "reverse": stats[0].1,
        "checksum_drops": { "forward": drops[0].0, "reverse": drops[0].1 },
        "exit_code": code,
    });
    if multi {
        let paths: Vec<_> = stats
            .iter()
            .zip(drops)
            .zip(addrs)
            .enumerate()
            .map(|(i, (((f, r), d), (air, ground)))| {
                serde_json::json!({
                    "name": net.paths[i].display_name(i),
                    "air_addr": air.to_string(),
                    "ground_addr": ground.to_string(),
                    "forward": f,
                    "reverse": r,
                    "checksum_drops": { "forward": d.0, "reverse": d.1 },
                })
            })
            .collect();
        json["paths"] = paths.into();
    }
    json
}

/// The environment of the lab's commands: path 0's addresses unsuffixed (as always), the
/// number of paths, and every path's addresses with a `_<i>` suffix.
fn lab_env(lab: &Lab, side: Side) -> Vec<(String, String)> {
    let peer_of = |i: usize| match side {
        Side::Air => lab.ground_addr_of(i),
        Side::Ground => lab.air_addr_of(i),
    };
    let mut env = vec![
        ("AEROTP_AIR_ADDR".to_string(), lab.air_addr().to_string()),
        (
            "AEROTP_GROUND_ADDR".to_string(),
            lab.ground_addr().to_string(),
        ),
        ("AEROTP_PEER_ADDR".to_string(), peer_of(0).to_string()),
        ("AEROTP_PATHS".to_string(), lab.path_count().to_string()),
    ];
    for i in 0..lab.path_count() {
        env.push((
            format!("AEROTP_AIR_ADDR_{i}"),
            lab.air_addr_of(i).to_string(),
        ));
        env.push((
            format!("AEROTP_GROUND_ADDR_{i}"),
            lab.ground_addr_of(i).to_string(),
        ));
        env.push((format!("AEROTP_PEER_ADDR_{i}"), peer_of(i).to_string()));
    }
    env
}

fn spawn(lab: &Lab, side: Side, program: &str, args: &[&str]) -> Result<tokio::process::Child> {
    let mut cmd = lab.command(side, program);
    cmd.args(args).envs(lab_env(lab, side));
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
        "{label}: offered {} pkt / {} B, delivered {} pkt / {} B, queue drops {}{}, lost {} \
         (random {}, burst {}, outage {}, header {}), corrupted {} pkt ({} bits flipped), \
         queue delay {}",
        s.offered_packets,
        s.offered_bytes,
        s.delivered_packets,
        s.delivered_bytes,
        s.dropped_queue_packets,
        // The in-flight bound is not the queue; named apart when it ever refuses.
        if s.dropped_in_flight_limit > 0 {
            format!(" (+{} over the in-flight bound)", s.dropped_in_flight_limit)
        } else {
            String::new()
        },
        s.lost_packets(),
        s.lost_random,
        s.lost_burst,
        s.lost_outage,
        s.lost_header_corrupt,
        s.corrupted_packets,
        s.bits_flipped,
        s.queue_delay.summary(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_flags::test_support::parse_flags;

    fn config(argv: &[&str]) -> Result<(Network, LabPathsConfig)> {
        parse_flags::<Args>(argv)
            .map_err(|e| anyhow!("{e}"))?
            .lab_config()
    }

    #[test]
    fn one_path_by_default_with_the_old_seeds_and_whole_packet_links() {
        let (_, c) = config(&[
            "--rate",
            "2mbit",
            "--reverse-rate",
            "1mbit",
            "--ber",
            "1e-5",
        ])
        .unwrap();
        assert_eq!(c.paths.len(), 1);
        let p = &c.paths[0];
        assert_eq!(
            (p.forward.rate_bps, p.reverse.rate_bps),
            (2_000_000, 1_000_000)
        );
        assert_eq!((p.forward.ber, p.reverse.ber), (1e-5, 1e-5));
        // Seeds as `aerotp lab` always drew them (default --seed 1).
        assert_eq!((p.forward_seed, p.reverse_seed), (1, 1 ^ REVERSE_SEED_MIX));
        // The lab carries real IP headers: no virtual header, no added overhead.
        assert_eq!(
            (p.forward.protected_prefix, p.forward.per_packet_overhead),
            (0, 0)
        );
        // Flags the lab lacked before now work: jitter, reverse delay, bursts, duplication.
        let (_, c) = config(&[
            "--jitter",
            "2ms",
            "--reverse-delay",
            "300ms",
            "--burst",
            "good=100,bad=3",
            "--duplicate",
            "0.01",
            "--queue",
            "30000",
            "--reorder",
        ])
        .unwrap();
        let p = &c.paths[0];
        assert_eq!(p.forward.jitter, Duration::from_millis(2));
        assert!(p.forward.allow_reorder);
        assert_eq!(p.reverse.delay, Duration::from_millis(300));
        assert_eq!(p.forward.delay, Duration::from_millis(10));
        assert_eq!(p.reverse.burst.unwrap().bad_packets, Some(3.0));
        assert_eq!(p.forward.duplicate, 0.01);
        assert_eq!(p.reverse.queue_bytes, 30_000);
    }

    #[test]
    fn scenario_paths_become_lab_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(
            &file,
            "[[path]]\nforward = { delay = \"10ms\" }\n\
             [[path]]\nname = \"sat\"\nforward = { rate_bps = \"256kbit\", delay = \"300ms\" }\n\
             random_outage = { mean_up = \"1min\", down_min = \"5s\", down_max = \"6s\" }\n",
        )
        .unwrap();
        let (net, c) = config(&["--scenario", file.to_str().unwrap(), "--seed", "4"]).unwrap();
        assert_eq!(net.paths.len(), 2);
        assert_eq!(c.paths.len(), 2);
        let sat = &c.paths[1];
        assert_eq!(sat.forward.rate_bps, 256_000);
        assert_eq!(sat.forward_seed, path_seed(4, 1));
        assert_ne!(sat.forward_seed, c.paths[0].forward_seed);
        // The path-level outage: one schedule, both directions.
        assert_eq!(sat.forward.random_outage, sat.reverse.random_outage);
        assert_eq!(
            sat.forward.random_outage.unwrap().seed,
            Some(outage_seed(path_seed(4, 1)))
        );
        assert!(c.paths[0].forward.random_outage.is_none());
        let e = config(&["--ber", "2"]).unwrap_err().to_string();
        assert!(e.contains("--ber") && e.contains("[0, 1)"), "{e}");
    }

    #[test]
    fn outages_until_gives_the_schedule_of_the_lab_s_links() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bench/traces/seed003-blackout-10min.toml"
        );
        let argv = [
            "--scenario",
            file,
            "--seed",
            "3",
            "--outages-until",
            "47min",
        ];
        let args = parse_flags::<Args>(&argv).unwrap();
        let until = args.outages_until.unwrap();
        assert_eq!(until, Duration::from_secs(2820));
        let (net, c) = args.lab_config().unwrap();
        let j = outages_json(&net, &c, until).unwrap();
        let paths = j["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 3);
        let mut drops = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(p["name"], format!("iridium{i}"));
            let f: Vec<[f64; 2]> = serde_json::from_value(p["forward"].clone()).unwrap();
            // The links' own schedule, interval for interval.
            let link = Link::new(c.paths[i].forward.clone(), c.paths[i].forward_seed).unwrap();
            let want: Vec<[f64; 2]> = link
                .outage_intervals(until)
                .into_iter()
                .map(|(a, b)| [a.as_secs_f64(), b.as_secs_f64()])
                .collect();
            assert_eq!(f, want);
            // The 10-minute blackout from 5 min, inside one interval.
            assert!(f.iter().any(|x| x[0] <= 300.0 && x[1] >= 900.0), "{f:?}");
            // A call drop apart from it lasts 45-50 s (two may touch and merge).
            for x in f.iter().filter(|x| x[1] <= 300.0 || x[0] >= 900.0) {
                assert!(x[1] - x[0] >= 45.0 - 1e-9, "{x:?}");
            }
            // The path-level drops take both directions down together.
            let r: Vec<[f64; 2]> = serde_json::from_value(p["reverse"].clone()).unwrap();
            let random =
                |v: &[[f64; 2]]| v.iter().filter(|x| x[1] <= 300.0 || x[0] >= 900.0).count();
            assert_eq!(random(&f), random(&r));
            drops.push(random(&f));
        }
        // Channel 0 (up 3 min on average) drops more often than channel 2 (30 min).
        assert!(drops[0] > drops[2], "{drops:?}");
        // Another seed draws another schedule.
        let args =
            parse_flags::<Args>(&[argv[0], argv[1], "--seed", "4", argv[4], argv[5]]).unwrap();
        let (net, c) = args.lab_config().unwrap();
        assert_ne!(outages_json(&net, &c, until).unwrap(), j);
        // It prints and exits: no lab commands beside it.
        let e = parse_flags::<Args>(&["--outages-until", "1h", "--air", "true"]).unwrap_err();
        assert!(e.contains("--outages-until") || e.contains("--air"), "{e}");
    }
}
