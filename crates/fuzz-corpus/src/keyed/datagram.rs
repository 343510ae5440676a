//! Datagrams of the keyed target built as the engine would put them on the wire, whatever
//! the attacker put in them (its own module: the target and the attacker both use it, and
//! neither imports the other's items for it).

use crate::packet::build_datagram;
use aerotp_fec as fec;
use aerotp_wire::{crc32c, Header, AUTH_OVERHEAD};

/// A TPDU as the engine would put it on the wire: header (with the AUTH bit when `auth`),
/// body (an envelope when `auth`), CRC-32C, then `h.fec` parity — every check a receiver makes
/// before it verifies the tag passes.
pub(super) fn emit_any(mut h: Header, auth: bool, body: &[u8]) -> Vec<u8> {
    if !auth {
        return build_datagram(h, body);
    }
    let Ok(len) = u16::try_from(body.len()) else {
        return Vec::new();
    };
    h.len = len;
    let plain = |h: &Header| {
        let mut out = h.to_bytes_auth().to_vec();
        out.extend_from_slice(body);
        out.extend_from_slice(&crc32c(body).to_be_bytes());
        out
    };
    let mut out = plain(&h);
    if h.fec > 0 && fec::encode(h.fec, &mut out).is_err() {
        h.fec = 0;
        out = plain(&h);
    }
    out
}

/// Whether a forged body must be built (an authenticated TPDU needs an envelope).
pub(super) fn parsed_is_empty(body: &[u8], auth: bool) -> bool {
    auth && body.len() < AUTH_OVERHEAD
}
