//! Gateway settings: command-line flags for the simple case, a TOML file (same keys) for many
//! flows (docs/gw/gateway.toml).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use aerotp_net::{ErasureChoice, Mode};
use aerotp_proto::PathAddr;
use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::consts::Role;
use crate::frame::Class;

mod checks;
mod dlep;
mod posture;
mod rate;
mod timers;
pub use rate::{RateControl, DEFAULT_CAP_BPS};

/// How a gateway shares its link rate among busy flows (docs/gateway.md §Priorities): the
/// engine's link share does it.
pub use aerotp_proto::SharePolicy as Policy;

/// One mapping of a local TCP or UDP port to the remote side.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Ingress: accept TCP connections here.
    pub tcp_listen: Option<String>,
    /// Ingress: receive UDP datagrams here.
    pub udp_listen: Option<String>,
    /// Destination `host:port` at the egress (empty: the egress's `tcp_connect`/`udp_connect`).
    pub dest: Option<String>,
    /// near-reliable (default for TCP), reliable, datagram (default for UDP), quasi-reliable,
    /// unreliable.
    pub mode: Option<String>,
    /// control, telemetry, bulk (default).
    pub class: Option<String>,
    /// FEC setting (off, auto, N words, pN parity bytes).
    pub fec: Option<String>,
    /// Erasure repair across TPDUs: off, auto, or a ratio such as 1.25 (the gateway's
    /// `erasure` unless set; docs/fec.md).
    pub erasure: Option<String>,
    /// Longest a lost TPDU may wait for its repairs, e.g. 500ms (the gateway's `max_delay`
    /// unless set).
    pub max_delay: Option<String>,
}

/// Peer addresses and the local address each path to them leaves from.
pub(crate) type PathSources = Vec<(SocketAddr, IpAddr)>;

/// Everything a gateway reads from its TOML file.
///
/// Not split: each field is a top-level key of the gateway's TOML file (docs/gateway.md,
/// docs/gw/gateway.toml; the same keys as the flags), so sub-structs would move the keys into
/// tables and break existing files; serde's `flatten` would keep the keys but does not work
/// with `deny_unknown_fields`, which makes a misspelt key an error.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub peer: Option<String>,
    /// Ingress: the egress's addresses on further paths (docs/spec.md §9, "several paths");
    /// each connection adds them as paths. `peer_paths = ["10.77.1.2:47000"]`; an entry
    /// `"LOCAL=ADDR"` also sends that path from this host's address LOCAL.
    #[serde(default)]
    pub peer_paths: Vec<String>,
    /// Ingress: this host's address to send the `peer` path from (one radio of several).
    pub peer_from: Option<String>,
    pub bind: Option<String>,
    pub listen: Option<String>,
    pub tcp_connect: Option<String>,
    pub udp_connect: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    pub allow_any: Option<bool>,
    /// A fixed rate the flows share: text such as "5mbit", or an integer of bits per second;
    /// "auto" (or unset): discovered (docs/gateway.md §Rate).
    #[serde(default, deserialize_with = "rate::rate_text")]
    pub rate: Option<String>,
    /// The cap of a discovered rate (`--max-rate`), as `rate` is written; default 5 Mb/s.
    #[serde(default, deserialize_with = "rate::rate_text")]
    pub max_rate: Option<String>,
    pub mtu: Option<usize>,
    pub store: Option<PathBuf>,
    pub store_capacity: Option<String>,
    pub window: Option<String>,
    pub metrics: Option<String>,
    pub priority: Option<String>,
    pub weights: Option<[u32; 3]>,
    /// DSCP each class's datagrams carry: standard, off, or CLASS=DSCP pairs (`--dscp`).
    pub dscp: Option<String>,
    pub idle_timeout: Option<String>,
    pub resume_timeout: Option<String>,
    /// FEC of what this gateway sends when a flow does not say: at the egress, the answers
    /// and downloads it carries back (the ingress chooses per flow for its own direction).
    pub fec: Option<String>,
    /// Erasure repair across TPDUs of what this gateway sends when a flow does not say: off,
    /// auto, or a ratio such as 1.25 (default: each mode's, docs/fec.md).
    pub erasure: Option<String>,
    /// Longest a lost TPDU may wait for its repairs, e.g. 500ms (default 500ms).
    pub max_delay: Option<String>,
    /// Pre-shared key file (`aerotp keygen`): every TPDU between the gateways is
    /// authenticated with it (docs/security.md). Both gateways need the same file.
    pub key_file: Option<PathBuf>,
    /// With `key_file`: encrypt TPDU bodies as well.
    pub encrypt: Option<bool>,
    /// Run without a key (`--insecure`): nothing between the gateways is authenticated. A
    /// gateway refuses to start with neither this nor `key_file` (docs/security.md,
    /// "Default posture").
    pub insecure: Option<bool>,
    /// How long an accepted connection may stay unproven (docs/security.md), e.g. 30s.
    pub setup_timeout: Option<String>,
    /// Most unproven connections at once; beyond it new peers get a RETRY (default 128).
    pub max_half_open: Option<usize>,
    /// Most AeroTP connections at once, one per TCP flow (default 4096); beyond it a new
    /// flow is refused (docs/gateway.md, "Many flows").
    pub max_connections: Option<usize>,
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSpec>,
    /// Ingress: transparent interception (docs/gateway.md §Transparent interception).
    pub transparent: Option<crate::transparent::TransparentSpec>,
    /// The radio's DLEP modem to follow (`--dlep`; docs/dlep.md): `ADDR[:PORT]` (port 854
    /// unless given) or `discover`. Its rates, downs, ups and pauses steer the paths.
    pub dlep: Option<String>,
    /// With `dlep`: `MAC=IP` entries, the AeroTP peer each DLEP destination stands for
    /// (`--dlep-map`), for a modem that reports no IP address for its destinations;
    /// `MAC=IP@LOCAL` when the modem is the radio of this host's address LOCAL (only the
    /// paths from LOCAL toward IP).
    #[serde(default)]
    pub dlep_map: Vec<String>,
    /// Capture every AeroTP datagram the gateway sends and receives to this pcapng file
    /// (`--pcap`; docs/capture.md).
    pub pcap: Option<PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer (`--pcap-queue`,
    /// default 8MiB): beyond it records are dropped and counted, never the data.
    pub pcap_queue: Option<String>,
    /// Write an event trace of every flow's connection into this directory (`--qlog`;
    /// docs/qlog.md).
    pub qlog: Option<PathBuf>,
}

impl FileConfig {
    pub fn load(path: &std::path::Path) -> Result<FileConfig> {
        let s = std::fs::read_to_string(path)
            .with_context(|| format!("--config {}: cannot read it", path.display()))?;
        toml::from_str(&s)
            .with_context(|| format!("--config {}: bad gateway config", path.display()))
    }

    /// Checks that no key of the other role is set: a key the role would ignore is an error
    /// that names it, so a misplaced setting is never silently without effect.
    pub fn check_role(&self, role: Role) -> Result<()> {
        let (other, keys): (Role, Vec<(&str, bool)>) = match role {
            Role::Ingress => (
                Role::Egress,
                vec![
                    ("listen", self.listen.is_some()),
                    ("tcp_connect", self.tcp_connect.is_some()),
                    ("udp_connect", self.udp_connect.is_some()),
                    ("allow", !self.allow.is_empty()),
                    ("allow_any", self.allow_any.is_some()),
                ],
            ),
            Role::Egress => (
                Role::Ingress,
                vec![
                    ("peer", self.peer.is_some()),
                    ("peer_paths", !self.peer_paths.is_empty()),
                    ("peer_from", self.peer_from.is_some()),
                    ("bind", self.bind.is_some()),
                    ("store_capacity", self.store_capacity.is_some()),
                    ("flow", !self.flows.is_empty()),
                    ("transparent", self.transparent.is_some()),
                ],
            ),
        };
        match keys.iter().find(|(_, set)| *set) {
            Some((key, _)) => bail!(
                "`{key}` is a setting of the {other} gateway, not of the {role}: remove it from this {role}'s flags or config file (see `aerotp gw {role} --help`)"
            ),
            None => Ok(()),
        }
    }

    /// The `peer_paths` (and the local addresses some name, with `peer_from`'s), checked:
    /// at most `aerotp_proto::MAX_PATHS` paths with `peer`, each its own address, every
    /// local address an IP address of `peer`'s family.
    fn peer_paths(&self) -> Result<(Vec<PathAddr>, PathSources)> {
        let mut paths = Vec::new();
        let mut sources = Vec::new();
        let peer = self.peer.as_deref().map(|p| addr(p, "peer")).transpose()?;
        let local_ip = |l: &str, what: &str| -> Result<IpAddr> {
            l.trim().parse::<IpAddr>().map_err(|_| {
                anyhow::anyhow!(
                    "{what}: '{l}' is not an IP address; give one of this host's addresses, \
                     e.g. 10.77.1.1"
                )
            })
        };
        for p in &self.peer_paths {
            let (local, a) = match p.split_once('=') {
                Some((l, a)) => (Some(local_ip(l, &format!("peer_paths '{p}'"))?), a),
                None => (None, p.as_str()),
            };
            let remote = addr(a, "peer_paths")?;
            let path = PathAddr::new(local, remote);
            // The first path: `peer`, from `peer_from` (or routing's choice).
            let from = self
                .peer_from
                .as_deref()
                .and_then(|f| f.trim().parse().ok());
            let is_first = Some(remote) == peer && (local.is_none() || local == from);
            if is_first || paths.contains(&path) {
                bail!(
                    "peer_paths '{p}': {remote} is already a path (peer or another entry); \
                     a path is its local and the egress's address, so give each entry its \
                     own egress address or its own LOCAL= (one of this host's addresses)"
                );
            }
            if let Some(l) = local {
                sources.push((remote, l));
            }
            paths.push(path);
        }
        if let Some(f) = &self.peer_from {
            let l = local_ip(f, "peer_from")?;
            let p = peer.ok_or_else(|| anyhow::anyhow!("peer_from needs peer"))?;
            sources.push((p, l));
        }
        if let Some((r, l)) = sources.iter().find(|(r, l)| r.is_ipv4() != l.is_ipv4()) {
            let key = if Some(*r) == peer {
                "peer_from"
            } else {
                "peer_paths"
            };
            bail!(
                "{key}: local address {l} is not of the family of {r}: one socket carries \
                 every path"
            );
        }
        if paths.len() + 1 > aerotp_proto::MAX_PATHS {
            bail!(
                "peer_paths has {} addresses: a connection keeps at most {} paths, so give at \
                 most {}",
                paths.len(),
                aerotp_proto::MAX_PATHS,
                aerotp_proto::MAX_PATHS - 1
            );
        }
        if self.peer.is_none() && !paths.is_empty() {
            bail!("peer_paths needs peer (the egress's address on the first path)");
        }
        Ok((paths, sources))
    }

    /// Flags win over the file: fills what `self` lacks from `other`.
    pub fn merge(mut self, other: FileConfig) -> FileConfig {
        macro_rules! take {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = other.$f; } )* };
        }
        take!(
            peer,
            bind,
            listen,
            tcp_connect,
            udp_connect,
            allow_any,
            rate,
            max_rate,
            mtu,
            store,
            store_capacity,
            window,
            metrics,
            priority,
            weights,
            dscp,
            idle_timeout,
            resume_timeout,
            fec,
            erasure,
            max_delay,
            transparent,
            key_file,
            encrypt,
            insecure,
            setup_timeout,
            max_half_open,
            max_connections,
            pcap,
            pcap_queue,
            qlog
        );
        self.allow.extend(other.allow);
        if self.peer_paths.is_empty() {
            self.peer_paths = other.peer_paths;
        }
        if self.peer_from.is_none() {
            self.peer_from = other.peer_from;
        }
        if self.dlep.is_none() {
            self.dlep = other.dlep;
        }
        if self.dlep_map.is_empty() {
            self.dlep_map = other.dlep_map;
        }
        self.flows.extend(other.flows);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowKind {
    Tcp,
    Udp,
}

/// A validated flow mapping.
#[derive(Debug, Clone)]
pub struct Route {
    pub kind: FlowKind,
    pub local: SocketAddr,
    pub dest: String,
    pub mode: Mode,
    pub class: Class,
    pub fec: aerotp_net::FecSetting,
    /// Erasure repair chosen for the flow (unset parts: the mode's default).
    pub erasure: ErasureChoice,
}

/// Validated settings of either role, grouped by what each part is for.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The gateway's own socket and the egress's addresses (ingress).
    pub paths: PeerPaths,
    /// What the egress listens on, where it connects, and whom it lets in.
    pub egress: EgressSettings,
    /// The air link: its rate, how the flows share it, the datagram size and DSCP.
    pub link: LinkSettings,
    /// Custody of the flows' bytes: the store and the windows.
    pub custody: CustodySettings,
    /// How long a flow's connection may stay silent or broken.
    pub timeouts: Timeouts,
    /// Address validation and the cap on connections.
    pub admission: Admission,
    /// Error control of what the gateway sends when a flow does not choose.
    pub coding: Coding,
    /// Authentication of the TPDUs between the gateways.
    pub auth: Auth,
    pub routes: Vec<Route>,
    /// Ingress: transparent interception, if set.
    pub transparent: Option<crate::transparent::Transparent>,
    pub metrics: Option<SocketAddr>,
    /// The DLEP session the endpoint follows (`dlep`), if any, started with the endpoint...
    pub dlep: Option<aerotp_dlep::ClientConfig>,
    /// ...and the peers its destinations stand for (`dlep_map`).
    pub dlep_map: aerotp_net::DestinationMap,
    /// The capture file and the event trace.
    pub recording: Recording,
}

/// The local socket and the paths to the egress (`peer`, `peer_paths`, `peer_from`, `bind`).
#[derive(Debug, Clone)]
pub struct PeerPaths {
    pub peer: Option<SocketAddr>,
    /// Further paths to the egress (ingress): its address on each, and this host's where
    /// one is given (`LOCAL=ADDR`).
    pub peer_paths: Vec<PathAddr>,
    /// The local address each path to the egress leaves from, where one is given
    /// (`peer_from`, `peer_paths` entries `LOCAL=ADDR`): pinned on the endpoint at start.
    pub path_sources: PathSources,
    pub bind: SocketAddr,
}

/// The egress's side: its listen address, its default destinations and its allow-list
/// (`listen`, `tcp_connect`, `udp_connect`, `allow`, `allow_any`).
#[derive(Debug, Clone)]
pub struct EgressSettings {
    pub listen: Option<SocketAddr>,
    pub tcp_connect: Option<String>,
    pub udp_connect: Option<String>,
    pub allow: Vec<String>,
    pub allow_any: bool,
}

/// The air link as the gateway uses it (`rate`, `max_rate`, `mtu`, `priority`, `weights`,
/// `dscp`).
#[derive(Debug, Clone)]
pub struct LinkSettings {
    /// The fixed rate, or the cap of the discovered ones (`rate_control`): the total the
    /// endpoint's link share divides among the classes, b/s with IP/UDP headers.
    pub rate: u64,
    /// Fixed (`rate`), or discovered by each flow's connection that can (reliable) under
    /// its share of `rate`; the others pace at that share.
    pub rate_control: RateControl,
    pub mtu: usize,
    pub policy: Policy,
    /// The DSCP each class's datagrams carry between the gateways (`crate::udp`'s routes by
    /// their class, flows' connections by theirs).
    pub dscp: aerotp_net::DscpPlan,
}

/// Custody of the flows' bytes (`store`, `store_capacity`, `window`).
#[derive(Debug, Clone)]
pub struct CustodySettings {
    pub store: Option<PathBuf>,
    pub store_capacity: u64,
    pub window: u64,
    /// `window` was given (flag or key); otherwise the TUN path sizes its own
    /// ([`Settings::tun_window`]).
    pub window_set: bool,
}

/// The timers of a flow's connection (`idle_timeout`, `resume_timeout`).
#[derive(Debug, Clone)]
pub struct Timeouts {
    pub idle: Duration,
    pub resume: Duration,
}

/// Address validation of accepted connections (docs/security.md, "Half-open connections")
/// and the connection cap (`setup_timeout`, `max_half_open`, `max_connections`).
#[derive(Debug, Clone)]
pub struct Admission {
    /// The set-up timeout, 1 s to 10 min (default 30 s)...
    pub setup_timeout: Duration,
    /// ...and most half-open connections, 0 to `max_connections` (default 128; 0: always
    /// RETRY).
    pub max_half_open: usize,
    /// Most AeroTP connections at once, 1 to 65536 (default [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

/// Error control of what the gateway sends when a flow has no choice of its own (`fec`,
/// `erasure`, `max_delay`).
#[derive(Debug, Clone)]
pub struct Coding {
    /// FEC of the flows without their own (ingress) and of what the egress sends back;
    /// [`DEFAULT_FEC`] unless set.
    pub fec: aerotp_net::FecSetting,
    /// Erasure repair of the flows without their own choice (ingress) and of what the egress
    /// sends back; unset parts keep each mode's default (docs/fec.md).
    pub erasure: ErasureChoice,
}

/// Authentication between the gateways (`key_file`, `encrypt`, `insecure`).
#[derive(Debug, Clone)]
pub struct Auth {
    /// Pre-shared key file; `None`: TPDUs are not authenticated.
    pub key_file: Option<PathBuf>,
    /// Encrypt TPDU bodies (only with `key_file`).
    pub encrypt: bool,
    /// No key, and the user said so (`insecure`): [`Settings::require_key`] lets it start.
    pub insecure: bool,
}

/// What the gateway records of its traffic (`pcap`, `pcap_queue`, `qlog`).
#[derive(Debug, Clone)]
pub struct Recording {
    /// The capture file (`pcap`), opened by the command before the socket is bound...
    pub pcap: Option<PathBuf>,
    /// ...with this many bytes of records queued at most (`pcap_queue`).
    pub pcap_queue: u64,
    /// The event trace's directory (`qlog`).
    pub qlog: Option<PathBuf>,
}

/// The TUN path's window when none is given: two seconds of the air link at `rate` (with a
/// discovered rate, of its cap: the link is at most that fast, so the window covers it), within
/// 256 KiB–16 MiB. The source learns of a byte only once the destination has it, so a window
/// under the link's rate × the end-to-end round trip caps the flow: at 250 ms one way and
/// 5 Mb/s, 256 KiB held an upload to 65 % of the ceiling and 1 MiB to 79 % (docs/results/gw.md,
/// "The TUN path measured"); two seconds cover a 500 ms one-way round trip and the repair of
/// a loss on it.
pub fn tun_window(rate_bps: u64) -> u64 {
    (rate_bps / 8 * 2).clamp(256 << 10, 16 << 20)
}

impl Settings {
    /// The window of the user-space TCP (`--transparent-tun`): `window` if given, else
    /// [`tun_window`] of the gateway's rate.
    pub fn tun_window(&self) -> u64 {
        if self.custody.window_set {
            self.custody.window
        } else {
            tun_window(self.link.rate)
        }
    }
}

/// Gateways' default connection cap: a ground-station pair serves many test articles, each
/// TCP flow one connection (docs/gateway.md, "Many flows": memory per idle flow).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// The repair a datagram-mode route sends with `choice` (`aerotp_proto::datagram_repair`): a
/// fixed ratio, or none. A gateway-wide `auto` applies to connections only; a flow's own
/// `erasure = "auto"` on a datagram flow is refused when the configuration is read.
pub(crate) fn datagram_erasure(
    choice: &ErasureChoice,
) -> Result<Option<aerotp_proto::ErasureSetting>> {
    aerotp_proto::datagram_repair(choice)
        .map_err(|e| anyhow::anyhow!("erasure settings of a datagram route: {e}"))
}

/// `erasure` and `max_delay` (a flow's or the gateway's: `prefix` says which in errors) over
/// `base`: what is unset stays as in `base`.
fn erasure_choice(
    mode: &Option<String>,
    max_delay: &Option<String>,
    base: ErasureChoice,
    prefix: &str,
) -> Result<ErasureChoice> {
    let mut c = base;
    if let Some(m) = mode {
        c.mode = Some(
            aerotp_net::ErasureMode::parse(m)
                .map_err(|e| anyhow::anyhow!("{prefix}erasure '{m}': {e}"))?,
        );
    }
    if let Some(d) = max_delay {
        let v = aerotp_link::parse_duration(d)
            .map_err(|e| anyhow::anyhow!("{prefix}max_delay '{d}': {e}"))?;
        if v < Duration::from_millis(1) || v > Duration::from_secs(60) {
            bail!("{prefix}max_delay '{d}': out of range: give 1ms to 60s, e.g. 500ms");
        }
        c.max_delay = Some(v);
    }
    Ok(c)
}

/// A size setting by the workspace's one rule ([`aerotp_link::parse_size`]); the error names
/// the key.
fn size(key: &str, s: &str) -> Result<u64> {
    aerotp_link::parse_size(s).map_err(|e| anyhow::anyhow!("{key}: {e}"))
}

/// A socket address key: `IP:PORT`, `[IPv6]:PORT` or `host:PORT` (resolved now). An address
/// without a port is refused as such, not as a name that does not resolve.
fn addr(s: &str, what: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let t = s.trim();
    let bracketed_v6 = t.starts_with('[') && t.ends_with(']');
    if t.parse::<IpAddr>().is_ok() || bracketed_v6 || (!t.is_empty() && !t.contains(':')) {
        bail!(
            "{what} '{s}': no port; give ADDRESS:PORT, e.g. 10.77.0.2:9000 or \
             [fd77::2]:9000 (a host name with its port: egress.example:9000)"
        );
    }
    s.to_socket_addrs()
        .with_context(|| {
            format!("{what}: cannot resolve '{s}'; give IP:PORT or a host name this host can resolve, with its port")
        })?
        .next()
        .with_context(|| format!("{what}: '{s}' has no address"))
}

impl FlowKind {
    fn name(self) -> &'static str {
        match self {
            FlowKind::Tcp => "TCP",
            FlowKind::Udp => "UDP",
        }
    }
}

/// FEC when nothing says otherwise: `auto`. In every connection mode the sender adapts it to
/// the bit-error rate the receiver reports (no parity on a clean link: 4.791 against
/// 4.795 Mb/s at BER 0, and 4.55 against 0.57 Mb/s at 1e-4, docs/results/seeds.md); in
/// datagram mode, with no report to adapt to, it is the strength for the engine's initial
/// assumption (BER 1e-4): a few percent of the rate on a clean link for ten times fewer
/// losses on a noisy one (docs/modes.md).
pub const DEFAULT_FEC: aerotp_net::FecSetting = aerotp_net::FecSetting::Auto;

/// Smallest and largest `mtu` accepted.
const MTU_RANGE: std::ops::RangeInclusive<usize> = 576..=65_507;

impl FileConfig {
    /// One `[[flow]]` table (or the flags' flow) validated; `fec` and `erasure` are the
    /// gateway's.
    fn route(f: &FlowSpec, fec: aerotp_net::FecSetting, erasure: ErasureChoice) -> Result<Route> {
        let (kind, local) = match (&f.tcp_listen, &f.udp_listen) {
            (Some(t), None) => (FlowKind::Tcp, addr(t, "tcp_listen")?),
            (None, Some(u)) => (FlowKind::Udp, addr(u, "udp_listen")?),
            _ => bail!("each [[flow]] needs exactly one of tcp_listen, udp_listen"),
        };
        let mode: Mode = match &f.mode {
            Some(m) => m
                .parse()
                .map_err(|e: String| anyhow::anyhow!("mode: {e}"))?,
            None if kind == FlowKind::Tcp => Mode::NearReliable,
            None => Mode::Datagram,
        };
        let ok = match kind {
            FlowKind::Tcp => matches!(mode, Mode::NearReliable | Mode::Reliable),
            FlowKind::Udp => matches!(
                mode,
                Mode::Datagram | Mode::QuasiReliable | Mode::Unreliable | Mode::Reliable
            ),
        };
        if !ok {
            bail!(
                "mode {mode} is not offered for {} flows (TCP: near-reliable, reliable; \
                 UDP: datagram, quasi-reliable, unreliable, reliable): change the flow's mode",
                kind.name()
            );
        }
        let class: Class = match &f.class {
            Some(c) => c
                .parse()
                .map_err(|e: String| anyhow::anyhow!("class: {e}"))?,
            None => Class::Bulk,
        };
        let fec = match &f.fec {
            Some(s) => aerotp_net::FecSetting::parse(s).context("the flow's fec")?,
            None => fec,
        };
        if mode == Mode::Datagram && f.erasure.as_deref() == Some("auto") {
            bail!(
                "erasure 'auto' on a datagram flow: datagram mode sends no receiver reports to \
                 adapt to; give a fixed ratio such as erasure = \"1.25\", or use mode \
                 quasi-reliable"
            );
        }
        let erasure = erasure_choice(&f.erasure, &f.max_delay, erasure, "the flow's ")?;
        // Every part checked against the mode now, not at the first connection.
        erasure
            .resolve(aerotp_proto::ErrorControl::for_mode(mode).erasure)
            .map_err(|e| anyhow::anyhow!("the flow's erasure settings: {e}"))?;
        Ok(Route {
            kind,
            local,
            dest: f.dest.clone().unwrap_or_default(),
            mode,
            class,
            fec,
            erasure,
        })
    }

    /// The MTU key, checked.
    fn mtu(&self) -> Result<usize> {
        let mtu = self.mtu.unwrap_or(1400);
        if !MTU_RANGE.contains(&mtu) {
            bail!(
                "mtu {mtu}: give {} to {} bytes (the largest AeroTP datagram on the air link)",
                MTU_RANGE.start(),
                MTU_RANGE.end()
            );
        }
        Ok(mtu)
    }

    /// The `encrypt` key, which needs a key file.
    fn encrypt(&self) -> Result<bool> {
        match (self.encrypt, &self.key_file) {
            (Some(true), None) => bail!(
                "encrypt: needs a key (--key-file PATH or the `key_file` key; `aerotp keygen PATH` writes one)"
            ),
            (e, _) => Ok(e.unwrap_or(false)),
        }
    }

    /// The `priority` key (and `weights`): how the link is shared among the classes.
    fn policy(&self) -> Result<Policy> {
        Ok(match self.priority.as_deref().unwrap_or("weighted") {
            "weighted" => Policy::Weighted {
                weights: self.weights.unwrap_or([8, 4, 1]),
            },
            "strict" => Policy::Strict { floor: 0.02 },
            p => bail!("priority '{p}': give strict or weighted"),
        })
    }

    /// Every `[[flow]]` (and the flags' flow) validated, no two on one listen port.
    fn routes(&self, fec: aerotp_net::FecSetting, erasure: ErasureChoice) -> Result<Vec<Route>> {
        let routes = self
            .flows
            .iter()
            .map(|f| FileConfig::route(f, fec, erasure))
            .collect::<Result<Vec<_>>>()?;
        FileConfig::check_listen_ports(&routes)?;
        Ok(routes)
    }

    /// The store and the windows (`store`, `store_capacity`, `window`).
    fn custody(&self) -> Result<CustodySettings> {
        Ok(CustodySettings {
            store: self.store.clone(),
            store_capacity: size(
                "store_capacity",
                self.store_capacity.as_deref().unwrap_or("256MB"),
            )?,
            window: size("window", self.window.as_deref().unwrap_or("256KiB"))?,
            window_set: self.window.is_some(),
        })
    }

    /// The capture and the event trace (`pcap`, `pcap_queue`, `qlog`).
    fn recording(&self) -> Result<Recording> {
        Ok(Recording {
            pcap: self.pcap.clone(),
            pcap_queue: size("pcap_queue", self.pcap_queue.as_deref().unwrap_or("8MiB"))?,
            qlog: self.qlog.clone(),
        })
    }

    pub fn settings(&self) -> Result<Settings> {
        let (rate_control, rate) = self.rate_setting()?;
        let mtu = self.mtu()?;
        let (max_half_open, max_connections) = self.admission()?;
        let policy = self.policy()?;
        let fec = match &self.fec {
            Some(s) => aerotp_net::FecSetting::parse(s).context("fec (--fec or the `fec` key)")?,
            None => DEFAULT_FEC,
        };
        self.check_inputs(mtu)?;
        let erasure = erasure_choice(&self.erasure, &self.max_delay, ErasureChoice::default(), "")?;
        let routes = self.routes(fec, erasure)?;
        let (peer_paths, path_sources) = self.peer_paths()?;
        let (dlep, dlep_map) = self.dlep()?;
        // Written in the order the keys are checked: the first error is the one reported.
        Ok(Settings {
            paths: PeerPaths {
                peer: self.peer.as_deref().map(|p| addr(p, "peer")).transpose()?,
                peer_paths,
                path_sources,
                bind: addr(self.bind.as_deref().unwrap_or("0.0.0.0:0"), "bind")?,
            },
            egress: EgressSettings {
                listen: self
                    .listen
                    .as_deref()
                    .map(|p| addr(p, "listen"))
                    .transpose()?,
                tcp_connect: self.tcp_connect.clone(),
                udp_connect: self.udp_connect.clone(),
                allow: self.allow.clone(),
                allow_any: self.allow_any.unwrap_or(false),
            },
            custody: self.custody()?,
            metrics: self
                .metrics
                .as_deref()
                .map(|p| addr(p, "metrics"))
                .transpose()?,
            link: LinkSettings {
                rate,
                rate_control,
                mtu,
                policy,
                dscp: match &self.dscp {
                    Some(p) => p
                        .parse()
                        .map_err(|e| anyhow::anyhow!("dscp (--dscp or the `dscp` key): {e}"))?,
                    None => aerotp_net::DscpPlan::STANDARD,
                },
            },
            timeouts: self.timeouts()?,
            routes,
            coding: Coding { fec, erasure },
            transparent: self
                .transparent
                .as_ref()
                .map(|t| t.settings())
                .transpose()
                .map_err(|e| anyhow::anyhow!(e))?,
            auth: Auth {
                key_file: self.key_file.clone(),
                encrypt: self.encrypt()?,
                insecure: self.insecure()?,
            },
            admission: Admission {
                setup_timeout: self.setup_timeout()?,
                max_half_open,
                max_connections,
            },
            dlep,
            dlep_map,
            recording: self.recording()?,
        })
    }
}

#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod tests;
