//! One direction of a link: FIFO serialisation, drop-tail queue, loss, outages, bit flips,
//! propagation delay with optional jitter, duplication. Pure: time is passed in, randomness
//! comes from the seed, so the same seed and inputs give the same outputs bit for bit.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Geometric};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::config::LinkConfig;
use crate::error::LinkError;

/// Why an offered packet was refused before it was put on the air.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Drop-tail: the transmit queue (bytes or packets limit) was full.
    QueueFull,
    /// `max_in_flight` packets were already accepted and not yet collected by `recv`.
    InFlightLimit,
}

/// Why a packet that was transmitted (and occupied the transmitter) will not arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossReason {
    /// Its transmission overlapped an outage.
    Outage,
    /// Lost by the Gilbert–Elliott burst model.
    Burst,
    /// Lost by the independent random loss.
    Random,
    /// A bit flip landed in the virtual (protected) header.
    HeaderCorrupt,
}

/// What happened to a packet offered with [`Link::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Accepted; it will be returned by `recv` at `arrival` (plus a copy if `duplicated`).
    Queued {
        /// Arrival time at the receiver.
        arrival: Duration,
        /// Bits flipped in the packet (0 = intact).
        flipped_bits: u32,
        /// A second identical copy arrives at the same time.
        duplicated: bool,
    },
    /// Refused at the queue; the transmitter was not used.
    Dropped(DropReason),
    /// Transmitted (the transmitter was busy for its serialisation time) but lost.
    Lost(LossReason),
}

impl Offer {
    /// True if the packet will be delivered.
    pub fn is_queued(&self) -> bool {
        matches!(self, Offer::Queued { .. })
    }
}

/// A packet returned by [`Link::recv_delivery`], with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Arrival time at the receiver (≤ the `now` passed to `recv_delivery`).
    pub arrival: Duration,
    /// The tag given to `send_tagged` (0 for `send`), e.g. a flow or client id.
    pub tag: u64,
    /// Bits flipped in this packet.
    pub flipped_bits: u32,
    /// The packet, impairments applied.
    pub packet: Vec<u8>,
}

/// Counters of one link direction. Packets and bytes are packet lengths as offered
/// (without `per_packet_overhead` or `protected_prefix`).
///
/// Every offered packet ends in exactly one of: dropped (`dropped_queue_packets`,
/// `dropped_in_flight_limit`), lost (`lost_*`), delivered, or still in flight. Duplicates
/// add to `delivered_*` and are counted in `duplicated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// Packets offered to `send`.
    pub offered_packets: u64,
    /// Bytes offered to `send`.
    pub offered_bytes: u64,
    /// Packets returned by `recv` (including duplicates).
    pub delivered_packets: u64,
    /// Bytes returned by `recv` (including duplicates).
    pub delivered_bytes: u64,
    /// Packets refused by the drop-tail queue.
    pub dropped_queue_packets: u64,
    /// Bytes refused by the drop-tail queue.
    pub dropped_queue_bytes: u64,
    /// Packets refused because `max_in_flight` was reached (driver not collecting).
    pub dropped_in_flight_limit: u64,
    /// Packets lost by independent random loss.
    pub lost_random: u64,
    /// Packets lost by the Gilbert–Elliott burst model.
    pub lost_burst: u64,
    /// Packets lost because their transmission overlapped an outage.
    pub lost_outage: u64,
    /// Packets dropped because a bit flip hit the virtual header.
    pub lost_header_corrupt: u64,
    /// Bytes of all lost packets.
    pub lost_bytes: u64,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// Delivered packets with at least one flipped bit.
    pub corrupted_packets: u64,
    /// Bits flipped in delivered packets.
    pub bits_flipped: u64,
}

impl LinkStats {
    /// All packets lost after transmission (random + burst + outage + header-corrupt).
    pub fn lost_packets(&self) -> u64 {
        self.lost_random + self.lost_burst + self.lost_outage + self.lost_header_corrupt
    }

    /// All packets refused before transmission.
    pub fn dropped_packets(&self) -> u64 {
        self.dropped_queue_packets + self.dropped_in_flight_limit
    }
}

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
    /// Gap between flipped bits, `None` when `ber == 0`.
    flip_gap: Option<Geometric>,
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
            Some(
                Geometric::new(config.ber)
                    .map_err(|e| LinkError::config("ber", format!("is {}: {e}", config.ber)))?,
            )
        } else {
            None
        };
        Ok(Link {
            rng: Pcg64Mcg::new(u128::from(seed) ^ 0x2545_f491_4f6c_dd1d_0000_0000_0000_0001),
            flip_gap,
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
    pub fn serialisation_time(&self, len: usize) -> Duration {
        let bits = (len as u128 + u128::from(self.config.per_packet_overhead)) * 8;
        let rate = u128::from(self.config.rate_bps);
        let ns = (bits * 1_000_000_000).div_ceil(rate);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
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

        // 1. Drop-tail queue, occupancy measured at `now`.
        self.drain_backlog(now);
        if self.backlog.len() >= self.config.queue_packets as usize
            || self.backlog_bytes + len > self.config.queue_bytes
        {
            self.stats.dropped_queue_packets += 1;
            self.stats.dropped_queue_bytes += len;
            return Offer::Dropped(DropReason::QueueFull);
        }
        if self.in_flight.len() >= self.config.max_in_flight as usize {
            self.stats.dropped_in_flight_limit += 1;
            return Offer::Dropped(DropReason::InFlightLimit);
        }

        // 2. FIFO serialisation.
        let tx_start = now.max(self.tx_free);
        let tx_end = tx_start + self.serialisation_time(packet.len());
        self.tx_free = tx_end;
        self.backlog.push_back((tx_end, len));
        self.backlog_bytes += len;

        // 3. Losses, in a fixed order. The burst chain advances for every transmitted
        // packet so that its timing does not depend on the other loss processes.
        let burst_lost = self.burst_step();
        let reason = if self.overlaps_outage(tx_start, tx_end) {
            Some(LossReason::Outage)
        } else if burst_lost {
            Some(LossReason::Burst)
        } else if self.config.loss > 0.0 && self.rng.gen_bool(self.config.loss) {
            Some(LossReason::Random)
        } else {
            None
        };
        if let Some(reason) = reason {
            return self.lose(reason, len);
        }

        // 4. Bit flips over virtual header + packet.
        let flipped_bits = match self.flip_bits(&mut packet) {
            Some(n) => n,
            None => return self.lose(LossReason::HeaderCorrupt, len),
        };

        // 5. Propagation delay and jitter.
        let mut arrival = tx_end + self.config.delay;
        if !self.config.jitter.is_zero() {
            let j = self.rng.gen_range(0..=self.config.jitter.as_nanos() as u64);
            arrival += Duration::from_nanos(j);
        }
        if !self.config.allow_reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);

        // 6. Duplication (only if there is room under max_in_flight for the copy).
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

    /// False during an outage (scheduled or periodic).
    pub fn is_up(&self, now: Duration) -> bool {
        !self.overlaps_outage(now, now)
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

    /// Decides the burst loss for this packet, then advances the Gilbert–Elliott chain.
    fn burst_step(&mut self) -> bool {
        let Some(ge) = self.config.burst else {
            return false;
        };
        let p_loss = if self.ge_bad {
            ge.loss_bad
        } else {
            ge.loss_good
        };
        let lost = p_loss > 0.0 && self.rng.gen_bool(p_loss);
        let p_switch = if self.ge_bad { ge.p_bg } else { ge.p_gb };
        if p_switch > 0.0 && self.rng.gen_bool(p_switch) {
            self.ge_bad = !self.ge_bad;
        }
        lost
    }

    /// Flips bits in place; `None` if a flip hit the virtual header (packet must be lost).
    ///
    /// The number of flips is exactly Binomial(8·(H + n), ber): the gaps between flipped
    /// bits are drawn from a geometric distribution (rand_distr's exact sampler), so the
    /// cost is one draw per flip plus one, not one per bit.
    fn flip_bits(&mut self, packet: &mut [u8]) -> Option<u32> {
        let Some(gap) = self.flip_gap else {
            return Some(0);
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

    /// True if the closed interval `[a, b]` meets an outage `[s, s + d)`. A transmission
    /// ending exactly when an outage starts survives; a zero-length one at `a` is lost iff
    /// `a` is inside an outage.
    fn overlaps_outage(&self, a: Duration, b: Duration) -> bool {
        let meets = |s: Duration, e: Duration| a < e && (b > s || (a == b && a >= s));
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
