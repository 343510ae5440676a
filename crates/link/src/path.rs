//! A chain of links (hop i's receiver feeds hop i+1's transmit queue), e.g. the papers'
//! 10 Gb/s LAN – 5 Mb/s lossy – 10 Gb/s LAN topology with a bounded router queue per hop.

use std::time::Duration;

use crate::config::LinkConfig;
use crate::error::LinkError;
use crate::link::{Delivery, Link, LinkStats, Offer};

/// A chain of [`Link`]s with the same send/recv/next_arrival API as one link.
///
/// Each hop's own bounded drop-tail queue is the router queue in front of it. A packet
/// arriving at the end of hop i at time t is offered to hop i+1 at time t exactly.
/// Forwarding between hops happens lazily, during `send`/`recv` calls, for every
/// internal arrival up to the `now` passed in; times passed in must not go backwards.
#[derive(Debug)]
pub struct Path {
    hops: Vec<Link>,
}

/// Seed of hop `i`: output i + 1 of a SplitMix64 generator seeded with the path seed, so
/// that hops draw independent streams.
fn hop_seed(seed: u64, i: usize) -> u64 {
    crate::seed::splitmix64(seed, i as u64 + 1)
}

impl Path {
    /// Builds a path from hop configs (first = nearest to the sender).
    pub fn new(hops: Vec<LinkConfig>, seed: u64) -> Result<Path, LinkError> {
        if hops.is_empty() {
            return Err(LinkError::EmptyPath);
        }
        let hops = hops
            .into_iter()
            .enumerate()
            .map(|(i, c)| Link::new(c, hop_seed(seed, i)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Path { hops })
    }

    /// The hop configs of the papers' topology: 10 Gb/s LAN – `lossy` – 10 Gb/s LAN.
    /// The LAN hops are `LinkConfig::default()` at 10 Gb/s with zero delay (the papers give
    /// none) and no impairment; their default queues are the routers' queues.
    pub fn papers_hops(lossy: LinkConfig) -> Vec<LinkConfig> {
        let lan = LinkConfig {
            rate_bps: 10_000_000_000,
            delay: Duration::ZERO,
            ..LinkConfig::default()
        };
        vec![lan.clone(), lossy, lan]
    }

    /// The papers' topology, see [`Path::papers_hops`].
    pub fn papers(lossy: LinkConfig, seed: u64) -> Result<Path, LinkError> {
        Path::new(Path::papers_hops(lossy), seed)
    }

    /// Offers a packet to the first hop at `now`; the result is the first hop's.
    pub fn send(&mut self, now: Duration, packet: Vec<u8>) -> Offer {
        self.send_tagged(now, packet, 0)
    }

    /// As [`Path::send`] with a tag carried to [`Path::recv_delivery`].
    pub fn send_tagged(&mut self, now: Duration, packet: Vec<u8>, tag: u64) -> Offer {
        self.forward(now);
        self.hops[0].send_tagged(now, packet, tag)
    }

    /// Next packet out of the last hop with arrival ≤ `now`.
    pub fn recv(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.recv_delivery(now).map(|d| d.packet)
    }

    /// As [`Path::recv`], with metadata (`flipped_bits` counts the last hop only).
    pub fn recv_delivery(&mut self, now: Duration) -> Option<Delivery> {
        self.forward(now);
        self.hops.last_mut()?.recv_delivery(now)
    }

    /// Earliest time at which something happens on the path (None if it is empty).
    ///
    /// This is a lower bound: it may be an arrival at an intermediate hop, in which case
    /// `recv` at that time forwards the packet internally and returns `None`; call
    /// `next_arrival` again afterwards.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.hops.iter().filter_map(Link::next_arrival).min()
    }

    /// True if every hop is up at `now`.
    pub fn is_up(&self, now: Duration) -> bool {
        self.hops.iter().all(|h| h.is_up(now))
    }

    /// Every interval `[start, end)` some hop is down, that starts before `until` (each
    /// hop's [`Link::outage_intervals`], merged where they overlap or touch).
    pub fn outage_intervals(&self, until: Duration) -> Vec<(Duration, Duration)> {
        crate::link::merge_intervals(
            self.hops
                .iter()
                .flat_map(|l| l.outage_intervals(until))
                .collect(),
        )
    }

    /// The hops, first = nearest to the sender.
    pub fn hops(&self) -> &[Link] {
        &self.hops
    }

    /// The bottleneck: the hop with the lowest rate (with a trace, the lowest of its
    /// configured rate and its rows' rates), the first of equals. Its queue is the one that
    /// fills (the papers' topology: the impaired link between two 10 Gb/s LAN hops).
    pub fn bottleneck(&self) -> usize {
        let rate = |l: &Link| {
            let c = l.config();
            c.trace
                .as_ref()
                .and_then(|t| t.min_rate_bps())
                .map_or(c.rate_bps, |r| r.min(c.rate_bps))
        };
        (0..self.hops.len())
            .min_by_key(|&i| rate(&self.hops[i]))
            .unwrap_or(0)
    }

    /// End-to-end summary: offered from the first hop, delivered from the last hop, every
    /// drop/loss/duplicate/flip counter summed over hops (a packet corrupted on two hops
    /// counts twice in `corrupted_packets`; per-hop figures are in `hops()`), and the
    /// queueing delay of the [`Path::bottleneck`] hop (delays of different hops are not
    /// pooled: a LAN hop's zeros would hide the bottleneck's queue).
    pub fn stats(&self) -> LinkStats {
        let first = self.hops[0].stats();
        let last = self.hops[self.hops.len() - 1].stats();
        let mut s = LinkStats {
            offered_packets: first.offered_packets,
            offered_bytes: first.offered_bytes,
            delivered_packets: last.delivered_packets,
            delivered_bytes: last.delivered_bytes,
            queue_delay: self.hops[self.bottleneck()].stats().queue_delay.clone(),
            ..LinkStats::default()
        };
        for h in &self.hops {
            let h = h.stats();
            s.dropped_queue_packets += h.dropped_queue_packets;
            s.dropped_queue_bytes += h.dropped_queue_bytes;
            s.dropped_in_flight_limit += h.dropped_in_flight_limit;
            s.lost_random += h.lost_random;
            s.lost_burst += h.lost_burst;
            s.lost_outage += h.lost_outage;
            s.lost_header_corrupt += h.lost_header_corrupt;
            s.lost_bytes += h.lost_bytes;
            s.duplicated += h.duplicated;
            s.corrupted_packets += h.corrupted_packets;
            s.bits_flipped += h.bits_flipped;
            s.burst_bad_packets += h.burst_bad_packets;
            s.random_outages += h.random_outages;
        }
        s
    }

    /// Moves every internal arrival with time ≤ `now` to the next hop, at its arrival time.
    /// Hop by hop in order: all packets entering hop i+1 up to `now` are known once hop i
    /// has been drained, and they are offered in arrival order.
    fn forward(&mut self, now: Duration) {
        for i in 0..self.hops.len() - 1 {
            let (left, right) = self.hops.split_at_mut(i + 1);
            let (from, to) = (&mut left[i], &mut right[0]);
            while let Some(d) = from.recv_delivery(now) {
                to.send_tagged(d.arrival, d.packet, d.tag);
            }
        }
    }
}
