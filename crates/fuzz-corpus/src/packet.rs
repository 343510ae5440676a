//! Addresses and well-formed datagrams for the targets that drive an endpoint.

use aerotp_fec as fec;
use aerotp_wire::{emit_tpdu, Header};
use std::net::SocketAddr;

/// Addresses the endpoint targets use.
pub(crate) fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], port))
}

/// Builds a datagram the way the engine does (docs/spec.md §1, §3): header, body and CRC-32C,
/// then parity when `header.fec > 0`. The fuzz targets use it to get past the checks, which
/// random bytes almost never pass.
pub fn build_datagram(header: Header, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if emit_tpdu(header, body, &mut out).is_err() {
        return Vec::new();
    }
    if header.fec > 0 && fec::encode(header.fec, &mut out).is_err() {
        out.clear();
        let mut h = header;
        h.fec = 0;
        let _ = emit_tpdu(h, body, &mut out);
    }
    out
}
