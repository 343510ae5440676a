//! The MAC Address data item's value (RFC 8175 §13.7): an EUI-48 or EUI-64. It names a DLEP
//! destination, so it is the key the session's destination table and events use.

use std::fmt;
use std::str::FromStr;

/// An EUI-48 (6 bytes) or EUI-64 (8 bytes) address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mac {
    len: u8,
    bytes: [u8; 8],
}

impl Mac {
    pub const fn eui48(b: [u8; 6]) -> Mac {
        Mac {
            len: 6,
            bytes: [b[0], b[1], b[2], b[3], b[4], b[5], 0, 0],
        }
    }

    pub const fn eui64(b: [u8; 8]) -> Mac {
        Mac { len: 8, bytes: b }
    }

    /// From a value of 6 or 8 bytes; `None` for any other length.
    pub fn from_slice(b: &[u8]) -> Option<Mac> {
        match b.len() {
            6 | 8 => {
                let mut bytes = [0u8; 8];
                bytes[..b.len()].copy_from_slice(b);
                Some(Mac {
                    len: b.len() as u8,
                    bytes,
                })
            }
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.as_bytes().iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mac({self})")
    }
}

/// `aa:bb:cc:dd:ee:ff` (6 or 8 groups of two hex digits, `:` or `-` between them).
impl FromStr for Mac {
    type Err = String;

    fn from_str(s: &str) -> Result<Mac, String> {
        let mut bytes = Vec::with_capacity(8);
        for part in s.split([':', '-']) {
            if part.len() != 2 || bytes.len() == 8 {
                return Err(format!("not a MAC address: {s:?}"));
            }
            bytes.push(
                u8::from_str_radix(part, 16).map_err(|_| format!("not a MAC address: {s:?}"))?,
            );
        }
        Mac::from_slice(&bytes).ok_or_else(|| format!("not a 6- or 8-byte MAC address: {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let m = Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0xab]);
        assert_eq!(m.to_string(), "00:11:22:33:44:ab");
        assert_eq!("00:11:22:33:44:AB".parse::<Mac>().unwrap(), m);
        let e = Mac::eui64([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(e.to_string().parse::<Mac>().unwrap(), e);
        assert_ne!(Mac::from_slice(&[0; 6]), Mac::from_slice(&[0; 8]));
        for bad in [
            "",
            "00:11",
            "00:11:22:33:44:55:66",
            "0:11:22:33:44:55",
            "zz:11:22:33:44:55",
        ] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
    }
}
