//! A hook that sees every datagram a driver sends or receives (captures: `--pcap`).
//!
//! The runtime knows nothing of file formats: it hands each datagram, with a wall-clock
//! timestamp and the local and remote addresses, to a [`Tap`]. `aerotp-capture` implements
//! it with a writer thread behind a queue bounded in bytes, so a slow disk drops capture
//! records, never data. The relay of `aerotp-emu` uses the same trait.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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
}

/// Time since the Unix epoch (the timestamps of real captures); 0 if the clock is before it.
pub fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// Most remote addresses whose local source address is remembered; the cache is emptied when
/// full (a server talking to more peers looks routes up again, it never grows without bound).
const LOCAL_CACHE_LIMIT: usize = 1024;

/// The local address a socket bound to `bound` uses towards each remote: a socket bound to
/// the unspecified address (`0.0.0.0:P`) has no one source address, so a capture asks the
/// kernel's routing table (a throwaway UDP socket connected to the remote; nothing is sent)
/// and remembers the answer per remote IP.
#[derive(Debug)]
pub struct LocalAddrs {
    bound: SocketAddr,
    cache: HashMap<IpAddr, IpAddr>,
}

impl LocalAddrs {
    pub fn new(bound: SocketAddr) -> LocalAddrs {
        LocalAddrs {
            bound,
            cache: HashMap::new(),
        }
    }

    /// The local address (with the bound port) datagrams to or from `remote` use.
    pub fn towards(&mut self, remote: SocketAddr) -> SocketAddr {
        if !self.bound.ip().is_unspecified() {
            return self.bound;
        }
        let port = self.bound.port();
        if let Some(ip) = self.cache.get(&remote.ip()) {
            return SocketAddr::new(*ip, port);
        }
        let ip = route_source(remote).unwrap_or(self.bound.ip());
        if self.cache.len() >= LOCAL_CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert(remote.ip(), ip);
        SocketAddr::new(ip, port)
    }
}

/// The source address the kernel would pick for `remote` (`connect` on UDP sends nothing).
fn route_source(remote: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = match remote {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(remote).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_bind_resolves_the_route_source_and_keeps_the_port() {
        let mut l = LocalAddrs::new("0.0.0.0:4242".parse().unwrap());
        let a = l.towards("127.0.0.1:9".parse().unwrap());
        assert_eq!(a, "127.0.0.1:4242".parse().unwrap());
        let mut fixed = LocalAddrs::new("127.0.0.2:7".parse().unwrap());
        assert_eq!(
            fixed.towards("127.0.0.1:9".parse().unwrap()),
            "127.0.0.2:7".parse().unwrap()
        );
        for i in 0..(LOCAL_CACHE_LIMIT as u32 + 10) {
            let ip = Ipv4Addr::from(0x7f00_0000 + i + 1);
            l.towards(SocketAddr::new(ip.into(), 1));
        }
        assert!(l.cache.len() <= LOCAL_CACHE_LIMIT);
    }
}
