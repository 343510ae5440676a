//! The sender's record of transmissions, one lane per path. Loss detection and timeouts run
//! per lane: TPDUs on a slow path are overtaken by those on a fast one by the paths' delay
//! difference, which is no loss (MPTCP and multipath QUIC keep a sequence space per path for
//! the same reason). With one path there is one lane and the rules are those of a single
//! flight, with the connection's own timings.

use crate::rate::{DeliverySampler, RateSample, SendSnapshot};
use crate::rtt::PathTiming;
use std::collections::VecDeque;
use std::time::Duration;

/// Transmissions older than this many later-acknowledged transmissions are declared lost
/// (packet-threshold loss detection, as in QUIC). With several paths it is off: the count
/// mixes paths.
const REORDER_THRESHOLD: u64 = 3;

/// Most paths a connection's sender keeps lanes for (`paths::MAX_PATHS` is the same bound).
pub const MAX_LANES: usize = 8;

/// One transmission in send order, for loss detection and timeouts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Transmission {
    pub tx: u64,
    pub seq: u64,
    pub at: Duration,
}

/// What one path carried of this sender's TPDUs (docs/stats.md, "Paths").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// TPDUs sent on the path, first transmissions and retransmissions.
    pub tpdus_sent: u64,
    pub bytes_sent: u64,
    /// TPDUs whose latest transmission was on the path when they were acknowledged.
    pub tpdus_acked: u64,
    pub bytes_acked: u64,
    /// TPDUs declared lost on the path (loss detection, timeout, NACK, SNACK, or the path
    /// going down with them in flight).
    pub tpdus_lost: u64,
}

#[derive(Debug, Default)]
struct Lane {
    flight: VecDeque<Transmission>,
    largest_acked_tx: Option<u64>,
    /// Send time of the earliest first transmission acknowledged since last taken.
    latency_from: Option<Duration>,
    /// When the first transmission on the lane since its latest acknowledgement went: the
    /// path has been silent since (whatever timeouts did with that transmission).
    unanswered_since: Option<Duration>,
    stats: LaneStats,
    /// What the path delivered, for its rate (`crate::rate`).
    rate: DeliverySampler,
}

/// Timings the connection gives for one call: its own, used when there is one path, and
/// each path's (`path`) when there are several.
#[derive(Clone, Copy)]
pub(crate) struct Timing<'a> {
    pub loss_time: Duration,
    /// Added to every lane's time threshold (reorder window, erasure repair wait).
    pub extra: Duration,
    pub count_rule: bool,
    pub path: &'a dyn Fn(usize) -> PathTiming,
}

#[derive(Debug)]
pub(crate) struct Lanes {
    list: Vec<Lane>,
}

impl Lanes {
    pub fn new() -> Lanes {
        Lanes {
            list: vec![Lane::default()],
        }
    }

    /// Whether there is one lane (one path).
    #[inline]
    pub fn single(&self) -> bool {
        self.list.len() == 1
    }

    /// Makes lanes up to `path` exist (bounded by `MAX_LANES`).
    pub fn ensure(&mut self, path: usize) {
        while self.list.len() <= path.min(MAX_LANES - 1) {
            self.list.push(Lane::default());
        }
    }

    #[inline]
    fn lane(&mut self, path: u8) -> &mut Lane {
        let i = usize::from(path).min(self.list.len() - 1);
        &mut self.list[i]
    }

    /// A transmission of `bytes` on `path`: its delivery snapshot. `tracked`: it has a
    /// record whose acknowledgement or loss will be reported (a redundant ASYN copy has
    /// not, and is left out of the path's delivery accounting).
    #[inline]
    pub fn on_sent(
        &mut self,
        now: Duration,
        path: u8,
        bytes: usize,
        tracked: bool,
    ) -> SendSnapshot {
        let l = self.lane(path);
        l.stats.tpdus_sent += 1;
        l.stats.bytes_sent += bytes as u64;
        l.unanswered_since.get_or_insert(now);
        if tracked {
            l.rate.on_sent(now, bytes)
        } else {
            SendSnapshot::default()
        }
    }

    /// The sender had nothing to send while the pacer allowed it.
    pub fn on_app_limited(&mut self) {
        for l in &mut self.list {
            l.rate.on_app_limited();
        }
    }

    /// The delivery accounting of `path`.
    pub fn sampler(&self, path: usize) -> Option<&DeliverySampler> {
        self.list.get(path).map(|l| &l.rate)
    }

    /// `path`'s rate sample since the last call and the bytes acknowledged since.
    pub fn take_rate_sample(&mut self, path: usize) -> (Option<RateSample>, u64) {
        self.list.get_mut(path).map_or((None, 0), |l| l.rate.take())
    }

    /// A transmission on `path` arrived corrupted (the peer said so): delivered, for the rate.
    pub fn on_corrupted(&mut self, now: Duration, path: u8, bytes: usize, snap: &SendSnapshot) {
        self.lane(path).rate.on_corrupted(now, bytes, snap);
    }

    /// When the path has been silent since: its first transmission after its latest
    /// acknowledgement.
    pub fn unanswered_since(&self, path: usize) -> Option<Duration> {
        self.list.get(path)?.unanswered_since
    }

    /// The path went down: its silence is accounted for.
    pub fn clear_unanswered(&mut self, path: usize) {
        if let Some(l) = self.list.get_mut(path) {
            l.unanswered_since = None;
        }
    }

    #[inline]
    pub fn push(&mut self, path: u8, t: Transmission) {
        self.lane(path).flight.push_back(t);
    }

    /// The transmission `snap` of `bytes` on `path` was acknowledged at `now`;
    /// `first_sent`: the TPDU's send time if this was its only transmission.
    #[inline]
    pub fn on_acked(
        &mut self,
        now: Duration,
        path: u8,
        bytes: usize,
        first_sent: Option<Duration>,
        snap: &SendSnapshot,
    ) {
        let l = self.lane(path);
        l.rate.on_acked(now, bytes, snap, first_sent.is_some());
        l.stats.tpdus_acked += 1;
        l.stats.bytes_acked += bytes as u64;
        l.unanswered_since = None;
        if let Some(s) = first_sent {
            l.latency_from = Some(l.latency_from.map_or(s, |o| o.min(s)));
        }
    }

    #[inline]
    pub fn on_acked_tx(&mut self, path: u8, tx: u64) {
        let l = self.lane(path);
        l.largest_acked_tx = Some(l.largest_acked_tx.map_or(tx, |x| x.max(tx)));
    }

    /// A transmission of `bytes` on `path` is no longer in flight (acknowledged, or queued to
    /// go again).
    pub fn leave_flight(&mut self, path: u8, bytes: usize) {
        self.lane(path).rate.leave_flight(bytes);
    }

    /// A loss just counted on `path` was a corrupted arrival: not lost, for the rate.
    pub fn forgive_loss(&mut self, path: u8, bytes: usize) {
        self.lane(path).rate.forgive_loss(bytes);
    }

    pub fn on_lost(&mut self, path: u8, bytes: usize) {
        let l = self.lane(path);
        l.stats.tpdus_lost += 1;
        l.rate.on_lost(bytes);
    }

    /// TPDU-body bytes sent over every path (first transmissions and retransmissions).
    pub fn bytes_sent(&self) -> u64 {
        self.list.iter().map(|l| l.stats.bytes_sent).sum()
    }

    pub fn stats(&self) -> Vec<LaneStats> {
        self.list.iter().map(|l| l.stats).collect()
    }

    /// The earliest send time of a first transmission on `path` acknowledged since the last
    /// call: `now` minus it is the path's longest acknowledgement latency (a round trip plus
    /// the time the peer held the acknowledgement to aggregate it), which its timeout must
    /// cover.
    pub fn take_latency(&mut self, path: usize) -> Option<Duration> {
        self.list.get_mut(path).and_then(|l| l.latency_from.take())
    }

    fn loss_time(&self, i: usize, t: &Timing) -> Duration {
        if self.list.len() == 1 {
            t.loss_time
        } else {
            (t.path)(i).loss_time
        }
    }

    /// The timeout of lane `i`: `rto` with one lane, the path's own (`path`) with several.
    fn rto(&self, i: usize, rto: Duration, path: &dyn Fn(usize) -> PathTiming) -> Duration {
        if self.list.len() == 1 {
            rto
        } else {
            path(i).rto
        }
    }

    /// The oldest current transmission of `path` (stale entries skipped, not removed).
    pub fn oldest(
        &self,
        path: usize,
        current: impl Fn(Transmission) -> bool,
    ) -> Option<Transmission> {
        self.list
            .get(path)?
            .flight
            .iter()
            .copied()
            .find(|t| current(*t))
    }

    /// When the oldest transmission overtaken by an acknowledged one on its path is declared
    /// lost by time, over all paths.
    #[inline]
    pub fn loss_deadline(
        &self,
        t: &Timing,
        current: impl Fn(Transmission) -> bool,
    ) -> Option<Duration> {
        // One path (the common case, asked on every turn of the engine): no iterator chain.
        if let [l] = self.list.as_slice() {
            let largest = l.largest_acked_tx?;
            let first = l.flight.iter().copied().find(|x| current(*x))?;
            return (first.tx < largest).then(|| first.at + t.loss_time + t.extra);
        }
        (0..self.list.len())
            .filter_map(|i| {
                let largest = self.list[i].largest_acked_tx?;
                let first = self.oldest(i, &current)?;
                (first.tx < largest).then(|| first.at + self.loss_time(i, t) + t.extra)
            })
            .min()
    }

    /// Packet- and time-threshold loss detection, per path, over the transmissions older than
    /// the path's newest acknowledged one. The sequence numbers declared lost are appended to
    /// `lost` (each path's count goes up).
    #[inline]
    pub fn detect(
        &mut self,
        now: Duration,
        t: &Timing,
        current: impl Fn(Transmission) -> bool,
        lost: &mut Vec<u64>,
    ) {
        let single = self.list.len() == 1;
        for i in 0..self.list.len() {
            let loss_time = self.loss_time(i, t);
            let l = &mut self.list[i];
            let Some(largest) = l.largest_acked_tx else {
                continue;
            };
            while let Some(x) = l.flight.front().copied() {
                if !current(x) {
                    l.flight.pop_front();
                    continue;
                }
                let by_count = single && t.count_rule && x.tx + REORDER_THRESHOLD <= largest;
                let by_time = x.tx < largest && x.at + loss_time + t.extra <= now;
                if !(by_count || by_time) {
                    break;
                }
                l.flight.pop_front();
                lost.push(x.seq);
            }
        }
    }

    /// Earliest retransmission-timeout deadline over the paths.
    #[inline]
    pub fn timeout_deadline(
        &self,
        rto: Duration,
        path: &dyn Fn(usize) -> PathTiming,
        current: impl Fn(Transmission) -> bool,
    ) -> Option<Duration> {
        if let [l] = self.list.as_slice() {
            return l.flight.iter().find(|x| current(**x)).map(|x| x.at + rto);
        }
        (0..self.list.len())
            .filter_map(|i| Some(self.oldest(i, &current)?.at + self.rto(i, rto, path)))
            .min()
    }

    /// Transmissions older than their path's timeout: appended to `lost`.
    #[inline]
    pub fn expired(
        &mut self,
        now: Duration,
        rto: Duration,
        path: &dyn Fn(usize) -> PathTiming,
        current: impl Fn(Transmission) -> bool,
        lost: &mut Vec<u64>,
    ) {
        for i in 0..self.list.len() {
            let rto = self.rto(i, rto, path);
            let l = &mut self.list[i];
            while let Some(x) = l.flight.front().copied() {
                if !current(x) {
                    l.flight.pop_front();
                    continue;
                }
                if x.at + rto > now {
                    break;
                }
                l.flight.pop_front();
                lost.push(x.seq);
            }
        }
    }

    /// Before the first round-trip sample: once the oldest current transmission over all
    /// paths is older than `rto`, it is taken out (the probe) — or with `lowest` the
    /// lowest-numbered current one — and every other transmission re-armed from `now` (see
    /// `Sender::on_timeout_before_sample`). With a discovered rate the first flight goes at
    /// the cap and may stand in a slow bottleneck's queue for tens of seconds: the oldest, as
    /// the probe goes to the back of the flight, resent it one TPDU per timeout (ASYN, then
    /// TPDU 1, 2, ...), and each needless copy, acknowledged, made the TPDUs sent before it
    /// look lost (2.4 kb/s: ten needless resends, a queue of 80 s). TCP's first timeouts
    /// resend the SYN, or the first unacknowledged segment. A fixed rate keeps the oldest
    /// (its figures in docs/results/ were measured so).
    pub fn expire_oldest(
        &mut self,
        now: Duration,
        rto: Duration,
        path: &dyn Fn(usize) -> PathTiming,
        lowest: bool,
        current: impl Fn(Transmission) -> bool,
    ) -> Option<u64> {
        for l in &mut self.list {
            while l.flight.front().is_some_and(|x| !current(*x)) {
                l.flight.pop_front();
            }
        }
        let due = self
            .list
            .iter()
            .enumerate()
            .filter_map(|(i, l)| Some(l.flight.front()?.at + self.rto(i, rto, path)))
            .min()?;
        if due > now {
            return None;
        }
        let in_flight = self
            .list
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.flight.iter().enumerate().map(move |(at, x)| (i, at, *x)));
        let (i, at, probe) = if lowest {
            in_flight.min_by_key(|(_, _, x)| x.seq)?
        } else {
            in_flight
                .filter(|(_, at, _)| *at == 0)
                .min_by_key(|(i, _, x)| x.at + self.rto(*i, rto, path))?
        };
        self.list[i].flight.remove(at);
        for l in &mut self.list {
            for x in l.flight.iter_mut() {
                x.at = now;
            }
        }
        Some(probe.seq)
    }

    /// Everything in flight on `path`, taken out (the path went down): appended to `lost`.
    pub fn drain(
        &mut self,
        path: usize,
        current: impl Fn(Transmission) -> bool,
        lost: &mut Vec<u64>,
    ) {
        if let Some(l) = self.list.get_mut(path) {
            lost.extend(l.flight.drain(..).filter(|x| current(*x)).map(|x| x.seq));
        }
    }

    /// Transmissions recorded, over the paths (diagnostics).
    pub fn in_flight(&self) -> usize {
        self.list.iter().map(|l| l.flight.len()).sum()
    }
}
