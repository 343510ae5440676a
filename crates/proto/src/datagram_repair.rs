//! Erasure repair on datagram-mode routes (docs/spec.md §7, "Datagram routes"; docs/fec.md).
//!
//! A route is one (remote address, source port, destination port). A route that repairs
//! numbers its datagrams — flag `SOURCE`, `seq` its source number, `tag` the route's
//! incarnation — and they are the source symbols of the same sliding-window code connections
//! use (`crate::erasure`); repair TPDUs (flags `REPAIR`) go out at the route's fixed ratio,
//! spread between the datagrams, plus a tail flush when the route pauses. The receiver
//! delivers every datagram as it arrives and each one it rebuilds as soon as it can; a late
//! copy of a rebuilt datagram is dropped as a duplicate.
//!
//! No feedback reaches a datagram route's sender, so the strength is a fixed ratio: the
//! window a repair covers is what the route sends within the delay bound, from the route's
//! measured rate and mean datagram size.
//!
//! Both sides are bounded: at most `EndpointConfig::max_repair_routes` routes each, the least
//! recently used forgotten beyond it; each route's coder is bounded by its window.

use crate::config_error::ConfigError;
use crate::erasure::{ErasureChoice, ErasureMode, ErasureRx, ErasureSetting, ErasureTx, Rebuilt};
use crate::table::{table, Table};
use std::net::SocketAddr;
use std::time::Duration;

/// A route: remote address, source port, destination port (as the sender names them; the
/// receiver keys by the header's ports, the same pair).
pub(crate) type RouteKey = (SocketAddr, u16, u16);

/// Where a datagram-mode message goes and how it is protected
/// (`Endpoint::send_datagram_with`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DatagramRoute {
    pub remote: SocketAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// Reed–Solomon parity bytes per codeword of each datagram (bit errors; 0 = none).
    pub parity: u8,
    /// What the route carries: its share of the link (`EndpointConfig::link_share`) and the
    /// class each of its datagrams is reported with (`Transmit::class`, which a driver may
    /// mark on the IP header). Local: not sent to the peer.
    pub class: crate::TrafficClass,
    /// Largest datagram, bytes.
    pub mtu: usize,
    /// Repair across the route's datagrams (lost datagrams): `None` or `Off` for none, else a
    /// fixed ratio (`ErasureMode::Ratio`). `Auto` is refused: no report reaches a datagram
    /// route's sender to adapt to.
    pub erasure: Option<ErasureSetting>,
}

impl DatagramRoute {
    /// A route without repair, of the bulk class.
    pub fn plain(remote: SocketAddr, src_port: u16, dst_port: u16, parity: u8, mtu: usize) -> Self {
        DatagramRoute {
            remote,
            src_port,
            dst_port,
            parity,
            class: crate::TrafficClass::Bulk,
            mtu,
            erasure: None,
        }
    }

    pub(crate) fn key(&self) -> RouteKey {
        (self.remote, self.src_port, self.dst_port)
    }

    /// The repair setting if the route repairs.
    pub(crate) fn repair(&self) -> Option<ErasureSetting> {
        self.erasure.filter(|s| s.mode != ErasureMode::Off)
    }
}

/// The repair a datagram route sends with `choice` over the mode's default: a fixed ratio,
/// or none. `auto` needs reports, which no datagram route's sender gets, so it gives none;
/// a driver where a user asked for it on a datagram route refuses it (`aerotp sim`, a
/// gateway flow), as `Endpoint::send_datagram_with` would.
pub fn datagram_repair(choice: &ErasureChoice) -> Result<Option<ErasureSetting>, ConfigError> {
    let default = crate::ErrorControl::for_mode(aerotp_wire::Mode::Datagram).erasure;
    Ok(choice
        .resolve(default)?
        .filter(|s| matches!(s.mode, ErasureMode::Ratio(_))))
}

/// Rate assumed for a route until its first measurement (100 ms of sending).
const ASSUMED_RATE_BPS: f64 = 1e6;
/// Shortest interval a rate sample spans.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// A route's sending rate and mean datagram size, smoothed; the rate is reported on a grid of
/// quarter powers of two so that jitter does not re-choose the window at every sample.
#[derive(Debug)]
struct RateMeter {
    since: Option<Duration>,
    bytes: u64,
    rate_bps: Option<f64>,
    mean_len: f64,
}

impl RateMeter {
    fn new() -> RateMeter {
        RateMeter {
            since: None,
            bytes: 0,
            rate_bps: None,
            mean_len: 0.0,
        }
    }

    fn on_send(&mut self, now: Duration, len: usize) {
        self.mean_len = if self.mean_len == 0.0 {
            len as f64
        } else {
            0.9 * self.mean_len + 0.1 * len as f64
        };
        let since = *self.since.get_or_insert(now);
        self.bytes += len as u64;
        let span = now.saturating_sub(since);
        if span >= SAMPLE_EVERY {
            let sample = self.bytes as f64 * 8.0 / span.as_secs_f64();
            self.rate_bps = Some(self.rate_bps.map_or(sample, |r| 0.7 * r + 0.3 * sample));
            self.since = Some(now);
            self.bytes = 0;
        }
    }

    fn rate_bps(&self) -> u64 {
        let r = self.rate_bps.unwrap_or(ASSUMED_RATE_BPS).max(1000.0);
        (2f64).powf((r.log2() * 4.0).round() / 4.0) as u64
    }

    fn mean_len(&self) -> usize {
        (self.mean_len.round() as usize).max(1)
    }
}

#[derive(Debug)]
struct SendRoute {
    tag: u8,
    /// Source number of the route's next datagram (the low 32 bits go on the wire).
    next: u64,
    parity: u8,
    /// The class of the route's last datagram: its repairs go out as that class.
    class: crate::TrafficClass,
    mtu: usize,
    tx: ErasureTx,
    meter: RateMeter,
    last_used: Duration,
}

/// A repair TPDU a route owes: where it goes and what its header carries.
#[derive(Debug)]
pub(crate) struct RepairOut {
    pub key: RouteKey,
    pub tag: u8,
    /// The route's next source number (informative, as in a connection's repair).
    pub seq: u32,
    pub parity: u8,
    pub class: crate::TrafficClass,
    /// The route's MTU (the repair body was sized for it).
    pub mtu: usize,
    pub body: Vec<u8>,
}

/// The sending side: every route that repairs.
#[derive(Debug)]
pub(crate) struct SendRoutes {
    routes: Table<RouteKey, SendRoute>,
    limit: usize,
}

impl SendRoutes {
    pub(crate) fn new(seed: u64, limit: usize) -> SendRoutes {
        SendRoutes {
            routes: table(seed),
            limit: limit.max(1),
        }
    }

    /// Whether route `key` is open with this parity and MTU. A repair covers sources sized
    /// for the route's parity and MTU, so a route whose sizes change starts a new incarnation.
    pub(crate) fn is_open_as(&self, key: &RouteKey, route: &DatagramRoute) -> bool {
        self.routes
            .get(key)
            .is_some_and(|r| (r.parity, r.mtu) == (route.parity, route.mtu))
    }

    /// Forgets a route (it no longer repairs); its next repairing datagram starts a new
    /// incarnation.
    pub(crate) fn remove(&mut self, key: &RouteKey) {
        self.routes.remove(key);
    }

    /// Starts route `key` with incarnation `tag` (1–255) and coefficient key `code_key`, both
    /// drawn by the caller; forgets the least recently used route if the table is full.
    pub(crate) fn open(&mut self, key: RouteKey, tag: u8, code_key: u64, route: &DatagramRoute) {
        let setting = route.repair().unwrap_or(ErasureSetting::OFF);
        let mut tx = ErasureTx::new(setting, route.mtu, code_key);
        tx.tail_covers_window();
        if self.routes.len() >= self.limit {
            if let Some(old) = least_recent(&self.routes, |r| r.last_used) {
                self.routes.remove(&old);
            }
        }
        self.routes.insert(
            key,
            SendRoute {
                tag,
                next: 0,
                parity: route.parity,
                class: route.class,
                mtu: route.mtu,
                tx,
                meter: RateMeter::new(),
                last_used: Duration::ZERO,
            },
        );
    }

    /// Numbers the route's next datagram: its `(tag, seq)`. The route must be open.
    pub(crate) fn number(&self, key: &RouteKey) -> Option<(u8, u32)> {
        self.routes.get(key).map(|r| (r.tag, r.next as u32))
    }

    /// A numbered datagram of `body` left on route `key`: it becomes a source symbol, and the
    /// repairs now due are returned (those the ratio's credit owes after this source).
    pub(crate) fn on_sent(
        &mut self,
        now: Duration,
        key: &RouteKey,
        route: &DatagramRoute,
        body: &[u8],
    ) -> Vec<RepairOut> {
        let Some(r) = self.routes.get_mut(key) else {
            return Vec::new();
        };
        let setting = route.repair().unwrap_or(ErasureSetting::OFF);
        if *r.tx.setting() != setting {
            r.tx.set_setting(setting);
        }
        r.last_used = now;
        r.class = route.class;
        r.meter.on_send(now, body.len());
        // srtt zero: the delay bound alone sets the window (no retransmission to compete with).
        r.tx.update(now, Duration::ZERO, r.meter.rate_bps(), r.meter.mean_len());
        let seq = r.next;
        r.next += 1;
        r.tx.on_data_sent(now, seq, aerotp_wire::Flags::empty(), body);
        drain(*key, r, now, false)
    }

    /// When the earliest tail flush is due (a route paused after sources no repair covers).
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.routes
            .values()
            .filter_map(|r| r.tx.next_repair_time())
            .min()
    }

    /// The tail flushes due at `now`, every route's.
    pub(crate) fn due(&mut self, now: Duration) -> Vec<RepairOut> {
        let mut out = Vec::new();
        for (key, r) in self.routes.iter_mut() {
            if r.tx.next_repair_time().is_some_and(|t| t <= now) {
                out.extend(drain(*key, r, now, true));
            }
        }
        out
    }
}

fn drain(key: RouteKey, r: &mut SendRoute, now: Duration, idle: bool) -> Vec<RepairOut> {
    let mut out = Vec::new();
    while let Some(body) = r.tx.poll_repair(now, idle) {
        out.push(RepairOut {
            key,
            tag: r.tag,
            seq: r.next as u32,
            parity: r.parity,
            class: r.class,
            mtu: r.mtu,
            body,
        });
    }
    out
}

fn least_recent<V>(t: &Table<RouteKey, V>, at: impl Fn(&V) -> Duration) -> Option<RouteKey> {
    t.iter().min_by_key(|(_, v)| at(v)).map(|(k, _)| *k)
}

#[derive(Debug)]
struct RecvRoute {
    tag: u8,
    rx: ErasureRx,
    last_used: Duration,
}

/// What a repair TPDU did at the receiver.
#[derive(Debug, Default)]
pub(crate) struct RepairUse {
    pub rebuilt: Vec<Rebuilt>,
    /// It added an equation (not redundant, not older than the window).
    pub used: bool,
    /// Its repair header did not parse or contradicted what is known.
    pub refused: bool,
}

/// The receiving side: every route a numbered datagram or a repair arrived on.
#[derive(Debug)]
pub(crate) struct RecvRoutes {
    routes: Table<RouteKey, RecvRoute>,
    limit: usize,
    mtu: usize,
    window: usize,
}

/// Most bytes all receiving routes' decoders may hold together (their worst case): with
/// large MTUs the route limit shrinks to fit.
pub const RECEIVE_ROUTES_BYTES: usize = 64 << 20;

impl RecvRoutes {
    pub(crate) fn new(seed: u64, limit: usize, mtu: usize) -> RecvRoutes {
        // The senders' largest window (`ErasureSetting::max_window` by default).
        let window = ErasureSetting::OFF.max_window;
        let per_route = ErasureRx::worst_case_bytes(mtu, window).max(1);
        RecvRoutes {
            routes: table(seed),
            limit: limit.min(RECEIVE_ROUTES_BYTES / per_route).max(1),
            mtu,
            window,
        }
    }

    /// Most routes held at once.
    #[cfg(test)]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The route's state for incarnation `tag`: a new incarnation (the sender forgot the
    /// route, or restarted) starts from nothing.
    fn route(&mut self, now: Duration, key: RouteKey, tag: u8) -> &mut RecvRoute {
        if self.routes.get(&key).is_some_and(|r| r.tag != tag) {
            self.routes.remove(&key);
        }
        if !self.routes.contains_key(&key) && self.routes.len() >= self.limit {
            if let Some(old) = least_recent(&self.routes, |r| r.last_used) {
                self.routes.remove(&old);
            }
        }
        let (mtu, window) = (self.mtu, self.window);
        let r = self.routes.entry(key).or_insert_with(|| RecvRoute {
            tag,
            rx: ErasureRx::new(mtu, window, true),
            last_used: now,
        });
        r.last_used = now;
        r
    }

    /// A numbered datagram arrived intact: `None` if it is a copy of one already delivered
    /// (arrived or rebuilt), else what it made rebuildable.
    pub(crate) fn on_source(
        &mut self,
        now: Duration,
        key: RouteKey,
        tag: u8,
        seq: u32,
        body: &[u8],
    ) -> Option<Vec<Rebuilt>> {
        if self
            .routes
            .get(&key)
            .is_some_and(|r| r.tag == tag && r.rx.behind(seq))
        {
            // A whole window behind: the sender numbers from a new start under a tag that
            // happens to equal the old one (1 in 255 restarts). Start over with it; a real
            // copy that late is gone from every window anyway.
            self.routes.remove(&key);
        }
        let r = self.route(now, key, tag);
        if r.rx.knows(seq) {
            return None;
        }
        Some(r.rx.on_source(seq, aerotp_wire::Flags::empty(), body))
    }

    /// A repair TPDU arrived intact.
    pub(crate) fn on_repair(
        &mut self,
        now: Duration,
        key: RouteKey,
        tag: u8,
        body: &[u8],
    ) -> RepairUse {
        let rx = &mut self.route(now, key, tag).rx;
        let (used, refused) = (rx.stats.repairs_used, rx.stats.repairs_refused);
        let rebuilt = rx.on_repair(body);
        RepairUse {
            rebuilt,
            used: rx.stats.repairs_used > used,
            refused: rx.stats.repairs_refused > refused,
        }
    }

    /// Bytes the routes' decoders hold now.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.routes.values().map(|r| r.rx.memory_bytes()).sum()
    }

    pub(crate) fn len(&self) -> usize {
        self.routes.len()
    }
}

#[cfg(test)]
#[path = "datagram_repair_tests.rs"]
mod tests;
