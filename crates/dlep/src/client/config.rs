//! The client's settings.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::codec::Mac;
use crate::discovery::{DISCOVERY_V4, DLEP_PORT};
use crate::session::Config;

/// Where the modem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A known session address (RFC 8175's port is 854).
    Connect(SocketAddr),
    /// Find it by Peer Discovery.
    Discover(Discovery),
}

/// Peer Discovery settings (RFC 8175 §7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// Where Peer Discovery signals go: 224.0.0.117:854 or \[ff02::1:7\]:854 by the RFC (a
    /// unicast address works too, for a modem that listens on one).
    pub group: SocketAddr,
    /// IPv4: the address of the interface to send from (the kernel's choice if `None`).
    pub interface_v4: Option<Ipv4Addr>,
    /// IPv6: the index of the interface to send from (0: the kernel's choice).
    pub interface_v6: u32,
    /// Time between Peer Discovery signals while no offer arrives.
    pub interval: Duration,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            group: SocketAddr::new(DISCOVERY_V4.into(), DLEP_PORT),
            interface_v4: None,
            interface_v6: 0,
            interval: Duration::from_secs(1),
        }
    }
}

/// The client's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    pub target: Target,
    pub session: Config,
    /// Give up a TCP connect after this long.
    pub connect_timeout: Duration,
    /// First wait before reconnecting; doubles per failure up to `backoff_max`, and is back to
    /// this after a session that came up.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Capacity of the event channel. Events beyond it wait in the session's bounded queue.
    pub channel_capacity: usize,
}

impl ClientConfig {
    /// Connect to `addr` with default settings.
    pub fn connect(addr: SocketAddr) -> ClientConfig {
        ClientConfig {
            target: Target::Connect(addr),
            session: Config::default(),
            connect_timeout: Duration::from_secs(3),
            backoff_initial: Duration::from_millis(100),
            // A restarted modem is back in session within about this long.
            backoff_max: Duration::from_secs(2),
            channel_capacity: 1024,
        }
    }

    /// Discover the modem with default settings.
    pub fn discover(discovery: Discovery) -> ClientConfig {
        ClientConfig {
            target: Target::Discover(discovery),
            ..ClientConfig::connect(SocketAddr::new(DISCOVERY_V4.into(), DLEP_PORT))
        }
    }
}

#[derive(Debug)]
pub(crate) enum Command {
    LinkCharacteristics {
        mac: Mac,
        current_rate_tx: Option<u64>,
        latency_us: Option<u64>,
    },
    Shutdown,
}
