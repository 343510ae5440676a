//! Buffers of the UDP sockets that face local applications (a route's listener, the socket
//! toward a destination). A gateway hands datagrams on in bursts: an AeroTP receiver holding
//! a hole for erasure repair releases up to `max_delay` of a stream at once, and a
//! destination answers such a burst with one. With the kernel's default receive buffer (about
//! 200 datagrams) the rest of a burst is dropped in the kernel, counted only in
//! `/proc/net/snmp` `RcvbufErrors`; so these sockets ask for the same 8 MiB as the AeroTP
//! socket (`aerotp_net`'s `SOCKET_BUFFER`), which Linux caps at `net.core.rmem_max`
//! (docs/gateway.md, "UDP routes and erasure repair").

use tokio::net::{ToSocketAddrs, UdpSocket};

/// Receive and send buffer asked for on application-facing UDP sockets.
pub const APP_UDP_BUFFER: usize = 8 << 20;

/// Asks for [`APP_UDP_BUFFER`] each way. The kernel caps the request instead of refusing
/// it, so a failure here is not an error of the route; the size in force is logged.
pub fn size_for_bursts(sock: &UdpSocket) {
    let r = socket2::SockRef::from(sock);
    let _ = r.set_recv_buffer_size(APP_UDP_BUFFER);
    let _ = r.set_send_buffer_size(APP_UDP_BUFFER);
    tracing::debug!(
        recv_buffer = r.recv_buffer_size().unwrap_or(0),
        "application-facing UDP socket"
    );
}

/// Binds an application-facing UDP socket and sizes it ([`size_for_bursts`]).
pub async fn bind(addr: impl ToSocketAddrs) -> std::io::Result<UdpSocket> {
    let sock = UdpSocket::bind(addr).await?;
    size_for_bursts(&sock);
    Ok(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bound_socket_gets_more_than_the_default_buffer() {
        let default = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sized = bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let get = |s: &UdpSocket| socket2::SockRef::from(s).recv_buffer_size().unwrap();
        // Linux caps the request at net.core.rmem_max; any host that allows more than its
        // default shows the growth (rmem_max equal to rmem_default would not, so say so).
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let def: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        if max > def {
            assert!(
                get(&sized) > get(&default),
                "{} vs {}",
                get(&sized),
                get(&default)
            );
        } else {
            assert!(get(&sized) >= get(&default));
        }
    }
}
