//! The 20-byte TPDU header (docs/spec.md §2).

use crate::checks::hec;
use crate::error::WireError;
use crate::mode::Mode;
use std::fmt;

pub const HEADER_LEN: usize = 20;
/// Where the source and destination ports lie in a header (docs/spec.md §2): a receiver
/// may compare them across datagrams before checking anything.
pub const PORT_BYTES: std::ops::Range<usize> = 2..6;
pub const VERSION: u8 = 1;

/// The header flag bits. A small newtype rather than a bitflags dependency: eight constants.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    pub const ASYN: Flags = Flags(0x01);
    pub const AFIN: Flags = Flags(0x02);
    pub const ACK: Flags = Flags(0x04);
    pub const MACK: Flags = Flags(0x08);
    pub const NACK: Flags = Flags(0x10);
    pub const SNACK: Flags = Flags(0x20);
    pub const RST: Flags = Flags(0x40);
    pub const RPT: Flags = Flags(0x80);
    /// Flags whose presence makes the body a control structure rather than data.
    pub const CONTROL: Flags = Flags(0x04 | 0x08 | 0x10 | 0x20 | 0x40 | 0x80);
    /// A repair TPDU (erasure coding across TPDUs, docs/spec.md §7): exactly `RST | RPT` and
    /// nothing else, a combination no control TPDU uses (a reset carries no report). Its body
    /// is a repair header and a repair symbol, never a control structure.
    pub const REPAIR: Flags = Flags(0x40 | 0x80);
    /// A CHALLENGE (or its stateless form, RETRY) from a listener: exactly `ASYN | RST`
    /// (docs/spec.md §9). Its body is a [`crate::Challenge`], never a reset reason.
    pub const CHALLENGE: Flags = Flags(0x01 | 0x40);
    /// An ECHO of a listener's cookie from an initiator: exactly `ASYN | RPT` (docs/spec.md
    /// §9). Its body is a [`crate::Echo`], never a report.
    pub const ECHO: Flags = Flags(0x01 | 0x80);
    /// In datagram mode only: a numbered datagram of a route that sends erasure repair
    /// (docs/spec.md §7, "Datagram routes"): its `seq` numbers it as a source symbol and its
    /// `tag` names the route's incarnation. The bit is `ASYN`'s, which datagram mode (no
    /// connection) has no other use for.
    pub const SOURCE: Flags = Flags(0x01);

    pub const fn empty() -> Flags {
        Flags(0)
    }
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }
    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
    pub fn insert(&mut self, other: Flags) {
        self.0 |= other.0;
    }
    /// A data TPDU carries application bytes (possibly none, with ASYN or AFIN).
    pub const fn is_data(self) -> bool {
        !self.intersects(Flags::CONTROL)
    }
    /// A repair TPDU: the flags are exactly [`Flags::REPAIR`].
    pub const fn is_repair(self) -> bool {
        self.0 == Flags::REPAIR.0
    }
    /// A CHALLENGE or RETRY: the flags are exactly [`Flags::CHALLENGE`].
    pub const fn is_challenge(self) -> bool {
        self.0 == Flags::CHALLENGE.0
    }
    /// An ECHO: the flags are exactly [`Flags::ECHO`].
    pub const fn is_echo(self) -> bool {
        self.0 == Flags::ECHO.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["ASYN", "AFIN", "ACK", "MACK", "NACK", "SNACK", "RST", "RPT"];
        let mut first = true;
        for (i, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("DATA")?;
        }
        Ok(())
    }
}

/// A parsed header. `len` is the body length; `hec` is computed on emit and checked on parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub mode: Mode,
    pub flags: Flags,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub timestamp: u32,
    pub fec: u8,
    pub tag: u8,
    pub len: u16,
}

impl Header {
    /// Parses and checks the first 20 bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Header, WireError> {
        let h: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(WireError::Truncated {
                what: "header",
                need: HEADER_LEN,
                have: buf.len(),
            })?;
        let stored = u16::from_be_bytes([h[18], h[19]]);
        if hec(&h[..18]) != stored {
            return Err(WireError::HeaderCheck);
        }
        Header::fields(h, h[0] & 0x0F)
    }

    /// The fields of a header whose HEC has been checked; `mode` is the mode nibble with any
    /// bit the caller handles (AUTH, docs/spec.md §8) already taken out.
    pub(crate) fn fields(h: &[u8; HEADER_LEN], mode: u8) -> Result<Header, WireError> {
        let version = h[0] >> 4;
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let mode = Mode::from_u8(mode).ok_or(WireError::Mode(mode))?;
        Ok(Header {
            mode,
            flags: Flags(h[1]),
            src_port: u16::from_be_bytes([h[2], h[3]]),
            dst_port: u16::from_be_bytes([h[4], h[5]]),
            seq: u32::from_be_bytes([h[6], h[7], h[8], h[9]]),
            timestamp: u32::from_be_bytes([h[10], h[11], h[12], h[13]]),
            fec: h[14],
            tag: h[15],
            len: u16::from_be_bytes([h[16], h[17]]),
        })
    }

    /// The header's 20 bytes, HEC included.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        self.encode_with(0)
    }

    /// The header's 20 bytes with `bits` set in byte 0 (the AUTH bit) before the HEC.
    pub(crate) fn encode_with(&self, bits: u8) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = (VERSION << 4) | (self.mode as u8) | bits;
        h[1] = self.flags.0;
        h[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        h[4..6].copy_from_slice(&self.dst_port.to_be_bytes());
        h[6..10].copy_from_slice(&self.seq.to_be_bytes());
        h[10..14].copy_from_slice(&self.timestamp.to_be_bytes());
        h[14] = self.fec;
        h[15] = self.tag;
        h[16..18].copy_from_slice(&self.len.to_be_bytes());
        let c = hec(&h[..18]);
        h[18..20].copy_from_slice(&c.to_be_bytes());
        h
    }

    /// Reads the `fec` byte without checking anything: a hint for decoding a corrupted TPDU.
    pub fn peek_fec(buf: &[u8]) -> Option<u8> {
        buf.get(14).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            mode: Mode::HybridNackMack,
            flags: Flags::ASYN | Flags::AFIN,
            src_port: 5000,
            dst_port: 6000,
            seq: 0xDEAD_BEEF,
            timestamp: 123_456,
            fec: 8,
            tag: 77,
            len: 1400,
        }
    }

    #[test]
    fn the_port_bytes_are_the_ports_in_order() {
        let h = sample();
        let b = h.to_bytes();
        let mut want = h.src_port.to_be_bytes().to_vec();
        want.extend_from_slice(&h.dst_port.to_be_bytes());
        assert_eq!(&b[PORT_BYTES], &want[..]);
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(Header::parse(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let b = sample().to_bytes();
        for bit in 0..HEADER_LEN * 8 {
            let mut c = b;
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(
                Header::parse(&c).is_err(),
                "flip of bit {bit} went undetected"
            );
        }
    }

    #[test]
    fn truncated_and_bad_version_and_mode() {
        let b = sample().to_bytes();
        assert!(matches!(
            Header::parse(&b[..19]),
            Err(WireError::Truncated { .. })
        ));
        let mut h = sample();
        h.mode = Mode::Reliable;
        let mut raw = h.to_bytes();
        raw[0] = 0x27; // version 2
        let c = hec(&raw[..18]).to_be_bytes();
        raw[18..20].copy_from_slice(&c);
        assert_eq!(Header::parse(&raw), Err(WireError::Version(2)));
        raw[0] = 0x1F; // mode 15
        let c = hec(&raw[..18]).to_be_bytes();
        raw[18..20].copy_from_slice(&c);
        assert_eq!(Header::parse(&raw), Err(WireError::Mode(15)));
    }

    #[test]
    fn flags_debug_names_bits() {
        assert_eq!(format!("{:?}", Flags::ASYN | Flags::MACK), "ASYN|MACK");
        assert_eq!(format!("{:?}", Flags::empty()), "DATA");
        assert!(Flags::AFIN.is_data());
        assert!(!Flags::MACK.is_data());
    }
}
