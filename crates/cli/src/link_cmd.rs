//! `aerotp link`: a UDP relay that applies the link model (rate, delay, bit errors, loss,
//! bursts, outages, ...) between clients and a server, in real time; one relay per path of
//! the scenario.

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_emu::{outage_seed, path_seed, run_relays, RelayConfig, RelayStats, RelayTap};
use aerotp_link::Network;
use anyhow::Context;

use crate::link_flags::LinkFlags;

/// Relay UDP datagrams through an emulated link: clients send to --listen, the relay
/// forwards to --to; replies come back through the reverse direction. With a scenario of
/// N paths there are N relays, one per path, each with its own listening and destination
/// address: give --listen and --to N times (path order), or once each, and path i then
/// uses the port + i.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
aerotp link --listen 127.0.0.1:9000 --to 127.0.0.1:9001 --rate 5mbit --delay 10ms --ber 1e-5\n  \
aerotp link --scenario two-radios.toml --listen 127.0.0.1:9000 --to 127.0.0.1:9100\n    \
(path 0: 9000 -> 9100, path 1: 9001 -> 9101)")]
pub struct Args {
    /// Address to listen on; clients send their datagrams here (e.g. 0.0.0.0:9000).
    /// Once per path, or once for all (path i listens on the port + i).
    #[arg(long, required = true)]
    listen: Vec<SocketAddr>,
    /// Address to forward to (the server side), e.g. 10.0.0.2:9000. Once per path, or once
    /// for all (path i forwards to the port + i).
    #[arg(long, required = true)]
    to: Vec<SocketAddr>,
    #[command(flatten)]
    link: LinkFlags,
    /// Bytes of IPv4+UDP header the relayed payload lacks: counted in serialisation time
    /// and subject to bit errors, a flip there drops the datagram. 0 disables both.
    #[arg(long, default_value_t = 28)]
    header_bytes: u32,
    /// Seed of the impairment model (same seed + same traffic = same impairments). Path 0
    /// uses it as is, path i a value derived from it and i.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Maximum number of concurrent clients (per path).
    #[arg(long, default_value_t = 64)]
    max_clients: usize,
    /// Forget a client after this long without traffic (keep it above your longest outage).
    #[arg(long, default_value = "10min", value_parser = duration_arg)]
    idle_timeout: Duration,
    /// Period of the statistics log line, one per path and direction (0s = never).
    #[arg(long, default_value = "10s", value_parser = stats_interval_arg)]
    stats_interval: Duration,
    /// Write what entered the emulated link and what left it, both directions, to FILE
    /// (pcapng): interface "in" holds every datagram as the relay received it, "out" every
    /// datagram as the link delivered it (corrupted, duplicated, reordered); a lost one is
    /// on "in" only. With several paths: "NAME in" and "NAME out" per path.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer thread; beyond it
    /// records are dropped and counted, never the relayed datagrams (e.g. 8MiB).
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = crate::common::size_arg)]
    pcap_queue: u64,
}

/// Interface names of a relay capture: "in" and "out" for one path; "NAME in", "NAME out"
/// per path otherwise (path i has interfaces 2i and 2i + 1).
fn capture_interfaces(configs: &[RelayConfig]) -> Vec<String> {
    if configs.len() == 1 {
        return vec!["in".into(), "out".into()];
    }
    configs
        .iter()
        .flat_map(|c| [format!("{} in", c.name), format!("{} out", c.name)])
        .collect()
}

use crate::common::{duration_arg, MAX_DURATION};

/// `--stats-interval`: 0s (never) or a period of at most 720h.
fn stats_interval_arg(s: &str) -> Result<Duration, String> {
    let d = aerotp_link::parse_duration(s).map_err(|e| e.to_string())?;
    if d > MAX_DURATION {
        return Err(format!(
            "'{s}' is too long; give 0s (never) or at most 720h"
        ));
    }
    Ok(d)
}

/// Address of path `i` of `n`: the i-th of `given`, or the first with its port + i.
fn path_addr(flag: &str, given: &[SocketAddr], i: usize, n: usize) -> anyhow::Result<SocketAddr> {
    match given.len() {
        1 => {
            let base = given[0];
            if n > 1 && base.port() == 0 {
                anyhow::bail!(
                    "{flag} {base}: with {n} paths a single {flag} needs a port (path i uses the port + i); \
                     give a port or {flag} once per path"
                );
            }
            let port = u16::try_from(usize::from(base.port()) + i).map_err(|_| {
                anyhow::anyhow!("{flag} {base}: path {i} would need port {} (above 65535)", usize::from(base.port()) + i)
            })?;
            Ok(SocketAddr::new(base.ip(), port))
        }
        m if m == n => Ok(given[i]),
        m => anyhow::bail!(
            "{flag} is given {m} times but the scenario has {n} paths; give it once (path i uses the port + i) or once per path"
        ),
    }
}

impl Args {
    /// One relay configuration per path of the network these flags describe, validated.
    fn relay_configs(&self) -> anyhow::Result<(Network, Vec<RelayConfig>)> {
        let net = self.link.network()?;
        anyhow::ensure!(
            self.max_clients > 0,
            "--max-clients 0: the relay must accept at least one client"
        );
        let n = net.paths.len();
        let mut configs = Vec::with_capacity(n);
        for (i, path) in net.paths.iter().enumerate() {
            let seed = path_seed(self.seed, i);
            let name = path.display_name(i);
            let mut forward = path.forward_config(outage_seed(seed));
            let mut reverse = path.reverse_config(outage_seed(seed));
            for c in [&mut forward, &mut reverse] {
                // The relayed payload lacks its IPv4/UDP header: the relay adds it to the
                // serialisation time and to the bits that can flip.
                c.per_packet_overhead = self.header_bytes;
                c.protected_prefix = self.header_bytes;
            }
            forward
                .validate()
                .with_context(|| format!("path {name}: forward direction"))?;
            reverse
                .validate()
                .with_context(|| format!("path {name}: reverse direction"))?;
            let listen = path_addr("--listen", &self.listen, i, n)?;
            let to = path_addr("--to", &self.to, i, n)?;
            let mut config = RelayConfig::new(listen, to, forward);
            config.reverse = Some(reverse);
            config.seed = seed;
            config.max_clients = self.max_clients;
            config.idle_timeout = self.idle_timeout;
            config.stats_interval = (!self.stats_interval.is_zero()).then_some(self.stats_interval);
            config.name = name;
            configs.push(config);
        }
        Ok((net, configs))
    }
}

/// The final JSON: a single path without a scenario file keeps the shape it always had
/// (the counters at the top level); otherwise one entry per path with its name and addresses.
fn stats_json(configs: &[RelayConfig], stats: &[RelayStats], scenario: bool) -> serde_json::Value {
    if configs.len() == 1 && !scenario {
        return serde_json::to_value(&stats[0]).unwrap_or_default();
    }
    let paths: Vec<serde_json::Value> = configs
        .iter()
        .zip(stats)
        .map(|(c, s)| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("name".into(), c.name.clone().into());
                o.insert("listen".into(), c.listen.to_string().into());
                o.insert("to".into(), c.to.to_string().into());
            }
            v
        })
        .collect();
    serde_json::json!({ "paths": paths })
}

/// One line per direction of a relay: the queueing delay at its link model's queue and the
/// tail drops (the JSON has them as `queue_delay` and `dropped_queue_packets`).
fn queue_lines(name: &str, s: &RelayStats) -> String {
    [("forward", &s.forward), ("reverse", &s.reverse)]
        .iter()
        .map(|(dir, l)| {
            format!(
                "link {name} {dir}: queue delay {}, queue drops {}, lost {}\n",
                l.queue_delay.summary(),
                l.dropped_queue_packets,
                l.lost_packets()
            )
        })
        .collect()
}

/// Runs the relays until Ctrl-C, then prints the final counters as JSON on stdout.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let (net, mut configs) = args.relay_configs()?;
    for c in &configs {
        eprintln!("link {}: {} -> {}", c.name, c.listen, c.to);
    }
    // The capture file before any socket: a path that cannot be written stops us first.
    let capture = match &args.pcap {
        Some(p) => {
            let names = capture_interfaces(&configs);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let cap = crate::common::open_capture(p, &names, args.pcap_queue)?;
            let handle = aerotp_net::TapHandle::new(cap.clone());
            for (i, c) in configs.iter_mut().enumerate() {
                c.tap = Some(RelayTap {
                    tap: handle.clone(),
                    inbound: 2 * i as u32,
                    outbound: 2 * i as u32 + 1,
                });
            }
            Some(cap)
        }
        None => None,
    };
    tracing::info!("{}", args.link.describe(&net));
    let shutdown = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C; stop the relay with a signal");
            std::future::pending::<()>().await;
        }
    };
    let stats = run_relays(configs.clone(), shutdown).await;
    // The relays have stopped (or failed): nothing more reaches the capture.
    let summary = match &capture {
        Some(c) => Some(crate::common::close_capture(c, "aerotp link")?),
        None => None,
    };
    let stats = stats.context("link relay")?;
    for (c, st) in configs.iter().zip(&stats) {
        eprint!("{}", queue_lines(&c.name, st));
    }
    let mut json = stats_json(&configs, &stats, args.link.scenario.is_some());
    if let (Some(s), Some(o)) = (summary, json.as_object_mut()) {
        o.insert(
            "capture".into(),
            serde_json::json!({ "packets": s.written, "dropped": s.dropped }),
        );
    }
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_flags::test_support::{
        assert_outages_and_queue, parse_flags, OUTAGES_AND_QUEUE,
    };

    fn parse(extra: &[&str]) -> Result<Args, String> {
        let mut argv = vec!["--listen", "127.0.0.1:9000", "--to", "127.0.0.1:9001"];
        argv.extend_from_slice(extra);
        parse_flags(&argv)
    }

    /// `link --scenario FILE --listen L... --to 127.0.0.1:8000`: the relay configurations
    /// (the flags themselves must parse).
    fn relays(file: &str, listens: &[&str]) -> anyhow::Result<(Network, Vec<RelayConfig>)> {
        let mut argv = vec!["--scenario", file];
        for l in listens {
            argv.extend(["--listen", l]);
        }
        argv.extend(["--to", "127.0.0.1:8000"]);
        parse_flags::<Args>(&argv).unwrap().relay_configs()
    }

    #[test]
    fn flags_build_the_link_configs() {
        let args = parse(
            &[
                "--rate",
                "2.4kbit",
                "--delay",
                "1.5s",
                "--ber",
                "1e-5",
                "--loss",
                "0.1",
                "--reverse-rate",
                "10mbit",
                "--seed",
                "7",
                "--jitter",
                "3ms",
                "--reorder",
                "--duplicate",
                "0.01",
            ]
            .iter()
            .chain(&OUTAGES_AND_QUEUE)
            .copied()
            .collect::<Vec<_>>(),
        )
        .unwrap();
        let (_, configs) = args.relay_configs().unwrap();
        assert_eq!(configs.len(), 1);
        let c = &configs[0];
        assert_eq!(c.forward.rate_bps, 2400);
        assert_eq!(c.forward.delay, Duration::from_millis(1500));
        assert_eq!(c.forward.ber, 1e-5);
        assert_eq!(c.forward.loss, 0.1);
        assert_outages_and_queue(&c.forward);
        assert_eq!(c.forward.protected_prefix, 28);
        assert_eq!(c.forward.per_packet_overhead, 28);
        assert_eq!(c.forward.jitter, Duration::from_millis(3));
        assert!(c.forward.allow_reorder);
        assert_eq!(c.forward.duplicate, 0.01);
        let reverse = c.reverse.as_ref().unwrap();
        assert_eq!(reverse.rate_bps, 10_000_000);
        assert_eq!(reverse.delay, Duration::from_millis(1500));
        assert_eq!(reverse.protected_prefix, 28);
        assert_eq!(c.seed, 7, "path 0 keeps the seed as given");
        assert_eq!(c.listen, "127.0.0.1:9000".parse().unwrap());
        // Defaults as before: 5 Mb/s, 10 ms, header bytes 28.
        let (_, configs) = parse(&[]).unwrap().relay_configs().unwrap();
        assert_eq!(configs[0].forward.rate_bps, 5_000_000);
        assert_eq!(configs[0].forward.delay, Duration::from_millis(10));
        let (_, configs) = parse(&["--header-bytes", "0"])
            .unwrap()
            .relay_configs()
            .unwrap();
        assert_eq!(configs[0].forward.protected_prefix, 0);
    }

    fn scenario(paths: usize) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for i in 0..paths {
            text += &format!(
                "[[path]]\nname = \"p{i}\"\nforward = {{ rate_bps = \"{}mbit\" }}\n\
                 random_outage = {{ mean_up = \"10s\", down_min = \"1s\", down_max = \"2s\" }}\n",
                i + 1
            );
        }
        let p = dir.path().join("s.toml");
        std::fs::write(&p, text).unwrap();
        (dir, p.to_str().unwrap().to_owned())
    }

    #[test]
    fn one_relay_per_path_with_own_addresses_and_seeds() {
        let (_d, file) = scenario(3);
        let (net, configs) = parse(&["--scenario", &file, "--seed", "5"])
            .unwrap()
            .relay_configs()
            .unwrap();
        assert_eq!(net.paths.len(), 3);
        assert_eq!(configs.len(), 3);
        for (i, c) in configs.iter().enumerate() {
            assert_eq!(c.name, format!("p{i}"));
            assert_eq!(c.listen.port(), 9000 + i as u16);
            assert_eq!(c.to.port(), 9001 + i as u16);
            assert_eq!(c.forward.rate_bps, (i as u64 + 1) * 1_000_000);
            assert_eq!(c.seed, path_seed(5, i));
            // The path-level random outage: one schedule for both directions.
            let r = c.reverse.as_ref().unwrap();
            assert_eq!(c.forward.random_outage, r.random_outage);
            assert_eq!(
                c.forward.random_outage.unwrap().seed,
                Some(outage_seed(c.seed))
            );
        }
        let seeds: std::collections::HashSet<u64> = configs.iter().map(|c| c.seed).collect();
        assert_eq!(seeds.len(), 3, "paths draw independent impairments");
        // One address per path, explicitly.
        let (_, configs) = relays(
            &file,
            &["127.0.0.1:7000", "127.0.0.1:7100", "127.0.0.1:7200"],
        )
        .unwrap();
        assert_eq!(configs[2].listen.port(), 7200);
        assert_eq!(configs[2].to.port(), 8002);
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        let err = parse(&["--rate", "fast"]).unwrap_err();
        assert!(err.contains("--rate") && err.contains("no number"), "{err}");
        let err = parse(&["--delay", "10"]).unwrap_err();
        assert!(err.contains("missing unit"), "{err}");
        let err = parse(&["--ber", "2"]).unwrap_err();
        assert!(err.contains("outside [0, 1)"), "{err}");
        let err = parse(&["--loss", "x"]).unwrap_err();
        assert!(err.contains("not a number"), "{err}");
        let err = parse(&["--outage", "5s"]).unwrap_err();
        assert!(err.contains("START+DURATION"), "{err}");
        let err = parse(&["--queue", "0"]).unwrap_err();
        assert!(err.contains("--queue"), "{err}");
        let err = parse(&["--max-clients", "0"])
            .unwrap()
            .relay_configs()
            .unwrap_err();
        assert!(err.to_string().contains("--max-clients"), "{err}");
        let (_d, file) = scenario(3);
        let err = relays(&file, &["127.0.0.1:7000", "127.0.0.1:7100"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--listen is given 2 times") && err.contains("3 paths"),
            "{err}"
        );
        let err = relays(&file, &["127.0.0.1:0"]).unwrap_err().to_string();
        assert!(err.contains("needs a port"), "{err}");
        let err = relays(&file, &["127.0.0.1:65535"]).unwrap_err().to_string();
        assert!(err.contains("above 65535"), "{err}");
    }

    #[test]
    fn json_keeps_its_shape_for_one_path_and_lists_paths_otherwise() {
        let (_, one) = parse(&[]).unwrap().relay_configs().unwrap();
        let v = stats_json(&one, &[RelayStats::default()], false);
        assert!(
            v.get("forward").is_some() && v.get("paths").is_none(),
            "{v}"
        );
        let (_d, file) = scenario(2);
        let (_, two) = parse(&["--scenario", &file])
            .unwrap()
            .relay_configs()
            .unwrap();
        let v = stats_json(&two, &[RelayStats::default(), RelayStats::default()], true);
        let paths = v["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 2);
        assert_eq!(paths[1]["name"], "p1");
        assert_eq!(paths[1]["listen"], "127.0.0.1:9001");
        assert!(paths[1]["reverse"]["offered_packets"].is_number());
        assert!(paths[1]["forward"]["queue_delay"]["p99"].is_number());
        let lines = queue_lines("p1", &RelayStats::default());
        assert!(
            lines.starts_with("link p1 forward: queue delay p50 0.000 ms")
                && lines.contains("link p1 reverse:")
                && lines.contains("queue drops 0"),
            "{lines}"
        );
    }
}
