//! From TPDU to datagram and back: the wire format plus forward error correction.
//!
//! Receiving follows docs/spec.md §3: accept without decoding when both checks pass; otherwise
//! decode with the header's `fec` byte and, when the header itself is damaged, with the parity
//! last seen from the same peer; a decode counts only if both checks pass afterwards.

use aerotp_fec as fec;
use aerotp_wire::{
    emit_tpdu, emit_tpdu_with, parse_tpdu_any, Header, WireError, HEADER_LEN, OVERHEAD,
};
use bytes::Bytes;

/// Appends header, body, CRC-32C and (if `header.fec > 0`) parity to `out`, after what `out`
/// already holds (the datagram is encoded in place at the end of a send train).
pub fn encode(header: Header, body: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
    let start = out.len();
    emit_tpdu(header, body, out)?;
    protect(header, out, start)
}

/// As [`encode`], for a body of `len` bytes that `write` appends to `out` itself (a control
/// body, serialised once, straight into the datagram). On error `out` is as it was.
pub fn encode_with(
    header: Header,
    len: usize,
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), WireError>,
) -> Result<(), WireError> {
    let start = out.len();
    emit_tpdu_with(header, len, out, write)?;
    protect(header, out, start)
}

/// Adds the parity `header` names to the TPDU in `out[start..]`, in place.
fn protect(header: Header, out: &mut Vec<u8>, start: usize) -> Result<(), WireError> {
    if header.fec > 0 && fec::encode_from(header.fec, out, start).is_err() {
        // The parity does not fit this size: send without FEC rather than not at all. Only
        // the header names the parity (it is outside the CRC's and the parity's reach), so
        // it is rewritten in place.
        let mut h = header;
        h.fec = 0;
        let len = out.len() - start - OVERHEAD;
        h.len = u16::try_from(len).map_err(|_| WireError::BodyTooLong(len))?;
        out[start..start + HEADER_LEN].copy_from_slice(&h.to_bytes());
    }
    Ok(())
}

/// Largest body that fits `mtu` with parity `p`.
pub fn max_body(mtu: usize, parity: u8) -> usize {
    fec::max_protected_len(mtu, parity).saturating_sub(OVERHEAD)
}

/// Datagram length of a body of `len` bytes with parity `p` (None if the code cannot carry it).
pub fn datagram_len(len: usize, parity: u8) -> Option<usize> {
    if parity == 0 {
        return Some(OVERHEAD + len);
    }
    fec::Layout::for_protected(OVERHEAD + len, parity)
        .ok()
        .map(|l| l.datagram_len())
}

/// The channel quality one datagram showed, for the bit-error-rate estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quality {
    /// Both checks passed as received.
    Clean,
    /// FEC corrected this many bits (and symbols).
    Corrected { bits: usize, symbols: usize },
    /// The header checked but the body did not, even after decoding.
    Corrupted,
}

/// A datagram turned back into a TPDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub header: Header,
    /// The body as received or corrected; for `Quality::Corrupted`, the damaged body. A
    /// slice of the caller's buffer when it handed one over ([`Source::Shared`]) and the
    /// body checked as received; a copy otherwise.
    pub body: Bytes,
    pub quality: Quality,
    /// Bits on the wire, for the estimator.
    pub bits: usize,
    /// Parity the datagram was protected with (as found).
    pub parity: u8,
    /// The header carries the AUTH bit: `body` is the sealed envelope (docs/spec.md §8),
    /// still to be verified by `auth::Auth::open` before anything acts on it.
    pub auth: bool,
    /// `body` is a slice of a buffer the caller handed over ([`Source::Shared`], a GRO
    /// train): while kept it keeps that whole buffer resident (`receiver::memory`).
    pub shared: bool,
}

/// A body shorter than this is copied out of a shared buffer rather than sliced: the copy
/// costs less than the slice's reference count, and a slice would keep a 64 kB train resident
/// for a few bytes (a 1-byte body pinned 43 kB, issue 39). Longer bodies pin at most 64 times
/// their size, and only for as long as `receiver::memory` lets them stay slices.
pub const SHARED_MIN_BODY: usize = 1024;

/// Why a datagram could not be turned into a TPDU at all: it is lost to the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undecodable {
    /// Not long enough to hold a header, or the header does not check even after decoding.
    Header(WireError),
}

/// Decodes `datagram`, using `scratch` for FEC work. `hint` is the parity last seen from the
/// same peer.
#[cfg(test)]
pub fn decode(
    datagram: &[u8],
    hint: Option<u8>,
    scratch: &mut Vec<u8>,
) -> Result<Received, Undecodable> {
    decode_within(Source::Borrowed(datagram), || hint, scratch, |_, _| true)
}

/// Where a datagram's bytes live, and so whether a body may stay where it is.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// The caller keeps its buffer: a body is copied out.
    Borrowed(&'a [u8]),
    /// `datagram` lies inside `buffer`, which the caller hands over: a body that checked as
    /// received is a slice of it (no copy, no allocation).
    Shared {
        datagram: &'a [u8],
        buffer: &'a Bytes,
    },
}

impl<'a> Source<'a> {
    pub fn datagram(&self) -> &'a [u8] {
        match *self {
            Source::Borrowed(d) | Source::Shared { datagram: d, .. } => d,
        }
    }

    /// `body`, a part of the datagram, as an owned body, and whether it is a slice of the
    /// shared buffer.
    fn body(&self, body: &[u8]) -> (Bytes, bool) {
        match self {
            Source::Shared { buffer, .. } if body.len() >= SHARED_MIN_BODY => {
                (buffer.slice_ref(body), true)
            }
            _ => (Bytes::copy_from_slice(body), false),
        }
    }
}

/// As [`decode`], but the peer's parity is asked for (`hint`) only when the datagram did not
/// check as received (a lookup per datagram otherwise, for nothing), and each FEC decoding
/// attempt (its parity given, and the parity the peer is known to use, if any) runs only if `allow`
/// says so: the endpoint's CPU budget for peers it does not know (`crate::decode_budget`).
pub fn decode_within(
    source: Source<'_>,
    hint: impl FnOnce() -> Option<u8>,
    scratch: &mut Vec<u8>,
    mut allow: impl FnMut(u8, Option<u8>) -> bool,
) -> Result<Received, Undecodable> {
    let datagram = source.datagram();
    let bits = datagram.len() * 8;
    let first = parse_tpdu_any(datagram);
    if let Ok((t, auth)) = &first {
        // (An authenticated TPDU without parity comes back with `body_ok` unchecked: its
        // tag, verified next, covers everything the CRC-32C would; docs/spec.md §8.)
        if t.body_ok && trailer_fits(datagram.len(), usize::from(t.header.len), t.header.fec) {
            let (body, shared) = source.body(t.body);
            return Ok(Received {
                header: t.header,
                body,
                quality: Quality::Clean,
                bits,
                parity: t.header.fec,
                auth: *auth,
                shared,
            });
        }
    }
    // Something failed: try to correct with each plausible parity, at most two attempts. The
    // parity the header names is plausible when the header checks, or when it is the one
    // this peer uses (`hint`); from a peer we know, a damaged header naming another parity
    // is junk or a rare strength change (a loss the mode repairs), not worth a decode that
    // may cost 600 times an ordinary one. `allow` holds unknown peers to a budget, and a
    // known peer's attempts above the parity it uses to a budget of its own.
    let hint = hint();
    let declared =
        Header::peek_fec(datagram).filter(|&p| first.is_ok() || hint.is_none() || hint == Some(p));
    let mut candidates: [Option<u8>; 2] = [declared, hint];
    if candidates[0] == candidates[1] {
        candidates[1] = None;
    }
    for p in candidates.into_iter().flatten().filter(|&p| p > 0) {
        if !allow(p, hint) {
            continue;
        }
        scratch.clear();
        scratch.extend_from_slice(datagram);
        let Ok(corr) = fec::decode(p, scratch) else {
            continue;
        };
        if let Ok((t, auth)) = parse_tpdu_any(scratch) {
            if t.header.fec == p
                && t.body_ok
                && trailer_fits(scratch.len(), usize::from(t.header.len), p)
            {
                return Ok(Received {
                    header: t.header,
                    body: Bytes::copy_from_slice(t.body),
                    quality: Quality::Corrected {
                        bits: corr.bits,
                        symbols: corr.symbols,
                    },
                    bits,
                    parity: p,
                    auth,
                    shared: false,
                });
            }
        }
    }
    match first {
        Ok((t, auth)) => Ok(Received {
            header: t.header,
            body: Bytes::copy_from_slice(t.body),
            quality: Quality::Corrupted,
            bits,
            parity: t.header.fec,
            auth,
            shared: false,
        }),
        Err(e) => Err(Undecodable::Header(e)),
    }
}

/// Whether the bytes after the CRC are exactly the parity the header announces.
fn trailer_fits(len: usize, body_len: usize, parity: u8) -> bool {
    datagram_len(body_len, parity) == Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_wire::{Flags, Mode};

    fn header(fec: u8) -> Header {
        Header {
            mode: Mode::HybridNackMack,
            flags: Flags::empty(),
            src_port: 1,
            dst_port: 2,
            seq: 42,
            timestamp: 0,
            fec,
            tag: 1,
            len: 0,
        }
    }

    #[test]
    fn clean_round_trip_with_and_without_fec() {
        for p in [0u8, 2, 8, 32] {
            let body: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
            let mut out = Vec::new();
            encode(header(p), &body, &mut out).unwrap();
            assert_eq!(Some(out.len()), datagram_len(body.len(), p));
            let r = decode(&out, None, &mut Vec::new()).unwrap();
            assert_eq!(r.quality, Quality::Clean);
            assert_eq!(r.body, body);
        }
    }

    /// A small body is copied out of a shared (GRO) buffer; a large one is a slice of it.
    #[test]
    fn only_large_bodies_stay_slices_of_a_shared_buffer() {
        for (len, sliced) in [
            (1usize, false),
            (SHARED_MIN_BODY - 1, false),
            (SHARED_MIN_BODY, true),
        ] {
            let mut out = Vec::new();
            encode(header(0), &vec![3u8; len], &mut out).unwrap();
            let buffer = Bytes::from(out);
            let source = Source::Shared {
                datagram: &buffer,
                buffer: &buffer,
            };
            let r = decode_within(source, || None, &mut Vec::new(), |_, _| true).unwrap();
            let p = r.body.as_ptr() as usize;
            let inside =
                p >= buffer.as_ptr() as usize && p < buffer.as_ptr() as usize + buffer.len();
            assert_eq!((r.shared, inside, r.body.len()), (sliced, sliced, len));
        }
    }

    #[test]
    fn corrects_errors_in_header_and_body() {
        let body = vec![0x55u8; 1200];
        let mut out = Vec::new();
        encode(header(8), &body, &mut out).unwrap();
        out[3] ^= 0x01; // header
        out[14] ^= 0x80; // the fec byte itself: needs the peer hint
        out[500] ^= 0xFF;
        assert!(decode(&out, None, &mut Vec::new()).is_err());
        let r = decode(&out, Some(8), &mut Vec::new()).unwrap();
        assert!(matches!(r.quality, Quality::Corrected { .. }));
        assert_eq!(r.body, body);
        assert_eq!(r.header.seq, 42);
    }

    #[test]
    fn a_known_peer_s_damaged_header_is_decoded_only_with_the_parity_it_uses() {
        // A datagram claiming parity 254 in a header that does not check, from a peer known
        // to use 8: only 8 is tried. From an unknown peer both are offered to `allow`.
        let mut junk = vec![0xA5u8; 1500];
        junk[0] = 0x10;
        junk[14] = 254;
        let mut tried = Vec::new();
        let _ = decode_within(
            Source::Borrowed(&junk),
            || Some(8),
            &mut Vec::new(),
            |p, _| {
                tried.push(p);
                true
            },
        );
        assert_eq!(tried, [8]);
        tried.clear();
        let _ = decode_within(
            Source::Borrowed(&junk),
            || None,
            &mut Vec::new(),
            |p, _| {
                tried.push(p);
                false
            },
        );
        assert_eq!(tried, [254]);
        // A header that checks names a parity worth trying even if the peer used another.
        let body = vec![7u8; 1000];
        let mut out = Vec::new();
        encode(header(16), &body, &mut out).unwrap();
        out[600] ^= 0xFF;
        let r = decode(&out, Some(8), &mut Vec::new()).unwrap();
        assert!(matches!(r.quality, Quality::Corrected { .. }));
        assert_eq!(r.body, body);
    }

    #[test]
    fn uncorrectable_body_is_reported_corrupted() {
        let body = vec![1u8; 300];
        let mut out = Vec::new();
        encode(header(0), &body, &mut out).unwrap();
        out[100] ^= 4;
        let r = decode(&out, None, &mut Vec::new()).unwrap();
        assert_eq!(r.quality, Quality::Corrupted);
        assert_eq!(r.header.seq, 42);
    }

    #[test]
    fn garbage_never_panics() {
        let mut scratch = Vec::new();
        let mut x: u32 = 12345;
        for len in 0..400 {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = decode(&buf, Some((len % 40) as u8), &mut scratch);
        }
    }
}
