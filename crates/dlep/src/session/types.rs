//! What the router learns from the modem: metrics, addresses, destinations, the peer.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::codec::{Mac, QueueParameters};

/// Link metrics (RFC 8175 §13.12..§13.20, RFC 8757). `None` means the modem has not said (or
/// said something implausible, which is reported as a [`crate::Anomaly`] and otherwise ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Maximum Data Rate (Receive), bit/s.
    pub max_rate_rx: Option<u64>,
    /// Maximum Data Rate (Transmit), bit/s.
    pub max_rate_tx: Option<u64>,
    /// Current Data Rate (Receive), bit/s.
    pub current_rate_rx: Option<u64>,
    /// Current Data Rate (Transmit), bit/s: what the radio can send to this destination now.
    pub current_rate_tx: Option<u64>,
    /// Latency, microseconds.
    pub latency_us: Option<u64>,
    /// Latency Range (RFC 8757): (minimum, maximum) microseconds.
    pub latency_range_us: Option<(u64, u64)>,
    /// Resources, percent.
    pub resources: Option<u8>,
    /// Relative Link Quality (Receive), percent.
    pub rlq_rx: Option<u8>,
    /// Relative Link Quality (Transmit), percent.
    pub rlq_tx: Option<u8>,
    /// Maximum Transmission Unit, octets.
    pub mtu: Option<u16>,
}

impl Metrics {
    /// Every value `other` has replaces this one's.
    pub fn overlay(&mut self, other: &Metrics) {
        fn set<T: Copy>(a: &mut Option<T>, b: Option<T>) {
            if b.is_some() {
                *a = b;
            }
        }
        set(&mut self.max_rate_rx, other.max_rate_rx);
        set(&mut self.max_rate_tx, other.max_rate_tx);
        set(&mut self.current_rate_rx, other.current_rate_rx);
        set(&mut self.current_rate_tx, other.current_rate_tx);
        set(&mut self.latency_us, other.latency_us);
        set(&mut self.latency_range_us, other.latency_range_us);
        set(&mut self.resources, other.resources);
        set(&mut self.rlq_rx, other.rlq_rx);
        set(&mut self.rlq_tx, other.rlq_tx);
        set(&mut self.mtu, other.mtu);
    }

    pub fn is_empty(&self) -> bool {
        *self == Metrics::default()
    }

    /// Latency as a duration.
    pub fn latency(&self) -> Option<Duration> {
        self.latency_us.map(Duration::from_micros)
    }
}

/// The layer-3 addresses and attached subnets a modem says a destination (or itself) has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    pub ipv4: Vec<Ipv4Addr>,
    pub ipv6: Vec<Ipv6Addr>,
    /// (network, prefix length)
    pub ipv4_subnets: Vec<(Ipv4Addr, u8)>,
    pub ipv6_subnets: Vec<(Ipv6Addr, u8)>,
}

impl Addresses {
    pub fn is_empty(&self) -> bool {
        self.ipv4.is_empty()
            && self.ipv6.is_empty()
            && self.ipv4_subnets.is_empty()
            && self.ipv6_subnets.is_empty()
    }
}

/// A neighbour the modem reaches, keyed by its MAC address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub mac: Mac,
    pub addresses: Addresses,
    /// The modem-wide metrics of the session, overlaid with what the modem said for this
    /// destination: RFC 8175 has the Session Initialization Response's metrics stand for any
    /// destination that does not carry its own.
    pub metrics: Metrics,
    /// RFC 8651 queue indexes the modem paused for this destination (255: all traffic).
    pub paused: Vec<u8>,
}

/// What the modem said about itself when the session came up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    pub peer_type: String,
    /// The modem's heartbeat interval (zero if it sends none).
    pub heartbeat_interval: Duration,
    /// The extensions both sides support (the modem's Extensions Supported).
    pub extensions: Vec<u16>,
    /// Modem-wide metrics: the default for every destination.
    pub metrics: Metrics,
    pub addresses: Addresses,
    /// RFC 8651 queues, when the modem announced them.
    pub queues: Option<QueueParameters>,
}
