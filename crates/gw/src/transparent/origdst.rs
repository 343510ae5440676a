//! Sockets that receive intercepted traffic and learn its original destination.
//!
//! TCP: a listener with `IP_TRANSPARENT` accepts connections TPROXY steers to it whatever
//! their destination; the accepted socket's local address is the original destination.
//! UDP: a socket with `IP_TRANSPARENT` and `IP_RECVORIGDSTADDR` gets each datagram's original
//! destination in an `IP_ORIGDSTADDR` control message (`recvmsg`; neither std, tokio nor
//! socket2 parse control messages, so that part uses libc).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::Interest;
use tokio::net::{TcpListener, UdpSocket};

fn transparent_socket(addr: SocketAddr, ty: Type, proto: Protocol) -> io::Result<Socket> {
    if !addr.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr}: transparent interception is IPv4 only for now (docs/gateway.md)"),
        ));
    }
    let s = Socket::new(Domain::IPV4, ty, Some(proto))?;
    s.set_reuse_address(true)?;
    s.set_ip_transparent(true).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("IP_TRANSPARENT on {addr}: {e} (needs root or CAP_NET_ADMIN)"),
        )
    })?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// A TCP listener that accepts TPROXY-steered connections.
pub fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = transparent_socket(addr, Type::STREAM, Protocol::TCP)?;
    s.listen(1024)?;
    TcpListener::from_std(s.into())
}

/// A UDP socket that receives TPROXY-steered datagrams with their original destination.
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = transparent_socket(addr, Type::DGRAM, Protocol::UDP)?;
    let on: libc::c_int = 1;
    // SAFETY: a valid fd, a c_int option value of the size given.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_IP,
            libc::IP_RECVORIGDSTADDR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    UdpSocket::from_std(s.into())
}

/// Whether traffic whose destination is `orig` was sent to the interception socket at
/// `listen` itself rather than steered to it: same port, and `orig` is an address of this
/// host (the rules never intercept traffic for this host: `fib daddr type local return`).
/// Locality is tested by binding an ordinary socket to it, which only a local address allows.
pub fn is_direct(orig: SocketAddr, listen: SocketAddr) -> bool {
    if orig.port() != listen.port() {
        return false;
    }
    if orig.ip() == listen.ip() {
        return true;
    }
    listen.ip().is_unspecified() && std::net::UdpSocket::bind(SocketAddr::new(orig.ip(), 0)).is_ok()
}

/// A UDP socket bound to `orig`, an address not of this host (`IP_TRANSPARENT`): replies to
/// an intercepted client leave from the destination it sent to.
pub fn reply_socket(orig: SocketAddr) -> io::Result<UdpSocket> {
    let s = transparent_socket(orig, Type::DGRAM, Protocol::UDP)?;
    UdpSocket::from_std(s.into())
}

/// The next datagram: its length, sender and original destination (`None` if the kernel gave
/// none: the datagram was sent to the socket's own address, not intercepted).
pub async fn recv_orig(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<SocketAddr>)> {
    sock.async_io(Interest::READABLE, || {
        recvmsg_orig(SockRef::from(sock), buf)
    })
    .await
}

fn recvmsg_orig(
    sock: SockRef<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<SocketAddr>)> {
    use std::os::fd::AsRawFd;
    // Room for one IP_ORIGDSTADDR (a sockaddr_in) and slack for any other message.
    let mut control = [0u64; 16];
    // SAFETY: zeroed sockaddr_in / msghdr are valid "empty" values.
    let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: every pointer in `msg` points at a live buffer of the length it states.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let sender = v4(&from);
    let mut orig = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
    // msg_controllen; the data of an IP_ORIGDSTADDR message is a sockaddr_in, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_IP && (*c).cmsg_type == libc::IP_ORIGDSTADDR {
                let sa: libc::sockaddr_in =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::sockaddr_in>());
                orig = Some(v4(&sa));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, sender, orig))
}

fn v4(sa: &libc::sockaddr_in) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
        u16::from_be(sa.sin_port),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_means_this_host_and_the_listener_port() {
        let any: SocketAddr = "0.0.0.0:7400".parse().unwrap();
        assert!(is_direct("127.0.0.1:7400".parse().unwrap(), any));
        assert!(!is_direct("127.0.0.1:7401".parse().unwrap(), any));
        // TEST-NET-3: never an address of this host.
        assert!(!is_direct("203.0.113.5:7400".parse().unwrap(), any));
        let one: SocketAddr = "127.0.0.1:7400".parse().unwrap();
        assert!(is_direct(one, one));
    }

    /// Without interception rules the original destination of a datagram is the socket's
    /// own address: the control message is parsed, sender and length are right.
    #[tokio::test]
    async fn a_direct_datagram_reports_the_socket_address_as_its_destination() {
        let sock = match udp_socket("127.0.0.1:0".parse().unwrap()) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                eprintln!("IP_TRANSPARENT needs root: test skipped ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let me = sock.local_addr().unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"hello", me).unwrap();
        let mut buf = [0u8; 64];
        let (n, from, orig) = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            recv_orig(&sock, &mut buf),
        )
        .await
        .expect("datagram within 5 s")
        .unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(from, tx.local_addr().unwrap());
        assert_eq!(orig, Some(me));
    }
}
