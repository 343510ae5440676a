//! The transport checksum check a receiving host makes, done by the lab itself.
//!
//! Packets written into a TUN device are not reliably checked by this kernel: a TCP segment
//! with a flipped payload bit was seen delivered to the application (a corrupted file over
//! kernel TCP at BER 1e-5). A real link's receiver drops such a segment, so the lab does what
//! the receiving host would: it makes the TCP or UDP checksum of every packet correct before
//! the link impairs it (packets read from a TUN may carry a partial, offloaded checksum), and
//! drops the packet after the link if a flipped bit broke it. UDP with checksum 0 (the sender
//! opted out, as AeroTP does with `SO_NO_CHECK`) is never checked, exactly as on a real host.
//! Only IPv4 is handled (the lab runs IPv4 only); a flipped IPv4 header is left to the
//! kernel, which checks the header checksum itself.
//!
//! The ones'-complement sum itself is `aerotp_tun::checksum`, shared with the gateway's
//! user-space TCP.

use std::net::{IpAddr, Ipv4Addr};

use aerotp_tun::checksum;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Where the transport header is and which checksum applies, for an unfragmented IPv4 packet.
fn locate(p: &[u8]) -> Option<(usize, u8, usize)> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let frag = u16::from_be_bytes([p[6], p[7]]);
    // More-fragments set or a non-zero offset: the checksum spans fragments; leave it.
    if ihl < 20 || total < ihl || total > p.len() || frag & 0x3FFF != 0 {
        return None;
    }
    let proto = p[9];
    let csum_at = match proto {
        TCP if total >= ihl + 20 => ihl + 16,
        UDP if total >= ihl + 8 => ihl + 6,
        _ => return None,
    };
    Some((ihl, proto, csum_at))
}

/// Ones'-complement sum of the pseudo-header and the segment as it stands.
fn segment_sum(p: &[u8], ihl: usize, proto: u8) -> u16 {
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let seg = &p[ihl..total];
    let addr = |at: usize| IpAddr::V4(Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]));
    // Both addresses are IPv4: the pseudo-header always sums.
    let acc = checksum::pseudo_header(addr(12), addr(16), proto, seg.len()).unwrap_or(0);
    checksum::fold(checksum::sum(seg, acc))
}

/// Makes the packet's TCP (or non-zero UDP) checksum correct. Returns whether the packet is
/// one whose checksum a receiver verifies.
pub(crate) fn normalise(p: &mut [u8]) -> bool {
    let Some((ihl, proto, at)) = locate(p) else {
        return false;
    };
    if proto == UDP && p[at] == 0 && p[at + 1] == 0 {
        return false;
    }
    p[at] = 0;
    p[at + 1] = 0;
    let mut c = !segment_sum(p, ihl, proto);
    if proto == UDP && c == 0 {
        c = 0xFFFF;
    }
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Whether a packet `normalise` marked as checked still passes its checksum. A packet whose
/// IP header is too damaged to find the segment is passed on for the kernel to drop.
pub(crate) fn passes(p: &[u8]) -> bool {
    match locate(p) {
        Some((ihl, proto, _)) => segment_sum(p, ihl, proto) == 0xFFFF,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_packet(payload: &[u8]) -> Vec<u8> {
        let total = 20 + 20 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&8000u16.to_be_bytes());
        p[32] = 0x50;
        p[40..].copy_from_slice(payload);
        p
    }

    #[test]
    fn every_single_bit_flip_in_a_tcp_segment_is_caught() {
        let mut p = tcp_packet(b"telemetry frame 0123456789");
        assert!(normalise(&mut p));
        assert!(passes(&p));
        for bit in 20 * 8..p.len() * 8 {
            let mut q = p.clone();
            q[bit / 8] ^= 1 << (bit % 8);
            assert!(!passes(&q), "bit {bit}");
        }
    }

    #[test]
    fn zero_checksum_udp_is_not_checked() {
        let mut p = tcp_packet(b"abcd");
        p[9] = UDP;
        // UDP header at 20..28 with checksum 0.
        p[26] = 0;
        p[27] = 0;
        assert!(!normalise(&mut p));
    }

    #[test]
    fn garbage_does_not_panic() {
        for len in 0..64 {
            let mut p: Vec<u8> = (0..len).map(|i| (i * 37 + 0x45) as u8).collect();
            let _ = normalise(&mut p);
            let _ = passes(&p);
        }
    }
}
