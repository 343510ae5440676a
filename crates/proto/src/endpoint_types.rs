//! What an endpoint hands its caller: connection handles, events, datagram-mode messages,
//! transmit instructions, errors and the endpoint's own counters.

use crate::close_outcome::CloseOutcome;
use crate::config::ConfigError;
use std::net::{IpAddr, SocketAddr};
use thiserror::Error;

/// Names one connection of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub u64);

/// What the endpoint tells the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Our connection heard from its peer (ASYNACK or any acknowledgement).
    Connected(ConnectionHandle),
    /// A peer opened a connection to a listening port.
    Accepted(ConnectionHandle),
    Readable(ConnectionHandle),
    Writable(ConnectionHandle),
    /// Confirmed delivery (`ConnectionConfig::confirm_delivery`): the peer confirmed more of
    /// what this connection sent (`Endpoint::peer_delivered`).
    Confirmed(ConnectionHandle),
    Closed(ConnectionHandle, CloseOutcome),
    /// A datagram-mode message arrived (`take_datagram` returns it).
    Datagram,
}

/// A datagram-mode message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatagramMsg {
    pub remote: SocketAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub data: Vec<u8>,
}

/// The two ends of a path (docs/spec.md §9): this host's address and the peer's. A
/// connection tells its paths apart by both, as QUIC tells them by the 4-tuple, so two of
/// this host's radios reaching one ground address are two paths. `local` is `None` where the
/// driver does not say (a socket bound to one address, a simulator): a driver either gives it
/// with every datagram it hands in and every path it opens, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathAddr {
    pub local: Option<IpAddr>,
    pub remote: SocketAddr,
}

impl PathAddr {
    /// A path to `remote` from this host's address `local`.
    pub fn new(local: Option<IpAddr>, remote: SocketAddr) -> PathAddr {
        PathAddr { local, remote }
    }
}

impl From<SocketAddr> for PathAddr {
    /// A path to `remote`, the local end unsaid.
    fn from(remote: SocketAddr) -> PathAddr {
        PathAddr {
            local: None,
            remote,
        }
    }
}

impl std::fmt::Display for PathAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.local {
            Some(l) => write!(f, "{l}={}", self.remote),
            None => write!(f, "{}", self.remote),
        }
    }
}

/// Where the datagram `poll_transmit` appended goes, and its length (it is the last `len`
/// bytes of the buffer it was given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub remote: SocketAddr,
    /// The local address it leaves from: the path's (`PathAddr::local`), or the one the
    /// datagram it answers arrived at; `None`: the driver's choice.
    pub local: Option<IpAddr>,
    pub len: usize,
    /// The class of the traffic it carries: its connection's (`ConnectionConfig::class`) or
    /// its datagram route's (`DatagramRoute::class`). The endpoint's own answers (challenges,
    /// echoes, resets) take the class of the connection they concern, else of the listener
    /// on its port, else `None`. A driver may mark it on the IP header (DSCP); the engine
    /// does not look at it again.
    pub class: Option<crate::TrafficClass>,
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum EndpointError {
    #[error("invalid connection settings: {0}")]
    Config(#[from] ConfigError),
    #[error("too many connections ({0}); close some or raise max_connections")]
    TooManyConnections(usize),
    #[error(
        "the connection has {0} paths (or addresses being validated) already, the most it keeps"
    )]
    TooManyPaths(usize),
    #[error("no such connection (it was closed and released)")]
    UnknownConnection,
    #[error("a connection to {0} port {1} from local port {2} already exists")]
    Exists(SocketAddr, u16, u16),
    #[error(
        "datagram of {len} bytes does not fit the MTU of {mtu} bytes: at most {max} with this \
         FEC, authentication and repair (split it, or lower the parity)"
    )]
    DatagramTooLarge { len: usize, max: usize, mtu: usize },
    #[error(
        "datagram routes cannot repair with 'auto': no report reaches their sender to adapt \
         to; give a fixed ratio such as 1.25, or use quasi-reliable"
    )]
    DatagramAutoRepair,
    #[error("datagram queue is full ({0} datagrams); poll_transmit more often")]
    DatagramQueueFull(usize),
    #[error("no more local ports free")]
    NoPorts,
}

/// Who a connection talks to, and how: what a driver needs to name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub remote: SocketAddr,
    pub local_port: u16,
    pub remote_port: u16,
    /// The connection's incarnation tag (docs/spec.md §2).
    pub tag: u8,
    pub mode: aerotp_wire::Mode,
}

/// Counters of what the endpoint itself saw.
///
/// Not split: a public flat counter set, every counter a row of docs/stats.md's endpoint
/// table and all but three (`datagram_repair_bytes_sent`, `datagram_repairs_received`,
/// `datagram_repairs_refused`) an `aerotp_*_total` Prometheus family of its own
/// (`aerotp_net::metrics`), each read by its name.
#[derive(Debug, Clone, Default)]
pub struct EndpointStats {
    pub datagrams_in: u64,
    pub undecodable: u64,
    pub corrupted_without_connection: u64,
    pub stray: u64,
    pub refused: u64,
    pub datagrams_delivered: u64,
    pub datagrams_dropped: u64,
    /// Authentication (docs/security.md): TPDUs whose tag verified.
    pub auth_verified: u64,
    /// Dropped by authentication before anything acted on them.
    /// The tag did not verify: forged, or another key under the same id.
    pub auth_failed: u64,
    /// Sealed with a key id this endpoint does not hold.
    pub auth_unknown_key: u64,
    /// A packet number seen before (or older than the replay window).
    pub auth_replayed: u64,
    /// Unauthenticated TPDU while this endpoint requires authentication.
    pub auth_missing: u64,
    /// Authenticated TPDU while this endpoint has no key.
    pub auth_unexpected: u64,
    /// Authenticated TPDU whose envelope CRC failed even after FEC: unverifiable.
    pub auth_corrupted: u64,
    /// Address validation (docs/security.md, "Half-open connections"). CHALLENGEs sent to
    /// half-open connections (first ones and re-challenges).
    pub challenges_sent: u64,
    /// RETRYs sent to new peers while `max_half_open` connections were half-open.
    pub retries_sent: u64,
    /// ECHOs this endpoint sent as an initiator.
    pub echoes_sent: u64,
    /// Connections proven by an echo (or admitted after a RETRY's echo).
    pub proven: u64,
    /// ECHOs whose cookie did not check (forged, stale, or for another connection).
    pub cookies_refused: u64,
    /// Half-open connections dropped at the set-up timeout.
    pub setup_timeouts: u64,
    /// FEC decoding attempts skipped because datagrams from unknown peers had used up their
    /// CPU budget (`decode_budget`); such a datagram counts as undecodable if nothing else
    /// reads it.
    pub fec_budget_refused: u64,
    /// Datagram-mode messages queued to send (`Endpoint::send_datagram`), and their bytes as
    /// sent (header, CRC, parity, authentication).
    pub datagrams_sent: u64,
    pub datagram_bytes_sent: u64,
    /// Repair TPDUs of datagram routes (docs/stats.md, "Datagram routes"): sent, and their
    /// bodies' bytes; received intact, of those the ones that added an equation, and the
    /// ones refused (a repair header that does not parse or contradicts what is known).
    pub datagram_repairs_sent: u64,
    pub datagram_repair_bytes_sent: u64,
    pub datagram_repairs_received: u64,
    pub datagram_repairs_used: u64,
    pub datagram_repairs_refused: u64,
    /// Datagrams that never arrived and were rebuilt from repairs (also counted in
    /// `datagrams_delivered`).
    pub datagrams_rebuilt: u64,
    /// Numbered datagrams dropped as copies of one already delivered (arrived or rebuilt).
    pub datagram_duplicates: u64,
    /// A peer's new address (docs/spec.md §9, "A peer's new address"): CHALLENGEs sent to
    /// new addresses (also in `challenges_sent`), and connections switched to one after its
    /// ECHO proved it.
    pub path_challenges: u64,
    pub migrations: u64,
    /// Addresses proven and added as another path of a connection (docs/spec.md §9).
    pub paths_added: u64,
}

impl EndpointStats {
    /// Every TPDU authentication dropped (the forgery figure's "accepted" is the rest).
    pub fn auth_dropped(&self) -> u64 {
        self.auth_failed
            + self.auth_unknown_key
            + self.auth_replayed
            + self.auth_missing
            + self.auth_unexpected
            + self.auth_corrupted
    }
}
