//! Peer Discovery over UDP: send the signal every interval until a Peer Offer arrives.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::time::timeout;

use super::config::{Command, Discovery};
use super::ctx::{Ctx, Stop};
use crate::discovery::{peer_discovery, PeerOffer};
use crate::session::Event;

/// RFC 8175 §7.1 sends discovery with TTL / hop limit 255 (GTSM, RFC 5082): a receiver can
/// then tell the signal came from its own link.
const DISCOVERY_TTL: u32 = 255;

fn socket_for(d: &Discovery) -> std::io::Result<UdpSocket> {
    let v6 = d.group.is_ipv6();
    let domain = if v6 { Domain::IPV6 } else { Domain::IPV4 };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    let bind: SocketAddr = if v6 {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    match d.group.ip() {
        IpAddr::V4(g) => {
            if g.is_multicast() {
                if let Some(i) = d.interface_v4 {
                    s.set_multicast_if_v4(&i)?;
                }
                s.set_multicast_ttl_v4(DISCOVERY_TTL)?;
                s.set_multicast_loop_v4(true)?;
            } else {
                s.set_ttl(DISCOVERY_TTL)?;
            }
        }
        IpAddr::V6(g) => {
            if g.is_multicast() {
                s.set_multicast_if_v6(d.interface_v6)?;
                s.set_multicast_hops_v6(DISCOVERY_TTL)?;
                s.set_multicast_loop_v6(true)?;
            } else {
                s.set_unicast_hops_v6(DISCOVERY_TTL)?;
            }
        }
    }
    // From the discovery port itself: a modem may answer to the signal's source port (RFC
    // 8175 §7.1) or, like LL-DLEP, to the discovery port at the source address; bound there,
    // both reach this socket. If the port is taken (or privileged), any port will do for the
    // first kind.
    s.set_reuse_address(true)?;
    let mut at = bind;
    at.set_port(d.group.port());
    if let Err(e) = s.bind(&at.into()) {
        tracing::debug!("DLEP: discovery cannot bind {at} ({e}): using any port");
        s.bind(&bind.into())?;
    }
    s.set_nonblocking(true)?;
    UdpSocket::from_std(s.into())
}

/// Returns the session address of the first modem that answers. Never gives up (a modem may be
/// switched on later); socket errors are reported and retried at the discovery interval.
pub(super) async fn find_modem(ctx: &mut Ctx, d: &Discovery) -> Result<SocketAddr, Stop> {
    // Between 10 ms (no busy loop) and a day (no overflowing deadline).
    let interval = d
        .interval
        .clamp(Duration::from_millis(10), Duration::from_secs(86_400));
    let signal = peer_discovery(&ctx.cfg.session.peer_type);
    let mut buf = vec![0u8; 2048];
    loop {
        let sock = match socket_for(d) {
            Ok(s) => s,
            Err(e) => {
                let error = format!("discovery socket: {e}");
                tracing::warn!("DLEP: {error}");
                ctx.tell(Event::ConnectFailed {
                    addr: None,
                    error,
                    retry_in: interval,
                })?;
                ctx.pause(interval).await?;
                continue;
            }
        };
        loop {
            if let Err(e) = sock.send_to(&signal, d.group).await {
                tracing::warn!("DLEP: sending Peer Discovery to {}: {e}", d.group);
            }
            let deadline = tokio::time::Instant::now() + interval;
            // Read answers until the interval is up; anything but an offer is ignored.
            loop {
                let got = tokio::select! {
                    r = timeout(deadline.saturating_duration_since(tokio::time::Instant::now()), sock.recv_from(&mut buf)) => r,
                    c = ctx.commands.recv() => match c {
                        Some(Command::LinkCharacteristics { .. }) => continue,
                        Some(Command::Shutdown) | None => return Err(Stop::Quit),
                    },
                    _ = ctx.events.closed() => return Err(Stop::Quit),
                };
                match got {
                    Err(_) => break,
                    Ok(Err(e)) => {
                        tracing::debug!("DLEP: discovery receive: {e}");
                        break;
                    }
                    Ok(Ok((n, from))) => match PeerOffer::parse(&buf[..n], from) {
                        Ok(offer) => {
                            tracing::info!(
                                "DLEP: Peer Offer from {from} ({:?}): {:?}",
                                offer.peer_type,
                                offer.connection_points
                            );
                            if let Some(a) = offer.connection_points.first() {
                                return Ok(*a);
                            }
                        }
                        Err(e) => tracing::debug!("DLEP: ignoring datagram from {from}: {e}"),
                    },
                }
            }
        }
    }
}
