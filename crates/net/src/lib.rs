//! Tokio runtime driving the AeroTP engine (`aerotp-proto`) over UDP sockets, IPv4 and IPv6.
//!
//! Design (like quinn): one driver task per [`Endpoint`] owns the UDP socket; the sans-IO
//! engine sits behind an `Arc<Mutex<..>>` shared with the application-facing handles. The
//! driver wakes on a received datagram, on the engine's next timeout (`poll_timeout`), or when
//! the application did something (write, close, connect); after each wake it feeds the engine,
//! handles timers, dispatches the engine's events to wakers / `Notify`s and drains every
//! datagram `poll_transmit` offers (in batches of [`BATCH`]). Engine time is
//! `tokio::time::Instant` elapsed since the endpoint was bound, so tests may pause time.
//!
//! Connections are byte streams ([`Connection`] implements `AsyncRead` and `AsyncWrite`;
//! `shutdown` is the graceful close of our sending half); [`Connection::finish`] closes and
//! waits for the end, returning a [`Report`] that says whether the mode's guarantee was met.
//! Datagram mode is [`Endpoint::send_datagram`] / [`Endpoint::recv_datagram`].
//!
//! On IPv4 the socket sets `SO_NO_CHECK` so datagrams leave with a zero UDP checksum and a
//! corrupted payload reaches AeroTP's own CRC/FEC instead of being dropped by the receiving
//! kernel. IPv6 UDP checksums are mandatory (RFC 8200 §8.1): over IPv6 AeroTP sees bit errors
//! as losses. See docs/runtime.md.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_proto as proto;
use proto::EndpointError;

#[cfg(target_os = "linux")]
pub mod cmsg;
mod connection;
mod counters;
mod driver;
mod endpoint;
mod exposition;
pub mod keyfile;
pub mod marks;
pub mod metrics;
mod radio;
mod radio_metrics;
mod report;
pub mod socket;
pub mod sources;
pub mod tap;
mod udp;

pub use connection::Connection;
pub use endpoint::Endpoint;
pub use marks::{Dscp, DscpPlan};
pub use metrics::{IoCounters, MetricsSource, Totals};
pub use proto::{
    datagram_parity, AuthConfig, AuthKey, CloseOutcome, ConnectionConfig, ConnectionStats,
    DatagramMsg, Delivered, EndpointConfig, EndpointStats, ErasureChoice, ErasureMode, FecSetting,
    KeySet, Mode, PathAddr, PathStats,
};
pub use radio::{DestinationMap, RadioBridge};
pub use report::{outcome_error, Report};
pub use socket::{udp_socket, zero_checksums};
pub use tap::{EngineTap, Tap, TapHandle, ENDPOINT_INTERFACES, TAP_RECEIVED, TAP_SENT};

/// AeroTP port a listener uses unless told otherwise (AeroTP ports are not UDP ports).
pub const DEFAULT_PORT: u16 = 1;
/// Datagrams the driver takes from the engine before it sends them and looks again: this
/// many, then what fills the last GSO train (at most `MAX_SEGMENTS` more).
pub const BATCH: usize = 64;

/// Errors of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The UDP socket could not be created or bound.
    #[error("cannot bind UDP socket {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    /// The engine refused (bad settings, too many connections…).
    #[error(transparent)]
    Engine(#[from] EndpointError),
    /// A path's local address cannot be used (`Endpoint::pin_source`).
    #[error("cannot send from that local address: {0}")]
    Source(#[from] sources::PinError),
    /// The operating system's random generator failed (the engine's seed comes from it).
    #[error("the operating system's random generator failed; the endpoint needs it for its cookie secret (check that getrandom(2) or /dev/urandom is available)")]
    Random,
}

/// Runs `fut` with a bound; `None` if it took longer.
pub async fn within<T>(limit: Duration, fut: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(limit, fut).await.ok()
}
