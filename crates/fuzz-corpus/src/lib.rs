//! The bodies of AeroTP's fuzz targets, shared by the cargo-fuzz project in `fuzz/` (nightly,
//! libFuzzer) and by this crate's tests, which replay every committed corpus file on stable in
//! `cargo test` (the way s2n-quic keeps its corpus alive).
//!
//! Each `target_*` takes any byte string and panics only when an invariant of the code under
//! test breaks; returning normally is the pass. They reach the code through its public API only,
//! so they keep working while the crates behind them are restructured.
//!
//! | target | code under test |
//! |---|---|
//! | [`target_wire_header`] | `aerotp_wire::Header::parse` |
//! | [`target_wire_control`] | `aerotp_wire::ControlBody::parse` (every control part) |
//! | [`target_wire_tpdu`] | `aerotp_wire::parse_tpdu` then the body parser its flags select (control, CHALLENGE, ECHO) |
//! | [`target_fec_decode`] | `aerotp_fec::decode` on raw bytes and on encoded, damaged TPDUs |
//! | [`target_proto_codec`] | the engine's datagram decode path (`Endpoint::handle_datagram`) |
//! | [`target_proto_endpoint`] | a script of datagrams, time jumps and application calls into two endpoints |
//! | [`target_proto_endpoint_keyed`] | the same with a pre-shared key (or none), an attacker who records, replays (also to a restarted endpoint), forges and sends high parity |
//! | [`target_gw_frame`] | the gateway's `Hello::read` and `Frame::read` |
//! | [`target_gw_store`] | the custody store's on-disk records (`DiskLog::open`, `read_at`) |

mod alloc;
mod deadline;
pub mod endpoint;
mod gw;
pub mod keyed;
mod packet;
mod script;
pub mod seeds;

pub use alloc::{heap_live_bytes, CountingAlloc};
pub use endpoint::{run_endpoint_script, target_proto_endpoint, ScriptSummary};
pub use gw::{target_gw_frame, target_gw_store};
pub use keyed::{run_keyed_script, target_proto_endpoint_keyed, KeyedSummary};
pub(crate) use packet::addr;
pub use packet::build_datagram;

use aerotp_fec as fec;
use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
use aerotp_wire::{
    emit_tpdu, parse_tpdu, ControlBody, Flags, Header, WireError, HEADER_LEN, OVERHEAD,
};
use std::time::Duration;

/// A target body: any input, panics only on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target by the name its cargo-fuzz binary and corpus directory carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("wire_header", target_wire_header),
    ("wire_control", target_wire_control),
    ("wire_tpdu", target_wire_tpdu),
    ("fec_decode", target_fec_decode),
    ("proto_codec", target_proto_codec),
    ("proto_endpoint", target_proto_endpoint),
    ("proto_endpoint_keyed", target_proto_endpoint_keyed),
    ("gw_frame", target_gw_frame),
    ("gw_store", target_gw_store),
];

/// The header parser: a header that parses re-emits to the very bytes it came from (the HEC
/// covers every field, so any other outcome means a field was misread).
pub fn target_wire_header(data: &[u8]) {
    match Header::parse(data) {
        Ok(h) => {
            assert!(data.len() >= HEADER_LEN);
            assert_eq!(
                &h.to_bytes()[..],
                &data[..HEADER_LEN],
                "header does not round-trip"
            );
            assert_eq!(Header::peek_fec(data), Some(h.fec));
        }
        Err(WireError::Truncated { need, have, .. }) => {
            assert!(data.len() < HEADER_LEN);
            assert_eq!((need, have), (HEADER_LEN, data.len()));
        }
        Err(WireError::HeaderCheck | WireError::Version(_) | WireError::Mode(_)) => {}
        Err(e) => panic!("header parser returned an error it has no reason for: {e}"),
    }
}

/// The control-body parser: the first byte is the header's flags, the rest the body. A body
/// that parses re-emits to exactly the same bytes, its length agrees with `len()`, and the
/// parts found are the ones the flags announce.
pub fn target_wire_control(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let flags = Flags(flags);
    let Ok(cb) = ControlBody::parse(flags, body) else {
        return;
    };
    let mut out = Vec::new();
    cb.emit(&mut out)
        .expect("a parsed control body always re-emits");
    assert_eq!(out, body, "control body does not round-trip");
    assert_eq!(cb.len(), body.len());
    // MACK includes the cumulative ACK, so ACK beside MACK announces nothing more.
    let mut announced = Flags(flags.0 & Flags::CONTROL.0);
    if announced.contains(Flags::MACK) {
        announced = Flags(announced.0 & !Flags::ACK.0);
    }
    assert_eq!(cb.flags(), announced, "parts found differ from the flags");
    // Every list holds no more entries than the body had room for (no allocation larger than
    // the input, docs/spec.md §6).
    let entries = cb.mack.as_ref().map_or(0, |m| m.entries.len())
        + cb.nack.as_ref().map_or(0, |n| n.seqs.len())
        + cb.snack.as_ref().map_or(0, |s| s.ranges.len());
    assert!(entries * 4 <= body.len());
}

/// A whole TPDU: the header, the body length against the datagram, the CRC, then the control
/// parser the flags select. A TPDU with a good CRC re-emits to the same leading bytes.
pub fn target_wire_tpdu(data: &[u8]) {
    let t = match parse_tpdu(data) {
        Ok(t) => t,
        Err(WireError::Truncated { need, have, .. }) => {
            assert!(need > have && have == data.len());
            return;
        }
        Err(_) => return,
    };
    let end = OVERHEAD + t.body.len();
    assert!(end <= data.len());
    assert_eq!(usize::from(t.header.len), t.body.len());
    if t.body_ok {
        let mut out = Vec::new();
        emit_tpdu(t.header, t.body, &mut out).expect("a parsed TPDU fits its length field");
        assert_eq!(out, &data[..end], "TPDU does not round-trip");
    }
    let f = t.header.flags;
    if f.is_challenge() || f.is_echo() {
        // docs/spec.md §9: never a control body; a parsed one re-emits byte for byte.
        assert_eq!(ControlBody::parse(f, t.body), Err(WireError::NotControl));
        let mut out = Vec::new();
        if f.is_echo() {
            if let Ok(e) = aerotp_wire::Echo::parse(t.body) {
                e.emit(&mut out);
                assert_eq!(out, t.body, "ECHO does not round-trip");
            }
        } else if let Ok(c) = aerotp_wire::Challenge::parse(t.body) {
            c.emit(&mut out);
            assert_eq!(out, t.body, "CHALLENGE does not round-trip");
        }
    } else if !f.is_data() {
        if let Ok(cb) = ControlBody::parse(f, t.body) {
            assert!(cb.len() == t.body.len());
        }
    }
    // The receive side expands the 32-bit sequence number around what it expects next.
    let expected = u64::from(t.header.timestamp) << 16 | u64::from(t.header.len);
    let full = aerotp_wire::expand_seq(expected, t.header.seq);
    assert_eq!(full as u32, t.header.seq);
    // Away from both ends of the 64-bit space the closest candidate is at most half the
    // 32-bit window away; near the ends the nearer candidates may not exist.
    if (1 << 32..=u64::MAX - (1 << 32)).contains(&expected) {
        assert!(full.abs_diff(expected) <= 1 << 31);
    }
}

/// Reed–Solomon decoding. Byte 0 picks the parity and the use of the rest:
/// * even byte 1: the rest is a received datagram. A successful decode must leave a valid
///   codeword (re-encoding the corrected protected region gives the corrected parity); a
///   failure must leave the datagram untouched.
/// * odd byte 1: the rest is a protected region and an error pattern. It is encoded, damaged
///   within the code's capacity (at most floor(p/2) symbols per codeword) and must decode back
///   exactly.
pub fn target_fec_decode(data: &[u8]) {
    let [parity, sel, rest @ ..] = data else {
        return;
    };
    let parity = *parity;
    if sel & 1 == 0 {
        let mut dg = rest.to_vec();
        match fec::decode(parity, &mut dg) {
            Ok(c) => {
                let layout = fec::Layout::for_datagram(dg.len(), parity)
                    .expect("decode succeeded, so the layout is valid");
                assert_eq!(layout.datagram_len(), dg.len());
                let mut re = dg[..layout.protected_len].to_vec();
                fec::encode(parity, &mut re).expect("the same layout encodes");
                assert_eq!(re, dg, "decode left something that is not a codeword");
                let diff = rest.iter().zip(&dg).filter(|(a, b)| a != b).count();
                assert_eq!(diff, c.symbols, "corrected symbols miscounted");
                let bits: usize = rest
                    .iter()
                    .zip(&dg)
                    .map(|(a, b)| (a ^ b).count_ones() as usize)
                    .sum();
                assert_eq!(bits, c.bits, "corrected bits miscounted");
            }
            Err(_) => assert_eq!(dg, rest, "a failed decode changed the datagram"),
        }
        return;
    }
    // Encoded-then-damaged: the first two bytes of `rest` give the protected length.
    let Some((len, rest)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let len = usize::from(u16::from_be_bytes(*len)) % 4096 + 1;
    let region: Vec<u8> = (0..len)
        .map(|i| rest.get(i).copied().unwrap_or(i as u8))
        .collect();
    let pattern = rest.get(len..).unwrap_or(&[]);
    let mut dg = region.clone();
    let Ok(layout) = fec::encode(parity, &mut dg) else {
        assert!(parity == 255, "encode refused a valid parity");
        return;
    };
    let clean = dg.clone();
    let m = layout.codewords;
    let cap = usize::from(parity / 2);
    let mut hits = vec![0usize; m];
    let mut damaged = 0;
    for pair in pattern.chunks_exact(3) {
        let pos = usize::from(u16::from_be_bytes([pair[0], pair[1]])) % dg.len();
        let xor = pair[2];
        // The codeword a byte belongs to: protected byte i is in codeword i mod m; parity
        // byte L + j*p + k is in codeword j.
        let cw = if pos < layout.protected_len {
            pos % m
        } else {
            (pos - layout.protected_len) / usize::from(parity.max(1))
        };
        if xor == 0 || dg[pos] != clean[pos] || hits[cw] >= cap {
            continue;
        }
        hits[cw] += 1;
        dg[pos] ^= xor;
        damaged += 1;
    }
    let c = fec::decode(parity, &mut dg).expect("errors within capacity must decode");
    assert_eq!(dg, clean, "decoded to the wrong codeword");
    assert_eq!(c.symbols, damaged);
}

/// The engine's decode path through its public API: one listening endpoint takes the
/// datagram (byte 0 says whether the rest is raw bytes or header fields plus a body that
/// [`build_datagram`] encodes and bytes then damage). Whatever it answers must be a
/// well-formed TPDU within the MTU, and the endpoint's counters must account for it.
pub fn target_proto_codec(data: &[u8]) {
    // `..default()`: see the same in `endpoint.rs`.
    #[allow(clippy::needless_update)]
    let ecfg = EndpointConfig {
        max_connections: 4,
        max_events: 16,
        max_datagrams: 4,
        ..EndpointConfig::default()
    };
    let mut ep = Endpoint::new(ecfg, 7);
    let cfg = ConnectionConfig {
        mtu: 1500,
        recv_window: 64,
        send_buffer: Some(1 << 16),
        ..ConnectionConfig::default()
    };
    ep.listen(7000, cfg).expect("valid listener config");
    let remote = addr(2, 9000);
    let dg = match data.split_first() {
        Some((&sel, rest)) if sel & 1 == 1 && rest.len() >= 16 => {
            // Fields: mode, flags, src_port, dst_port (7000 or raw), seq, tag, fec, then
            // the body and a damage pattern split at the byte after the fields.
            let mode = Mode::ALL[usize::from(rest[0]) % Mode::ALL.len()];
            let dst_port = if rest[4] & 1 == 0 {
                7000
            } else {
                u16::from_be_bytes([rest[4], rest[5]])
            };
            let header = Header {
                mode,
                flags: Flags(rest[1]),
                src_port: u16::from_be_bytes([rest[2], rest[3]]),
                dst_port,
                seq: u32::from_be_bytes([rest[6], rest[7], rest[8], rest[9]]),
                timestamp: u32::from_be_bytes([rest[10], rest[11], rest[12], rest[13]]),
                fec: rest[14],
                tag: rest[15],
                len: 0,
            };
            let tail = &rest[16..];
            let split = usize::from(tail.first().copied().unwrap_or(0));
            let body = tail
                .get(1..1 + split)
                .unwrap_or(tail.get(1..).unwrap_or(&[]));
            let damage = tail.get(1 + split..).unwrap_or(&[]);
            let mut dg = build_datagram(header, body);
            for d in damage.chunks_exact(3) {
                if dg.is_empty() {
                    break;
                }
                let pos = usize::from(u16::from_be_bytes([d[0], d[1]])) % dg.len();
                dg[pos] ^= d[2];
            }
            dg
        }
        Some((_, rest)) => rest.to_vec(),
        None => return,
    };
    let before = ep.stats.clone();
    ep.handle_datagram(Duration::ZERO, remote, &dg);
    let s = &ep.stats;
    assert_eq!(s.datagrams_in, before.datagrams_in + 1);
    assert!(
        ep.connection_count() <= 1,
        "one datagram opened two connections"
    );
    let mut out = Vec::new();
    let mut n = 0;
    loop {
        out.clear();
        let Some(t) = ep.poll_transmit(Duration::ZERO, &mut out) else {
            break;
        };
        n += 1;
        assert!(n <= 64, "one datagram made the endpoint send without end");
        assert_eq!(t.remote, remote, "an answer went to someone else");
        endpoint::check_emitted(&out, 1500);
    }
    endpoint::drain_events(&mut ep, &mut Vec::new());
}
