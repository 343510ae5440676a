//! Batched UDP I/O for the driver: generic segmentation offload (GSO, `UDP_SEGMENT`) on send
//! and generic receive offload (GRO, `UDP_GRO`) on receive, on Linux.
//!
//! With GSO one `sendmsg` hands the kernel a train of equal-sized datagrams to one destination
//! (the last may be shorter); it travels the IP stack as one buffer and is cut into datagrams
//! only where needed (on loopback: not at all when the receiver asked for GRO). With GRO one
//! `recvmsg` returns such a train whole, with the segment size in a control message. The
//! datagrams on the wire are exactly those sent one by one; only the per-datagram system-call
//! and stack cost goes. The kernel refuses GSO on a socket that sends zero UDP checksums
//! (`SO_NO_CHECK`), so GSO is used only where checksums are on (see [`crate::udp_socket`]).
//! Where the kernel lacks either feature, or refuses a train, the datagrams go one by one.

use bytes::BytesMut;
use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Most datagrams in one GSO train (the kernel's `UDP_MAX_SEGMENTS` is 64 or more).
pub(crate) const MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO train (a UDP payload fits in 65 507 bytes over IPv4).
pub(crate) const MAX_TRAIN_BYTES: usize = 65_000;
/// Receive buffer: the largest UDP payload, or a whole GRO train.
pub(crate) const RECV_BUFFER: usize = 65_536;

/// A train of datagrams to one destination: `count` datagrams of `segment` bytes, the last
/// possibly shorter, back to back in `buf`.
#[derive(Debug)]
pub(crate) struct Train {
    pub dest: SocketAddr,
    /// The local address the train leaves from (`IP_PKTINFO`); `None`: the socket's own, or
    /// routing's choice (see `crate::sources`).
    pub src: Option<IpAddr>,
    /// The IPv4 TOS / IPv6 traffic-class byte of its datagrams (`crate::marks`; 0 = none set).
    pub tos: u8,
    pub buf: Vec<u8>,
    pub segment: usize,
    pub count: usize,
    /// The last datagram is shorter than `segment`: nothing more may join.
    closed: bool,
}

impl Train {
    fn new(to: SendTo, buf: Vec<u8>) -> Train {
        let (dest, src, tos) = to;
        Train {
            dest,
            src,
            tos,
            segment: buf.len(),
            buf,
            count: 1,
            closed: false,
        }
    }

    /// Whether one more datagram of up to `segment` bytes may still join.
    fn has_room(&self, max_segments: usize) -> bool {
        !self.closed
            && self.count < max_segments
            && self.buf.len() + self.segment <= MAX_TRAIN_BYTES
    }

    /// Whether a datagram of `len` bytes to `to` may follow the ones in the train (a train
    /// is one destination, source and mark).
    fn accepts(&self, to: SendTo, len: usize) -> bool {
        to == (self.dest, self.src, self.tos) && len > 0 && len <= self.segment
    }

    /// The datagrams of the train.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.buf.chunks(self.segment.max(1))
    }
}

/// How a datagram is sent: its destination, its local source address if one was chosen, its
/// TOS byte (DSCP mark).
pub(crate) type SendTo = (SocketAddr, Option<IpAddr>, u8);

/// Outgoing datagrams grouped into trains (bounded: the driver takes at most its batch from the
/// engine before sending).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub trains: Vec<Train>,
    pool: Vec<Vec<u8>>,
    pub datagrams: usize,
}

impl Outbox {
    /// Lets `write` append one datagram straight to the end of the last train's buffer, where
    /// it is sent from: the engine encodes into the train, with no copy between. `write` says
    /// where the datagram goes, the local address it leaves from if the engine chose one, and
    /// its TOS byte (`None`: it wrote nothing). A datagram that may not follow in that train
    /// (another destination, source or mark, longer than its segments) is moved into a train
    /// of its own — one copy, once per train at most. Returns the datagram's destination,
    /// source and mark, and its bytes.
    pub fn fill(
        &mut self,
        max_segments: usize,
        write: impl FnOnce(&mut Vec<u8>) -> Option<SendTo>,
    ) -> Option<(SendTo, &[u8])> {
        // Where the datagram starts in the last train's buffer once placed.
        let at = match self.trains.last_mut() {
            Some(t) if t.has_room(max_segments) => {
                let start = t.buf.len();
                let Some(to) = write(&mut t.buf) else {
                    t.buf.truncate(start);
                    return None;
                };
                let len = t.buf.len() - start;
                if t.accepts(to, len) {
                    t.count += 1;
                    t.closed = len < t.segment;
                    start
                } else {
                    let mut buf = self.pool.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(&t.buf[start..]);
                    t.buf.truncate(start);
                    self.trains.push(Train::new(to, buf));
                    0
                }
            }
            _ => {
                let mut buf = self.pool.pop().unwrap_or_default();
                buf.clear();
                let Some(to) = write(&mut buf) else {
                    self.pool.push(buf);
                    return None;
                };
                self.trains.push(Train::new(to, buf));
                0
            }
        };
        self.datagrams += 1;
        self.trains
            .last()
            .map(|t| ((t.dest, t.src, t.tos), &t.buf[at..]))
    }

    /// Adds one datagram, joining the last train when it can (`max_segments` 1 = no trains).
    #[cfg(test)]
    pub fn push(&mut self, dest: SocketAddr, data: &[u8], max_segments: usize) {
        self.fill(max_segments, |buf| {
            buf.extend_from_slice(data);
            Some((dest, None, 0))
        });
    }

    pub fn is_empty(&self) -> bool {
        self.trains.is_empty()
    }

    /// Whether the last train may still take a datagram of its segment size.
    pub fn last_has_room(&self, max_segments: usize) -> bool {
        self.trains.last().is_some_and(|t| t.has_room(max_segments))
    }

    /// Takes the trains out (their buffers come back through [`Outbox::recycle`]).
    pub fn take(&mut self) -> Vec<Train> {
        self.datagrams = 0;
        std::mem::take(&mut self.trains)
    }

    pub fn recycle(&mut self, mut trains: Vec<Train>) {
        for t in trains.drain(..) {
            if self.pool.len() < 2 * MAX_SEGMENTS {
                self.pool.push(t.buf);
            }
        }
        // Keep the (empty) vector's capacity for the next batch.
        if self.trains.is_empty() {
            self.trains = trains;
        }
    }
}

/// The driver's socket with the offloads it could turn on.
#[derive(Debug)]
pub(crate) struct UdpIo {
    socket: UdpSocket,
    /// Most datagrams per send (1 = no GSO).
    max_segments: usize,
    /// Reads carry the destination address (`IP_PKTINFO`/`IPV6_PKTINFO` is on).
    destinations: bool,
}

impl UdpIo {
    /// Wraps `socket`, turning on GSO (unless `gso` is false) and GRO where the kernel has them,
    /// and, with `pktinfo` (a socket bound to the unspecified address), the destination
    /// address of every datagram read (`crate::sources`).
    pub fn new(socket: UdpSocket, gso: bool, pktinfo: bool) -> UdpIo {
        let max_segments = if gso && sys::gso_supported(&socket) {
            MAX_SEGMENTS
        } else {
            1
        };
        sys::enable_gro(&socket);
        let destinations = pktinfo
            && match sys::enable_pktinfo(&socket) {
                Ok(()) => true,
                Err(e) => {
                    // Replies then leave from the address routing picks, and the engine is
                    // not told local addresses (`LocalAddrs::tells_engine`).
                    tracing::debug!(error = %e, "no destination addresses on reads");
                    false
                }
            };
        UdpIo {
            socket,
            max_segments,
            destinations,
        }
    }

    /// Whether every read says the address the datagram was sent to.
    pub fn destinations(&self) -> bool {
        self.destinations
    }

    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Sends a train; returns how many of its datagrams could not be sent.
    pub async fn send(&mut self, t: &Train) -> usize {
        if t.count > 1 {
            match self.send_one(t.dest, t.src, t.tos, &t.buf, t.segment).await {
                Ok(()) => return 0,
                Err(e) => {
                    // The kernel or the route refused the train (no GSO on this device, a
                    // segment above the path MTU, ...): send one by one from now on.
                    tracing::debug!(error = %e, segments = t.count, "GSO send refused; GSO off");
                    self.max_segments = 1;
                }
            }
        }
        let mut failed = 0;
        for d in t.datagrams() {
            if let Err(e) = self.send_one(t.dest, t.src, t.tos, d, 0).await {
                tracing::debug!(addr = %t.dest, error = %e, "send failed");
                failed += 1;
            }
        }
        failed
    }

    /// Sends from `src`; if this host no longer has that address (a radio that came back
    /// with another one), from routing's choice instead: the peer then sees the path's new
    /// address and validates it (docs/spec.md §9), rather than the path going silent.
    async fn send_one(
        &self,
        dest: SocketAddr,
        src: Option<IpAddr>,
        tos: u8,
        buf: &[u8],
        segment: usize,
    ) -> io::Result<()> {
        match self.send_from((dest, src, tos), buf, segment).await {
            Err(e) if src.is_some_and(source_gone) => {
                tracing::debug!(?src, error = %e, "source address gone; routing's choice");
                self.send_from((dest, None, tos), buf, segment).await
            }
            r => r,
        }
    }

    async fn send_from(&self, to: SendTo, buf: &[u8], segment: usize) -> io::Result<()> {
        loop {
            self.socket.writable().await?;
            match self.socket.try_io(Interest::WRITABLE, || {
                sys::send(&self.socket, to, buf, segment)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// Receives one datagram or GRO train into `buf` (its contents replaced; room for
    /// [`RECV_BUFFER`] bytes is made, reusing its allocation when nothing else holds it)
    /// without waiting. `WouldBlock` when nothing is waiting.
    pub fn try_recv(&self, buf: &mut BytesMut) -> io::Result<Read> {
        buf.clear();
        buf.reserve(RECV_BUFFER);
        let r = self.socket.try_io(Interest::READABLE, || {
            sys::recv(&self.socket, &mut buf.spare_capacity_mut()[..RECV_BUFFER])
        })?;
        // SAFETY: `recv` initialised the first `r.len` bytes of the spare capacity (the
        // kernel wrote them; `r.len` is at most the length it was given).
        unsafe { buf.set_len(r.len) };
        Ok(r)
    }
}

/// Whether `src` is not (or no longer) one of this host's addresses, asked after a send
/// from it failed (Linux then says `ENETUNREACH`, as for a destination without a route, so
/// the error alone does not tell; a path whose radio is down must not fall back to another
/// radio's route, or it would look up).
fn source_gone(src: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(src, 0))
        .is_err_and(|e| e.kind() == io::ErrorKind::AddrNotAvailable)
}

/// What one read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Read {
    /// Bytes in the buffer: one datagram or a GRO train.
    pub len: usize,
    pub from: SocketAddr,
    /// Length of each datagram of a train (the last may be shorter); `len` for one.
    pub stride: usize,
    /// The address the datagrams were sent to, where the socket reports it (`pktinfo`).
    pub to: Option<IpAddr>,
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::mem::MaybeUninit;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::os::fd::AsRawFd;

    use socket2::SockAddr;
    use tokio::net::UdpSocket;

    use super::Read;
    use crate::cmsg::{self, Control, Message};

    /// Asks for the destination address of every datagram read (`IP_PKTINFO`,
    /// `IPV6_RECVPKTINFO`).
    pub(super) fn enable_pktinfo(s: &UdpSocket) -> io::Result<()> {
        let fd = s.as_raw_fd();
        if s.local_addr()?.is_ipv4() {
            crate::socket::set_int_option(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)
        } else {
            crate::socket::set_int_option(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)
        }
    }

    pub(super) fn gso_supported(s: &UdpSocket) -> bool {
        crate::socket::int_option(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
    }

    pub(super) fn enable_gro(s: &UdpSocket) {
        // Best effort: without GRO each datagram is one read.
        let _ = crate::socket::set_int_option(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1);
    }

    /// One `sendmsg` to `to`'s destination; `segment` > 0 and shorter than `buf` asks for
    /// segmentation, `to`'s source sets the source address and its TOS byte, if not 0, the
    /// IPv4 TOS (`IP_TOS`) or IPv6 traffic class (`IPV6_TCLASS`) of these datagrams alone.
    pub(super) fn send(
        s: &UdpSocket,
        (dest, src, tos): super::SendTo,
        buf: &[u8],
        segment: usize,
    ) -> io::Result<()> {
        let seg =
            if segment > 0 && segment < buf.len() {
                Some(u16::try_from(segment).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "segment too large")
                })?)
            } else {
                None
            };
        let control = control(seg, src, tos, dest)?;
        cmsg::sendmsg(s, &SockAddr::from(dest), buf, &control).map(|_| ())
    }

    /// The control messages of one `sendmsg`: the segment size (`seg`), the source address
    /// (`src`) and the TOS byte (`tos`), each only when there is one.
    fn control(
        seg: Option<u16>,
        src: Option<IpAddr>,
        tos: u8,
        dest: SocketAddr,
    ) -> io::Result<Control> {
        let mut c = Control::new();
        if let Some(seg) = seg {
            c.push(&Message::Segment(seg))?;
        }
        match src {
            Some(IpAddr::V4(local)) => c.push(&Message::PacketInfoV4 {
                ifindex: 0,
                local,
                dest: Ipv4Addr::UNSPECIFIED,
            })?,
            Some(IpAddr::V6(addr)) => c.push(&Message::PacketInfoV6 { addr, ifindex: 0 })?,
            None => {}
        }
        if tos != 0 {
            // An IPv4 peer of an IPv6 socket (an IPv4-mapped address) is sent to by the IPv4
            // stack, which reads IP_TOS; a native IPv6 peer takes IPV6_TCLASS.
            c.push(&match dest {
                SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_none() => {
                    Message::TrafficClass(tos)
                }
                _ => Message::Tos(tos),
            })?;
        }
        Ok(c)
    }

    /// One `recvmsg` into `buf` (written, never read: it need not be initialised), with
    /// the GRO segment size and the destination address if reported.
    pub(super) fn recv(s: &UdpSocket, buf: &mut [MaybeUninit<u8>]) -> io::Result<Read> {
        let mut control = Control::new();
        let r = cmsg::recvmsg(s, buf, &mut control)?;
        let (n, from, truncated) = (r.len, r.from, r.flags & libc::MSG_TRUNC != 0);
        let mut stride = n;
        let mut to = None;
        for m in control.messages() {
            match m {
                Message::Gro(v) if v > 0 => stride = v as usize,
                Message::PacketInfoV4 { dest, .. } => to = Some(IpAddr::V4(dest)),
                Message::PacketInfoV6 { addr, .. } => to = Some(IpAddr::V6(addr)),
                _ => {}
            }
        }
        if truncated {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "datagram truncated",
            ));
        }
        let from = from
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP sender"))?;
        Ok(Read {
            len: n,
            from,
            stride,
            to,
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::io;
    use std::mem::MaybeUninit;
    use std::net::{IpAddr, SocketAddr};
    use tokio::net::UdpSocket;

    use super::Read;

    pub(super) fn gso_supported(_s: &UdpSocket) -> bool {
        false
    }

    pub(super) fn enable_gro(_s: &UdpSocket) {}

    pub(super) fn enable_pktinfo(_s: &UdpSocket) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "packet info is read on Linux only",
        ))
    }

    /// Without packet info the source is the socket's or routing's (`src` is not set), and
    /// datagrams go unmarked (DSCP marks are set per datagram on Linux only).
    pub(super) fn send(
        s: &UdpSocket,
        (dest, _src, _tos): super::SendTo,
        buf: &[u8],
        _segment: usize,
    ) -> io::Result<()> {
        s.try_send_to(buf, dest).map(|_| ())
    }

    pub(super) fn recv(s: &UdpSocket, buf: &mut [MaybeUninit<u8>]) -> io::Result<Read> {
        for b in buf.iter_mut() {
            b.write(0);
        }
        // SAFETY: every byte was just initialised.
        let buf = unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) };
        let (n, from) = s.try_recv_from(buf)?;
        Ok(Read {
            len: n,
            from,
            stride: n,
            to: None,
        })
    }
}

#[cfg(test)]
mod tests;
