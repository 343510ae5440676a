//! What a link reports: the fate of an offered packet, a delivery, and the statistics.

use std::time::Duration;

use serde::Serialize;

use crate::histogram::DelayHistogram;

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
    /// Packets refused by the drop-tail queue (tail drops: the queue was full; never counted
    /// among the losses below).
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
    /// Transmitted packets that found the Gilbert–Elliott chain in Bad (lost or not).
    pub burst_bad_packets: u64,
    /// Random outages (down periods) begun by the start of the latest transmission.
    pub random_outages: u64,
    /// Per packet accepted by the queue: the time from its offer (`send`) to the start of its
    /// serialisation (`tx_start − now`; 0 when the transmitter was idle). Lost packets count
    /// too: they waited before being put on the air. Serialises as `{n, p50, p99, max, mean}`
    /// in seconds. For a [`crate::Path`], the bottleneck hop's.
    pub queue_delay: DelayHistogram,
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
