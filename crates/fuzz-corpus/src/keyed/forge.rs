//! The keyed target's forgeries: a recorded TPDU with fields changed, or one from nothing;
//! every check before the tag recomputed.

use super::datagram::{emit_any, parsed_is_empty};
use super::{a_addr, b_addr, World, PORT};
use crate::script::Script;
use aerotp_wire::{parse_tpdu_any, Envelope, Flags, Header, HEADER_LEN, NONCE_LEN, TAG_LEN};
use std::net::SocketAddr;

impl World {
    /// A forged TPDU: a recorded one with fields changed, or one from nothing; every check
    /// before the tag recomputed. Returns (to B, from, datagram).
    pub(super) fn forge(&mut self, s: &mut Script) -> (bool, SocketAddr, Vec<u8>) {
        let sel = s.u8();
        let to_b = sel & 1 == 0;
        let from = match (sel >> 1) % 4 {
            0 | 1 => {
                if to_b {
                    a_addr()
                } else {
                    b_addr()
                }
            }
            _ => Self::attacker_addr(sel >> 3),
        };
        let base = s.u8();
        let pick = usize::from(s.u16());
        // A recording of a datagram that went the same way (so its ports and tag are those
        // of a connection of the endpoint it is forged into).
        let recorded = (base < 160)
            .then(|| self.pick_recorded(to_b, pick))
            .flatten();
        let parsed = recorded.as_deref().and_then(|d| {
            parse_tpdu_any(d)
                .ok()
                .map(|(t, auth)| (t.header, t.body.to_vec(), auth))
        });
        let (mut h, mut body, mut auth) = match parsed {
            Some(x) => x,
            None => self.forged_from_nothing(s, to_b, base),
        };
        let m = s.u8();
        if m & 1 != 0 {
            // RST 0x40, AFIN 0x02, ASYN 0x01, CHALLENGE/ECHO combinations: any flags.
            h.flags = Flags(s.u8());
        }
        if m & 2 != 0 {
            // Near the recorded number: in the window of a blind forger who guesses well.
            h.seq = h.seq.wrapping_add(u32::from(s.u8())).wrapping_sub(16);
        }
        if m & 4 != 0 {
            h.timestamp = s.u32();
        }
        if m & 8 != 0 && !body.is_empty() {
            let pos = usize::from(s.u16()) % body.len();
            body[pos] ^= s.u8() | 1;
        }
        if m & 16 != 0 || parsed_is_empty(&body, auth) {
            body = forged_body(s, auth, recorded.as_deref());
        }
        if m & 32 != 0 {
            h.fec = s.u8() % 64;
        }
        if m & 64 != 0 {
            // Without the AUTH bit to a keyed endpoint, or with it to a keyless one.
            auth = !auth;
        }
        if m & 128 != 0 {
            h.tag = h.tag.wrapping_add(1);
        }
        (to_b, from, emit_any(h, auth, &body))
    }

    /// A header from nothing (the ports, tag and mode of a connection of the endpoint it is
    /// forged into, picked by `base`, else the script's), an empty body, and the AUTH bit
    /// when keyed.
    fn forged_from_nothing(&self, s: &mut Script, to_b: bool, base: u8) -> (Header, Vec<u8>, bool) {
        let (ep, hs) = if to_b {
            (&self.b, &self.b_hs)
        } else {
            (&self.a, &self.a_hs)
        };
        let (src_port, dst_port, tag, mode) =
            Self::conn_header(ep, hs, base).unwrap_or((s.u16(), PORT, s.u8(), self.cfg.mode));
        let h = Header {
            mode,
            flags: Flags(s.u8()),
            src_port,
            dst_port,
            seq: u32::from(s.u16()),
            timestamp: s.u32(),
            fec: 0,
            tag,
            len: 0,
        };
        (h, Vec::new(), self.keyed.is_some())
    }
}

/// A new body: with the AUTH bit a sealed-looking envelope (key byte, a nonce of A's
/// instance or any, the script's bytes, a tag), else the script's bytes.
fn forged_body(s: &mut Script, auth: bool, recorded: Option<&[u8]>) -> Vec<u8> {
    let n = usize::from(s.u8());
    let text = s.bytes(n).to_vec();
    if !auth {
        return text;
    }
    let mut e = vec![Envelope::key_byte(s.u8() & 0x7F, s.u8() & 1 == 1)];
    let mut nonce = [0u8; NONCE_LEN];
    let theirs = recorded.and_then(|r| r.get(HEADER_LEN + 1..HEADER_LEN + 1 + NONCE_LEN));
    if let Some(r) = theirs {
        // The instance of the recorded sender, a packet number ahead: a forgery that must
        // not move the replay window.
        nonce.copy_from_slice(r);
        nonce[11] = nonce[11].wrapping_add(s.u8());
        nonce[8] = nonce[8].wrapping_add(s.u8());
    } else {
        for (x, y) in nonce.iter_mut().zip(s.bytes(NONCE_LEN)) {
            *x = *y;
        }
    }
    e.extend_from_slice(&nonce);
    e.extend_from_slice(&text);
    e.extend(std::iter::repeat_n(s.u8(), TAG_LEN));
    e
}
