//! `aerotp gw`: the AeroGW gateways (ingress, egress) and their statistics (docs/gateway.md).
//! Each role has its own flags: a flag of the other role is an error, not silently ignored.

use std::path::PathBuf;

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_gw::Role;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Accept local TCP connections / UDP datagrams and carry them over AeroTP to the egress.
    Ingress(Box<IngressArgs>),
    /// Receive flows from an ingress over AeroTP and connect them to their destinations.
    Egress(Box<EgressArgs>),
    /// Print a gateway's statistics (Prometheus text from its --metrics endpoint).
    Stats {
        /// The gateway's --metrics address.
        #[arg(long, default_value = "127.0.0.1:9464")]
        metrics: String,
    },
}

/// Flags both roles take.
#[derive(Debug, clap::Args)]
struct CommonArgs {
    /// TOML file with the same keys as these flags and [[flow]] tables (flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// FEC: off, auto, N words, pN parity bytes. Default auto (docs/modes.md: never worse on
    /// a link with bit errors, a few percent of the rate on a clean one).
    #[arg(long)]
    fec: Option<String>,
    /// Air link rate shared by the flows (e.g. 5mbit), counted with each datagram's IPv4/UDP
    /// headers. On a radio with framing of its own, set it below the link's rate by that
    /// framing's share: a queue at the link delays every class alike.
    #[arg(long)]
    rate: Option<String>,
    /// Largest AeroTP datagram, bytes (larger UDP datagrams are fragmented).
    #[arg(long)]
    mtu: Option<usize>,
    /// Reliable (end-to-end) flows: bytes read ahead of the destination's confirmation.
    #[arg(long)]
    window: Option<String>,
    /// Serve Prometheus metrics over HTTP here (docs/stats.md).
    #[arg(long)]
    metrics: Option<String>,
    /// How busy flows share the rate: weighted (control 8 : telemetry 4 : bulk 1, the
    /// default) or strict (the highest busy class first; lower busy classes keep 2 % per
    /// flow). Either way what idle flows and datagram-mode routes send is kept for them
    /// first, and datagram-mode routes are held to their class's share (docs/gateway.md).
    #[arg(long)]
    priority: Option<String>,
    /// Drop a connection silent for this long (then a near-reliable flow resumes).
    #[arg(long)]
    idle_timeout: Option<String>,
    /// Longest a near-reliable flow keeps trying to resume.
    #[arg(long)]
    resume_timeout: Option<String>,
    /// Write every AeroTP datagram the gateway's socket sends and receives to FILE (pcapng;
    /// interfaces "sent" and "received"; open it with tools/wireshark/aerotp.lua). The file
    /// is created before the socket is bound, so a bad path costs no traffic; it is closed
    /// on SIGINT/SIGTERM.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer thread; beyond it
    /// records are dropped and counted, never the data (e.g. 8MiB, 64MB).
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = crate::common::size_arg)]
    pcap_queue: u64,
}

#[derive(Debug, clap::Args)]
struct IngressArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The egress's UDP address.
    #[arg(long)]
    peer: Option<String>,
    /// Local UDP address for AeroTP (default 0.0.0.0:0).
    #[arg(long)]
    bind: Option<String>,
    /// Accept TCP connections here (one flow).
    #[arg(long)]
    tcp_listen: Option<String>,
    /// Receive UDP datagrams here (one flow).
    #[arg(long)]
    udp_listen: Option<String>,
    /// Destination host:port asked of the egress (default: the egress's own).
    #[arg(long)]
    dest: Option<String>,
    /// Flow mode (docs/modes.md). TCP: near-reliable (default; custody store), reliable (end
    /// to end). UDP: datagram (default; no state, no repair beyond FEC), quasi-reliable (one
    /// AeroTP connection per client: FEC, in order, may lose; losses counted), unreliable
    /// (same, no repair beyond --fec; with --fec off, none).
    #[arg(long)]
    mode: Option<String>,
    /// Flow class: control, telemetry, bulk.
    #[arg(long)]
    class: Option<String>,
    /// Crash-safe custody store (required for near-reliable flows), resent after a restart.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Bytes the custody store may hold (e.g. 256MB); when full, sources are not read.
    #[arg(long)]
    store_capacity: Option<String>,
}

#[derive(Debug, clap::Args)]
struct EgressArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// UDP address to receive AeroTP on.
    #[arg(long)]
    listen: Option<String>,
    /// Default TCP destination.
    #[arg(long)]
    tcp_connect: Option<String>,
    /// Default UDP destination.
    #[arg(long)]
    udp_connect: Option<String>,
    /// Further destinations an ingress may ask for.
    #[arg(long)]
    allow: Vec<String>,
    /// Any destination an ingress asks for.
    #[arg(long)]
    allow_any: bool,
    /// Per-flow record of the bytes written to each destination (recommended), so a
    /// restarted egress resumes flows on a new destination connection exactly where they
    /// stopped (without it, a restarted egress refuses resumes).
    #[arg(long)]
    store: Option<PathBuf>,
}

impl CommonArgs {
    /// The flags as a config (role-specific keys empty), merged over `--config`'s file.
    fn file_config(self) -> FileConfig {
        FileConfig {
            rate: self.rate,
            mtu: self.mtu,
            window: self.window,
            metrics: self.metrics,
            priority: self.priority,
            idle_timeout: self.idle_timeout,
            resume_timeout: self.resume_timeout,
            fec: self.fec,
            ..FileConfig::default()
        }
    }
}

/// Merges the flags over the `--config` file, then checks that the result names no key of
/// the other role (a file may not either).
fn with_file(flags: FileConfig, config: Option<PathBuf>, role: Role) -> Result<FileConfig> {
    let cfg = match config {
        Some(p) => flags.merge(FileConfig::load(&p)?),
        None => flags,
    };
    cfg.check_role(role)?;
    Ok(cfg)
}

impl IngressArgs {
    fn file_config(self) -> Result<FileConfig> {
        let mut flows = Vec::new();
        if self.tcp_listen.is_some() && self.udp_listen.is_some() {
            anyhow::bail!(
                "give --tcp-listen or --udp-listen, not both (use a config file for many flows)"
            );
        }
        if self.tcp_listen.is_some() || self.udp_listen.is_some() {
            flows.push(FlowSpec {
                tcp_listen: self.tcp_listen,
                udp_listen: self.udp_listen,
                dest: self.dest,
                mode: self.mode,
                class: self.class,
                fec: None,
            });
        } else if let Some((flag, v)) = [
            ("--dest", &self.dest),
            ("--mode", &self.mode),
            ("--class", &self.class),
        ]
        .into_iter()
        .find_map(|(f, v)| v.as_ref().map(|v| (f, v)))
        {
            anyhow::bail!(
                "{flag} {v}: applies to the flow of --tcp-listen or --udp-listen, and neither \
                 was given (flows of --config set it in their [[flow]] table)"
            );
        }
        let config = self.common.config.clone();
        let flags = FileConfig {
            peer: self.peer,
            bind: self.bind,
            store: self.store,
            store_capacity: self.store_capacity,
            flows,
            ..self.common.file_config()
        };
        with_file(flags, config, Role::Ingress)
    }
}

impl EgressArgs {
    fn file_config(self) -> Result<FileConfig> {
        let config = self.common.config.clone();
        let flags = FileConfig {
            listen: self.listen,
            tcp_connect: self.tcp_connect,
            udp_connect: self.udp_connect,
            allow: self.allow,
            allow_any: self.allow_any.then_some(true),
            store: self.store,
            ..self.common.file_config()
        };
        with_file(flags, config, Role::Egress)
    }
}

pub fn run(args: Args) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (role, cfg, (pcap, pcap_queue)) = match args.cmd {
            Cmd::Stats { metrics } => {
                let addr = tokio::net::lookup_host(&metrics)
                    .await?
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("--metrics {metrics}: no address"))?;
                print!("{}", aerotp_gw::metrics::fetch(addr).await?);
                return Ok(0);
            }
            Cmd::Ingress(mut a) => {
                let pcap = (a.common.pcap.take(), a.common.pcap_queue);
                (Role::Ingress, a.file_config()?, pcap)
            }
            Cmd::Egress(mut a) => {
                let pcap = (a.common.pcap.take(), a.common.pcap_queue);
                (Role::Egress, a.file_config()?, pcap)
            }
        };
        let settings = cfg.settings()?;
        // The capture file exists before the gateway binds its socket: a path that cannot be
        // written is refused (naming the flag) before any datagram is sent.
        let capture = match &pcap {
            Some(p) => Some(
                crate::common::open_capture(p, &aerotp_net::ENDPOINT_INTERFACES, pcap_queue)
                    .with_context(|| format!("--pcap {}", p.display()))?,
            ),
            None => None,
        };
        let gw = aerotp_gw::start(role, settings).await?;
        if let Some(c) = &capture {
            gw.ep.set_tap(c.clone());
        }
        eprintln!("aerotp gw {role}: AeroTP on {}", gw.ep.local_addr());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stopping; custody stays in the store");
        if let Some(c) = capture {
            gw.ep.remove_tap();
            crate::common::close_capture(&c, &format!("aerotp gw {role}"))?;
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("gw").chain(args.iter().copied()))
    }

    #[test]
    fn a_flag_of_the_other_role_is_an_error() {
        for args in [
            &[
                "egress",
                "--listen",
                "127.0.0.1:9000",
                "--tcp-listen",
                "127.0.0.1:80",
            ][..],
            &[
                "egress",
                "--listen",
                "127.0.0.1:9000",
                "--peer",
                "127.0.0.1:1",
            ],
            &["egress", "--listen", "127.0.0.1:9000", "--mode", "reliable"],
            &[
                "ingress",
                "--peer",
                "127.0.0.1:9000",
                "--allow",
                "127.0.0.1:80",
            ],
            &[
                "ingress",
                "--peer",
                "127.0.0.1:9000",
                "--tcp-connect",
                "127.0.0.1:80",
            ],
        ] {
            let e = parse(args).expect_err(&args.join(" "));
            assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
            assert!(e.to_string().contains(args[3]), "{e}");
        }
        assert!(parse(&["egress", "--listen", "127.0.0.1:9000", "--fec", "auto"]).is_ok());
    }

    #[test]
    fn help_lists_only_the_role_s_flags() {
        let help = |role: &str| parse(&[role, "--help"]).unwrap_err().to_string();
        let (i, e) = (help("ingress"), help("egress"));
        for f in [
            "--peer",
            "--tcp-listen",
            "--udp-listen",
            "--mode",
            "--class",
        ] {
            assert!(i.contains(f) && !e.contains(f), "{f}");
        }
        for f in ["--listen ", "--tcp-connect", "--udp-connect", "--allow"] {
            assert!(e.contains(f) && !i.contains(f), "{f}");
        }
        for f in ["--fec", "--rate", "--metrics", "--config"] {
            assert!(e.contains(f) && i.contains(f), "{f}");
        }
    }

    #[test]
    fn flow_flags_without_a_flow_and_file_keys_of_the_other_role_are_errors() {
        let Cmd::Ingress(a) = parse(&["ingress", "--peer", "127.0.0.1:1", "--mode", "reliable"])
            .unwrap()
            .cmd
        else {
            panic!("ingress")
        };
        let e = format!("{:#}", a.file_config().unwrap_err());
        assert!(e.contains("--mode reliable"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("egress.toml");
        std::fs::write(&p, "listen = \"127.0.0.1:9000\"\npeer = \"127.0.0.1:1\"\n").unwrap();
        let Cmd::Egress(a) = parse(&["egress", "--config", p.to_str().unwrap()])
            .unwrap()
            .cmd
        else {
            panic!("egress")
        };
        let e = format!("{:#}", a.file_config().unwrap_err());
        assert!(e.contains("`peer`") && e.contains("ingress"), "{e}");
    }
}
