//! Control messages (`cmsg`) of `sendmsg`/`recvmsg`, built and parsed in one place for every
//! AeroTP socket that uses them (Linux): the driver's UDP offloads and marks
//! ([`crate::udp`]: `UDP_SEGMENT`, `UDP_GRO`, `IP_PKTINFO`/`IPV6_PKTINFO`,
//! `IP_TOS`/`IPV6_TCLASS`), the gateway's transparent UDP (`IP_ORIGDSTADDR`/`IPV6_ORIGDSTADDR`)
//! and the tests' DSCP reader (`aerotp_testkit::tos`: the TOS byte received).
//!
//! Written by hand over byte slices rather than with a crate: neither std, tokio nor socket2
//! parse control messages; quinn-udp (in the tree through quinn) keeps its own private; nix
//! (not in the tree) parses only what its own `recvmsg` returned, so its parser cannot be run
//! over arbitrary bytes, and it would put its `sendmsg`/`recvmsg` on the driver's hot path.
//! Here the parser is safe code over `&[u8]`: every length the buffer states is checked
//! against the bytes there before it is used, so no input makes it read out of bounds, panic
//! or loop (each message advances by at least one header; see the tests, which also check the
//! layout against libc's `CMSG_*` macros). The header is libc's `cmsghdr`, read and written
//! whole, so its field widths are the C library's.
//!
//! Send: [`Control::push`] each message, then [`sendmsg`]. Receive: [`recvmsg`], then
//! [`Control::messages`]. These two are the only `sendmsg`/`recvmsg` calls of the runtime,
//! the gateway and the test kit.

use std::io;
use std::mem::{size_of, zeroed, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use socket2::SockAddr;

/// Bytes of control space a [`Control`] holds: a segment size or GRO `int`, an IPv6
/// packet-info message (24 + 40 bytes) and a TOS `int`, or an `IPV6_ORIGDSTADDR` (a
/// `sockaddr_in6`), with room to spare for messages nobody asked for.
pub const SPACE: usize = 128;

/// One control message AeroTP writes or reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// `SOL_UDP`/`UDP_SEGMENT` (send): cut the datagram into segments of this many bytes
    /// (generic segmentation offload). A `u16`.
    Segment(u16),
    /// `SOL_UDP`/`UDP_GRO` (receive): the length of each datagram of a coalesced train (an
    /// `int`, as the kernel wrote it).
    Gro(i32),
    /// `IPPROTO_IP`/`IP_PKTINFO`: on send, `local` is the source address (`ipi_spec_dst`); on
    /// receive, `dest` is the address the datagram was sent to (`ipi_addr`).
    PacketInfoV4 {
        ifindex: i32,
        local: Ipv4Addr,
        dest: Ipv4Addr,
    },
    /// `IPPROTO_IPV6`/`IPV6_PKTINFO`: the source address on send, the destination on receive.
    PacketInfoV6 { addr: Ipv6Addr, ifindex: u32 },
    /// `IPPROTO_IP`/`IP_TOS`: the IPv4 TOS byte (written as an `int`; the kernel reports one
    /// byte, which is read, as is an `int`).
    Tos(u8),
    /// `IPPROTO_IPV6`/`IPV6_TCLASS`: the IPv6 traffic-class byte (an `int` both ways).
    TrafficClass(u8),
    /// `IP_ORIGDSTADDR` (a `sockaddr_in`) or `IPV6_ORIGDSTADDR` (a `sockaddr_in6`): the
    /// original destination of a datagram TPROXY steered to a transparent socket (receive).
    /// Flow label and scope are kept as the kernel gave them.
    OrigDst(SocketAddr),
}

/// `CMSG_ALIGN`: lengths are rounded up to the alignment of `size_t` (glibc and musl alike).
const fn align(len: usize) -> usize {
    let a = size_of::<usize>();
    (len + a - 1) & !(a - 1)
}

/// `CMSG_LEN(0)`: where a message's data starts.
const HEADER: usize = align(size_of::<libc::cmsghdr>());

/// `CMSG_SPACE(len)`: the bytes a message with `len` bytes of data takes, padding included.
const fn space(len: usize) -> usize {
    HEADER + align(len)
}

/// Control space, aligned for `cmsghdr`, with the length of the messages written or received.
#[repr(C, align(8))]
#[derive(Clone)]
pub struct Control {
    bytes: [u8; SPACE],
    len: usize,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(parse(self.as_bytes())).finish()
    }
}

impl Default for Control {
    fn default() -> Control {
        Control::new()
    }
}

impl Control {
    pub const fn new() -> Control {
        Control {
            bytes: [0; SPACE],
            len: 0,
        }
    }

    /// The messages written (or received), with the padding between them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Appends `m` (`CMSG_SPACE` of its data); an error if it does not fit in [`SPACE`].
    pub fn push(&mut self, m: &Message) -> io::Result<()> {
        let (level, kind, data, n) = encode(m);
        let start = self.len;
        let end = start + space(n);
        if end > SPACE {
            return Err(io::Error::other(format!(
                "control messages do not fit in {SPACE} bytes"
            )));
        }
        // SAFETY: all-zero bytes are a valid `cmsghdr` (integers, and padding on some C
        // libraries, which is why it is not built field by field).
        let mut h: libc::cmsghdr = unsafe { zeroed() };
        h.cmsg_len = (HEADER + n) as _;
        h.cmsg_level = level;
        h.cmsg_type = kind;
        // SAFETY: `h` is a live plain-data value of `size_of::<cmsghdr>()` bytes.
        let hb = unsafe {
            std::slice::from_raw_parts((&h as *const libc::cmsghdr).cast::<u8>(), size_of_hdr())
        };
        let msg = &mut self.bytes[start..end];
        msg.fill(0);
        msg[..hb.len()].copy_from_slice(hb);
        msg[HEADER..HEADER + n].copy_from_slice(&data[..n]);
        self.len = end;
        Ok(())
    }

    /// The messages pushed, or those [`recvmsg`] received (see [`parse`]).
    pub fn messages(&self) -> Messages<'_> {
        parse(self.as_bytes())
    }

    /// Points `msg` at the messages pushed (no control at all if none). `msg` then refers to
    /// this value, which must stay in place until the call; the kernel only reads it.
    fn attach(&self, msg: &mut libc::msghdr) {
        if self.len == 0 {
            msg.msg_control = std::ptr::null_mut();
            msg.msg_controllen = 0;
        } else {
            msg.msg_control = self.bytes.as_ptr() as *mut libc::c_void;
            msg.msg_controllen = self.len as _;
        }
    }

    /// Points `msg` at the whole space, for `recvmsg` to fill; then [`Control::received`].
    fn attach_space(&mut self, msg: &mut libc::msghdr) {
        self.len = 0;
        msg.msg_control = self.bytes.as_mut_ptr().cast();
        msg.msg_controllen = SPACE as _;
    }

    /// Takes the length of the messages `recvmsg` left in the space (`msg_controllen`, at
    /// most [`SPACE`]).
    #[allow(clippy::unnecessary_cast)] // msg_controllen is a size_t or a socklen_t by libc
    fn received(&mut self, msg: &libc::msghdr) {
        self.len = (msg.msg_controllen as usize).min(SPACE);
    }
}

/// One `sendmsg` of `buf` to `dest` with the messages of `control`; the bytes sent.
pub fn sendmsg(
    socket: &impl AsRawFd,
    dest: &SockAddr,
    buf: &[u8],
    control: &Control,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid (no name, no iovecs, no control).
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = dest.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = dest.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    control.attach(&mut msg);
    // SAFETY: every pointer in `msg` refers to a live buffer of the stated length, which the
    // kernel only reads.
    let r = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// What one [`recvmsg`] returned.
#[derive(Debug, Clone)]
pub struct Received {
    /// Bytes written at the start of the buffer.
    pub len: usize,
    /// The sender.
    pub from: SockAddr,
    /// `msg_flags` (e.g. `MSG_TRUNC`: the datagram was longer than the buffer).
    pub flags: libc::c_int,
}

/// One `recvmsg` into `buf` (written, never read: it need not be initialised), its control
/// messages into `control` (read them with [`Control::messages`]).
pub fn recvmsg(
    socket: &impl AsRawFd,
    buf: &mut [MaybeUninit<u8>],
    control: &mut Control,
) -> io::Result<Received> {
    let fd = socket.as_raw_fd();
    // SAFETY: `try_init` hands us storage for any socket address and its length; every
    // pointer in `msg` refers to a live buffer of the stated length.
    let ((len, flags), from) = unsafe {
        SockAddr::try_init(|storage, name_len| {
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let mut msg: libc::msghdr = zeroed();
            msg.msg_name = storage.cast();
            msg.msg_namelen = *name_len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            control.attach_space(&mut msg);
            let r = libc::recvmsg(fd, &mut msg, 0);
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            *name_len = msg.msg_namelen;
            control.received(&msg);
            Ok((r as usize, msg.msg_flags))
        })?
    };
    Ok(Received { len, from, flags })
}

/// [`recvmsg`] into an initialised buffer.
pub fn recvmsg_into(
    socket: &impl AsRawFd,
    buf: &mut [u8],
    control: &mut Control,
) -> io::Result<Received> {
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout; `recvmsg` only writes
    // initialised bytes into it, so `buf` stays initialised.
    let buf = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
    recvmsg(socket, buf, control)
}

fn size_of_hdr() -> usize {
    size_of::<libc::cmsghdr>()
}

/// Level, type and data (the first `n` bytes of the array) of `m`.
fn encode(m: &Message) -> (libc::c_int, libc::c_int, [u8; 28], usize) {
    let mut d = [0u8; 28];
    let int = |v: u8| libc::c_int::from(v).to_ne_bytes();
    let (level, kind, n) = match m {
        Message::Segment(s) => (
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            fill(&mut d, &[&s.to_ne_bytes()]),
        ),
        Message::Gro(g) => (
            libc::SOL_UDP,
            libc::UDP_GRO,
            fill(&mut d, &[&g.to_ne_bytes()]),
        ),
        Message::Tos(t) => (libc::IPPROTO_IP, libc::IP_TOS, fill(&mut d, &[&int(*t)])),
        Message::TrafficClass(t) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            fill(&mut d, &[&int(*t)]),
        ),
        // struct in_pktinfo { int ipi_ifindex; in_addr ipi_spec_dst; in_addr ipi_addr; }
        Message::PacketInfoV4 {
            ifindex,
            local,
            dest,
        } => (
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            fill(
                &mut d,
                &[&ifindex.to_ne_bytes(), &local.octets(), &dest.octets()],
            ),
        ),
        // struct in6_pktinfo { in6_addr ipi6_addr; unsigned ipi6_ifindex; }
        Message::PacketInfoV6 { addr, ifindex } => (
            libc::IPPROTO_IPV6,
            libc::IPV6_PKTINFO,
            fill(&mut d, &[&addr.octets(), &ifindex.to_ne_bytes()]),
        ),
        // struct sockaddr_in { sa_family_t; in_port_t (network order); in_addr; zero[8] }
        Message::OrigDst(SocketAddr::V4(a)) => (
            libc::SOL_IP,
            libc::IP_ORIGDSTADDR,
            fill(
                &mut d,
                &[
                    &FAMILY_V4,
                    &a.port().to_be_bytes(),
                    &a.ip().octets(),
                    &[0; 8],
                ],
            ),
        ),
        // struct sockaddr_in6 { family; port; u32 flowinfo (network order); in6_addr;
        // u32 scope_id }
        Message::OrigDst(SocketAddr::V6(a)) => (
            libc::SOL_IPV6,
            libc::IPV6_ORIGDSTADDR,
            fill(
                &mut d,
                &[
                    &FAMILY_V6,
                    &a.port().to_be_bytes(),
                    &a.flowinfo().to_be_bytes(),
                    &a.ip().octets(),
                    &a.scope_id().to_ne_bytes(),
                ],
            ),
        ),
    };
    (level, kind, d, n)
}

/// Writes `parts` one after another at the start of `d`; their total length.
fn fill(d: &mut [u8; 28], parts: &[&[u8]]) -> usize {
    let mut n = 0;
    for p in parts {
        d[n..n + p.len()].copy_from_slice(p);
        n += p.len();
    }
    n
}

const FAMILY_V4: [u8; 2] = (libc::AF_INET as libc::sa_family_t).to_ne_bytes();
const FAMILY_V6: [u8; 2] = (libc::AF_INET6 as libc::sa_family_t).to_ne_bytes();

/// The messages in `bytes` (a control buffer as `recvmsg` fills it), in order: those this
/// module knows and whose data has the length their kind needs. Others, and ones of the
/// wrong length, are passed over; a header that does not fit, or states a length shorter
/// than itself or past the end, ends the walk (as `CMSG_NXTHDR` does).
pub fn parse(bytes: &[u8]) -> Messages<'_> {
    Messages { bytes, at: 0 }
}

/// Iterator over the messages of a control buffer (see [`parse`]).
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for Messages<'_> {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        loop {
            let (level, kind, data) = self.next_raw()?;
            if let Some(m) = decode(level, kind, data) {
                return Some(m);
            }
        }
    }
}

impl<'a> Messages<'a> {
    /// The next message's level, type and data, whatever its kind; `None` at the end.
    #[allow(clippy::unnecessary_cast)] // cmsg_len is a size_t or a socklen_t by libc
    fn next_raw(&mut self) -> Option<(libc::c_int, libc::c_int, &'a [u8])> {
        let rest = self.bytes.get(self.at..)?;
        if rest.len() < size_of_hdr() {
            self.at = self.bytes.len();
            return None;
        }
        // SAFETY: `rest` holds at least `size_of::<cmsghdr>()` bytes, read unaligned; any
        // bytes are a valid `cmsghdr` (integers only).
        let h: libc::cmsghdr = unsafe { std::ptr::read_unaligned(rest.as_ptr().cast()) };
        let len = usize::try_from(h.cmsg_len as u64).unwrap_or(usize::MAX);
        if len < HEADER || len > rest.len() {
            self.at = self.bytes.len();
            return None;
        }
        // At least HEADER bytes on, and at most to the end (`align` of a length within the
        // buffer cannot overflow).
        self.at = (self.at + align(len)).min(self.bytes.len());
        Some((h.cmsg_level, h.cmsg_type, &rest[HEADER..len]))
    }
}

/// A message of a known kind whose data is the right length.
fn decode(level: libc::c_int, kind: libc::c_int, data: &[u8]) -> Option<Message> {
    let u16_at = |i: usize| Some(u16::from_ne_bytes(data.get(i..i + 2)?.try_into().ok()?));
    let u32_at = |i: usize| Some(u32::from_ne_bytes(data.get(i..i + 4)?.try_into().ok()?));
    let ip4_at = |i: usize| {
        Some(Ipv4Addr::from(
            <[u8; 4]>::try_from(data.get(i..i + 4)?).ok()?,
        ))
    };
    let ip6_at = |i: usize| {
        Some(Ipv6Addr::from(
            <[u8; 16]>::try_from(data.get(i..i + 16)?).ok()?,
        ))
    };
    let int = || (data.len() == 4).then(|| u32_at(0)).flatten();
    match (level, kind) {
        (libc::SOL_UDP, libc::UDP_SEGMENT) if data.len() == 2 => u16_at(0).map(Message::Segment),
        (libc::SOL_UDP, libc::UDP_GRO) => int().map(|v| Message::Gro(v as i32)),
        (libc::IPPROTO_IP, libc::IP_TOS) => match data {
            [b] => Some(Message::Tos(*b)),
            _ => int().map(|v| Message::Tos(v as u8)),
        },
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => int().map(|v| Message::TrafficClass(v as u8)),
        (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() == 12 => Some(Message::PacketInfoV4 {
            ifindex: u32_at(0)? as i32,
            local: ip4_at(4)?,
            dest: ip4_at(8)?,
        }),
        (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() == 20 => {
            Some(Message::PacketInfoV6 {
                addr: ip6_at(0)?,
                ifindex: u32_at(16)?,
            })
        }
        (libc::SOL_IP, libc::IP_ORIGDSTADDR)
            if data.len() == size_of::<libc::sockaddr_in>()
                && u16_at(0)? == libc::AF_INET as u16 =>
        {
            let port = u16::from_be(u16_at(2)?);
            Some(Message::OrigDst(SocketAddrV4::new(ip4_at(4)?, port).into()))
        }
        (libc::SOL_IPV6, libc::IPV6_ORIGDSTADDR)
            if data.len() == size_of::<libc::sockaddr_in6>()
                && u16_at(0)? == libc::AF_INET6 as u16 =>
        {
            let port = u16::from_be(u16_at(2)?);
            let flow = u32::from_be(u32_at(4)?);
            let a = SocketAddrV6::new(ip6_at(8)?, port, flow, u32_at(24)?);
            Some(Message::OrigDst(a.into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
