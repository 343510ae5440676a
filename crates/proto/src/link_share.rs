//! Sharing one link's rate among an endpoint's connections by traffic class: control before
//! telemetry before bulk, strict or weighted (docs/gateway.md §Priorities). Every
//! [`SHARE_PERIOD`] of the caller's time the endpoint samples what each connection sent and
//! which have bytes queued, and re-paces them; datagram-mode messages, sent outside any
//! connection, are counted and kept from the connections' share the same way.
//!
//! Off unless `EndpointConfig::link_share` is set: each connection then keeps the rate its
//! own configuration gives it.

use std::collections::BTreeMap;
use std::time::Duration;

/// How often the shares are recomputed.
pub const SHARE_PERIOD: Duration = Duration::from_millis(50);
/// The engine's lowest pacing rate (`ConnectionConfig::validate` accepts nothing lower).
const MIN_RATE: u64 = crate::rate::MIN_RATE_BPS;
/// A connection with nothing queued keeps this multiple of what it recently sent reserved, so
/// that one fed a little faster than before is not squeezed at once.
const HEADROOM: f64 = 1.25;
/// However much the idle connections reserve, the busy ones share at least this fraction of
/// the link (an idle connection's reservation follows its past, a busy one's need is now).
const MIN_BUSY_FRACTION: f64 = 0.1;
/// Per period, a usage estimate moves this far toward a lower sample; a higher sample is
/// taken at once. Rising at once keeps a bursty connection's reservation; decaying over a few
/// periods (time constant about SHARE_PERIOD / 0.2 = 250 ms) frees what a quietened one no
/// longer uses.
const USAGE_DECAY_STEP: f64 = 0.2;
/// The share's total over the largest rate its connections discovered: room for the
/// connection that holds the link to probe above its estimate (the cruise's 1.25 gain),
/// so a link that speeds up is found; a busy link's queue is the models' to guard.
const DISCOVERED_ROOM: f64 = 1.25;
/// Credit an idle link keeps (`LinkShare::occupy`): datagrams that fit in it go back to
/// back, so a driver woken a few milliseconds late does not lose link time.
const LINK_BURST: Duration = Duration::from_millis(10);

/// What a connection carries, for sharing the link: lower classes yield to higher ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TrafficClass {
    Control = 0,
    Telemetry = 1,
    #[default]
    Bulk = 2,
}

impl TrafficClass {
    pub const ALL: [TrafficClass; 3] = [
        TrafficClass::Control,
        TrafficClass::Telemetry,
        TrafficClass::Bulk,
    ];

    /// The class numbered `v` (its `as u8` value), if any.
    pub fn from_u8(v: u8) -> Option<TrafficClass> {
        TrafficClass::ALL.get(usize::from(v)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            TrafficClass::Control => "control",
            TrafficClass::Telemetry => "telemetry",
            TrafficClass::Bulk => "bulk",
        }
    }
}

impl std::str::FromStr for TrafficClass {
    type Err = String;
    fn from_str(s: &str) -> Result<TrafficClass, String> {
        TrafficClass::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown class '{s}': give control, telemetry or bulk"))
    }
}

/// How busy connections share the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SharePolicy {
    /// A class gets the link only when no higher class has bytes queued (each lower class
    /// with busy connections keeps `floor` of it to stay alive). A class's part is split
    /// evenly among its busy connections.
    Strict { floor: f64 },
    /// The classes with busy connections share the link in proportion to their weights
    /// (indexed by `TrafficClass as usize`); a class's part is split evenly among its busy
    /// connections.
    Weighted { weights: [u32; 3] },
}

impl Default for SharePolicy {
    fn default() -> Self {
        SharePolicy::Weighted { weights: [8, 4, 1] }
    }
}

/// One link shared by every connection of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkShareConfig {
    /// The link's rate, bits per second (the same count as `ConnectionConfig::rate_bps`).
    pub rate_bps: u64,
    pub policy: SharePolicy,
}

impl LinkShareConfig {
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        self.check().map_err(crate::ConfigError::LinkShare)
    }

    fn check(&self) -> Result<(), String> {
        if self.rate_bps < MIN_RATE {
            return Err(format!(
                "link share rate {} b/s: give at least {MIN_RATE} b/s",
                self.rate_bps
            ));
        }
        match self.policy {
            SharePolicy::Strict { floor } if !(0.0..0.5).contains(&floor) => Err(format!(
                "strict floor {floor}: give a fraction in [0, 0.5) of the link"
            )),
            SharePolicy::Weighted { weights } if weights.contains(&0) => Err(format!(
                "weights {weights:?}: give a positive weight for every class"
            )),
            _ => Ok(()),
        }
    }
}

/// What the allocator knows of one connection at a recomputation.
#[derive(Debug, Clone, Copy)]
struct Demand {
    class: TrafficClass,
    /// More bytes wait unsent than the connection's rate sends in a period.
    busy: bool,
    /// Recent sending rate on the wire, b/s (see [`next_usage`]).
    usage_bps: f64,
}

/// The usage estimate after a period in which the connection sent at `sample_bps`: up at
/// once, down by [`USAGE_DECAY_STEP`] of the difference.
fn next_usage(prev_bps: f64, sample_bps: f64) -> f64 {
    if sample_bps >= prev_bps {
        sample_bps
    } else {
        prev_bps + (sample_bps - prev_bps) * USAGE_DECAY_STEP
    }
}

/// The rate of a connection of `class` out of `total` given the classes of the busy ones
/// (`busy` includes the connection itself if it is busy; `add_self` counts it in when not).
///
/// The policy divides the link among the *classes* that have busy connections, and each
/// class's part is split evenly among its connections: fifty bulk flows together get the bulk
/// class's weight or floor, not fifty times it. (Per connection, fifty bulk flows under strict
/// priority took 50 × 2 % of the link and left the control class 1 kb/s: a 3 s round trip for
/// a 200-byte message, docs/results/gw.md "Many flows".)
fn share(
    total: u64,
    policy: SharePolicy,
    class: TrafficClass,
    busy: &[TrafficClass],
    add_self: bool,
) -> u64 {
    let mut count = [0u64; 3];
    for &c in busy.iter().chain(add_self.then_some(&class)) {
        count[c as usize] += 1;
    }
    let present = || {
        TrafficClass::ALL
            .into_iter()
            .filter(|&c| count[c as usize] > 0)
    };
    let class_part = match policy {
        SharePolicy::Weighted { weights } => {
            let w = |c: TrafficClass| u64::from(weights[c as usize].max(1));
            let sum: u64 = present().map(w).sum();
            total * w(class) / sum.max(1)
        }
        SharePolicy::Strict { floor } => {
            let top = present().min().unwrap_or(class);
            let floor_bps = (total as f64 * floor) as u64;
            if class == top {
                let lower = present().filter(|&c| c != top).count() as u64;
                total.saturating_sub(lower * floor_bps)
            } else {
                floor_bps
            }
        }
    };
    (class_part / count[class as usize].max(1)).clamp(MIN_RATE, total.max(MIN_RATE))
}

/// Per class (indexed by `TrafficClass as usize`), the rate one more busy connection of it
/// would get.
fn class_shares(total: u64, policy: SharePolicy, busy: &[TrafficClass]) -> [u64; 3] {
    TrafficClass::ALL.map(|c| share(total, policy, c, busy, true))
}

/// Every connection's rate. One with nothing queued is paced at the rate it would get if it
/// became busy (its next bytes are not held back), and what it actually sends (with
/// [`HEADROOM`], at most that rate) is reserved; the busy ones share what is left by the
/// policy. Without the reservation, a connection fed steadily below its share (idle at most
/// samples) would add its traffic on top of the busy ones' full rate: a standing queue at the
/// link, for every class. `unpaced_bps` is what is sent outside any connection (datagram
/// mode, sent at once): reserved the same way.
///
/// Also returns, per class, the cap for datagram-mode traffic of that class: what one more
/// busy connection of the class would get out of the link less the idle connections'
/// reservations.
fn allocate(
    total: u64,
    policy: SharePolicy,
    demands: &[Demand],
    unpaced_bps: f64,
) -> (Vec<u64>, [u64; 3]) {
    let busy: Vec<TrafficClass> = demands.iter().filter(|d| d.busy).map(|d| d.class).collect();
    let as_if_busy = |d: &Demand| share(total, policy, d.class, &busy, true);
    let idle_reserved: f64 = demands
        .iter()
        .filter(|d| !d.busy)
        .map(|d| (d.usage_bps * HEADROOM).min(as_if_busy(d) as f64))
        .sum();
    let at_least = |bps: f64| bps.max(total as f64 * MIN_BUSY_FRACTION) as u64;
    let caps = class_shares(at_least(total as f64 - idle_reserved), policy, &busy);
    let left = at_least(total as f64 - idle_reserved - unpaced_bps * HEADROOM);
    let rates = demands
        .iter()
        .map(|d| {
            if d.busy {
                share(left, policy, d.class, &busy, false)
            } else {
                as_if_busy(d)
            }
        })
        .collect();
    (rates, caps)
}

/// One connection as the share sees it.
#[derive(Debug, Clone)]
struct Entry {
    class: TrafficClass,
    busy: bool,
    /// The connection's wire bytes sent at the last sample.
    wire_bytes: u64,
    usage_bps: f64,
    rate: u64,
}

/// What the share needs of a connection at a sample: its class (the connection's
/// configuration holds it; a change is taken here), its wire bytes sent so far and whether
/// its unsent backlog outlasts a period at its current rate (busy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed {
    pub class: TrafficClass,
    pub wire_bytes: u64,
    pub busy: bool,
}

/// The link share of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct LinkShare {
    cfg: LinkShareConfig,
    /// By connection handle; ordered, so that a recomputation does the same in every run.
    entries: BTreeMap<u64, Entry>,
    /// Wire bytes of datagram-mode messages sent, all time.
    unpaced_bytes: u64,
    /// `unpaced_bytes` at the last sample.
    unpaced_sampled: u64,
    unpaced_usage_bps: f64,
    datagram_caps: [u64; 3],
    /// The next recomputation; `None` until the first connection or datagram.
    next_tick: Option<Duration>,
    /// A datagram was counted while `next_tick` was `None`: start at the next `tick`.
    start_pending: bool,
    last_tick: Duration,
    /// When the link is free of what the endpoint has sent (a few milliseconds of credit at
    /// most, `LinkShare::occupy`); no connection sends before.
    link_free: Duration,
    /// The largest rate the connections discovered for the link, b/s (`set_discovered`).
    discovered_bps: Option<u64>,
}

impl LinkShare {
    pub fn new(cfg: LinkShareConfig) -> LinkShare {
        LinkShare {
            cfg,
            entries: BTreeMap::new(),
            unpaced_bytes: 0,
            unpaced_sampled: 0,
            unpaced_usage_bps: 0.0,
            datagram_caps: [cfg.rate_bps.max(MIN_RATE); 3],
            next_tick: None,
            start_pending: false,
            last_tick: Duration::ZERO,
            link_free: Duration::ZERO,
            discovered_bps: None,
        }
    }

    /// The rate shared, b/s: the configured one, or under it what the connections
    /// discovered with `DISCOVERED_ROOM` to probe.
    pub fn total(&self) -> u64 {
        match self.discovered_bps {
            Some(d) => self
                .cfg
                .rate_bps
                .min((d as f64 * DISCOVERED_ROOM) as u64)
                .max(MIN_RATE),
            None => self.cfg.rate_bps,
        }
    }

    /// The largest rate any connection discovered for the link, b/s (`None`: none
    /// discovers, or none measured yet): the share divides that rather than the configured
    /// one, which is then a cap, so the control class keeps its part of a link that shrank.
    pub fn set_discovered(&mut self, bps: Option<u64>) {
        self.discovered_bps = bps.filter(|&b| b > 0);
    }

    pub fn config(&self) -> LinkShareConfig {
        self.cfg
    }

    fn start_ticking(&mut self, now: Duration) {
        if self.next_tick.is_none() {
            self.last_tick = now;
            self.next_tick = Some(now + SHARE_PERIOD);
        }
        self.start_pending = false;
    }

    /// Adds a connection and returns its first rate: what it gets as if busy, beside the
    /// connections busy at the last recomputation.
    pub fn add(&mut self, now: Duration, h: u64, class: TrafficClass, wire_bytes: u64) -> u64 {
        let busy: Vec<TrafficClass> = self
            .entries
            .values()
            .filter(|e| e.busy)
            .map(|e| e.class)
            .collect();
        let rate = share(self.total(), self.cfg.policy, class, &busy, true);
        self.entries.insert(
            h,
            Entry {
                class,
                busy: false,
                wire_bytes,
                usage_bps: 0.0,
                rate,
            },
        );
        self.start_ticking(now);
        rate
    }

    pub fn remove(&mut self, h: u64) {
        self.entries.remove(&h);
    }

    /// Counts a datagram-mode message of `wire_len` bytes sent outside any connection. The
    /// caller passes no time here, so an idle share starts its period at the next `tick`
    /// (its deadline is due at once meanwhile).
    pub fn count_datagram(&mut self, wire_len: usize) {
        self.unpaced_bytes += wire_len as u64;
        if self.next_tick.is_none() {
            self.start_pending = true;
        }
    }

    /// What datagram-mode traffic of `class` may send now, b/s: the rate one more busy
    /// connection of its class would get, less the idle connections' reservations.
    pub fn datagram_rate(&self, class: TrafficClass) -> u64 {
        self.datagram_caps[class as usize]
    }

    /// The rate the connections together may put on the link, b/s: the link less what
    /// datagram-mode traffic (sent outside any connection and outside the endpoint's pacing)
    /// reserves, as in `allocate`. The busy connections' shares already leave that room, but
    /// connections that are never busy (fed a little at a time, as an end-to-end window
    /// feeds a gateway's flows) are each paced at the rate they would get if busy, so only
    /// the endpoint's pacing of them as one bounds their sum: at the full link rate it put
    /// the datagrams on top, a standing queue at the link for every class (measured:
    /// docs/results/gw.md, "Datagrams on top of a full link").
    ///
    /// The datagrams' usage is reserved without [`HEADROOM`]: their caps (`allocate`) already
    /// leave the idle connections theirs, and the usage estimate rises at once and decays
    /// slowly, so it covers their bursts. With the headroom as well, a bulk-class UDP flood
    /// allowed 3.6 of 5 Mb/s reserved 4.5 and left the connections 0.5 Mb/s, under the
    /// telemetry class's 1 Mb/s: a lower class's datagrams squeezed a higher class's
    /// connections (telemetry aged 103 ms at the median instead of 13 ms; docs/results/gw.md,
    /// "Every gateway figure re-measured").
    pub fn connections_rate(&self) -> u64 {
        let total = self.total() as f64;
        (total - self.unpaced_usage_bps).max(total * MIN_BUSY_FRACTION) as u64
    }

    /// A datagram of `wire_len` bytes (its IP and UDP headers included) occupies the link
    /// for its time at `connections_rate` from `link_free` on; credit for an idle link is
    /// kept for `LINK_BURST` at most. Each connection is paced at its share, but their sum
    /// may still burst: 475 idle flows answered at the same instant put 85 kB on a 5 Mb/s
    /// link at once (queue drops in the lab, a control round trip of 100 ms at the 95th
    /// percentile). This paces them together and lets the highest class go first, at the
    /// link's rate less what datagram-mode traffic reserves.
    pub fn occupy(&mut self, now: Duration, wire_len: usize) {
        let bits = (wire_len * 8) as f64;
        let time = Duration::from_secs_f64(bits / self.connections_rate().max(1) as f64);
        self.link_free = self.link_free.max(now.saturating_sub(LINK_BURST)) + time;
    }

    /// When the link is free of what has been sent (`occupy`): no connection sends before.
    pub fn link_free(&self) -> Duration {
        self.link_free
    }

    /// When the shares are next recomputed: every period while there is anything to share
    /// (a connection, or datagram traffic not yet decayed away).
    pub fn deadline(&self) -> Option<Duration> {
        if self.start_pending {
            return Some(Duration::ZERO);
        }
        self.next_tick
    }

    /// Recomputes if the period is up: samples each connection through `observe` (by
    /// handle), and returns the connections whose rate changed with their new rate.
    pub fn tick(
        &mut self,
        now: Duration,
        mut observe: impl FnMut(u64) -> Option<Observed>,
    ) -> Vec<(u64, u64)> {
        if std::mem::take(&mut self.start_pending) && self.next_tick.is_none() {
            self.start_ticking(now);
            return Vec::new();
        }
        match self.next_tick {
            Some(t) if t <= now => {}
            _ => return Vec::new(),
        }
        let secs = now.saturating_sub(self.last_tick).as_secs_f64();
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / secs;
        for (h, e) in self.entries.iter_mut() {
            if let Some(o) = observe(*h) {
                if secs > 0.0 {
                    e.usage_bps = next_usage(e.usage_bps, rate(o.wire_bytes, e.wire_bytes));
                }
                e.wire_bytes = o.wire_bytes;
                e.busy = o.busy;
                e.class = o.class;
            }
        }
        if secs > 0.0 {
            self.unpaced_usage_bps = next_usage(
                self.unpaced_usage_bps,
                rate(self.unpaced_bytes, self.unpaced_sampled),
            );
        }
        self.unpaced_sampled = self.unpaced_bytes;
        self.last_tick = now;
        let demands: Vec<Demand> = self
            .entries
            .values()
            .map(|e| Demand {
                class: e.class,
                busy: e.busy,
                usage_bps: e.usage_bps,
            })
            .collect();
        let (rates, caps) = allocate(
            self.total(),
            self.cfg.policy,
            &demands,
            self.unpaced_usage_bps,
        );
        self.datagram_caps = caps;
        let mut changed = Vec::new();
        for ((h, e), r) in self.entries.iter_mut().zip(rates) {
            if r != e.rate {
                e.rate = r;
                changed.push((*h, r));
            }
        }
        // Keep ticking while something is left to share; datagram usage below 1 b/s is gone.
        self.next_tick = (!self.entries.is_empty() || self.unpaced_usage_bps >= 1.0)
            .then_some(now + SHARE_PERIOD);
        changed
    }
}

#[cfg(test)]
mod tests;
