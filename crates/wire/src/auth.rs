//! The authenticated TPDU envelope (docs/spec.md §8): layout only, no cryptography.
//!
//! An authenticated TPDU sets bit 0x08 of byte 0 (`AUTH`) and carries, as its body, an
//! envelope: one byte of key id and body kind, the 12-byte nonce, the body (plain or
//! encrypted) and the 16-byte AEAD tag. The header's `len` is the envelope's length and the
//! CRC-32C covers the envelope, so FEC, the HEC and the CRC work on it exactly as on a plain
//! body: a receiver corrects bit errors first and verifies the tag afterwards. The header's 20
//! bytes, as sent (AUTH bit, envelope length and HEC included), are the AEAD's associated data.

use crate::error::WireError;
use crate::header::{Header, HEADER_LEN};

/// Bit of byte 0 (`ver_mode`) that marks an authenticated TPDU.
pub const AUTH_BIT: u8 = 0x08;
/// Key-id byte, bit 7: the body is encrypted (otherwise it travels in clear, authenticated).
pub const ENCRYPTED_BIT: u8 = 0x80;
/// Largest key id (7 bits).
pub const MAX_KEY_ID: u8 = 0x7F;
pub const NONCE_LEN: usize = 12;
pub const TAG_LEN: usize = 16;
/// Bytes the envelope adds to a body: key-id byte, nonce, tag.
pub const AUTH_OVERHEAD: usize = 1 + NONCE_LEN + TAG_LEN;

/// A parsed envelope borrowing from the TPDU's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// Which key sealed it (0–127).
    pub key_id: u8,
    /// Whether `body` is ciphertext.
    pub encrypted: bool,
    pub nonce: [u8; NONCE_LEN],
    /// The body as sent: plaintext, or ciphertext of the same length.
    pub body: &'a [u8],
    pub tag: [u8; TAG_LEN],
}

impl<'a> Envelope<'a> {
    /// Splits an authenticated TPDU's body into its parts.
    pub fn parse(envelope: &'a [u8]) -> Result<Envelope<'a>, WireError> {
        if envelope.len() < AUTH_OVERHEAD {
            return Err(WireError::Truncated {
                what: "auth envelope",
                need: AUTH_OVERHEAD,
                have: envelope.len(),
            });
        }
        let (head, rest) = envelope.split_at(1 + NONCE_LEN);
        let (body, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&head[1..]);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(tag);
        Ok(Envelope {
            key_id: head[0] & MAX_KEY_ID,
            encrypted: head[0] & ENCRYPTED_BIT != 0,
            nonce,
            body,
            tag: t,
        })
    }

    /// The key-id byte as it goes on the wire.
    pub fn key_byte(key_id: u8, encrypted: bool) -> u8 {
        (key_id & MAX_KEY_ID) | if encrypted { ENCRYPTED_BIT } else { 0 }
    }
}

impl Header {
    /// The header's 20 bytes with the AUTH bit set and the HEC computed over them: what an
    /// authenticated TPDU carries, and the AEAD's associated data.
    pub fn to_bytes_auth(&self) -> [u8; HEADER_LEN] {
        self.encode_with(AUTH_BIT)
    }

    /// Parses a header that may carry the AUTH bit; says whether it did. [`Header::parse`]
    /// refuses the bit (as an unknown mode), so a part that knows nothing of authentication
    /// never takes an envelope for a body.
    pub fn parse_any(buf: &[u8]) -> Result<(Header, bool), WireError> {
        let Some(&b0) = buf.first() else {
            return Header::parse(buf).map(|h| (h, false));
        };
        if b0 & AUTH_BIT == 0 {
            return Header::parse(buf).map(|h| (h, false));
        }
        // Check the HEC over the bytes as they are, then parse with the bit cleared.
        let raw: [u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(WireError::Truncated {
                what: "header",
                need: HEADER_LEN,
                have: buf.len(),
            })?;
        if crate::checks::hec(&raw[..18]) != u16::from_be_bytes([raw[18], raw[19]]) {
            return Err(WireError::HeaderCheck);
        }
        Header::fields(&raw, raw[0] & 0x0F & !AUTH_BIT).map(|h| (h, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Flags;
    use crate::mode::Mode;
    use proptest::prelude::*;

    fn header() -> Header {
        Header {
            mode: Mode::HybridNack,
            flags: Flags::RST,
            src_port: 7,
            dst_port: 9,
            seq: 77,
            timestamp: 5,
            fec: 4,
            tag: 200,
            len: 40,
        }
    }

    #[test]
    fn auth_header_round_trips_and_plain_parser_refuses_it() {
        let h = header();
        let b = h.to_bytes_auth();
        assert_eq!(b[0] & AUTH_BIT, AUTH_BIT);
        assert_eq!(Header::parse_any(&b), Ok((h, true)));
        assert_eq!(Header::parse_any(&h.to_bytes()), Ok((h, false)));
        // A part that does not know the bit sees an unknown mode, never a plain TPDU.
        assert_eq!(
            Header::parse(&b),
            Err(WireError::Mode(8 + Mode::HybridNack as u8))
        );
        let mut bad = b;
        bad[5] ^= 1;
        assert_eq!(Header::parse_any(&bad), Err(WireError::HeaderCheck));
    }

    #[test]
    fn envelope_splits_fields() {
        let mut env = vec![Envelope::key_byte(5, true)];
        env.extend_from_slice(&[1u8; NONCE_LEN]);
        env.extend_from_slice(b"body");
        env.extend_from_slice(&[2u8; TAG_LEN]);
        let e = Envelope::parse(&env).unwrap();
        assert_eq!((e.key_id, e.encrypted, e.body), (5, true, &b"body"[..]));
        assert_eq!(e.nonce, [1u8; NONCE_LEN]);
        assert_eq!(e.tag, [2u8; TAG_LEN]);
        assert!(matches!(
            Envelope::parse(&env[..AUTH_OVERHEAD - 1]),
            Err(WireError::Truncated { .. })
        ));
        let empty = Envelope::parse(&env[..0]);
        assert!(empty.is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Envelope::parse(&buf);
            if let Ok((h, auth)) = Header::parse_any(&buf) {
                let again = if auth { h.to_bytes_auth() } else { h.to_bytes() };
                prop_assert_eq!(&again[..], &buf[..HEADER_LEN]);
            }
        }
    }
}
