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
    /// Print, install or remove the nftables TPROXY rules that steer the applications'
    /// traffic to a transparent ingress (docs/gateway.md §Transparent interception).
    Rules(RulesArgs),
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
    /// Erasure repair across TPDUs (repair TPDUs that rebuild lost ones without a round
    /// trip): off, auto, or a ratio such as 1.25. Default: each mode's (auto in
    /// quasi-reliable and unreliable; the retransmitting modes on round trips of 200 ms or
    /// more; docs/fec.md). Datagram-mode UDP flows repair only at a ratio (no reports reach
    /// their sender): auto leaves them without. Key `erasure`, also per `[[flow]]`.
    #[arg(long, value_name = "off|auto|RATIO")]
    erasure: Option<String>,
    /// Longest a lost TPDU may wait for its repairs, 1ms to 60s (default 500ms). Key
    /// `max_delay`, also per `[[flow]]`.
    #[arg(long, value_name = "DURATION")]
    max_delay: Option<String>,
    /// auto (the default): each flow whose mode can (reliable) discovers the link's rate
    /// under its class's share of --max-rate; the others are paced at that share. Or a
    /// fixed rate R the flows share (e.g. 4.8mbit; a dedicated allocation), counted with each
    /// datagram's IPv4/UDP headers: set it a few per cent under the link's rate (and under
    /// a radio's own framing's share too): at exactly the link's rate a queue a burst leaves
    /// at the link never drains, and every class waits in it. Key `rate` (docs/gateway.md
    /// §Rate).
    #[arg(long, value_name = "auto|R")]
    rate: Option<String>,
    /// Cap of the discovered rates, shared by class as a fixed rate is (default 5mbit):
    /// near-reliable, quasi-reliable, unreliable and datagram flows, which cannot discover,
    /// are paced at their share of it, so keep it a few per cent under the link's top rate.
    /// Not with a fixed --rate. Key `max_rate`.
    #[arg(long, value_name = "R")]
    max_rate: Option<String>,
    /// Largest AeroTP datagram, bytes (larger UDP datagrams are fragmented).
    #[arg(long)]
    mtu: Option<usize>,
    /// Reliable (end-to-end) flows: bytes read ahead of the destination's confirmation
    /// (default 256 KiB; through --transparent-tun two seconds of --rate, or of --max-rate
    /// when the rate is discovered, 256 KiB to 16 MiB).
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
    /// DSCP each class's datagrams between the gateways carry: standard (control ef,
    /// telemetry af41, bulk df), off, or CLASS=DSCP pairs over the standard plan, e.g.
    /// control=cs5,bulk=af11 (a DSCP is 0-63 or a name: df, ef, af11-af43, cs0-cs7, va, le).
    /// The egress's UDP replies go as bulk. Key `dscp`.
    #[arg(long, value_name = "PLAN")]
    dscp: Option<String>,
    /// Drop a connection that hears nothing from the other gateway for this long (at least
    /// 1s, default 30s; then a near-reliable flow resumes). An idle flow's connection sends a
    /// keep-alive after a third of it, so idle flows stay up while the peer answers.
    #[arg(long)]
    idle_timeout: Option<String>,
    /// Longest a near-reliable flow keeps trying to resume.
    #[arg(long)]
    resume_timeout: Option<String>,
    /// How long a peer may take to prove its address (1s-10min, default 30s); the egress opens
    /// no TCP connection onwards before (docs/security.md).
    #[arg(long)]
    setup_timeout: Option<String>,
    /// Most connections whose peer has not proven its address (0 to --max-connections,
    /// default 128); beyond it new peers get a stateless RETRY.
    #[arg(long)]
    max_half_open: Option<usize>,
    /// Most AeroTP connections at once (1-65536, default 4096): one per TCP flow; a flow
    /// beyond it is refused (docs/gateway.md, "Many flows", gives the memory per flow).
    #[arg(long)]
    max_connections: Option<usize>,
    #[command(flatten)]
    key: crate::key_flags::KeyFlags,
    #[command(flatten)]
    dlep: crate::dlep_flags::DlepArgs,
    /// Write every AeroTP datagram the gateway's socket sends and receives to FILE (pcapng;
    /// interfaces "sent" and "received"; open it with tools/wireshark/aerotp.lua). The file
    /// is created before the socket is bound, so a bad path costs no traffic; it is closed
    /// on SIGINT/SIGTERM. Key `pcap`.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer thread; beyond it
    /// records are dropped and counted, never the data (default 8MiB; e.g. 64MB). Key
    /// `pcap_queue`.
    #[arg(long, value_name = "SIZE", value_parser = size_text)]
    pcap_queue: Option<String>,
    /// Write an event trace to DIR/gw-<role>-<pid>.sqlog (every TPDU of every flow's
    /// connection, the engine's RTT, losses, FEC and state; docs/qlog.md); closed on
    /// SIGINT/SIGTERM. DIR is created if missing. Key `qlog`.
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct IngressArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The egress's UDP address.
    #[arg(long)]
    peer: Option<String>,
    /// The egress's address on a further path, [LOCAL=]ADDR (repeat per path; config
    /// `peer_paths`): every connection to the egress spreads over --peer and these
    /// (docs/gateway.md, "Several paths"). LOCAL, one of this host's addresses, is where the
    /// path's datagrams leave from; without it routing picks. --bind stays on the wildcard
    /// address so each path can leave from its own address.
    #[arg(long = "peer-path", value_name = "[LOCAL=]ADDR")]
    peer_paths: Vec<String>,
    /// This host's address to send the --peer path from (config `peer_from`).
    #[arg(long = "peer-from", value_name = "LOCAL")]
    peer_from: Option<String>,
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
    #[command(flatten)]
    transparent: TransparentArgs,
}

/// Transparent interception (`[transparent]` in a config file; docs/gateway.md).
#[derive(Debug, clap::Args)]
struct TransparentArgs {
    /// Take TCP connections to any destination that `aerotp gw rules --tcp-port` steers here
    /// ([::]:7400 for IPv4 and IPv6, 0.0.0.0:7400 for IPv4 only); each is carried to the
    /// destination its application addressed.
    #[arg(long)]
    transparent_tcp: Option<String>,
    /// Take UDP datagrams to any destination that `aerotp gw rules --udp-port` steers here
    /// ([::]:7401 or 0.0.0.0:7401, as for TCP; datagram mode; replies leave from the address
    /// the application sent to).
    #[arg(long)]
    transparent_udp: Option<String>,
    /// Mode of intercepted TCP flows: near-reliable (default, needs --store) or reliable.
    #[arg(long)]
    transparent_mode: Option<String>,
    /// Reliable mode end to end: terminate intercepted TCP routed into this TUN device (made
    /// by the ingress; root; `gw rules --tcp-tun`) in the ingress's own TCP, which
    /// acknowledges a byte to the source only once the destination's TCP has acknowledged it
    /// (confirmed by the egress). A reliable [[flow]] on an address this host does not have
    /// is served there too: the ingress routes that address into the device.
    #[arg(long)]
    transparent_tun: Option<String>,
    /// Class of intercepted flows: control, telemetry, bulk (default).
    #[arg(long)]
    transparent_class: Option<String>,
    /// Class of intercepted UDP flows, if not --transparent-class's (e.g. telemetry
    /// datagrams beside bulk TCP); needs --transparent-udp.
    #[arg(long)]
    transparent_udp_class: Option<String>,
    /// Class of intercepted TCP flows to a destination, CLASS=PREFIX[:PORT[-PORT]], e.g.
    /// control=*:7100 (repeat; the first that matches wins; none: --transparent-class).
    #[arg(long)]
    transparent_tcp_class: Vec<String>,
    /// Carry only these destinations, PREFIX[:PORT[-PORT]] (repeat; none: all not denied).
    #[arg(long)]
    transparent_allow: Vec<String>,
    /// Refuse these destinations, PREFIX[:PORT[-PORT]] (repeat; deny wins over allow).
    #[arg(long)]
    transparent_deny: Vec<String>,
}

impl TransparentArgs {
    /// The `[transparent]` table of these flags; `None` if no flag was given.
    fn spec(self) -> Option<aerotp_gw::transparent::TransparentSpec> {
        let spec = aerotp_gw::transparent::TransparentSpec {
            tcp_listen: self.transparent_tcp,
            udp_listen: self.transparent_udp,
            mode: self.transparent_mode,
            tun: self.transparent_tun,
            class: self.transparent_class,
            udp_class: self.transparent_udp_class,
            tcp_classes: self.transparent_tcp_class,
            allow: self.transparent_allow,
            deny: self.transparent_deny,
        };
        (spec != aerotp_gw::transparent::TransparentSpec::default()).then_some(spec)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RulesAction {
    /// Show the commands and the nftables script `install` runs.
    Print,
    /// Install them (replacing an earlier install).
    Install,
    /// Remove them (what is absent is not an error).
    Remove,
}

#[derive(Debug, clap::Args)]
struct RulesArgs {
    action: RulesAction,
    /// Interface whose incoming traffic is intercepted (the applications' side; repeat).
    #[arg(long, required = true)]
    iif: Vec<String>,
    /// Port of the ingress's --transparent-tcp listener.
    #[arg(long)]
    tcp_port: Option<u16>,
    /// The ingress's --transparent-tun device: TCP is routed into it (reliable end to end;
    /// install after the ingress started; instead of --tcp-port).
    #[arg(long)]
    tcp_tun: Option<String>,
    /// Port of the ingress's --transparent-udp socket.
    #[arg(long)]
    udp_port: Option<u16>,
    /// Firewall mark of intercepted packets (decimal or 0x hex).
    #[arg(long, default_value = "0x1", value_parser = parse_mark)]
    mark: u32,
    /// Routing table that delivers marked packets locally.
    #[arg(long, default_value_t = 100)]
    route_table: u32,
    /// Destination prefix never intercepted (a.b.c.d/len or [v6::]/len, no port; repeat).
    #[arg(long)]
    exclude: Vec<String>,
    /// Network namespace to act in (default: the current one).
    #[arg(long)]
    netns: Option<String>,
    /// Intercept IPv4 only (for a host without IPv6, where `ip -6` fails).
    #[arg(long)]
    ipv4_only: bool,
}

/// `--pcap-queue`: checked by the workspace's size rule now, kept as text for the config.
fn size_text(s: &str) -> Result<String, String> {
    crate::common::size_arg(s).map(|_| s.to_string())
}

fn parse_mark(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("'{s}': give a 32-bit mark, decimal or 0x hex (e.g. 0x1)"))
}

impl RulesArgs {
    fn spec(self) -> Result<aerotp_gw::transparent::RuleSpec> {
        let exclude = self
            .exclude
            .iter()
            .map(|x| aerotp_gw::transparent::DestRule::parse("--exclude", x))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
        let spec = aerotp_gw::transparent::RuleSpec {
            iif: self.iif,
            tcp_port: self.tcp_port,
            tcp_tun: self.tcp_tun,
            udp_port: self.udp_port,
            mark: self.mark,
            route_table: self.route_table,
            exclude,
            netns: self.netns,
            ipv6: !self.ipv4_only,
        };
        spec.check().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }

    fn run(self) -> Result<i32> {
        let action = self.action;
        let spec = self.spec()?;
        match action {
            RulesAction::Print => print!("{}", spec.print()),
            RulesAction::Install => {
                spec.install().map_err(anyhow::Error::msg)?;
                eprintln!(
                    "aerotp gw rules: installed (nft table inet {})",
                    aerotp_gw::transparent::rules::TABLE
                );
            }
            RulesAction::Remove => {
                spec.remove().map_err(anyhow::Error::msg)?;
                eprintln!("aerotp gw rules: removed");
            }
        }
        Ok(0)
    }
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
            max_rate: self.max_rate,
            mtu: self.mtu,
            window: self.window,
            metrics: self.metrics,
            priority: self.priority,
            dscp: self.dscp,
            idle_timeout: self.idle_timeout,
            resume_timeout: self.resume_timeout,
            setup_timeout: self.setup_timeout,
            max_half_open: self.max_half_open,
            max_connections: self.max_connections,
            fec: self.fec,
            erasure: self.erasure,
            max_delay: self.max_delay,
            key_file: self.key.key_file,
            encrypt: self.key.encrypt.then_some(true),
            insecure: self.key.insecure.then_some(true),
            dlep: self.dlep.dlep_key(),
            dlep_map: self.dlep.dlep_map_keys(),
            pcap: self.pcap,
            pcap_queue: self.pcap_queue,
            qlog: self.qlog,
            ..FileConfig::default()
        }
    }
}

/// The rate in force and why, as the gateway says it at start.
fn rate_line(s: &aerotp_gw::config::Settings) -> String {
    let r = aerotp_link::format_rate(s.link.rate);
    match s.link.rate_control {
        aerotp_gw::config::RateControl::Fixed => {
            format!("rate {r} fixed (rate), shared by class")
        }
        aerotp_gw::config::RateControl::Discover => format!(
            "rate discovered by reliable flows under their class's share of {r} (max_rate{}); \
             flows in other modes are paced at their share of it",
            if s.link.rate == aerotp_gw::config::DEFAULT_CAP_BPS {
                ", default: give it for a faster link"
            } else {
                ""
            }
        ),
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
                erasure: None,
                max_delay: None,
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
            peer_paths: self.peer_paths,
            peer_from: self.peer_from,
            bind: self.bind,
            store: self.store,
            store_capacity: self.store_capacity,
            flows,
            transparent: self.transparent.spec(),
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
    let args = match args.cmd {
        // Runs `nft`/`ip`: no runtime needed.
        Cmd::Rules(r) => return r.run(),
        cmd => Args { cmd },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (role, cfg) = match args.cmd {
            Cmd::Stats { metrics } => return print_metrics(&metrics).await,
            Cmd::Ingress(a) => (Role::Ingress, a.file_config()?),
            Cmd::Egress(a) => (Role::Egress, a.file_config()?),
            Cmd::Rules(_) => unreachable!("handled above"),
        };
        serve(role, cfg).await
    })
}

/// `aerotp gw stats`: prints a running gateway's metrics.
async fn print_metrics(metrics: &str) -> Result<i32> {
    let addr = tokio::net::lookup_host(metrics)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("--metrics {metrics}: no address"))?;
    print!("{}", aerotp_gw::metrics::fetch(addr).await?);
    Ok(0)
}

/// Runs the gateway in `role` until Ctrl-C or SIGTERM, with its capture and qlog if asked
/// for.
async fn serve(role: Role, cfg: FileConfig) -> Result<i32> {
    let settings = cfg.settings()?;
    // A key, or the user's word that none is wanted (then said on stderr), before any
    // file, socket or store is opened.
    settings.require_key(role)?;
    if settings.auth.insecure {
        eprintln!(
            "{}",
            crate::key_flags::insecure_warning(&format!("gw {role}"))
        );
    }
    // The capture file exists before the gateway binds its socket: a path that cannot be
    // written is refused (naming the flag) before any datagram is sent.
    let capture = match &settings.recording.pcap {
        Some(p) => Some(
            crate::common::open_capture(
                p,
                &aerotp_net::ENDPOINT_INTERFACES,
                settings.recording.pcap_queue,
            )
            .context("pcap (--pcap or the `pcap` key)")?,
        ),
        None => None,
    };
    let qlog = open_qlog(&settings, role)?;
    let rate = rate_line(&settings);
    let gw = aerotp_gw::start(role, settings).await?;
    crate::qlog_tap::attach_taps(
        &gw.ep,
        capture
            .clone()
            .map(|c| c as std::sync::Arc<dyn aerotp_net::Tap>),
        qlog.as_ref(),
    );
    eprintln!("aerotp gw {role}: AeroTP on {}", gw.ep.local_addr());
    eprintln!("aerotp gw {role}: {rate}");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping; custody stays in the store");
    gw.ep.remove_tap();
    if let Some(q) = qlog {
        gw.ep.remove_engine_tap();
        let (st, dropped) = q.finish()?;
        eprintln!(
            "aerotp gw {role}: qlog {}: {} events, {} not written",
            q.path.display(),
            st.events,
            dropped + st.dropped
        );
    }
    if let Some(c) = capture {
        crate::common::close_capture(&c, &format!("aerotp gw {role}"))?;
    }
    Ok(0)
}

/// The qlog the settings ask for (`--qlog` or the `qlog` key), from the role's vantage.
fn open_qlog(
    settings: &aerotp_gw::config::Settings,
    role: Role,
) -> Result<Option<std::sync::Arc<crate::qlog_tap::LiveQlog>>> {
    let Some(d) = &settings.recording.qlog else {
        return Ok(None);
    };
    let vantage = match role {
        Role::Ingress => aerotp_qlog::Vantage::Client,
        Role::Egress => aerotp_qlog::Vantage::Server,
    };
    Ok(Some(std::sync::Arc::new(
        crate::qlog_tap::LiveQlog::named(d, &format!("gw-{role}"), vantage)
            .context("qlog (--qlog or the `qlog` key)")?,
    )))
}

#[cfg(test)]
mod tests;
