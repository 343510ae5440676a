//! A connection's paths (docs/spec.md §9): the peer's addresses it sends to, each with its
//! own round trip, delivery rate, losses and up/down state, and the choice of path for each
//! datagram.
//!
//! - **Data** is spread over the paths that are up by smooth weighted round robin (as nginx
//!   and Linux `teql` spread packets), the weights following what each path *delivers*
//!   (bytes acknowledged per interval), not what it is offered: a path that loses or is
//!   slower than its share gets less. A retransmission avoids the path that lost it, a
//!   repair the path of the latest data; both count in the round robin, so each path's share
//!   of all datagrams stays its weight.
//! - **Feedback and other control TPDUs** go back on the path the peer's latest TPDU came
//!   from (alive one way at least), or on the path a PROBE came from (so the peer learns
//!   that path works).
//! - **A path goes down** when its oldest unacknowledged TPDU is a round trip and a probe
//!   interval overdue while another path is up: its TPDUs in flight are resent on the
//!   others, its share of the connection's rate is taken off the pacer (the survivors keep
//!   their own), and it is probed with a PROBE at doubling intervals up to 2 s. Anything
//!   heard from it brings it back with its old share.
//!
//! With one path all of this is inert: the path is path 0, the connection's own round-trip
//! estimate and rate rule, and nothing differs from a single-path connection.

use crate::codec::Quality;
use crate::endpoint_types::PathAddr;
use crate::rtt::{PathTiming, RttEstimator};
use crate::sender::LaneStats;
use aerotp_fec::auto::BerEstimator;
use ledger::{PathTraffic, UpTime};
use probing::ProbeSchedule;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Most paths a connection keeps (the sender's lanes have the same bound).
pub const MAX_PATHS: usize = crate::sender::MAX_LANES;

/// A path carries feedback only if the peer's TPDUs came on it this recently (it works at
/// least that way).
const FEEDBACK_FRESH: Duration = Duration::from_secs(1);

/// Shortest interval over which delivery rates are measured for the weights.
const MIN_WEIGHT_INTERVAL: Duration = Duration::from_millis(100);

/// TPDUs acknowledged per up path, on average, before an interval's delivery counts: fewer
/// are noise (on 2.4 kb/s channels a 512-byte TPDU takes 1.7 s and the round trip varies by
/// 1.8 s; intervals of one round trip held two or three TPDUs per path, and the weights
/// swung from 2 % to 90 % and back, each swing a queue of tens of seconds).
const MIN_WEIGHT_TPDUS: u64 = 64;

/// Share of a new measurement in a weight (the rest is the old weight).
const WEIGHT_GAIN: f64 = 0.25;

/// Smoothed over smallest round trip beyond which a path counts as queueing (sent more than
/// it carries).
const QUEUE_RATIO: f64 = 1.25;

/// What a path without a queue is credited beyond what it delivered: it may carry more, and
/// only being offered more shows how much.
const PROBE_GAIN: f64 = 1.1;

/// The factor on what a path delivered for its weight: `PROBE_GAIN` without a queue, and its
/// smallest round trip over its smoothed one with a queue (a path sent more than it carries
/// delivers its capacity while the queue grows, so it is weighted below that until the queue
/// drains; without this a path that lost for any reason passed its share to one already
/// full).
fn headroom(rtt: &RttEstimator) -> f64 {
    let Some(min) = rtt.min_rtt() else {
        return 1.0;
    };
    let ratio = rtt.smoothed().as_secs_f64() / min.as_secs_f64().max(1e-6);
    if ratio < QUEUE_RATIO {
        PROBE_GAIN
    } else {
        1.0 / ratio
    }
}

/// A path that is up never gets less than this share of the up paths' mean weight: it keeps
/// carrying enough to be measured.
const MIN_WEIGHT_SHARE: f64 = 0.05;

/// What one path did (docs/stats.md, "Paths").
#[derive(Debug, Clone, PartialEq)]
pub struct PathStats {
    /// The peer's address on this path.
    pub remote: SocketAddr,
    /// This host's address on it (`PathAddr::local`; `None` where the driver does not say).
    pub local: Option<IpAddr>,
    pub up: bool,
    /// Smoothed time from a TPDU's transmission on the path to its acknowledgement (the
    /// peer's acknowledgement delay included); zero before the first sample.
    pub srtt: Duration,
    /// Bytes per second acknowledged on the path over the last interval, in bits per second.
    pub delivered_bps: u64,
    /// Share of the connection's data the path is given (of the paths that are up).
    pub weight: f64,
    /// The sender's TPDUs on the path (data and retransmissions).
    pub sent: LaneStats,
    /// Every datagram sent on the path (control and repairs too), and its bytes.
    pub datagrams_sent: u64,
    pub bytes_sent: u64,
    pub datagrams_received: u64,
    pub bytes_received: u64,
    /// Time spent up and down since the path was added.
    pub time_up: Duration,
    pub time_down: Duration,
    /// Times the path went down.
    pub downs: u64,
    /// PROBEs sent while it was down.
    pub probes: u64,
    /// Bit-error rate of what arrived on the path (the FEC's corrections and failed checks,
    /// as the connection's own estimate counts them); 0 before anything arrived, and for a
    /// connection with one path (its BER is the connection's).
    pub ber: f64,
    /// What the rate control says of the path (discovered rate, phase, minimum round trip).
    pub rate: crate::rate::PathRate,
    /// What the path's radio says and how often it changed (its rate is `rate.radio_bps`).
    pub radio: crate::radio::PathRadio,
}

#[derive(Debug)]
struct Path {
    addr: PathAddr,
    up: bool,
    /// Time spent up and down, and times it went down (statistics).
    uptime: UpTime,
    /// The probes of the path while it is down.
    probe: ProbeSchedule,
    rtt: RttEstimator,
    /// Bytes and TPDUs acknowledged on the path at the start of the weight interval.
    acked_mark: u64,
    acked_tpdus_mark: u64,
    delivered_bps: u64,
    weight: f64,
    credit: f64,
    /// Datagrams and bytes each way (statistics).
    traffic: PathTraffic,
    /// When the peer was last heard on this path.
    last_heard: Duration,
    /// Smoothed one-way delay of the peer's TPDUs on this path, in µs, less that of the
    /// first TPDU timed on any path: the clocks' offset cancels, so the path with the least
    /// is the quickest back too (taking a path's delay as the same both ways).
    relative_delay: Option<f64>,
    /// What arrived on the path, for its bit-error rate (several paths only).
    ber: BerEstimator,
    /// The radio says the path takes nothing now (RFC 8651 Pause, or its destination is
    /// down): no data, repair or retransmission goes on it (`radio`).
    held: bool,
    /// The radio said the destination is down: no probes until it says it is up.
    radio_down: bool,
    /// What the radio says of the path, and its changes counted (`PathStats::radio`).
    radio: crate::radio::PathRadio,
}

impl Path {
    fn new(addr: PathAddr, now: Duration, weight: f64, rtt: RttEstimator) -> Path {
        Path {
            addr,
            up: true,
            uptime: UpTime::new(now),
            probe: ProbeSchedule::new(now),
            rtt,
            acked_mark: 0,
            acked_tpdus_mark: 0,
            delivered_bps: 0,
            weight,
            credit: 0.0,
            traffic: PathTraffic::default(),
            last_heard: now,
            relative_delay: None,
            ber: BerEstimator::new(),
            held: false,
            radio_down: false,
            radio: crate::radio::PathRadio::default(),
        }
    }

    /// Up, and not held by its radio: data may go on it.
    fn usable(&self) -> bool {
        self.up && !self.held
    }
}

#[derive(Debug)]
pub(crate) struct Paths {
    list: Vec<Path>,
    /// Path of the peer's latest TPDU.
    rx: usize,
    /// A PROBE came on this path: the next control TPDU answers on it.
    reply: Option<usize>,
    /// Path of the latest data TPDU sent (a repair avoids it).
    last_data: u8,
    /// Path of the datagram `Connection::poll_transmit` produced last.
    tx: usize,
    /// Next path an outage probe tries (all paths silent: each is tried in turn).
    outage_next: usize,
    /// Start of the current weight interval.
    interval_start: Duration,
    /// Paths this end asked for that are being validated: counted as down paths of the mean
    /// weight, so the first path is not sent the whole rate meant for all of them.
    expected: usize,
    /// Arrival time less the peer's timestamp of the first TPDU timed (µs, wrapping).
    delay_reference: Option<u32>,
    /// A path was added: the next `reweigh` starts a fresh interval (the old one's counts
    /// would credit the first path with everything it carried alone).
    restart_interval: bool,
    /// The weights follow each path's discovered rate (`set_rate_shares`), not `reweigh`.
    rate_weighted: bool,
    /// The connection's loss time and timeout as of the latest feedback or path added
    /// (`set_unsampled_timing`): what the lane of a path without a sample of its own runs
    /// on (`lane_timing`). Taken then, not read at the call: a new path's first
    /// acknowledgements, applied before that feedback is, were always judged so.
    unsampled: PathTiming,
}

impl Paths {
    pub fn new(addr: PathAddr, now: Duration, rtt: RttEstimator) -> Paths {
        Paths {
            list: vec![Path::new(addr, now, 1.0, rtt)],
            rx: 0,
            reply: None,
            last_data: 0,
            tx: 0,
            outage_next: 0,
            interval_start: now,
            expected: 0,
            delay_reference: None,
            restart_interval: true,
            rate_weighted: false,
            unsampled: PathTiming::default(),
        }
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.list.get(i).is_some_and(|p| p.up)
    }

    /// Weighs the up paths by their share of the discovered rate (`crate::rate`), once every
    /// up path has one; from then on `reweigh` leaves the weights alone. The up paths' total
    /// weight stays, as in `reweigh`.
    pub fn set_rate_shares(&mut self, shares: &[Option<f64>]) {
        let up: Vec<usize> = (0..self.list.len()).filter(|&i| self.list[i].up).collect();
        if up.len() < 2
            || up
                .iter()
                .any(|&i| shares.get(i).copied().flatten().is_none())
        {
            return;
        }
        self.rate_weighted = true;
        self.spread_weights(&up, |i, _, budget| budget * shares[i].unwrap_or(0.0));
    }

    /// Gives each up path in `up` the weight `target(path, its weight, the up paths' total)`,
    /// at least `MIN_WEIGHT_SHARE` of an even share, then scales them back to the same total
    /// (only a path going down or up changes the pacing rate).
    fn spread_weights(&mut self, up: &[usize], target: impl Fn(usize, f64, f64) -> f64) {
        let budget: f64 = up.iter().map(|&i| self.list[i].weight).sum();
        let floor = MIN_WEIGHT_SHARE * budget / up.len() as f64;
        for &i in up {
            let w = &mut self.list[i].weight;
            *w = target(i, *w, budget).max(floor);
        }
        let after: f64 = up.iter().map(|&i| self.list[i].weight).sum();
        for &i in up {
            self.list[i].weight *= budget / after;
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the connection has several paths (all the rules of this module apply).
    #[inline]
    pub fn multi(&self) -> bool {
        self.list.len() > 1
    }

    pub fn addr(&self, i: usize) -> PathAddr {
        self.list[i.min(self.list.len() - 1)].addr
    }

    pub fn remote(&self, i: usize) -> SocketAddr {
        self.addr(i).remote
    }

    pub fn addrs(&self) -> impl Iterator<Item = PathAddr> + '_ {
        self.list.iter().map(|p| p.addr)
    }

    /// The path with both ends `addr` (a path is its local and its remote address).
    #[inline]
    pub fn index_of(&self, addr: PathAddr) -> Option<usize> {
        self.list.iter().position(|p| p.addr == addr)
    }

    /// Adds the path `addr` (up, with the mean weight of the others and their round-trip
    /// estimate's settings); `None` when `MAX_PATHS` are there already.
    pub fn add(&mut self, addr: PathAddr, now: Duration, rtt: RttEstimator) -> Option<usize> {
        if let Some(i) = self.index_of(addr) {
            return Some(i);
        }
        if self.list.len() >= MAX_PATHS {
            return None;
        }
        let mean = self.mean_weight();
        self.list.push(Path::new(addr, now, mean.max(1e-3), rtt));
        self.restart_interval = true;
        Some(self.list.len() - 1)
    }

    fn mean_weight(&self) -> f64 {
        self.list.iter().map(|p| p.weight).sum::<f64>() / self.list.len() as f64
    }

    /// `n` paths this end asked for are being validated.
    pub fn expect(&mut self, n: usize) {
        self.expected = n.min(MAX_PATHS);
    }

    /// The peer moved (or this end did): path `i` is `addr` from now on.
    pub fn replace(&mut self, i: usize, addr: PathAddr) {
        if let Some(p) = self.list.get_mut(i) {
            p.addr = addr;
        }
    }

    /// A TPDU of `bytes` came from path `i`. Returns whether that brought it back up.
    #[inline]
    pub fn on_heard(&mut self, now: Duration, i: usize, bytes: usize) -> bool {
        let Some(p) = self.list.get_mut(i) else {
            return false;
        };
        p.traffic.on_received(bytes);
        p.last_heard = now;
        self.rx = i;
        if p.up {
            return false;
        }
        p.uptime.came_up(now);
        p.up = true;
        p.probe.cancel();
        p.credit = 0.0;
        // An interval across a path's return measures the outage, not the paths.
        self.restart_interval = true;
        true
    }

    /// Whether the peer was heard on any path after `t`.
    pub fn heard_since(&self, t: Duration) -> bool {
        self.list.iter().any(|p| p.last_heard > t)
    }

    /// The path the peer has been silent on longest.
    pub fn stalest(&self) -> usize {
        (0..self.list.len())
            .min_by_key(|&i| self.list[i].last_heard)
            .unwrap_or(0)
    }

    /// The peer's TPDU just heard (on the latest path) carried `timestamp` (its clock, µs)
    /// and arrived at `arrival` (ours, µs): the path's one-way delay, up to the clocks'
    /// offset. Both clocks wrap at 2^32 µs, so the difference is taken wrapping.
    pub fn on_timestamp(&mut self, arrival: u32, timestamp: u32) {
        let d = arrival.wrapping_sub(timestamp);
        let reference = *self.delay_reference.get_or_insert(d);
        let relative = f64::from(d.wrapping_sub(reference) as i32);
        let p = &mut self.list[self.rx];
        p.relative_delay = Some(
            p.relative_delay
                .map_or(relative, |o| (o * 7.0 + relative) / 8.0),
        );
    }

    /// How the latest datagram (on the path of the peer's latest TPDU) arrived: clean,
    /// corrected, or corrupted, for that path's bit-error rate. Nothing with one path.
    #[inline]
    pub fn on_quality(&mut self, bits: usize, quality: Quality, parity: u8) {
        if self.list.len() < 2 {
            return;
        }
        let ber = &mut self.list[self.rx].ber;
        match quality {
            Quality::Clean => ber.record_clean(bits),
            Quality::Corrected { bits: b, symbols } => ber.record_corrected(bits, b, symbols),
            Quality::Corrupted => ber.record_failed(bits, parity),
        }
    }

    /// A PROBE came on the path of the latest TPDU: the answer goes there.
    pub fn reply_on_rx(&mut self) {
        self.reply = Some(self.rx);
    }

    /// Smooth weighted round robin over the paths that are up, avoiding `avoid` (the path a
    /// retransmission was lost on, the path of the data a repair protects) if another is up.
    /// With no path up, the path heard last.
    #[inline]
    pub fn pick(&mut self, avoid: Option<u8>) -> u8 {
        if self.list.len() == 1 {
            return 0;
        }
        let avoid = avoid.map(usize::from);
        let others_up = self
            .list
            .iter()
            .enumerate()
            .any(|(i, p)| p.usable() && Some(i) != avoid);
        let usable = |i: usize, p: &Path| p.usable() && (!others_up || Some(i) != avoid);
        let total: f64 = self
            .list
            .iter()
            .filter(|p| p.usable())
            .map(|p| p.weight)
            .sum();
        // Every path that is up earns its weight on every pick, the avoided one too, and the
        // path chosen pays the whole turn: each path's share of all datagrams (data, repairs,
        // retransmissions) stays its weight. Crediting only the usable paths put every repair
        // on one path whenever the repair period was a multiple of the path count (one repair
        // per four data TPDUs over two paths: the data alternates, so the datagram before each
        // repair was always on the same path); that path carried 1.5x its share and queued.
        let mut best: Option<usize> = None;
        for i in 0..self.list.len() {
            if !self.list[i].usable() {
                continue;
            }
            self.list[i].credit += self.list[i].weight;
            if usable(i, &self.list[i])
                && best.is_none_or(|b| self.list[i].credit > self.list[b].credit)
            {
                best = Some(i);
            }
        }
        let Some(b) = best else {
            return self.rx as u8;
        };
        self.list[b].credit -= total;
        b as u8
    }

    /// Notes the path the datagram being sent goes on.
    #[inline]
    pub fn set_tx(&mut self, path: u8, data: bool) {
        self.tx = usize::from(path).min(self.list.len() - 1);
        if data {
            self.last_data = path;
        }
    }

    /// The datagram noted by `set_tx` went: `bytes` on its path.
    #[inline]
    pub fn on_sent(&mut self, bytes: usize) {
        self.list[self.tx].traffic.on_sent(bytes);
    }

    pub fn tx_addr(&self) -> PathAddr {
        self.addr(self.tx)
    }

    pub fn last_data(&self) -> u8 {
        self.last_data
    }

    /// The path for a control TPDU (feedback above all): the one a PROBE came on, else the
    /// quickest of the paths that are up and carried the peer's TPDUs within
    /// `FEEDBACK_FRESH` (by the one-way delay of what arrived on them), else the path the
    /// peer's latest TPDU came on. Feedback on the path of the latest arrival instead sent
    /// half of it back on a 40 ms path when a 10 ms one was there: acknowledgements of the
    /// fast path's TPDUs came after its timeout, which resent them (one in five).
    pub fn control(&mut self, now: Duration) -> u8 {
        if let Some(r) = self.reply.take() {
            return r as u8;
        }
        if self.list.len() == 1 {
            return 0;
        }
        let fresh = |p: &Path| p.up && p.last_heard + FEEDBACK_FRESH >= now;
        let delay = |p: &Path| p.relative_delay.unwrap_or(f64::INFINITY);
        let mut best = self.rx;
        for (i, p) in self.list.iter().enumerate() {
            if fresh(p) && (!fresh(&self.list[best]) || delay(p) < delay(&self.list[best])) {
                best = i;
            }
        }
        best as u8
    }

    /// The path for the next outage probe: every path in turn.
    pub fn outage_probe(&mut self) -> u8 {
        let i = self.outage_next % self.list.len();
        self.outage_next = i + 1;
        i as u8
    }

    /// A latency sample of path `i` (transmission to acknowledgement, the longest of an
    /// acknowledgement's), and the peer's acknowledgement hold as its MACKs report it: the
    /// path's timeout covers both, as the connection's does (with the round trip alone it
    /// came down to the round trip itself on a steady path, and a MACK a millisecond late
    /// resent a fifth of a 10 ms path's TPDUs).
    pub fn on_latency(&mut self, i: usize, sample: Duration, peer_hold: Duration) {
        if let Some(p) = self.list.get_mut(i) {
            p.rtt.on_sample(sample.max(Duration::from_micros(1)));
            p.rtt.on_ack_latency(sample);
            p.rtt.on_peer_max_delay(peer_hold);
        }
    }

    /// Time threshold and timeout of path `i`'s loss detection; the connection's own (now)
    /// where the path has no sample yet.
    pub fn timing(&self, i: usize, conn: &RttEstimator) -> (Duration, Duration) {
        match self.own_timing(i) {
            Some(t) => (t.loss_time, t.rto),
            None => (conn.loss_time(), conn.rto()),
        }
    }

    /// Path `i`'s own time threshold and timeout, read from its estimator now, once it has a
    /// sample (its floor is the connection's: every estimator has the configured `min_rto`).
    fn own_timing(&self, i: usize) -> Option<PathTiming> {
        let r = &self.list.get(i)?.rtt;
        r.has_sample().then(|| PathTiming {
            loss_time: r.loss_time(),
            rto: r.rto().max(r.min_rto()),
        })
    }

    /// See `unsampled`.
    pub fn set_unsampled_timing(&mut self, t: PathTiming) {
        self.unsampled = t;
    }

    /// The time threshold and timeout path `i`'s lane of loss detection runs on (several
    /// paths): the path's own, read now, or `unsampled` before its first sample.
    pub fn lane_timing(&self, i: usize) -> PathTiming {
        self.own_timing(i).unwrap_or(self.unsampled)
    }

    /// When path `i` is declared down if nothing on it is acknowledged: the first TPDU sent
    /// on it since its latest acknowledgement (at `oldest`) overdue by twice the path's
    /// timeout, or by a round trip and a probe interval if that is sooner. Nothing
    /// acknowledged on a path for two timeouts is no random loss (the acknowledgements of
    /// the TPDUs around a lost one would have come); waiting a round trip and a probe
    /// interval sent a third of a second of a 1 Mb/s path's TPDUs into it when it died,
    /// each resent a timeout later, and stalled in-order delivery that long. One timeout
    /// took a survivor's queue, growing while the dead path's share went to it, for a
    /// death. Never for the last path up (then the connection's outage rules apply).
    pub fn down_at(
        &self,
        i: usize,
        oldest: Option<Duration>,
        probe_interval: Duration,
        conn: &RttEstimator,
    ) -> Option<Duration> {
        let p = &self.list[i];
        let others_up = self.list.iter().enumerate().any(|(j, q)| j != i && q.up);
        if !p.up || !others_up {
            return None;
        }
        let rtt = if p.rtt.has_sample() { &p.rtt } else { conn };
        let probed = rtt.smoothed() + (rtt.variation() * 4).max(probe_interval);
        Some(oldest? + (self.timing(i, conn).1 * 2).min(probed))
    }

    /// Path `i` goes down at `now`; its first probe is due at once.
    pub fn set_down(&mut self, now: Duration, i: usize, probe_interval: Duration) {
        let Some(p) = self.list.get_mut(i) else {
            return;
        };
        p.uptime.went_down(now);
        p.up = false;
        p.probe.start(now, probe_interval);
        p.credit = 0.0;
        // The interval so far held the path's silence: not what the others can carry.
        self.restart_interval = true;
    }

    /// The earliest probe of a down path.
    pub fn next_probe(&self) -> Option<Duration> {
        self.list
            .iter()
            .filter(|p| !p.up && !p.probe.is_due() && !p.radio_down)
            .map(|p| p.probe.next())
            .min()
    }

    /// Marks the down paths whose probe time has come.
    pub fn probes_due(&mut self, now: Duration) {
        for p in self
            .list
            .iter_mut()
            .filter(|p| !p.up && !p.probe.is_due() && !p.radio_down)
        {
            p.probe.fire_if_time(now);
        }
    }

    /// A down path with a probe to send, taken.
    pub fn take_probe(&mut self) -> Option<u8> {
        let i = self.list.iter().position(|p| p.probe.is_due())?;
        self.list[i].probe.take();
        Some(i as u8)
    }

    pub fn has_probe(&self) -> bool {
        self.list.iter().any(|p| p.probe.is_due())
    }

    /// Share of the weight that is up: the connection paces at its rate times this.
    pub fn up_fraction(&self) -> f64 {
        let all: f64 = self.list.iter().map(|p| p.weight).sum::<f64>()
            + self.expected as f64 * self.mean_weight();
        let up: f64 = self
            .list
            .iter()
            .filter(|p| p.usable())
            .map(|p| p.weight)
            .sum();
        if all > 0.0 {
            up / all
        } else {
            1.0
        }
    }

    /// Re-weighs the up paths by what each delivered since the interval began (`acked`: the
    /// sender's per-path counts), once an interval of at least the longest round trip has
    /// passed, each path's delivery counted with its `headroom`. Down paths keep their weight
    /// (their share comes back with them); the up paths' total stays, so only a path going
    /// down or up changes the pacing rate.
    pub fn reweigh(&mut self, now: Duration, acked: &[LaneStats]) {
        // The longest of the up paths' smallest round trips: every path has answered within
        // an interval (the smoothed round trip would lengthen it as a queue grows, and the
        // weights would react ever later to the queue they should drain).
        let longest = self
            .list
            .iter()
            .filter(|p| p.up)
            .filter_map(|p| p.rtt.min_rtt())
            .max()
            .unwrap_or_default();
        let elapsed = now.saturating_sub(self.interval_start);
        if self.list.len() < 2 || self.rate_weighted {
            return;
        }
        if std::mem::take(&mut self.restart_interval) {
            self.interval_start = now;
            for (i, p) in self.list.iter_mut().enumerate() {
                p.acked_mark = acked.get(i).map_or(0, |s| s.bytes_acked);
                p.acked_tpdus_mark = acked.get(i).map_or(0, |s| s.tpdus_acked);
            }
            return;
        }
        let up_count = self.list.iter().filter(|p| p.up).count() as u64;
        let tpdus: u64 = self
            .list
            .iter()
            .enumerate()
            .filter(|(_, p)| p.up)
            .map(|(i, p)| {
                acked
                    .get(i)
                    .map_or(0, |s| s.tpdus_acked.saturating_sub(p.acked_tpdus_mark))
            })
            .sum();
        if elapsed < longest.max(MIN_WEIGHT_INTERVAL) || tpdus < MIN_WEIGHT_TPDUS * up_count {
            return;
        }
        self.interval_start = now;
        let mut delivered = vec![0f64; self.list.len()];
        for (i, p) in self.list.iter_mut().enumerate() {
            let total = acked.get(i).map_or(0, |s| s.bytes_acked);
            let bytes = total.saturating_sub(p.acked_mark);
            p.acked_mark = total;
            p.acked_tpdus_mark = acked.get(i).map_or(0, |s| s.tpdus_acked);
            p.delivered_bps = (bytes as f64 * 8.0 / elapsed.as_secs_f64()) as u64;
            delivered[i] = bytes as f64 * headroom(&p.rtt);
        }
        let up: Vec<usize> = (0..self.list.len()).filter(|&i| self.list[i].up).collect();
        let sum: f64 = up.iter().map(|&i| delivered[i]).sum();
        if sum <= 0.0 || up.len() < 2 {
            return;
        }
        self.spread_weights(&up, |i, w, budget| {
            let measured = budget * delivered[i] / sum;
            w * (1.0 - WEIGHT_GAIN) + measured * WEIGHT_GAIN
        });
    }

    pub fn stats(&self, now: Duration, sent: &[LaneStats]) -> Vec<PathStats> {
        let up_total: f64 = self.list.iter().filter(|p| p.up).map(|p| p.weight).sum();
        self.list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (time_up, time_down) = p.uptime.totals(now, p.up);
                PathStats {
                    remote: p.addr.remote,
                    local: p.addr.local,
                    up: p.up,
                    srtt: if p.rtt.has_sample() {
                        p.rtt.smoothed()
                    } else {
                        Duration::ZERO
                    },
                    delivered_bps: p.delivered_bps,
                    weight: if p.up && up_total > 0.0 {
                        p.weight / up_total
                    } else {
                        0.0
                    },
                    sent: sent.get(i).copied().unwrap_or_default(),
                    datagrams_sent: p.traffic.datagrams_sent,
                    bytes_sent: p.traffic.bytes_sent,
                    datagrams_received: p.traffic.datagrams_received,
                    bytes_received: p.traffic.bytes_received,
                    time_up,
                    time_down,
                    downs: p.uptime.downs(),
                    probes: p.probe.sent(),
                    ber: p.ber.estimate().unwrap_or(0.0),
                    rate: crate::rate::PathRate::default(),
                    radio: p.radio,
                }
            })
            .collect()
    }
}

mod ledger;
mod probing;
mod radio;
#[cfg(test)]
mod tests;
