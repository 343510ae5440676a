//! Shares the air link's rate among the flows' AeroTP connections: control before telemetry
//! before bulk, strict or weighted (docs/gateway.md §Priorities). Recomputed every
//! [`PERIOD`] from which flows have bytes waiting and what the others actually send.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::Connection;

pub use crate::config::Policy;
use crate::consts::SEND_BUFFER;
use crate::flow::{Flow, SessionLoad};
use crate::frame::Class;

pub const PERIOD: Duration = Duration::from_millis(50);
/// Engine's lowest rate.
const MIN_RATE: u64 = 1000;
/// A flow with nothing waiting keeps this multiple of what it recently sent reserved, so that
/// a flow fed a little faster than before is not squeezed at once.
const HEADROOM: f64 = 1.25;
/// However much the idle flows reserve, the busy ones share at least this fraction of the
/// link (an idle flow's reservation follows its past, a busy flow's need is now).
const MIN_BUSY_FRACTION: f64 = 0.1;
/// Per period, a flow's usage estimate moves this far toward a lower sample; a higher sample
/// is taken at once. Rising at once keeps a bursty flow's reservation; decaying over a few
/// periods (time constant about PERIOD / 0.2 = 250 ms) frees what a quietened flow no longer
/// uses.
const USAGE_DECAY_STEP: f64 = 0.2;

/// What the allocator knows of one connection.
#[derive(Debug, Clone, Copy)]
struct Demand {
    class: Class,
    /// Bytes wait to be sent (see [`Entry::busy`]).
    busy: bool,
    /// Recent sending rate on the wire, b/s (see [`next_usage`]).
    usage_bps: f64,
}

struct Entry {
    conn: Connection,
    class: Class,
    load: Arc<SessionLoad>,
    flow: Option<Arc<Flow>>,
    rate: u64,
    /// The connection's `bytes_sent_wire` at the last usage sample.
    wire_bytes: u64,
    usage_bps: f64,
}

impl Entry {
    /// Busy: bytes wait in the gateway for this connection, or unsent in the engine's send
    /// buffer. The engine's buffer matters: a flow's writer hands the engine up to a whole
    /// send buffer at once, so a gateway-only count would call a saturating flow idle and
    /// hand every flow an as-if-busy rate (the link oversubscribed).
    fn busy(&self) -> bool {
        self.load.backlog.load(Ordering::Relaxed) > 0
            || (self.conn.outcome().is_none() && self.conn.writable() < SEND_BUFFER)
    }

    fn demand(&self) -> Demand {
        Demand {
            class: self.class,
            busy: self.busy(),
            usage_bps: self.usage_bps,
        }
    }
}

/// The usage estimate after a period in which the flow sent at `sample_bps`: up at once,
/// down by [`USAGE_DECAY_STEP`] of the difference.
fn next_usage(prev_bps: f64, sample_bps: f64) -> f64 {
    if sample_bps >= prev_bps {
        sample_bps
    } else {
        prev_bps + (sample_bps - prev_bps) * USAGE_DECAY_STEP
    }
}

/// The rate of a flow of `class` out of `total` given the classes of the busy flows (`busy`
/// includes the flow itself if it is busy; `add_self` counts it in when it is not listed).
fn share(total: u64, policy: Policy, class: Class, busy: &[Class], add_self: bool) -> u64 {
    let extra = add_self.then_some(class);
    let all = || busy.iter().copied().chain(extra);
    let r = match policy {
        Policy::Weighted { weights } => {
            let w = |c: Class| u64::from(weights[c as usize].max(1));
            let sum: u64 = all().map(w).sum();
            total * w(class) / sum.max(1)
        }
        Policy::Strict { floor } => {
            let top = all().min().unwrap_or(class);
            let floor_bps = (total as f64 * floor) as u64;
            if class == top {
                let n = all().filter(|&c| c == top).count() as u64;
                let lower = all().filter(|&c| c != top).count() as u64;
                total.saturating_sub(lower * floor_bps) / n.max(1)
            } else {
                floor_bps
            }
        }
    };
    r.clamp(MIN_RATE, total.max(MIN_RATE))
}

/// Per class (indexed by `Class as usize`), the rate one more busy flow of it would get.
fn class_shares(total: u64, policy: Policy, busy: &[Class]) -> [u64; 3] {
    [Class::Control, Class::Telemetry, Class::Bulk].map(|c| share(total, policy, c, busy, true))
}

/// Every connection's rate. A flow with nothing waiting is paced at the rate it would get if
/// it became busy (its next bytes are not held back), and what it actually sends (with
/// [`HEADROOM`], at most that rate) is reserved; the busy flows share what is left by the
/// policy. Without the reservation, a flow fed steadily below its share (idle at most
/// samples) would add its traffic on top of the busy flows' full rate: a standing queue at
/// the air link, for every class. `unpaced_bps` is what the gateway sends outside any
/// connection (datagram mode, sent at once): reserved the same way.
///
/// Also returns, per class, the cap of a datagram-mode route: what one more busy flow of
/// the class would get out of the link less the idle connections' reservations (a route
/// capped at the whole link would send on top of them).
fn allocate(
    total: u64,
    policy: Policy,
    demands: &[Demand],
    unpaced_bps: f64,
) -> (Vec<u64>, [u64; 3]) {
    let busy: Vec<Class> = demands.iter().filter(|d| d.busy).map(|d| d.class).collect();
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

/// The rate allocator of one gateway.
pub struct Scheduler {
    total: u64,
    policy: Policy,
    entries: Mutex<HashMap<u64, Entry>>,
    next: Mutex<u64>,
    /// Bytes handed to the endpoint outside any connection (datagram mode), counted by
    /// [`Scheduler::count_unpaced`]; sampled like a connection's wire bytes.
    unpaced_bytes: AtomicU64,
    /// (`unpaced_bytes` at the last sample, usage estimate in b/s).
    unpaced_usage: Mutex<(u64, f64)>,
    /// Per class, the rate a busy flow of it would get now: the cap of datagram-mode routes
    /// of that class (see [`crate::policer`]).
    datagram_rates: [AtomicU64; 3],
    /// Bytes a datagram-mode message adds on the link beyond its payload: AeroTP header and
    /// CRC, plus the IPv4/UDP headers that the connections' pacers count per datagram too.
    datagram_overhead: usize,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("total", &self.total)
            .field("policy", &self.policy)
            .finish()
    }
}

/// Removes its session from the scheduler when dropped.
#[derive(Debug)]
pub struct Registration {
    sched: Arc<Scheduler>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.sched
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.sched.recompute();
    }
}

impl Scheduler {
    pub fn new(total: u64, policy: Policy) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            total,
            policy,
            entries: Mutex::new(HashMap::new()),
            next: Mutex::new(0),
            unpaced_bytes: AtomicU64::new(0),
            unpaced_usage: Mutex::new((0, 0.0)),
            datagram_rates: [0, 1, 2].map(|_| AtomicU64::new(total.max(MIN_RATE))),
            datagram_overhead: aerotp_wire::OVERHEAD
                + aerotp_net::ConnectionConfig::default().per_packet_overhead,
        })
    }

    /// What a datagram-mode message of `payload` bytes weighs against its route's cap, counted
    /// as the connections' pacers count their datagrams.
    pub fn datagram_link_len(&self, payload: usize) -> usize {
        payload + self.datagram_overhead
    }

    /// What a datagram-mode route of `class` may send now, in b/s: the rate a busy flow of
    /// its class would get (updated every [`PERIOD`]).
    pub fn datagram_rate(&self, class: Class) -> u64 {
        self.datagram_rates[class as usize].load(Ordering::Relaxed)
    }

    /// Counts a datagram-mode message of `payload` bytes sent outside any connection (its
    /// header and CRC added here; FEC parity, a few percent, is not).
    pub fn count_unpaced(&self, payload: usize) {
        let wire = (payload + aerotp_wire::OVERHEAD) as u64;
        self.unpaced_bytes.fetch_add(wire, Ordering::Relaxed);
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Rate for a connection about to open (as if it were busy).
    pub fn initial_rate(&self, class: Class) -> u64 {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let busy: Vec<Class> = e.values().filter(|x| x.busy()).map(|x| x.class).collect();
        share(self.total, self.policy, class, &busy, true)
    }

    pub fn register(
        self: &Arc<Self>,
        conn: Connection,
        class: Class,
        load: Arc<SessionLoad>,
        flow: Option<Arc<Flow>>,
    ) -> Registration {
        let id = {
            let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        let wire_bytes = conn.stats().bytes_sent_wire;
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Entry {
                    conn,
                    class,
                    load,
                    flow,
                    rate: 0,
                    wire_bytes,
                    usage_bps: 0.0,
                },
            );
        self.recompute();
        Registration {
            sched: self.clone(),
            id,
        }
    }

    /// Samples every connection's sending rate over the last `elapsed`.
    fn sample_usage(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return;
        }
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / secs;
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for x in e.values_mut() {
            let wire = x.conn.stats().bytes_sent_wire;
            x.usage_bps = next_usage(x.usage_bps, rate(wire, x.wire_bytes));
            x.wire_bytes = wire;
        }
        let mut u = self.unpaced_usage.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.unpaced_bytes.load(Ordering::Relaxed);
        *u = (now, next_usage(u.1, rate(now, u.0)));
    }

    /// Recomputes every connection's rate from which flows have bytes waiting and what the
    /// others send.
    pub fn recompute(&self) {
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let ids: Vec<u64> = e.keys().copied().collect();
        let demands: Vec<Demand> = ids.iter().map(|id| e[id].demand()).collect();
        let unpaced_bps = self
            .unpaced_usage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1;
        let (rates, caps) = allocate(self.total, self.policy, &demands, unpaced_bps);
        for (slot, r) in self.datagram_rates.iter().zip(caps) {
            slot.store(r, Ordering::Relaxed);
        }
        for (id, r) in ids.iter().zip(rates) {
            let Some(x) = e.get_mut(id) else { continue };
            if r != x.rate {
                x.rate = r;
                x.conn.set_rate(r);
                if let Some(f) = &x.flow {
                    f.lock().rate = r;
                }
            }
        }
    }

    /// Samples usage and recomputes every [`PERIOD`] until the scheduler is dropped
    /// elsewhere.
    pub fn spawn(self: &Arc<Self>) {
        let w = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut t = tokio::time::interval(PERIOD);
            let mut last = Instant::now();
            loop {
                t.tick().await;
                match w.upgrade() {
                    Some(s) => {
                        let now = Instant::now();
                        s.sample_usage(now - last);
                        last = now;
                        s.recompute();
                    }
                    None => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(class: Class) -> Demand {
        Demand {
            class,
            busy: true,
            usage_bps: 0.0,
        }
    }

    fn idle(class: Class, usage_bps: f64) -> Demand {
        Demand {
            class,
            busy: false,
            usage_bps,
        }
    }

    const WEIGHTED: Policy = Policy::Weighted { weights: [8, 4, 1] };

    #[test]
    fn shares_follow_the_policy() {
        let busy2 = [Class::Control, Class::Bulk];
        assert_eq!(
            share(9_000_000, WEIGHTED, Class::Control, &busy2, false),
            8_000_000
        );
        assert_eq!(
            share(9_000_000, WEIGHTED, Class::Bulk, &busy2, false),
            1_000_000
        );
        // Alone, a flow gets the whole link.
        assert_eq!(
            share(9_000_000, WEIGHTED, Class::Bulk, &[], true),
            9_000_000
        );
        let strict = Policy::Strict { floor: 0.01 };
        let busy3 = [Class::Telemetry, Class::Bulk, Class::Bulk];
        assert_eq!(
            share(10_000_000, strict, Class::Telemetry, &busy3, false),
            9_800_000
        );
        assert_eq!(
            share(10_000_000, strict, Class::Bulk, &busy3, false),
            100_000
        );
        let two_bulk = [Class::Bulk, Class::Bulk];
        assert_eq!(
            share(10_000_000, strict, Class::Bulk, &two_bulk, false),
            5_000_000
        );
    }

    #[test]
    fn busy_flows_alone_share_the_whole_link() {
        let d = [busy(Class::Control), busy(Class::Bulk)];
        assert_eq!(
            allocate(9_000_000, WEIGHTED, &d, 0.0).0,
            vec![8_000_000, 1_000_000]
        );
        // Idle flows that send nothing reserve nothing, and may burst at their busy share.
        let d = [busy(Class::Bulk), idle(Class::Telemetry, 0.0)];
        assert_eq!(
            allocate(10_000_000, WEIGHTED, &d, 0.0).0,
            vec![10_000_000, 8_000_000]
        );
    }

    #[test]
    fn what_an_idle_flow_sends_is_kept_from_the_busy_ones() {
        // Telemetry fed at 2 Mb/s (never backlogged) next to a saturating bulk flow: bulk gets
        // the link less 1.25 x 2 Mb/s, so the two together do not exceed the link.
        let d = [busy(Class::Bulk), idle(Class::Telemetry, 2_000_000.0)];
        let r = allocate(10_000_000, WEIGHTED, &d, 0.0).0;
        assert_eq!(r, vec![7_500_000, 8_000_000]);
        assert!(r[0] as f64 + 2_000_000.0 <= 10_000_000.0);
        // The same under strict priority, the idle flow being the higher class.
        let strict = Policy::Strict { floor: 0.02 };
        let r = allocate(10_000_000, strict, &d, 0.0).0;
        assert_eq!(r[0], 7_500_000);
        // An idle lower-class flow reserves at most what it could get (the floor).
        let d = [busy(Class::Control), idle(Class::Bulk, 3_000_000.0)];
        let r = allocate(10_000_000, strict, &d, 0.0).0;
        assert_eq!(r, vec![9_800_000, 200_000]);
    }

    #[test]
    fn datagram_mode_traffic_is_kept_from_the_busy_flows() {
        let d = [busy(Class::Control), busy(Class::Bulk)];
        let strict = Policy::Strict { floor: 0.01 };
        // 0.8 Mb/s of datagrams: 1 Mb/s kept; control gets the rest less bulk's floor (1 %
        // of what is left).
        assert_eq!(
            allocate(10_000_000, strict, &d, 800_000.0).0,
            vec![8_910_000, 90_000]
        );
        let s = Scheduler::new(10_000_000, strict);
        s.count_unpaced(1000 - aerotp_wire::OVERHEAD);
        assert_eq!(s.unpaced_bytes.load(Ordering::Relaxed), 1000);
        s.sample_usage(Duration::from_millis(10));
        assert_eq!(s.unpaced_usage.lock().unwrap().1, 800_000.0);
    }

    #[test]
    fn datagram_routes_are_capped_at_their_class_share() {
        let strict = Policy::Strict { floor: 0.02 };
        // A busy control flow: lower classes get the floor; a control route shares with it.
        assert_eq!(
            class_shares(10_000_000, strict, &[Class::Control]),
            [5_000_000, 200_000, 200_000]
        );
        assert_eq!(
            class_shares(9_000_000, WEIGHTED, &[Class::Bulk]),
            [8_000_000, 7_200_000, 4_500_000]
        );
        // An idle telemetry flow sending 2 Mb/s: datagram routes share what it leaves.
        let d = [idle(Class::Telemetry, 2_000_000.0)];
        assert_eq!(
            allocate(10_000_000, WEIGHTED, &d, 0.0).1,
            [7_500_000; 3],
            "nothing busy: a route may use the link less the reservation"
        );
        let d = [busy(Class::Bulk), idle(Class::Telemetry, 2_000_000.0)];
        assert_eq!(
            allocate(10_000_000, strict, &d, 0.0).1,
            [7_350_000, 7_350_000, 3_750_000]
        );
        // Nothing busy: any class may use the whole link; that is where a scheduler starts.
        assert_eq!(class_shares(9_000_000, WEIGHTED, &[]), [9_000_000; 3]);
        let s = Scheduler::new(10_000_000, strict);
        assert_eq!(s.datagram_rate(Class::Bulk), 10_000_000);
        s.recompute();
        assert_eq!(s.datagram_rate(Class::Bulk), 10_000_000);
    }

    #[test]
    fn idle_reservations_never_starve_the_busy_flows() {
        let d = [
            busy(Class::Bulk),
            idle(Class::Control, 9_000_000.0),
            idle(Class::Telemetry, 9_000_000.0),
        ];
        let r = allocate(10_000_000, WEIGHTED, &d, 0.0).0;
        assert_eq!(r[0], 1_000_000, "{r:?}");
    }

    #[test]
    fn usage_rises_at_once_and_decays_over_periods() {
        assert_eq!(next_usage(1_000.0, 5_000.0), 5_000.0);
        let mut u = 5_000_000.0;
        let mut periods = 0;
        while u > 50_000.0 {
            u = next_usage(u, 0.0);
            periods += 1;
        }
        // 0.8^n < 1 %: 21 periods of 50 ms, about a second.
        assert_eq!(periods, 21);
        assert!(next_usage(u, 0.0) < u);
    }
}
