use std::time::Duration;

use crate::codec::ids::extension;

/// The router side's settings. `Default` gives values suited to a radio on the same LAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our Heartbeat Interval: sent in Session Initialization, and how often we send
    /// Heartbeats. RFC 8175 requires a non-zero interval; it is sent in whole milliseconds.
    pub heartbeat_interval: Duration,
    /// Heartbeat intervals of the modem's without any message before the session is declared
    /// dead. RFC 8175 (Heartbeat message) has a participant allow two.
    pub missed_heartbeats: u32,
    /// How long to wait for the Session Initialization Response.
    pub init_timeout: Duration,
    /// How long to wait for the Session Termination Response after sending Termination.
    pub termination_timeout: Duration,
    /// Peer Type description sent to the modem.
    pub peer_type: String,
    /// Extensions offered in Extensions Supported. The defaults are RFC 8651 pause, RFC 8757
    /// latency range, and LL-DLEP's private id for the latency-range draft (so that it sends
    /// its latency range, which this side reads like RFC 8757's).
    pub extensions: Vec<u16>,
    /// Destinations tracked at most; a Destination Up beyond is refused (Request Denied).
    pub max_destinations: usize,
    /// Addresses (of each kind) kept per destination.
    pub max_addresses: usize,
    /// Data rates above this (bit/s) are implausible and ignored, as is a rate of 0.
    pub max_rate_bps: u64,
    /// Latencies above this are implausible and ignored.
    pub max_latency: Duration,
    /// Events held for the consumer before updates coalesce (see [`crate::Event`]).
    pub event_capacity: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_interval: Duration::from_secs(5),
            missed_heartbeats: 2,
            init_timeout: Duration::from_secs(5),
            termination_timeout: Duration::from_secs(1),
            peer_type: "AeroTP router".to_string(),
            extensions: vec![
                extension::PAUSE,
                extension::LATENCY_RANGE,
                extension::LL_DLEP_LATENCY_RANGE,
            ],
            max_destinations: 256,
            max_addresses: 32,
            // 1 Tb/s: well above any radio, well below 2^64-1.
            max_rate_bps: 1_000_000_000_000,
            max_latency: Duration::from_secs(60),
            event_capacity: 4096,
        }
    }
}

impl Config {
    /// The heartbeat interval in the 32-bit milliseconds of the data item, at least 1 ms.
    pub(crate) fn heartbeat_ms(&self) -> u32 {
        u32::try_from(self.heartbeat_interval.as_millis())
            .unwrap_or(u32::MAX)
            .max(1)
    }
}
