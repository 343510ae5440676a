//! UDP socket set-up, the one place every AeroTP program opens its sockets (the runtime's
//! endpoints, the lab benches, the link relay of `aerotp-emu`): non-blocking, large kernel
//! buffers, and zero IPv4 UDP checksums where they help.
//!
//! Why zero checksums: on a real lossy link a corrupted payload should reach AeroTP's own
//! CRC/FEC (which may repair it) or the relay's peer, instead of being dropped by the
//! receiving kernel's checksum check. IPv6 UDP checksums are mandatory (RFC 8200 §8.1), so
//! there the kernel drops corrupted datagrams and AeroTP sees them as losses.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

/// Socket buffer sizes requested (best effort: a smaller grant only means earlier kernel
/// drops under bursts, so failures to enlarge are ignored).
pub const SOCKET_BUFFER: usize = 8 << 20;

/// A socket set-up step that failed: which step, on which address, and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{op} {addr}: {source}")]
pub struct SocketError {
    /// The step: "creating a UDP socket for", "setting SO_NO_CHECK on", "binding",
    /// "connecting to", "registering with tokio".
    pub op: &'static str,
    /// The address the step was about (the bound one, or the peer for "connecting to").
    pub addr: SocketAddr,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl From<SocketError> for io::Error {
    /// Keeps the OS error's kind (callers match `AddrInUse`, `PermissionDenied`…) and puts the
    /// step and address in the message.
    fn from(e: SocketError) -> io::Error {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

/// Whether a socket bound to `addr` sends zero UDP checksums (`SO_NO_CHECK`): on IPv4, unless
/// bound to a loopback address. A loopback-bound socket can only reach loopback, which corrupts
/// nothing, so zero checksums would buy nothing there, and they would cost GSO (the kernel
/// refuses segmentation offload with zero checksums).
pub fn zero_checksums(addr: SocketAddr) -> bool {
    addr.is_ipv4() && !addr.ip().is_loopback()
}

/// Opens a non-blocking UDP socket bound to `bind` (port 0 = any), with [`SOCKET_BUFFER`]
/// buffers and `SO_NO_CHECK` where [`zero_checksums`] says so, connected to `connect` if
/// given. Must be called within a tokio runtime.
pub fn open(bind: SocketAddr, connect: Option<SocketAddr>) -> Result<UdpSocket, SocketError> {
    let err = |op, addr| move |source| SocketError { op, addr, source };
    let s = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
        .map_err(err("creating a UDP socket for", bind))?;
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    if zero_checksums(bind) {
        set_no_check(&s).map_err(err("setting SO_NO_CHECK on", bind))?;
    }
    s.set_nonblocking(true).map_err(err("binding", bind))?;
    s.bind(&bind.into()).map_err(err("binding", bind))?;
    if let Some(to) = connect {
        s.connect(&to.into()).map_err(err("connecting to", to))?;
    }
    UdpSocket::from_std(s.into()).map_err(err("registering with tokio", bind))
}

/// [`open`] without a peer, as an `io::Result` (the error keeps the OS error's kind).
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    Ok(open(addr, None)?)
}

/// Sets an integer socket option (`setsockopt` with a `c_int`).
#[cfg(target_os = "linux")]
pub fn set_int_option(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the caller passes an fd it keeps open for the call; the option value points to
    // a live c_int and its exact size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option (`getsockopt` into a `c_int`).
#[cfg(target_os = "linux")]
pub(crate) fn int_option(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the caller passes an fd it keeps open for the call; `v` and `len` are live and
    // sized for a c_int.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets `SO_NO_CHECK` (send IPv4 UDP with checksum 0). Written by hand: socket2 does not
/// expose this Linux option.
#[cfg(target_os = "linux")]
fn set_no_check(s: &Socket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK, 1)
}

/// Elsewhere the option does not exist: checksums stay on (corrupted datagrams are losses).
#[cfg(not(target_os = "linux"))]
fn set_no_check(_s: &Socket) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_checksums_only_on_non_loopback_ipv4() {
        assert!(zero_checksums("0.0.0.0:0".parse().unwrap()));
        assert!(zero_checksums("10.1.2.3:9".parse().unwrap()));
        assert!(!zero_checksums("127.0.0.1:0".parse().unwrap()));
        assert!(!zero_checksums("[::]:0".parse().unwrap()));
        assert!(!zero_checksums("[::1]:0".parse().unwrap()));
    }

    #[tokio::test]
    async fn opens_binds_and_connects() {
        let a = open("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let to = a.local_addr().unwrap();
        let b = open("127.0.0.1:0".parse().unwrap(), Some(to)).unwrap();
        b.send(b"ping").await.unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = a.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"ping");
        assert_eq!(from, b.local_addr().unwrap());
        assert_eq!(b.peer_addr().unwrap(), to);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn no_check_set_on_wildcard_ipv4_only() {
        use std::os::fd::AsRawFd;
        let s = open("0.0.0.0:0".parse().unwrap(), None).unwrap();
        let v = int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK).unwrap();
        assert_eq!(v, 1);
        let lo = open("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let v = int_option(lo.as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK).unwrap();
        assert_eq!(v, 0);
    }

    #[tokio::test]
    async fn errors_keep_the_kind_and_name_step_and_address() {
        let a = udp_socket("127.0.0.1:0".parse().unwrap()).unwrap();
        let taken = a.local_addr().unwrap();
        let e = udp_socket(taken).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains(&format!("binding {taken}")), "{e}");
    }
}
