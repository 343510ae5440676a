//! A UDP socket that reads the IPv4 TOS / IPv6 traffic-class byte of every datagram
//! (`IP_RECVTOS`, `IPV6_RECVTCLASS`): how tests see the DSCP marks AeroTP puts on the wire.
//! Linux only.
#![cfg(target_os = "linux")]

use std::io;
use std::mem::{size_of_val, zeroed};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

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
    let mut cmsg = [0u64; 16];
    // SAFETY: `try_init` hands us storage for any socket address and its length; an all-zero
    // msghdr is valid; every pointer in `msg` refers to a live buffer of the stated length;
    // control messages are walked with the CMSG macros within `msg_controllen`.
    let (tos, from) = unsafe {
        socket2::SockAddr::try_init(|name, name_len| {
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            let mut msg: libc::msghdr = zeroed();
            msg.msg_name = name.cast();
            msg.msg_namelen = *name_len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = size_of_val(&cmsg) as _;
            let n = libc::recvmsg(s.as_raw_fd(), &mut msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            *name_len = msg.msg_namelen;
            data.truncate(n as usize);
            let mut tos = None;
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let at = libc::CMSG_DATA(c);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) => tos = Some(*at),
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                        tos = Some(std::ptr::read_unaligned(at.cast::<libc::c_int>()) as u8)
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
            Ok(tos)
        })?
    };
    let from = from
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP sender"))?;
    Ok(Marked { data, tos, from })
}
