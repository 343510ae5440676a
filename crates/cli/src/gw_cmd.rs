//! `aerotp gw`: the AeroGW gateways (ingress, egress) and their statistics (docs/gateway.md).

use std::path::PathBuf;

use aerotp_gw::config::{FileConfig, FlowSpec};
use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Accept local TCP connections / UDP datagrams and carry them over AeroTP to the egress.
    Ingress(Box<RoleArgs>),
    /// Receive flows from an ingress over AeroTP and connect them to their destinations.
    Egress(Box<RoleArgs>),
    /// Print a gateway's statistics (Prometheus text from its --metrics endpoint).
    Stats {
        /// The gateway's --metrics address.
        #[arg(long, default_value = "127.0.0.1:9464")]
        metrics: String,
    },
}

#[derive(Debug, clap::Args)]
struct RoleArgs {
    /// TOML file with the same keys as these flags and [[flow]] tables (flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Ingress: the egress's UDP address.
    #[arg(long)]
    peer: Option<String>,
    /// Ingress: local UDP address for AeroTP (default 0.0.0.0:0).
    #[arg(long)]
    bind: Option<String>,
    /// Egress: UDP address to receive AeroTP on.
    #[arg(long)]
    listen: Option<String>,
    /// Ingress: accept TCP connections here (one flow).
    #[arg(long)]
    tcp_listen: Option<String>,
    /// Ingress: receive UDP datagrams here (one flow).
    #[arg(long)]
    udp_listen: Option<String>,
    /// Ingress: destination host:port asked of the egress (default: the egress's own).
    #[arg(long)]
    dest: Option<String>,
    /// Flow mode. TCP: near-reliable (default; custody store), reliable (end to end).
    /// UDP: datagram (default; one AeroTP datagram each, no state), quasi-reliable (one
    /// AeroTP connection per client: FEC, in order, may lose; losses counted), unreliable
    /// (same, no FEC or repair).
    #[arg(long)]
    mode: Option<String>,
    /// Flow class: control, telemetry, bulk.
    #[arg(long)]
    class: Option<String>,
    /// FEC: off, auto, N words, pN parity bytes. Ingress: for the flow given by
    /// --tcp-listen/--udp-listen (and flows of --config without their own). Egress: for what it
    /// sends back (answers, downloads). Default off, auto for quasi-reliable UDP flows.
    #[arg(long)]
    fec: Option<String>,
    /// Egress: default TCP destination.
    #[arg(long)]
    tcp_connect: Option<String>,
    /// Egress: default UDP destination.
    #[arg(long)]
    udp_connect: Option<String>,
    /// Egress: further destinations an ingress may ask for.
    #[arg(long)]
    allow: Vec<String>,
    /// Egress: any destination an ingress asks for.
    #[arg(long)]
    allow_any: bool,
    /// Air link rate shared by the flows (e.g. 5mbit), counted with each datagram's IPv4/UDP
    /// headers. On a radio with framing of its own, set it below the link's rate by that
    /// framing's share: a queue at the link delays every class alike.
    #[arg(long)]
    rate: Option<String>,
    /// Largest AeroTP datagram, bytes.
    #[arg(long)]
    mtu: Option<usize>,
    /// Crash-safe state directory. Ingress (required for near-reliable flows): the custody
    /// store, resent after a restart. Egress (recommended): per-flow record of the bytes
    /// written to each destination, so a restarted egress resumes flows on a new destination
    /// connection exactly where they stopped (without it, a restarted egress refuses resumes).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Bytes the custody store may hold (e.g. 256MB); when full, sources are not read.
    #[arg(long)]
    store_capacity: Option<String>,
    /// Reliable (end-to-end) flows: bytes read ahead of the destination's confirmation.
    #[arg(long)]
    window: Option<String>,
    /// Serve Prometheus metrics over HTTP here.
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
}

impl RoleArgs {
    fn file_config(self: Box<Self>) -> Result<FileConfig> {
        let mut flows = Vec::new();
        if self.tcp_listen.is_some() || self.udp_listen.is_some() {
            if self.tcp_listen.is_some() && self.udp_listen.is_some() {
                anyhow::bail!("give --tcp-listen or --udp-listen, not both (use a config file for many flows)");
            }
            flows.push(FlowSpec {
                tcp_listen: self.tcp_listen,
                udp_listen: self.udp_listen,
                dest: self.dest,
                mode: self.mode,
                class: self.class,
                fec: None,
            });
        }
        let flags = FileConfig {
            peer: self.peer,
            bind: self.bind,
            listen: self.listen,
            tcp_connect: self.tcp_connect,
            udp_connect: self.udp_connect,
            allow: self.allow,
            allow_any: self.allow_any.then_some(true),
            rate: self.rate,
            mtu: self.mtu,
            store: self.store,
            store_capacity: self.store_capacity,
            window: self.window,
            metrics: self.metrics,
            priority: self.priority,
            weights: None,
            idle_timeout: self.idle_timeout,
            resume_timeout: self.resume_timeout,
            fec: self.fec,
            flows,
        };
        Ok(match &self.config {
            Some(p) => flags.merge(FileConfig::load(p)?),
            None => flags,
        })
    }
}

pub fn run(args: Args) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (role, ra) = match args.cmd {
            Cmd::Stats { metrics } => {
                let addr = tokio::net::lookup_host(&metrics)
                    .await?
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{metrics}: no address"))?;
                print!("{}", aerotp_gw::metrics::fetch(addr).await?);
                return Ok(0);
            }
            Cmd::Ingress(a) => ("ingress", a),
            Cmd::Egress(a) => ("egress", a),
        };
        let settings = ra.file_config()?.settings()?;
        let gw = aerotp_gw::start(role, settings).await?;
        eprintln!("aerotp gw {role}: AeroTP on {}", gw.ep.local_addr());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stopping; custody stays in the store");
        Ok(0)
    })
}
