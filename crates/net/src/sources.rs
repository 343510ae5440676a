//! Which local address each datagram leaves from, on a socket bound to the unspecified
//! address (`0.0.0.0:P` or `[::]:P`), which has no one source address of its own.
//!
//! Three sources, first match wins:
//! 1. **Pinned**: the local end of a path, as configured (`Connection::add_path_from`,
//!    `Endpoint::pin_source`; `aerotp send --path LOCAL=REMOTE`). Kept for the endpoint's life.
//! 2. **Learned**: the address the peer last sent to (`IP_PKTINFO` / `IPV6_PKTINFO` on every
//!    read). A multihomed receiver then answers from the address it was reached at, as a QUIC
//!    server does; left to the routing table, a reply could leave from another of its
//!    addresses, which the peer does not know (a stray, or a path it never opened).
//! 3. Otherwise the kernel's choice by routing (nothing is set on the datagram). Captures ask
//!    the routing table for it ([`LocalAddrs::towards`]) so their records name it.
//!
//! Where the socket reports the destination address of what it reads (an unspecified
//! address with `IP_PKTINFO` on: [`LocalAddrs::tells_engine`]), the engine is told both ends
//! of every datagram and of every path it opens ([`LocalAddrs::path`]), and it names the local
//! address of each datagram it sends: a path is then both of its addresses, so two radios
//! reaching one ground address are two paths. Then that address is the source, before the
//! three above.
//!
//! A socket bound to one address has nothing to choose: every lookup answers that address and
//! nothing is pinned or learned. Both tables are bounded (see the constants); a send or a read
//! costs one hash lookup per GSO/GRO train, and only on unspecified-address sockets.

use aerotp_proto::PathAddr;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Most peer addresses pinned to a local address (paths are few: 8 per connection).
pub const MAX_PINNED: usize = 256;
/// Most peer addresses whose destination address is remembered (about 48 bytes each); when
/// full, an arbitrary entry makes room (that peer's replies fall back to routing until it
/// sends again).
const MAX_LEARNED: usize = 4096;
/// Most remote addresses whose route source a capture remembers; emptied when full.
const ROUTE_CACHE_LIMIT: usize = 1024;

/// Why a local address cannot be pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("the endpoint is bound to {0}, so every datagram leaves from it; bind it to the unspecified address (0.0.0.0:PORT or [::]:PORT) to choose a local address per path")]
    BoundToOne(SocketAddr),
    #[error("local address {local} is not of the same family as {remote}")]
    Family { local: IpAddr, remote: SocketAddr },
    #[error("{0} is not a usable local address (unspecified or multicast); give one of this host's unicast addresses")]
    NotUnicast(IpAddr),
    #[error("{0} is not an address of this host ({1}); `ip address` lists them")]
    NotLocal(IpAddr, String),
    #[error("{MAX_PINNED} peer addresses already have a local address pinned")]
    Full,
}

/// The local address towards each peer of one socket.
#[derive(Debug)]
pub struct LocalAddrs {
    bound: SocketAddr,
    pinned: HashMap<SocketAddr, IpAddr>,
    learned: HashMap<SocketAddr, IpAddr>,
    routes: HashMap<IpAddr, IpAddr>,
    /// The engine is told local addresses (`tells_engine`).
    tells: bool,
}

impl LocalAddrs {
    /// The addresses of a socket bound to `bound` whose reads say their destination address
    /// (`destinations`) or not.
    pub fn new(bound: SocketAddr, destinations: bool) -> LocalAddrs {
        LocalAddrs {
            tells: destinations && bound.ip().is_unspecified(),
            bound,
            pinned: HashMap::new(),
            learned: HashMap::new(),
            routes: HashMap::new(),
        }
    }

    /// Whether the socket is bound to the unspecified address (it has addresses to choose).
    pub fn chooses(&self) -> bool {
        self.bound.ip().is_unspecified()
    }

    /// The local address (with the bound port) a capture records for a datagram to or from
    /// `remote` whose local address is `local` where known (the engine named it, or the read
    /// said it), else [`LocalAddrs::towards`]'s answer.
    pub fn named(&mut self, remote: SocketAddr, local: Option<IpAddr>) -> SocketAddr {
        match local {
            Some(ip) => SocketAddr::new(ip, self.bound.port()),
            None => self.towards(remote),
        }
    }

    /// Whether the engine is told the local address of each datagram and path (the socket
    /// chooses among several and reads say where each datagram was sent to).
    pub fn tells_engine(&self) -> bool {
        self.tells
    }

    /// What the engine is told a datagram from `remote` to this host's `to` came on.
    #[inline]
    pub fn arrival(&self, remote: SocketAddr, to: Option<IpAddr>) -> PathAddr {
        PathAddr::new(if self.tells { to } else { None }, remote)
    }

    /// The path to `remote` the engine opens, from `local` if given (checked as `pin` checks
    /// it), else from the pinned address or routing's choice towards `remote`; the local end
    /// unsaid where the engine is not told local addresses.
    pub fn path(
        &mut self,
        remote: SocketAddr,
        local: Option<IpAddr>,
    ) -> Result<PathAddr, PinError> {
        if !self.tells {
            return Ok(remote.into());
        }
        let local = match local {
            Some(l) => {
                self.check(remote, l)?;
                l
            }
            None => self.towards(remote).ip(),
        };
        Ok(PathAddr::new(Some(local), remote))
    }

    /// Datagrams to `remote` leave from `local` from now on. `local` must be one of this
    /// host's addresses (checked by binding a throwaway UDP socket to it).
    pub fn pin(&mut self, remote: SocketAddr, local: IpAddr) -> Result<(), PinError> {
        self.check(remote, local)?;
        if self.pinned.len() >= MAX_PINNED && !self.pinned.contains_key(&remote) {
            return Err(PinError::Full);
        }
        self.pinned.insert(remote, local);
        Ok(())
    }

    /// Whether `local` can be the local end of a path to `remote`.
    fn check(&self, remote: SocketAddr, local: IpAddr) -> Result<(), PinError> {
        if !self.chooses() {
            return Err(PinError::BoundToOne(self.bound));
        }
        if local.is_ipv4() != remote.is_ipv4() || local.is_ipv4() != self.bound.is_ipv4() {
            return Err(PinError::Family { local, remote });
        }
        if local.is_unspecified() || local.is_multicast() {
            return Err(PinError::NotUnicast(local));
        }
        std::net::UdpSocket::bind(SocketAddr::new(local, 0))
            .map_err(|e| PinError::NotLocal(local, e.to_string()))?;
        Ok(())
    }

    /// The local address pinned for `remote`, if any.
    pub fn pinned(&self, remote: SocketAddr) -> Option<IpAddr> {
        self.pinned.get(&remote).copied()
    }

    /// Puts back what [`LocalAddrs::pinned`] returned before a pin that is undone.
    pub fn restore(&mut self, remote: SocketAddr, before: Option<IpAddr>) {
        match before {
            Some(ip) => self.pinned.insert(remote, ip),
            None => self.pinned.remove(&remote),
        };
    }

    /// A datagram from `remote` arrived addressed to `local`.
    #[inline]
    pub fn learn(&mut self, remote: SocketAddr, local: IpAddr) {
        if !self.chooses() || self.learned.get(&remote) == Some(&local) {
            return;
        }
        if self.learned.len() >= MAX_LEARNED && !self.learned.contains_key(&remote) {
            if let Some(k) = self.learned.keys().next().copied() {
                self.learned.remove(&k);
            }
        }
        self.learned.insert(remote, local);
    }

    /// The source address to set on a datagram to `remote`; `None`: let routing choose (or
    /// the socket is bound to one address).
    #[inline]
    pub fn source(&self, remote: SocketAddr) -> Option<IpAddr> {
        if !self.chooses() {
            return None;
        }
        self.pinned
            .get(&remote)
            .or_else(|| self.learned.get(&remote))
            .copied()
    }

    /// The local address (with the bound port) datagrams to or from `remote` use, for a
    /// capture's records: the bound address, the chosen source, or the routing table's
    /// answer (a throwaway UDP socket connected to the remote; nothing is sent).
    pub fn towards(&mut self, remote: SocketAddr) -> SocketAddr {
        if !self.chooses() {
            return self.bound;
        }
        let port = self.bound.port();
        if let Some(ip) = self.source(remote) {
            return SocketAddr::new(ip, port);
        }
        if let Some(ip) = self.routes.get(&remote.ip()) {
            return SocketAddr::new(*ip, port);
        }
        let ip = route_source(remote).unwrap_or(self.bound.ip());
        if self.routes.len() >= ROUTE_CACHE_LIMIT {
            self.routes.clear();
        }
        self.routes.insert(remote.ip(), ip);
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

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn unspecified_bind_resolves_the_route_source_and_keeps_the_port() {
        let mut l = LocalAddrs::new(a("0.0.0.0:4242"), true);
        assert_eq!(l.towards(a("127.0.0.1:9")), a("127.0.0.1:4242"));
        let mut fixed = LocalAddrs::new(a("127.0.0.2:7"), true);
        assert_eq!(fixed.towards(a("127.0.0.1:9")), a("127.0.0.2:7"));
        for i in 0..(ROUTE_CACHE_LIMIT as u32 + 10) {
            let ip = Ipv4Addr::from(0x7f00_0000 + i + 1);
            l.towards(SocketAddr::new(ip.into(), 1));
        }
        assert!(l.routes.len() <= ROUTE_CACHE_LIMIT);
    }

    #[test]
    fn pinned_beats_learned_beats_routing() {
        let mut l = LocalAddrs::new(a("0.0.0.0:4242"), true);
        let peer = a("127.0.0.1:9");
        assert_eq!(l.source(peer), None);
        l.learn(peer, "127.0.0.3".parse().unwrap());
        assert_eq!(l.source(peer), Some("127.0.0.3".parse().unwrap()));
        assert_eq!(l.towards(peer), a("127.0.0.3:4242"));
        l.pin(peer, "127.0.0.2".parse().unwrap()).unwrap();
        l.learn(peer, "127.0.0.4".parse().unwrap());
        assert_eq!(l.source(peer), Some("127.0.0.2".parse().unwrap()));
        // Another port of the same host is another peer address.
        assert_eq!(l.source(a("127.0.0.1:10")), None);
    }

    #[test]
    fn a_socket_bound_to_one_address_neither_pins_nor_learns() {
        let mut l = LocalAddrs::new(a("127.0.0.1:4242"), true);
        let peer = a("127.0.0.1:9");
        l.learn(peer, "127.0.0.3".parse().unwrap());
        assert_eq!(l.source(peer), None);
        assert_eq!(
            l.pin(peer, "127.0.0.2".parse().unwrap()),
            Err(PinError::BoundToOne(a("127.0.0.1:4242")))
        );
    }

    #[test]
    fn bad_local_addresses_are_refused_with_the_reason() {
        let mut l = LocalAddrs::new(a("0.0.0.0:4242"), true);
        let peer = a("127.0.0.1:9");
        assert!(matches!(
            l.pin(peer, "::1".parse().unwrap()),
            Err(PinError::Family { .. })
        ));
        assert!(matches!(
            l.pin(peer, "0.0.0.0".parse().unwrap()),
            Err(PinError::NotUnicast(_))
        ));
        // TEST-NET-3: not configured on any host.
        let e = l.pin(peer, "203.0.113.77".parse().unwrap()).unwrap_err();
        assert!(matches!(e, PinError::NotLocal(..)), "{e}");
        assert!(e.to_string().contains("ip address"), "{e}");
        assert_eq!(l.source(peer), None);
    }

    #[test]
    fn the_tables_are_bounded() {
        let mut l = LocalAddrs::new(a("0.0.0.0:4242"), true);
        let local: IpAddr = "127.0.0.2".parse().unwrap();
        for i in 0..(MAX_LEARNED as u32 + 100) {
            l.learn(
                SocketAddr::new(Ipv4Addr::from(0x0a00_0000 + i).into(), 1),
                local,
            );
        }
        assert_eq!(l.learned.len(), MAX_LEARNED);
        for i in 0..MAX_PINNED as u32 {
            l.pin(
                SocketAddr::new(Ipv4Addr::from(0x0a00_0000 + i).into(), 2),
                local,
            )
            .unwrap();
        }
        assert_eq!(
            l.pin(a("10.9.9.9:2"), local),
            Err(PinError::Full),
            "one past the bound"
        );
        // Re-pinning a peer already pinned is not growth.
        l.pin(
            SocketAddr::new(Ipv4Addr::from(0x0a00_0000).into(), 2),
            local,
        )
        .unwrap();
    }
}
