//! The Internet checksum (RFC 1071): the ones'-complement sum of 16-bit big-endian words, and
//! the TCP/UDP checksum over the IPv4 or IPv6 pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1).
//!
//! Written by hand: the sum is a few lines, and the packet crates that do it would add a
//! parser neither user needs.

use std::net::IpAddr;

/// Adds `data` to the running sum `acc` as 16-bit big-endian words (an odd last byte is the
/// high byte of a word padded with zero). Fold with [`fold`]. `acc` cannot overflow for any
/// packet an IP length field can describe (65,535 bytes: at most 2^31).
pub fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Folds a running sum into 16 bits (end-around carry).
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The running sum of the pseudo-header of a `len`-byte segment of protocol `proto` between
/// `src` and `dst`; `None` when the two addresses are of different families.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Option<u32> {
    let acc = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => sum(&d.octets(), sum(&s.octets(), 0)),
        (IpAddr::V6(s), IpAddr::V6(d)) => sum(&d.octets(), sum(&s.octets(), 0)),
        _ => return None,
    };
    // The length is 16 bits in IPv4's pseudo-header and 32 in IPv6's: the same sum once
    // folded.
    Some(acc + u32::from(proto) + len as u32)
}

/// The TCP/UDP checksum of `segment` (its header and payload) as it stands: the value to
/// store when its checksum field is zero, and 0 when a received segment's checksum is right.
/// `None` when the addresses are of different families.
pub fn transport(src: IpAddr, dst: IpAddr, proto: u8, segment: &[u8]) -> Option<u16> {
    let acc = pseudo_header(src, dst, proto, segment.len())?;
    Some(!fold(sum(segment, acc)))
}

/// The IPv4 header checksum of `header` as it stands (0 when a received header is right).
pub fn ipv4_header(header: &[u8]) -> u16 {
    !fold(sum(header, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1071_example_and_odd_lengths() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        // An odd byte counts as the high byte of a padded word.
        assert_eq!(fold(sum(&[0xAB], 0)), 0xAB00);
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
        assert_eq!(fold(0x1_FFFE), 0xFFFF, "end-around carry");
        assert_eq!(fold(sum(&[], 0)), 0);
    }

    #[test]
    fn a_known_ipv4_header_checks() {
        // A captured IPv4 header (Wikipedia's example) with its checksum b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_header(&h), 0, "a right header sums to zero");
        h[10] = 0;
        h[11] = 0;
        assert_eq!(ipv4_header(&h), 0xb861);
    }

    #[test]
    fn a_stored_transport_checksum_verifies_and_any_flip_is_caught() {
        for (s, d) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            let (s, d): (IpAddr, IpAddr) = (s.parse().unwrap(), d.parse().unwrap());
            let mut seg = vec![0u8; 20];
            seg[12] = 0x50;
            seg.extend_from_slice(b"odd-length payload!");
            let c = transport(s, d, 6, &seg).unwrap();
            seg[16..18].copy_from_slice(&c.to_be_bytes());
            assert_eq!(transport(s, d, 6, &seg), Some(0));
            for bit in 0..seg.len() * 8 {
                let mut q = seg.clone();
                q[bit / 8] ^= 1 << (bit % 8);
                assert_ne!(transport(s, d, 6, &q), Some(0), "bit {bit}");
            }
            assert_ne!(transport(s, d, 17, &seg), Some(0), "the protocol is summed");
        }
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(transport(v4, v6, 6, &[0; 20]), None, "mixed families");
    }
}
