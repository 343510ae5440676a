//! Peer Discovery / Peer Offer (RFC 8175 §7.1), sans IO: the router multicasts Peer Discovery
//! signals (224.0.0.117 or ff02::1:7, UDP port 854) until a modem answers with a Peer Offer
//! naming where its session listens.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::codec::ids::signal;
use crate::codec::{DataItem, ParseError, Signal};

/// IANA's DLEP port, for discovery (UDP) and sessions (TCP).
pub const DLEP_PORT: u16 = 854;
/// IPv4 link-local multicast group for Peer Discovery.
pub const DISCOVERY_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 117);
/// IPv6 link-local multicast group for Peer Discovery.
pub const DISCOVERY_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 7);

/// A Peer Discovery signal carrying our Peer Type.
pub fn peer_discovery(peer_type: &str) -> Vec<u8> {
    let s = Signal::new(
        signal::PEER_DISCOVERY,
        vec![DataItem::PeerType {
            secured: false,
            description: peer_type.chars().take(200).collect(),
        }],
    );
    // A peer type of at most 200 characters always fits.
    s.to_bytes().unwrap_or_default()
}

/// What a Peer Offer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOffer {
    pub peer_type: Option<String>,
    /// Where the modem accepts sessions, in the order offered; ports default to 854. Entries
    /// asking for TLS are left out (this side speaks plain TCP).
    pub connection_points: Vec<SocketAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("not a DLEP signal: {0}")]
    Parse(#[from] ParseError),
    #[error("signal type {0} is not Peer Offer")]
    NotOffer(u16),
}

impl PeerOffer {
    /// Reads a datagram as a Peer Offer. `from` is its source: RFC 8175 has a modem that names
    /// no connection point take sessions at the offer's source address, port 854.
    pub fn parse(datagram: &[u8], from: SocketAddr) -> Result<PeerOffer, OfferError> {
        let s = Signal::parse(datagram)?;
        if s.ty != signal::PEER_OFFER {
            return Err(OfferError::NotOffer(s.ty));
        }
        let mut offer = PeerOffer {
            peer_type: None,
            connection_points: Vec::new(),
        };
        for i in s.items {
            match i {
                DataItem::PeerType { description, .. } => offer.peer_type = Some(description),
                DataItem::Ipv4ConnectionPoint {
                    tls: false,
                    addr,
                    port,
                } => offer
                    .connection_points
                    .push(SocketAddr::new(IpAddr::V4(addr), port.unwrap_or(DLEP_PORT))),
                DataItem::Ipv6ConnectionPoint {
                    tls: false,
                    addr,
                    port,
                } => offer
                    .connection_points
                    .push(SocketAddr::new(IpAddr::V6(addr), port.unwrap_or(DLEP_PORT))),
                _ => {}
            }
        }
        if offer.connection_points.is_empty() {
            offer
                .connection_points
                .push(SocketAddr::new(from.ip(), DLEP_PORT));
        }
        Ok(offer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_and_offer() {
        let d = peer_discovery("r");
        assert_eq!(&d[..4], b"DLEP");
        assert_eq!(Signal::parse(&d).unwrap().ty, signal::PEER_DISCOVERY);
        let from: SocketAddr = "10.0.0.1:854".parse().unwrap();
        let offer = Signal::new(
            signal::PEER_OFFER,
            vec![
                DataItem::Ipv4ConnectionPoint {
                    tls: true,
                    addr: Ipv4Addr::new(10, 0, 0, 9),
                    port: Some(1),
                },
                DataItem::Ipv4ConnectionPoint {
                    tls: false,
                    addr: Ipv4Addr::new(10, 0, 0, 2),
                    port: Some(4854),
                },
            ],
        );
        let o = PeerOffer::parse(&offer.to_bytes().unwrap(), from).unwrap();
        assert_eq!(o.connection_points, vec!["10.0.0.2:4854".parse().unwrap()]);
        let bare = Signal::new(signal::PEER_OFFER, vec![]).to_bytes().unwrap();
        let o = PeerOffer::parse(&bare, from).unwrap();
        assert_eq!(o.connection_points, vec!["10.0.0.1:854".parse().unwrap()]);
        assert_eq!(PeerOffer::parse(&d, from), Err(OfferError::NotOffer(1)));
        assert!(PeerOffer::parse(b"DLE", from).is_err());
    }
}
