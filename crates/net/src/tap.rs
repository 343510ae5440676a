//! A hook that sees every datagram a driver sends or receives (captures: `--pcap`).
//!
//! The runtime knows nothing of file formats: it hands each datagram, with a wall-clock
//! timestamp and the local and remote addresses, to a [`Tap`]. `aerotp-capture` implements
//! it with a writer thread behind a queue bounded in bytes, so a slow disk drops capture
//! records, never data. The relay of `aerotp-emu` uses the same trait.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Interface of a datagram the endpoint handed to its socket.
pub const TAP_SENT: u32 = 0;
/// Interface of a datagram the endpoint read from its socket.
pub const TAP_RECEIVED: u32 = 1;
/// Interface names of an endpoint capture, indexed by [`TAP_SENT`] and [`TAP_RECEIVED`].
pub const ENDPOINT_INTERFACES: [&str; 2] = ["sent", "received"];

/// Receives a copy of datagrams. Called on the datapath (the endpoint's driver task, with the
/// engine locked; the relay's task): an implementation must return at once — queue, never
/// write or wait.
pub trait Tap: Send + Sync {
    /// One datagram on interface `iface`, from `src` to `dst`, at `at` since the Unix epoch.
    fn datagram(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, bytes: &[u8]);

    /// One datagram sent with a DSCP mark: `(src, dst, tos)`, `tos` the IP header's TOS /
    /// traffic-class byte it left with (`crate::marks`). A tap that has no use for the mark
    /// keeps this default, which forgets it.
    fn marked_datagram(
        &self,
        iface: u32,
        at: Duration,
        (src, dst, _tos): (SocketAddr, SocketAddr, u8),
        bytes: &[u8],
    ) {
        self.datagram(iface, at, src, dst, bytes);
    }
}

/// Receives the engine's view of each connection after each step of the driver (`--qlog`):
/// its counters and state, read, never changed. Same rule as [`Tap`]: called with the engine
/// locked, so an implementation queues and returns at once.
pub trait EngineTap: Send + Sync {
    /// Connection `conn` (its handle number) at `at` since the Unix epoch.
    fn connection(
        &self,
        at: Duration,
        conn: u64,
        stats: &aerotp_proto::ConnectionStats,
        state: aerotp_proto::State,
    );

    /// A change a radio made to a path, as the engine applied it
    /// (`aerotp_proto::Endpoint::poll_radio_change`), at `at` since the Unix epoch: the
    /// engine's time of the change on the wall clock, not the time the driver took it. A tap
    /// that has no use for radios keeps this default, which forgets it.
    fn radio(&self, at: Duration, change: &aerotp_proto::RadioChange) {
        let _ = (at, change);
    }
}

/// A shareable tap (cloned into relay configurations, kept by endpoints).
#[derive(Clone)]
pub struct TapHandle(pub Arc<dyn Tap>);

impl std::fmt::Debug for TapHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TapHandle")
    }
}

impl TapHandle {
    pub fn new(tap: Arc<dyn Tap>) -> TapHandle {
        TapHandle(tap)
    }

    pub fn datagram(
        &self,
        iface: u32,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) {
        self.0.datagram(iface, at, src, dst, bytes);
    }

    /// A datagram sent with TOS byte `addrs.2` ([`Tap::marked_datagram`]).
    pub fn marked_datagram(
        &self,
        iface: u32,
        at: Duration,
        addrs: (SocketAddr, SocketAddr, u8),
        bytes: &[u8],
    ) {
        self.0.marked_datagram(iface, at, addrs, bytes);
    }
}

/// Time since the Unix epoch (the timestamps of real captures); 0 if the clock is before it.
pub fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}
