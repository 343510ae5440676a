//! IPv4/IPv6 + TCP segments as the user-space TCP of the ingress reads them from its TUN
//! device and writes them back: parsed without panicking (every length checked against the
//! packet), built with correct checksums.
//!
//! Written by hand: the few header fields a minimal TCP needs (ports, sequence and
//! acknowledgement numbers, flags, window, the MSS, window-scale, SACK and timestamp options)
//! are less
//! code than adapting a packet crate's types, and no crate in the dependency tree parses TCP.
//! The checksums are `aerotp_tun::checksum`'s, shared with the lab.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use aerotp_tun::checksum as csum;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

const PROTO_TCP: u8 = 6;
const TCP_HDR: usize = 20;

/// One TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// The MSS option (SYN only).
    pub mss: Option<u16>,
    /// The window-scale option's shift (SYN only).
    pub wscale: Option<u8>,
    /// The SACK-permitted option (SYN only, RFC 2018).
    pub sack_ok: bool,
    /// The SACK option's blocks, 8 bytes each, as received ([`Segment::sack_blocks`]).
    pub sack: &'a [u8],
    /// The timestamps option (RFC 7323): TSval, TSecr.
    pub ts: Option<(u32, u32)>,
    pub payload: &'a [u8],
}

impl Segment<'_> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Sequence space the segment takes: its bytes, plus one each for SYN and FIN.
    pub fn seq_len(&self) -> u32 {
        self.payload.len() as u32 + u32::from(self.has(SYN)) + u32::from(self.has(FIN))
    }

    /// The SACK blocks (left edge, right edge) the segment carries (read by the tests).
    #[cfg(test)]
    pub fn sack_blocks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.sack
            .chunks_exact(8)
            .filter_map(|b| Some((be32(b, 0)?, be32(b, 4)?)))
    }
}

/// Why a packet was not taken as a TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not IPv4/IPv6, a length that does not fit, a fragment, an IPv6 extension header.
    Malformed,
    /// Another transport protocol.
    NotTcp,
    /// The TCP checksum is wrong.
    Checksum,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Parses one IP packet read from the TUN device (no packet-information header).
pub fn parse(p: &[u8]) -> Result<Segment<'_>, Skip> {
    let (src, dst, tcp) = ip_header(p)?;
    if tcp.len() < TCP_HDR {
        return Err(Skip::Malformed);
    }
    let off = usize::from(tcp[12] >> 4) * 4;
    if off < TCP_HDR || off > tcp.len() {
        return Err(Skip::Malformed);
    }
    if checksum(src, dst, tcp) != 0 && !offloaded(src, dst, tcp) {
        return Err(Skip::Checksum);
    }
    let o = options(&tcp[TCP_HDR..off])?;
    Ok(Segment {
        src: SocketAddr::new(src, be16(tcp, 0).ok_or(Skip::Malformed)?),
        dst: SocketAddr::new(dst, be16(tcp, 2).ok_or(Skip::Malformed)?),
        seq: be32(tcp, 4).ok_or(Skip::Malformed)?,
        ack: be32(tcp, 8).ok_or(Skip::Malformed)?,
        flags: tcp[13],
        window: be16(tcp, 14).ok_or(Skip::Malformed)?,
        mss: o.mss,
        wscale: o.wscale,
        sack_ok: o.sack_ok,
        sack: o.sack,
        ts: o.ts,
        payload: &tcp[off..],
    })
}

/// The IPv4 or IPv6 header of `p`: its source and destination, and the TCP segment it
/// carries.
fn ip_header(p: &[u8]) -> Result<(IpAddr, IpAddr, &[u8]), Skip> {
    Ok(match p.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(p[0] & 0x0F) * 4;
            let total = usize::from(be16(p, 2).ok_or(Skip::Malformed)?);
            let frag = be16(p, 6).ok_or(Skip::Malformed)?;
            if ihl < 20 || total < ihl || total > p.len() || frag & 0x3FFF != 0 {
                return Err(Skip::Malformed);
            }
            if p[9] != PROTO_TCP {
                return Err(Skip::NotTcp);
            }
            let a = |at: usize| IpAddr::V4(Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]));
            (a(12), a(16), &p[ihl..total])
        }
        Some(6) => {
            if p.len() < 40 {
                return Err(Skip::Malformed);
            }
            let len = usize::from(be16(p, 4).ok_or(Skip::Malformed)?);
            if 40 + len > p.len() {
                return Err(Skip::Malformed);
            }
            // Extension headers are not followed (an intercepted flow's segments carry none).
            if p[6] != PROTO_TCP {
                return Err(Skip::NotTcp);
            }
            let a = |at: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&p[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(o))
            };
            (a(8), a(24), &p[40..40 + len])
        }
        _ => return Err(Skip::Malformed),
    })
}

/// The TCP options a segment's fields take.
#[derive(Default)]
struct Options<'a> {
    mss: Option<u16>,
    wscale: Option<u8>,
    sack_ok: bool,
    sack: &'a [u8],
    ts: Option<(u32, u32)>,
}

/// Reads the options area `opts` of a TCP header.
fn options(mut opts: &[u8]) -> Result<Options<'_>, Skip> {
    let mut o = Options::default();
    while let Some(&kind) = opts.first() {
        match kind {
            0 => break,
            1 => opts = &opts[1..],
            _ => {
                let len = usize::from(*opts.get(1).ok_or(Skip::Malformed)?);
                if len < 2 || len > opts.len() {
                    return Err(Skip::Malformed);
                }
                match (kind, len) {
                    (2, 4) => o.mss = be16(opts, 2),
                    (3, 3) => o.wscale = Some(opts[2]),
                    (4, 2) => o.sack_ok = true,
                    (5, _) if (len - 2) % 8 == 0 => o.sack = &opts[2..len],
                    (8, 10) => o.ts = be32(opts, 2).zip(be32(opts, 6)),
                    _ => {}
                }
                opts = &opts[len..];
            }
        }
    }
    Ok(o)
}

/// The TCP checksum over the pseudo-header and `tcp` as it stands (0 when a received
/// segment's checksum is right; the value to store when the field is zero).
fn checksum(src: IpAddr, dst: IpAddr, tcp: &[u8]) -> u16 {
    // Mixed families never come from one packet.
    csum::transport(src, dst, PROTO_TCP, tcp).unwrap_or(0xFFFF)
}

/// Whether the checksum field holds what a sender that offloads checksumming leaves there
/// (`CHECKSUM_PARTIAL`: the folded pseudo-header sum, the payload not summed yet). Linux
/// forwards such packets unchanged from a veth in another namespace into a TUN device; they
/// crossed only the host's memory, so there is nothing to verify.
fn offloaded(src: IpAddr, dst: IpAddr, tcp: &[u8]) -> bool {
    csum::pseudo_header(src, dst, PROTO_TCP, tcp.len())
        .is_some_and(|acc| be16(tcp, 16) == Some(csum::fold(acc)))
}

/// What a segment we send says.
#[derive(Debug, Clone)]
pub struct Out<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// SYN-ACK: our MSS, (when the peer offered scaling) our shift, and whether SACK is
    /// permitted (when the peer offered it).
    pub syn_opts: Option<(u16, Option<u8>, bool)>,
    /// SACK blocks (left edge, right edge) to report, a D-SACK block first: as many are
    /// written as fit in the 40 option bytes (4 alone, 3 beside timestamps).
    pub sack: Vec<(u32, u32)>,
    /// The timestamps option to send (RFC 7323): TSval, TSecr.
    pub ts: Option<(u32, u32)>,
    pub payload: &'a [u8],
}

/// Builds the IP packet of `o` (IPv4 or IPv6 by its addresses). The payload is at most one
/// segment (the connection's MSS), far below the 16-bit length fields' limit.
pub fn build(o: &Out<'_>) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(TCP_HDR + 8 + o.payload.len());
    tcp.extend_from_slice(&o.src.port().to_be_bytes());
    tcp.extend_from_slice(&o.dst.port().to_be_bytes());
    tcp.extend_from_slice(&o.seq.to_be_bytes());
    tcp.extend_from_slice(&o.ack.to_be_bytes());
    let mut opts = Vec::new();
    if let Some((mss, ws, sack_ok)) = o.syn_opts {
        opts.extend_from_slice(&[2, 4]);
        opts.extend_from_slice(&mss.to_be_bytes());
        if let Some(s) = ws {
            opts.extend_from_slice(&[1, 3, 3, s]);
        }
        if sack_ok {
            opts.extend_from_slice(&[1, 1, 4, 2]);
        }
    }
    if let Some((val, ecr)) = o.ts {
        opts.extend_from_slice(&[1, 1, 8, 10]);
        opts.extend_from_slice(&val.to_be_bytes());
        opts.extend_from_slice(&ecr.to_be_bytes());
    }
    // What is left of the 40 option bytes, less two NOPs and the SACK option's kind and
    // length, in 8-byte blocks.
    let fit = 40usize.saturating_sub(opts.len() + 4) / 8;
    let blocks = &o.sack[..o.sack.len().min(fit)];
    if !blocks.is_empty() {
        opts.extend_from_slice(&[1, 1, 5, 2 + 8 * blocks.len() as u8]);
        for (l, r) in blocks {
            opts.extend_from_slice(&l.to_be_bytes());
            opts.extend_from_slice(&r.to_be_bytes());
        }
    }
    let off = (TCP_HDR + opts.len()) / 4;
    tcp.push((off as u8) << 4);
    tcp.push(o.flags);
    tcp.extend_from_slice(&o.window.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]);
    tcp.extend_from_slice(&opts);
    tcp.extend_from_slice(o.payload);
    let c = checksum(o.src.ip(), o.dst.ip(), &tcp);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    match (o.src.ip(), o.dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + tcp.len()) as u16;
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, PROTO_TCP, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let h = csum::ipv4_header(&ip);
            ip[10..12].copy_from_slice(&h.to_be_bytes());
            ip.extend_from_slice(&tcp);
            ip
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(x) => x.octets(),
                IpAddr::V4(x) => x.to_ipv6_mapped().octets(),
            };
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
            ip.extend_from_slice(&[PROTO_TCP, 64]);
            ip.extend_from_slice(&v6(s));
            ip.extend_from_slice(&v6(d));
            ip.extend_from_slice(&tcp);
            ip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out<'a>(src: &str, dst: &str, payload: &'a [u8], syn: bool) -> Out<'a> {
        Out {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq: 0xFFFF_FFF0,
            ack: 7,
            flags: if syn { SYN | ACK } else { ACK | PSH },
            window: 1234,
            syn_opts: syn.then_some((1460, Some(7), true)),
            sack: if syn {
                vec![]
            } else {
                vec![(5, 9), (0xFFFF_FFF0, 3)]
            },
            ts: Some((0xDEAD_BEEF, if syn { 42 } else { 43 })),
            payload,
        }
    }

    #[test]
    fn built_segments_parse_back_both_families() {
        for (s, d) in [
            ("10.0.0.1:80", "10.0.0.2:40000"),
            ("[fd00::1]:80", "[fd00::2]:40000"),
        ] {
            for syn in [false, true] {
                let o = out(s, d, b"hello, odd length", syn);
                let p = build(&o);
                let seg = parse(&p).unwrap();
                assert_eq!(seg.src, o.src);
                assert_eq!(seg.dst, o.dst);
                assert_eq!(
                    (seg.seq, seg.ack, seg.flags, seg.window),
                    (o.seq, 7, o.flags, 1234)
                );
                assert_eq!(seg.payload, b"hello, odd length");
                assert_eq!(seg.mss, syn.then_some(1460));
                assert_eq!(seg.wscale, syn.then_some(7));
                assert_eq!(seg.sack_ok, syn);
                assert_eq!(seg.ts, Some((0xDEAD_BEEF, if syn { 42 } else { 43 })));
                let blocks: Vec<_> = seg.sack_blocks().collect();
                assert_eq!(
                    blocks,
                    if syn {
                        vec![]
                    } else {
                        vec![(5, 9), (0xFFFF_FFF0, 3)]
                    }
                );
            }
        }
    }

    #[test]
    fn sack_blocks_are_cut_to_what_fits_beside_the_timestamps() {
        let mut o = out("10.0.0.1:80", "10.0.0.2:40000", b"x", false);
        o.sack = (0..5u32).map(|i| (i * 10, i * 10 + 5)).collect();
        let p = build(&o);
        let seg = parse(&p).unwrap();
        assert_eq!(
            seg.sack_blocks().count(),
            3,
            "12 option bytes of timestamps: 3 blocks"
        );
        assert_eq!(
            seg.sack_blocks().next(),
            Some((0, 5)),
            "the first block kept first"
        );
        o.ts = None;
        let p = build(&o);
        let seg = parse(&p).unwrap();
        assert_eq!((seg.sack_blocks().count(), seg.ts), (4, None));
    }

    #[test]
    fn damaged_packets_are_refused_never_a_panic() {
        let p = build(&out("10.0.0.1:80", "10.0.0.2:40000", b"payload", true));
        // Every truncation, and every single-bit flip: refused or parsed, never a panic; a
        // flip in the TCP part is caught by the checksum.
        for n in 0..p.len() {
            assert!(parse(&p[..n]).is_err(), "truncated to {n}");
        }
        for bit in 0..p.len() * 8 {
            let mut q = p.clone();
            q[bit / 8] ^= 1 << (bit % 8);
            let r = parse(&q);
            if bit / 8 >= 20 {
                assert!(r.is_err(), "bit {bit} flipped in TCP accepted");
            }
        }
        let mut udp = p.clone();
        udp[9] = 17;
        assert_eq!(parse(&udp), Err(Skip::NotTcp));
        let mut frag = p.clone();
        frag[6] = 0x20;
        assert_eq!(parse(&frag), Err(Skip::Malformed));
        assert_eq!(parse(&[0x45]), Err(Skip::Malformed));
        assert_eq!(parse(&[]), Err(Skip::Malformed));
        let mut bad_opt = build(&out("10.0.0.1:80", "10.0.0.2:40000", b"", true));
        bad_opt[20 + 21] = 40; // the MSS option's length beyond the header
        assert!(parse(&bad_opt).is_err());
    }
}
