//! A UDP socket that reads the IPv4 TOS / IPv6 traffic-class byte of every datagram
//! (`IP_RECVTOS`, `IPV6_RECVTCLASS`): how tests see the DSCP marks AeroTP puts on the wire.
//! The control messages are read by `aerotp_net::cmsg`. Linux only.
#![cfg(target_os = "linux")]

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_net::cmsg::{self, Control, Message};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// One datagram as read: its bytes, its TOS byte (`None`: the kernel reported none) and its
/// sender.
#[derive(Debug)]
pub struct Marked {
    pub data: Vec<u8>,
    pub tos: Option<u8>,
    pub from: SocketAddr,
}

impl Marked {
    /// The DSCP (the TOS byte's upper six bits).
    pub fn dscp(&self) -> Option<u8> {
        self.tos.map(|t| t >> 2)
    }
}

/// A socket on `addr` (e.g. "127.0.0.1:0", "[::1]:0") that reports each datagram's TOS byte.
/// Must be called within a tokio runtime.
pub fn tos_reader(addr: &str) -> UdpSocket {
    let s = std::net::UdpSocket::bind(addr).expect("bind the TOS reader");
    s.set_nonblocking(true).expect("non-blocking");
    let sock = socket2::SockRef::from(&s);
    let asked = if s.local_addr().expect("bound").is_ipv4() {
        sock.set_recv_tos(true)
    } else {
        sock.set_recv_tclass_v6(true)
    };
    asked.expect("asking for the TOS byte");
    UdpSocket::from_std(s).expect("register with tokio")
}

/// The next datagram on a [`tos_reader`] socket; panics if none comes within `limit`.
pub async fn read_marked(s: &UdpSocket, limit: Duration) -> Marked {
    let read = async {
        loop {
            s.readable().await.expect("readable");
            match s.try_io(Interest::READABLE, || recv(s)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r.expect("recvmsg"),
            }
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .unwrap_or_else(|_| panic!("no datagram within {limit:?}"))
}

fn recv(s: &UdpSocket) -> io::Result<Marked> {
    let mut data = vec![0u8; 65_536];
    let mut control = Control::new();
    let r = cmsg::recvmsg_into(s, &mut data, &mut control)?;
    data.truncate(r.len);
    let tos = control.messages().fold(None, |tos, m| match m {
        Message::Tos(t) | Message::TrafficClass(t) => Some(t),
        _ => tos,
    });
    let from = r
        .from
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP sender"))?;
    Ok(Marked { data, tos, from })
}
