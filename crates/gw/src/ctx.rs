//! What both gateway roles share: the settings, the AeroTP endpoint (which shares the link by class), the
//! custody budget and the registry of flows and counters. The roles themselves live in
//! `crate::ingress` and `crate::egress`; this module imports neither.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::{ConnectionConfig, Endpoint, ErasureChoice, FecSetting, Mode};

pub use crate::consts::*;

use crate::config::Settings;
use crate::flow::{Budget, Flow, SessionEnd};
use crate::frame::Class;

/// Why a UDP datagram was dropped by a gateway (the `reason` label of
/// `aerotp_gw_udp_dropped_total`, docs/stats.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The AeroTP send queue (a connection's buffer, or the endpoint's datagram queue) was
    /// full: UDP semantics, a full queue drops rather than blocks the sender.
    QueueFull,
    /// The ingress asked for a destination the egress does not allow.
    NotAllowed,
    /// No destination given and no default (`udp_connect`) at the egress.
    NoDestination,
    /// A stream-mode datagram reached the egress before its flow's hello (which was lost).
    BeforeHello,
    /// The local socket refused the datagram (send error) or could not be set up.
    SocketError,
    /// A UDP flow's AeroTP connection could not be opened.
    NoConnection,
    /// A datagram-mode message of another format (a gateway of another version).
    Malformed,
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        DropReason::QueueFull,
        DropReason::NotAllowed,
        DropReason::NoDestination,
        DropReason::BeforeHello,
        DropReason::SocketError,
        DropReason::NoConnection,
        DropReason::Malformed,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::NotAllowed => "not_allowed",
            DropReason::NoDestination => "no_destination",
            DropReason::BeforeHello => "before_hello",
            DropReason::SocketError => "socket_error",
            DropReason::NoConnection => "no_connection",
            DropReason::Malformed => "malformed",
        }
    }
}

/// At most one log line per drop reason per this period; the line says how many it stands for.
const DROP_LOG_PERIOD: Duration = Duration::from_secs(10);

/// Rate limiter of the drop log: per reason, when the last line was printed and how many drops
/// happened since.
#[derive(Debug, Default)]
struct DropLog {
    last: [Option<Instant>; DropReason::ALL.len()],
    since: [u64; DropReason::ALL.len()],
}

/// Counters and live flows of a gateway, for the metrics endpoint (docs/stats.md).
#[derive(Debug)]
pub struct Registry {
    pub role: Role,
    pub flows: Mutex<HashMap<u64, Arc<Flow>>>,
    pub flows_total: AtomicU64,
    pub flows_completed: AtomicU64,
    pub flows_reset: AtomicU64,
    pub resumes: AtomicU64,
    /// UDP datagrams received from a local UDP socket (ingress: from clients; egress: replies
    /// from destinations), counted on arrival, before any drop.
    pub udp_in: AtomicU64,
    /// UDP datagrams written to a local UDP socket (ingress: replies to clients; egress: to
    /// destinations).
    pub udp_out: AtomicU64,
    /// Datagrams dropped by this gateway, all reasons (per reason: [`Registry::dropped`]).
    pub udp_dropped: AtomicU64,
    udp_dropped_by: [AtomicU64; DropReason::ALL.len()],
    /// Datagram-mode datagrams over their class's share (dropped at the ingress).
    pub udp_policed: AtomicU64,
    /// Datagrams the air link lost on their way to this gateway: sequence gaps of stream-mode
    /// flows, and datagram-mode datagrams whose fragments did not all arrive.
    pub udp_lost: AtomicU64,
    /// Egress: ids of the stream-mode UDP flows live now (a second connection claiming one is
    /// a phantom made by a corrupted UDP port on the link, docs/gateway.md §UDP).
    pub udp_stream_ids: Mutex<std::collections::HashSet<u64>>,
    drop_log: Mutex<DropLog>,
}

impl Registry {
    pub fn new(role: Role) -> Registry {
        Registry {
            role,
            flows: Mutex::default(),
            flows_total: AtomicU64::new(0),
            flows_completed: AtomicU64::new(0),
            flows_reset: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            udp_in: AtomicU64::new(0),
            udp_out: AtomicU64::new(0),
            udp_dropped: AtomicU64::new(0),
            udp_dropped_by: Default::default(),
            udp_policed: AtomicU64::new(0),
            udp_lost: AtomicU64::new(0),
            udp_stream_ids: Mutex::default(),
            drop_log: Mutex::default(),
        }
    }

    pub fn insert(&self, f: &Arc<Flow>) {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(f.id, f.clone());
    }

    pub fn remove(&self, id: u64) {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// The live flows now.
    pub fn snapshot(&self) -> Vec<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    /// Datagrams dropped for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.udp_dropped_by[reason as usize].load(Ordering::Relaxed)
    }

    /// Counts a dropped datagram and logs why: the first drop of a reason at once, then at
    /// most one line per reason every 10 s with the number of drops it stands for, so a flood
    /// cannot flood the log too.
    pub(crate) fn drop_udp(&self, reason: DropReason, detail: &dyn fmt::Display) {
        self.udp_dropped.fetch_add(1, Ordering::Relaxed);
        self.udp_dropped_by[reason as usize].fetch_add(1, Ordering::Relaxed);
        let i = reason as usize;
        let now = Instant::now();
        let mut log = self.drop_log.lock().unwrap_or_else(|e| e.into_inner());
        log.since[i] += 1;
        if log.last[i].is_some_and(|t| now.duration_since(t) < DROP_LOG_PERIOD) {
            return;
        }
        let count = std::mem::take(&mut log.since[i]);
        log.last[i] = Some(now);
        drop(log);
        tracing::warn!(role = %self.role, reason = reason.label(), %detail, count,
            "UDP datagram dropped (count: drops for this reason since the last such line; \
             at most one line per reason every 10 s)");
    }
}

/// The parts of a running gateway both roles use.
#[derive(Debug)]
pub struct Ctx {
    pub settings: Settings,
    pub ep: Endpoint,
    pub budget: Arc<Budget>,
    pub reg: Arc<Registry>,
}

/// Binds the gateway's AeroTP endpoint on `addr`, authenticated when the settings name a key
/// file (read and checked now; then followed, so a rotated key is taken without a restart).
pub(crate) fn bind_endpoint(
    settings: &Settings,
    addr: std::net::SocketAddr,
) -> anyhow::Result<Endpoint> {
    let mut cfg = aerotp_net::EndpointConfig {
        setup_timeout: settings.admission.setup_timeout,
        max_half_open: settings.admission.max_half_open,
        max_connections: settings.admission.max_connections,
        // The engine shares the air link among the flows' connections by class and counts
        // datagram-mode routes against it (docs/gateway.md §Priorities).
        link_share: Some(aerotp_proto::LinkShareConfig {
            rate_bps: settings.link.rate,
            policy: settings.link.policy,
        }),
        // Datagram routes' decoders take the largest datagram the gateways exchange.
        datagram_repair_mtu: settings.link.mtu,
        ..Default::default()
    };
    let flag = "key_file (--key-file or the `key_file` key)";
    if let Some(path) = &settings.auth.key_file {
        let keys = aerotp_net::keyfile::load(path, flag)?;
        cfg.auth = Some(aerotp_net::keyfile::auth_config(
            keys,
            settings.auth.encrypt,
        )?);
    }
    let ep = Endpoint::bind(addr, cfg)?;
    ep.set_dscp_plan(settings.link.dscp);
    for &(remote, local) in &settings.paths.path_sources {
        anyhow::Context::with_context(ep.pin_source(remote, local), || {
            format!("the path to {remote} from {local} (peer_from or a peer_paths LOCAL=ADDR)")
        })?;
    }
    if let Some(path) = &settings.auth.key_file {
        aerotp_net::keyfile::watch(&ep, path.clone(), flag.into());
    }
    if let Some(dlep) = &settings.dlep {
        // The session runs as long as the endpoint does (docs/dlep.md); a modem that is not
        // there is retried, and the paths go on as without DLEP meanwhile.
        let modem = aerotp_dlep::target_text(dlep);
        tracing::info!(%modem, "following the radio's DLEP session");
        drop(ep.follow_dlep(dlep.clone(), settings.dlep_map.clone()));
    }
    Ok(ep)
}

/// Opens the further path `p` of a flow's connection (`peer_paths`), from its local address
/// where the entry gives one.
pub fn add_path(
    conn: &aerotp_net::Connection,
    p: aerotp_proto::PathAddr,
) -> Result<(), aerotp_net::Error> {
    match p.local {
        Some(local) => conn.add_path_from(local, p.remote),
        None => conn.add_path(p.remote),
    }
}

impl Ctx {
    /// The context of a gateway of `role` on endpoint `ep`.
    pub fn new(settings: Settings, ep: Endpoint, role: Role) -> Arc<Ctx> {
        let budget = Budget::new(settings.custody.store_capacity);
        Arc::new(Ctx {
            settings,
            ep,
            budget,
            reg: Arc::new(Registry::new(role)),
        })
    }

    /// The MTU left for a TPDU before authentication adds its envelope (the whole MTU
    /// without a key): what a datagram-mode fragment must fit.
    pub(crate) fn sealed_mtu(&self) -> usize {
        if self.ep.authenticated() {
            self.settings
                .link
                .mtu
                .saturating_sub(aerotp_proto::AUTH_OVERHEAD)
        } else {
            self.settings.link.mtu
        }
    }

    /// What a datagram-mode message of `payload` bytes weighs against its route's cap,
    /// counted as the connections' pacers count their datagrams: AeroTP header and CRC plus
    /// the IP/UDP headers (FEC parity, a few percent, is not counted).
    pub fn datagram_link_len(&self, payload: usize) -> usize {
        payload + aerotp_wire::OVERHEAD + ConnectionConfig::default().per_packet_overhead
    }

    /// What a datagram-mode route of `class` may send now, b/s: the rate one more busy flow
    /// of its class would get from the endpoint's link share.
    pub fn datagram_rate(&self, class: Class) -> u64 {
        self.ep
            .datagram_rate(class)
            .unwrap_or(self.settings.link.rate)
    }

    pub fn role(&self) -> Role {
        self.reg.role
    }

    /// The configuration of a flow connection of `class` in `mode` with `fec` and `erasure`
    /// (checked against the mode when the settings were read). The endpoint's link share
    /// paces it by its class from its first TPDU on.
    pub fn conn_config(
        &self,
        mode: Mode,
        fec: FecSetting,
        erasure: ErasureChoice,
        class: Class,
    ) -> ConnectionConfig {
        let mut c = ConnectionConfig::with_mode(mode);
        // The fixed rate or the cap; the endpoint's link share then paces the connection at
        // its class's share of it, and a discovering one (reliable) finds the link's rate
        // under that share.
        c.rate_bps = self.settings.link.rate;
        c.rate_control = self.settings.link.rate_control;
        c.class = class;
        c.mtu = self.settings.link.mtu;
        c.fec = fec;
        // `resolve` fails only on values the settings already refused; keep the default then.
        c.erasure = erasure
            .resolve(aerotp_proto::ErrorControl::for_mode(mode).erasure)
            .unwrap_or(None);
        c.idle_timeout = self.settings.timeouts.idle;
        // A TCP flow may stay idle for hours (an SSH session, a held-open telemetry socket):
        // its connection probes the peer after a third of the idle timeout of silence, so
        // only a peer that stops answering ends it (docs/gateway.md, "Many flows").
        c.keep_alive = Some(self.settings.timeouts.idle / 3);
        c.send_buffer = Some(SEND_BUFFER);
        c
    }

    /// Counts a TCP flow's end, releases its budget and records, forgets it.
    /// `remove_store`: the ingress's custody store of the flow goes too (unless a broken
    /// custody flow keeps it for the next start).
    pub(crate) fn finish_flow(&self, flow: &Arc<Flow>, end: &SessionEnd, remove_store: bool) {
        match end {
            SessionEnd::Complete => {
                self.reg.flows_completed.fetch_add(1, Ordering::Relaxed);
                let st = flow.lock();
                tracing::info!(flow = %fid(flow.id), sent = st.end(), received = st.in_delivered(),
                    secs = flow.started.elapsed().as_secs_f64(), "flow complete");
            }
            SessionEnd::Reset(r) | SessionEnd::Broken(r) => {
                self.reg.flows_reset.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(flow = %fid(flow.id), reason = %r, "flow ended without completion");
            }
        }
        flow.release_budget();
        if !matches!(end, SessionEnd::Complete) {
            if let Some(log) = flow.take_progress() {
                if let Err(e) = log.remove() {
                    tracing::warn!(flow = %fid(flow.id), error = %e, "cannot remove the flow's egress record");
                }
            }
        }
        let keep = matches!(end, SessionEnd::Broken(_))
            && flow.custody_mode
            && self.role() == Role::Ingress;
        if remove_store && !keep {
            flow.remove_store();
        } else if keep {
            tracing::error!(flow = %fid(flow.id), "resume timeout: custody left in the store, retried at next start");
        }
        self.reg.remove(flow.id);
    }
}

/// A fresh flow id: time, process id and a counter, spread over 64 bits.
pub(crate) fn new_flow_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = t
        ^ (u64::from(std::process::id()) << 40)
        ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(20);
    aerotp_link::splitmix64(x, 1)
}

/// A flow id as the logs and metrics print it.
pub(crate) fn fid(id: u64) -> String {
    format!("{id:016x}")
}
