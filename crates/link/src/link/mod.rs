//! One direction of a link: FIFO serialisation, drop-tail queue, loss, outages, bit flips,
//! propagation delay with optional jitter, duplication, a Gilbert–Elliott channel with
//! per-state loss and BER, random outages and trace replay. Pure: time is passed in,
//! randomness comes from the seed, so the same seed and inputs give the same outputs bit for
//! bit.
//!
//! Random streams. The per-packet draws (burst loss, per-packet burst transitions, random
//! loss, bit flips, jitter, duplication) come from one PCG stream seeded exactly as before
//! these processes existed, so configurations that do not use them draw what they always
//! drew. The processes that run in time, independently of the traffic (the time-form
//! Gilbert–Elliott chain, random outages), have streams of their own: their schedules are a
//! function of the seed and of time only, never of which packets were sent.

//!
//! One job per module: this one the link itself (queue, serialisation, impairments, the
//! packets in flight), `outcome` what it reports, `schedule` the processes that run in time.

mod outcome;
mod schedule;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Geometric};
use rand_pcg::Pcg64Mcg;

use crate::config::{GilbertElliott, LinkConfig, Sojourn};
use crate::error::LinkError;
use crate::trace::TraceRow;
pub use outcome::{Delivery, DropReason, LinkStats, LossReason, Offer};
use schedule::{
    intervals, nanos, stream_rng, Alternating, Span, STREAM_BURST_TIME, STREAM_RANDOM_OUTAGE,
};

/// A packet propagating towards the receiver. Ordered for a min-heap on (arrival, seq).
#[derive(Debug)]
struct InFlight {
    arrival: Duration,
    seq: u64,
    tag: u64,
    flipped_bits: u32,
    packet: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest arrival first.
        (other.arrival, other.seq).cmp(&(self.arrival, self.seq))
    }
}

/// One direction of a link. See the crate docs and `docs/link-model.md`.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    rng: Pcg64Mcg,
    /// Sampler of the gap between flipped bits for the BER it was built for (the BER in
    /// force changes with the burst state and the trace; rebuilt only when it does).
    flip_gap: Option<(f64, Geometric)>,
    /// Per-packet Gilbert–Elliott transitions (p_gb, p_bg), for the two packet forms.
    ge_per_packet: Option<(f64, f64)>,
    /// The time-form Gilbert–Elliott chain (on = Bad).
    ge_timed: Option<Alternating>,
    /// The random outage schedule (on = down).
    random_outage: Option<Alternating>,
    /// Latest `now` seen by `send` (time is clamped to be monotonic).
    last_now: Duration,
    /// When the transmitter finishes the last accepted packet.
    tx_free: Duration,
    /// (transmission end, bytes) of packets queued or being serialised.
    backlog: VecDeque<(Duration, u64)>,
    backlog_bytes: u64,
    in_flight: BinaryHeap<InFlight>,
    next_seq: u64,
    /// Latest arrival scheduled, for jitter without reordering.
    last_arrival: Duration,
    ge_bad: bool,
    stats: LinkStats,
}

impl Link {
    /// Builds a link after validating `config`; `seed` fixes every random draw.
    pub fn new(config: LinkConfig, seed: u64) -> Result<Link, LinkError> {
        config.validate()?;
        let flip_gap = if config.ber > 0.0 {
            Some((
                config.ber,
                Geometric::new(config.ber)
                    .map_err(|e| LinkError::config("ber", format!("is {}: {e}", config.ber)))?,
            ))
        } else {
            None
        };
        let (ge_per_packet, ge_timed) = match config.burst.as_ref().map(GilbertElliott::sojourn) {
            None => (None, None),
            Some(Sojourn::PerPacket { p_gb, p_bg }) => (Some((p_gb, p_bg)), None),
            Some(Sojourn::Timed { good, bad }) => (
                None,
                Some(Alternating::new(
                    Span::Exp(nanos(good) as f64),
                    Span::Exp(nanos(bad) as f64),
                    stream_rng(seed, STREAM_BURST_TIME),
                )),
            ),
        };
        let random_outage = config.random_outage.map(|r| {
            Alternating::new(
                Span::Exp(nanos(r.mean_up) as f64),
                Span::Uniform(nanos(r.down_min), nanos(r.down_max)),
                stream_rng(r.seed.unwrap_or(seed), STREAM_RANDOM_OUTAGE),
            )
        });
        Ok(Link {
            // The original stream, seeded as it always was: old configs draw as before.
            rng: Pcg64Mcg::new(u128::from(seed) ^ 0x2545_f491_4f6c_dd1d_0000_0000_0000_0001),
            flip_gap,
            ge_per_packet,
            ge_timed,
            random_outage,
            config,
            last_now: Duration::ZERO,
            tx_free: Duration::ZERO,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            in_flight: BinaryHeap::new(),
            next_seq: 0,
            last_arrival: Duration::ZERO,
            ge_bad: false,
            stats: LinkStats::default(),
        })
    }

    /// Time the transmitter needs for a packet of `len` bytes:
    /// `ceil((len + per_packet_overhead) * 8 / rate)` rounded up to the nanosecond.
    /// This is at the configured `rate_bps`; with a trace, see [`Link::serialisation_time_at`].
    pub fn serialisation_time(&self, len: usize) -> Duration {
        self.serialisation_time_rate(len, self.config.rate_bps)
    }

    /// Serialisation time of a packet of `len` bytes whose transmission starts at `t`: at the
    /// rate in force at `t` (the trace's, else the configured one), for the whole packet.
    pub fn serialisation_time_at(&self, len: usize, t: Duration) -> Duration {
        self.serialisation_time_rate(len, self.rate_at(t))
    }

    /// The rate in force at `t`: the trace row's `rate_bps` if it gives one, else `rate_bps`.
    pub fn rate_at(&self, t: Duration) -> u64 {
        self.trace_row(t)
            .and_then(|r| r.rate_bps)
            .unwrap_or(self.config.rate_bps)
    }

    fn serialisation_time_rate(&self, len: usize, rate_bps: u64) -> Duration {
        let bits = (len as u128 + u128::from(self.config.per_packet_overhead)) * 8;
        let rate = u128::from(rate_bps.max(1));
        let ns = (bits * 1_000_000_000).div_ceil(rate);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    fn trace_row(&self, t: Duration) -> Option<&TraceRow> {
        self.config.trace.as_ref().and_then(|tr| tr.row_at(t))
    }

    /// Offers a packet at time `now`. Returns what happened (queued or dropped and why).
    pub fn send(&mut self, now: Duration, packet: Vec<u8>) -> Offer {
        self.send_tagged(now, packet, 0)
    }

    /// As [`Link::send`], with a tag returned by [`Link::recv_delivery`] (flow, client…).
    pub fn send_tagged(&mut self, now: Duration, mut packet: Vec<u8>, tag: u64) -> Offer {
        let now = now.max(self.last_now);
        self.last_now = now;
        let len = packet.len() as u64;
        self.stats.offered_packets += 1;
        self.stats.offered_bytes += len;
        // The steps run in a fixed order, and each draws from the one random stream in a
        // fixed order: a seed gives the same run whatever the packets are.
        if let Some(reason) = self.refused(now, len) {
            return Offer::Dropped(reason);
        }
        let (tx_start, tx_end, row) = self.serialise(now, len);
        let (lost, burst_bad) = self.loss(tx_start, tx_end, &row);
        if let Some(reason) = lost {
            return self.lose(reason, len);
        }
        let ber = self.ber_in_force(&row, burst_bad);
        let flipped_bits = match self.flip_bits(&mut packet, ber) {
            Some(n) => n,
            None => return self.lose(LossReason::HeaderCorrupt, len),
        };
        let arrival = self.arrival(tx_end, &row);
        // Step 6, duplication (only if there is room under max_in_flight for the copy).
        let duplicated = self.config.duplicate > 0.0
            && self.rng.gen_bool(self.config.duplicate)
            && self.in_flight.len() + 2 <= self.config.max_in_flight as usize;
        if duplicated {
            self.stats.duplicated += 1;
            self.push(arrival, tag, flipped_bits, packet.clone());
        }
        self.push(arrival, tag, flipped_bits, packet);
        Offer::Queued {
            arrival,
            flipped_bits,
            duplicated,
        }
    }

    /// Step 1, the drop-tail queue, occupancy measured at `now`: why a packet of `len` bytes
    /// is refused, if it is (counted).
    fn refused(&mut self, now: Duration, len: u64) -> Option<DropReason> {
        self.drain_backlog(now);
        if self.backlog.len() >= self.config.queue_packets as usize
            || self.backlog_bytes + len > self.config.queue_bytes
        {
            self.stats.dropped_queue_packets += 1;
            self.stats.dropped_queue_bytes += len;
            return Some(DropReason::QueueFull);
        }
        if self.in_flight.len() >= self.config.max_in_flight as usize {
            self.stats.dropped_in_flight_limit += 1;
            return Some(DropReason::InFlightLimit);
        }
        None
    }

    /// Step 2, FIFO serialisation: when the packet's transmission starts and ends, and the
    /// trace row in force at its start, which gives the rate, delay, BER and loss for the
    /// whole packet.
    fn serialise(&mut self, now: Duration, len: u64) -> (Duration, Duration, TraceRow) {
        let tx_start = now.max(self.tx_free);
        self.stats.queue_delay.record(tx_start - now);
        let row = self.trace_row(tx_start).copied().unwrap_or_default();
        let rate = row.rate_bps.unwrap_or(self.config.rate_bps);
        let tx_end = tx_start + self.serialisation_time_rate(len as usize, rate);
        self.tx_free = tx_end;
        self.backlog.push_back((tx_end, len));
        self.backlog_bytes += len;
        (tx_start, tx_end, row)
    }

    /// Step 3, losses, in a fixed order (outage, burst, random): why the packet is lost, if
    /// it is, and the burst chain's state (bad or not) when there is one. The chain advances
    /// for every transmitted packet so that its timing does not depend on the other loss
    /// processes.
    fn loss(
        &mut self,
        tx_start: Duration,
        tx_end: Duration,
        row: &TraceRow,
    ) -> (Option<LossReason>, Option<bool>) {
        let (burst_lost, burst_bad) = self.burst_step(tx_start);
        let reason = if self.overlaps_outage_advancing(tx_start, tx_end) {
            Some(LossReason::Outage)
        } else if burst_lost {
            Some(LossReason::Burst)
        } else {
            let loss = row.loss.unwrap_or(self.config.loss);
            if loss > 0.0 && self.rng.gen_bool(loss) {
                Some(LossReason::Random)
            } else {
                None
            }
        };
        (reason, burst_bad)
    }

    /// Step 4, the BER bits are flipped at (over virtual header + packet): the burst state's
    /// own BER if it has one, else the trace's, else the configured one.
    fn ber_in_force(&self, row: &TraceRow, burst_bad: Option<bool>) -> f64 {
        let base_ber = row.ber.unwrap_or(self.config.ber);
        match (self.config.burst, burst_bad) {
            (Some(ge), Some(true)) => ge.ber_bad.unwrap_or(base_ber),
            (Some(ge), Some(false)) => ge.ber_good.unwrap_or(base_ber),
            _ => base_ber,
        }
    }

    /// Step 5, the arrival time: end of transmission plus propagation delay and jitter, never
    /// before the last arrival unless reordering is allowed.
    fn arrival(&mut self, tx_end: Duration, row: &TraceRow) -> Duration {
        let mut arrival = tx_end + row.delay.unwrap_or(self.config.delay);
        if !self.config.jitter.is_zero() {
            let j = self.rng.gen_range(0..=self.config.jitter.as_nanos() as u64);
            arrival += Duration::from_nanos(j);
        }
        if !self.config.allow_reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);
        arrival
    }

    /// Next packet whose arrival time is ≤ `now` (impairments already applied), in
    /// arrival order (ties in send order).
    pub fn recv(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.recv_delivery(now).map(|d| d.packet)
    }

    /// As [`Link::recv`], with arrival time, tag and number of flipped bits.
    pub fn recv_delivery(&mut self, now: Duration) -> Option<Delivery> {
        if self.in_flight.peek()?.arrival > now {
            return None;
        }
        let p = self.in_flight.pop()?;
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += p.packet.len() as u64;
        if p.flipped_bits > 0 {
            self.stats.corrupted_packets += 1;
            self.stats.bits_flipped += u64::from(p.flipped_bits);
        }
        Some(Delivery {
            arrival: p.arrival,
            tag: p.tag,
            flipped_bits: p.flipped_bits,
            packet: p.packet,
        })
    }

    /// Earliest time at which `recv` may return something (None if nothing in flight).
    pub fn next_arrival(&self) -> Option<Duration> {
        self.in_flight.peek().map(|p| p.arrival)
    }

    /// Counters since construction.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The validated configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// False during an outage (scheduled, periodic or random). A trace row with `loss = 1`
    /// loses every packet but is not an outage.
    pub fn is_up(&self, now: Duration) -> bool {
        !self.overlaps_outage(now, now)
    }

    /// The random outages (`[start, end)`, relative to the epoch) that start before `until`,
    /// from the epoch on. The schedule depends only on the seed and on time, not on the
    /// traffic, so this is the schedule the link applies, whenever it is asked. Empty without
    /// `random_outage`. The list is built for the call (the link itself keeps only the
    /// current period); its length is about `until / (mean_up + mean down)`.
    pub fn random_outage_intervals(&self, until: Duration) -> Vec<(Duration, Duration)> {
        intervals(self.random_outage.as_ref(), until)
    }

    /// Every down interval `[start, end)` that starts before `until`: scheduled, periodic
    /// and random outages together, sorted, with overlapping or touching ones merged.
    pub fn outage_intervals(&self, until: Duration) -> Vec<(Duration, Duration)> {
        let mut all: Vec<(Duration, Duration)> = self
            .config
            .outages
            .iter()
            .filter(|o| o.start < until)
            .map(|o| (o.start, o.start + o.duration))
            .collect();
        if let Some(p) = &self.config.periodic_outage {
            let mut start = p.offset;
            while start < until {
                all.push((start, start + p.duration));
                match start.checked_add(p.period) {
                    Some(next) => start = next,
                    None => break,
                }
            }
        }
        all.extend(self.random_outage_intervals(until));
        merge_intervals(all)
    }

    /// The Bad periods `[start, end)` of a time-form Gilbert–Elliott chain that start before
    /// `until`, from the epoch on (a function of the seed and time only, like
    /// [`Link::random_outage_intervals`]). Empty for the per-packet forms or without `burst`.
    pub fn burst_bad_intervals(&self, until: Duration) -> Vec<(Duration, Duration)> {
        intervals(self.ge_timed.as_ref(), until)
    }

    /// Packets accepted and not yet returned by `recv`.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Time at which the transmitter becomes idle (all accepted packets serialised).
    pub fn busy_until(&self) -> Duration {
        self.tx_free
    }

    fn drain_backlog(&mut self, now: Duration) {
        while let Some(&(end, bytes)) = self.backlog.front() {
            if end > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
    }

    fn lose(&mut self, reason: LossReason, len: u64) -> Offer {
        let counter = match reason {
            LossReason::Outage => &mut self.stats.lost_outage,
            LossReason::Burst => &mut self.stats.lost_burst,
            LossReason::Random => &mut self.stats.lost_random,
            LossReason::HeaderCorrupt => &mut self.stats.lost_header_corrupt,
        };
        *counter += 1;
        self.stats.lost_bytes += len;
        Offer::Lost(reason)
    }

    fn push(&mut self, arrival: Duration, tag: u64, flipped_bits: u32, packet: Vec<u8>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.push(InFlight {
            arrival,
            seq,
            tag,
            flipped_bits,
            packet,
        });
    }

    /// Decides the burst loss of a packet whose transmission starts at `tx_start`; returns
    /// (lost, state the packet saw: `Some(true)` = Bad, `None` without a burst model).
    ///
    /// Per-packet forms: the packet sees the current state, its loss is drawn, then the
    /// chain moves (both draws from the main stream, as they always were). Time form: the
    /// state at `tx_start` of the continuous-time chain (its own stream); only the loss is
    /// drawn from the main stream.
    fn burst_step(&mut self, tx_start: Duration) -> (bool, Option<bool>) {
        let Some(ge) = self.config.burst else {
            return (false, None);
        };
        if let Some(chain) = &mut self.ge_timed {
            let t = nanos(tx_start);
            chain.advance(t);
            self.ge_bad = chain.cur.0 <= t;
        }
        let bad = self.ge_bad;
        self.stats.burst_bad_packets += u64::from(bad);
        let p_loss = if bad { ge.loss_bad } else { ge.loss_good };
        let lost = p_loss > 0.0 && self.rng.gen_bool(p_loss);
        if let Some((p_gb, p_bg)) = self.ge_per_packet {
            let p_switch = if bad { p_bg } else { p_gb };
            if p_switch > 0.0 && self.rng.gen_bool(p_switch) {
                self.ge_bad = !self.ge_bad;
            }
        }
        (lost, Some(bad))
    }

    /// Flips bits in place at `ber`; `None` if a flip hit the virtual header (packet must be
    /// lost).
    ///
    /// The number of flips is exactly Binomial(8·(H + n), ber): the gaps between flipped
    /// bits are drawn from a geometric distribution (rand_distr's exact sampler), so the
    /// cost is one draw per flip plus one, not one per bit.
    fn flip_bits(&mut self, packet: &mut [u8], ber: f64) -> Option<u32> {
        if ber <= 0.0 {
            return Some(0);
        }
        let gap = match self.flip_gap {
            Some((b, g)) if b == ber => g,
            // `ber` was validated to be in (0, 1), where Geometric::new cannot fail; a link
            // that could not build the sampler would flip nothing rather than panic.
            _ => match Geometric::new(ber) {
                Ok(g) => {
                    self.flip_gap = Some((ber, g));
                    g
                }
                Err(_) => return Some(0),
            },
        };
        let header_bits = u64::from(self.config.protected_prefix) * 8;
        let total_bits = header_bits + packet.len() as u64 * 8;
        let mut flips = 0u32;
        let mut pos = gap.sample(&mut self.rng);
        while pos < total_bits {
            if pos < header_bits {
                return None;
            }
            let bit = pos - header_bits;
            packet[(bit / 8) as usize] ^= 0x80 >> (bit % 8);
            flips += 1;
            pos = pos
                .saturating_add(1)
                .saturating_add(gap.sample(&mut self.rng));
        }
        Some(flips)
    }

    /// As [`Link::overlaps_outage`], moving the random outage cursor to `a` first (`send`'s
    /// transmission starts never go backwards), and counting the outages begun.
    fn overlaps_outage_advancing(&mut self, a: Duration, b: Duration) -> bool {
        if let Some(r) = &mut self.random_outage {
            let t = nanos(a);
            r.advance(t);
            self.stats.random_outages = r.index + u64::from(r.cur.0 <= t);
        }
        self.overlaps_outage(a, b)
    }

    /// True if the closed interval `[a, b]` meets an outage `[s, s + d)`. A transmission
    /// ending exactly when an outage starts survives; a zero-length one at `a` is lost iff
    /// `a` is inside an outage.
    fn overlaps_outage(&self, a: Duration, b: Duration) -> bool {
        let meets = |s: Duration, e: Duration| a < e && (b > s || (a == b && a >= s));
        if let Some(r) = &self.random_outage {
            // Periods are in increasing time: the first one ending after `a` is the only one
            // that can meet [a, b] if it does not start after b.
            let (s, e) = r.period_ending_after(nanos(a));
            if meets(Duration::from_nanos(s), Duration::from_nanos(e)) {
                return true;
            }
        }
        if self
            .config
            .outages
            .iter()
            .any(|o| meets(o.start, o.start + o.duration))
        {
            return true;
        }
        if let Some(p) = &self.config.periodic_outage {
            let period = p.period.as_nanos();
            // Index of the last outage starting at or before `a` (or the first one): only
            // it and the next one can meet [a, b] first, since duration < period.
            let k = a.as_nanos().saturating_sub(p.offset.as_nanos()) / period;
            for k in [k, k + 1] {
                let start_ns = p.offset.as_nanos() + k * period;
                let Ok(start_ns) = u64::try_from(start_ns) else {
                    continue;
                };
                let s = Duration::from_nanos(start_ns);
                if meets(s, s + p.duration) {
                    return true;
                }
            }
        }
        false
    }
}

/// `[start, end)` intervals sorted, with overlapping or touching ones merged.
pub(crate) fn merge_intervals(mut all: Vec<(Duration, Duration)>) -> Vec<(Duration, Duration)> {
    all.sort();
    let mut merged: Vec<(Duration, Duration)> = Vec::with_capacity(all.len());
    for (s, e) in all {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}
