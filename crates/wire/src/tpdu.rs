//! A whole TPDU without its FEC parity: header, body and CRC-32C.

use crate::checks::crc32c;
use crate::error::WireError;
use crate::header::{Header, HEADER_LEN};

pub const CRC_LEN: usize = 4;
/// Bytes a TPDU adds to its body before FEC: header and CRC-32C.
pub const OVERHEAD: usize = HEADER_LEN + CRC_LEN;

/// A parsed TPDU borrowing its body from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tpdu<'a> {
    pub header: Header,
    pub body: &'a [u8],
    /// Whether the body's CRC-32C checked. A TPDU with a good header and a bad body "arrived
    /// corrupted": modes with NACKs ask for it again.
    pub body_ok: bool,
}

/// Parses the TPDU at the start of `buf`; bytes after the CRC (FEC parity) are ignored.
/// Fails only if the header is unusable (truncated, corrupted, unknown version or mode) or the
/// datagram is shorter than the header says.
pub fn parse_tpdu(buf: &[u8]) -> Result<Tpdu<'_>, WireError> {
    let header = Header::parse(buf)?;
    parse_rest(buf, header)
}

/// As [`parse_tpdu`], but also accepts an authenticated TPDU (docs/spec.md §8) and says
/// whether it is one; its body is then the envelope, still sealed. The CRC-32C of an
/// authenticated TPDU without parity is not computed (`body_ok` is true): there is nothing
/// FEC could correct, and the AEAD tag the receiver verifies covers every byte it would.
pub fn parse_tpdu_any(buf: &[u8]) -> Result<(Tpdu<'_>, bool), WireError> {
    let (header, auth) = Header::parse_any(buf)?;
    let skip_crc = auth && header.fec == 0;
    Ok((parse_body(buf, header, skip_crc)?, auth))
}

fn parse_rest(buf: &[u8], header: Header) -> Result<Tpdu<'_>, WireError> {
    parse_body(buf, header, false)
}

fn parse_body(buf: &[u8], header: Header, skip_crc: bool) -> Result<Tpdu<'_>, WireError> {
    let len = usize::from(header.len);
    let end = HEADER_LEN + len + CRC_LEN;
    if buf.len() < end {
        return Err(WireError::Truncated {
            what: "tpdu body",
            need: end,
            have: buf.len(),
        });
    }
    let body = &buf[HEADER_LEN..HEADER_LEN + len];
    let stored = u32::from_be_bytes([buf[end - 4], buf[end - 3], buf[end - 2], buf[end - 1]]);
    let body_ok = skip_crc || crc32c(body) == stored;
    Ok(Tpdu {
        header,
        body,
        body_ok,
    })
}

/// Appends header (with `len` set from `body`), body and CRC-32C to `out`.
pub fn emit_tpdu(header: Header, body: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
    emit_tpdu_with(header, body.len(), out, |out| {
        out.extend_from_slice(body);
        Ok(())
    })
}

/// As [`emit_tpdu`], for a body that `write` appends to `out` itself, `len` bytes exactly: a
/// control body is serialised once, straight into the datagram, instead of into a buffer of
/// its own first. On any error `out` is as it was.
pub fn emit_tpdu_with(
    mut header: Header,
    len: usize,
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), WireError>,
) -> Result<(), WireError> {
    header.len = u16::try_from(len).map_err(|_| WireError::BodyTooLong(len))?;
    let start = out.len();
    out.reserve(OVERHEAD + len);
    out.extend_from_slice(&header.to_bytes());
    let body_at = out.len();
    let written = write(out).and_then(|()| match out.len() - body_at {
        n if n == len => Ok(()),
        n => Err(WireError::BodyLengthMismatch {
            announced: len,
            written: n,
        }),
    });
    if let Err(e) = written {
        out.truncate(start);
        return Err(e);
    }
    let crc = crc32c(&out[body_at..]);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Appends an authenticated TPDU: the header with the AUTH bit (its `len` is taken as given:
/// the caller sealed over it), the envelope already in `out[start..]` is followed by its
/// CRC-32C. Used by the sealer, which writes header and envelope in place.
pub fn finish_auth_tpdu(out: &mut Vec<u8>, start: usize) {
    let crc = crc32c(&out[start + HEADER_LEN..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Flags;
    use crate::mode::Mode;
    use proptest::prelude::*;

    fn header() -> Header {
        Header {
            mode: Mode::Reliable,
            flags: Flags::ASYN,
            src_port: 1,
            dst_port: 2,
            seq: 3,
            timestamp: 4,
            fec: 0,
            tag: 9,
            len: 0,
        }
    }

    #[test]
    fn round_trip_and_body_corruption_detected() {
        let mut out = Vec::new();
        emit_tpdu(header(), b"telemetry", &mut out).unwrap();
        assert_eq!(out.len(), OVERHEAD + 9);
        let t = parse_tpdu(&out).unwrap();
        assert_eq!(t.body, b"telemetry");
        assert!(t.body_ok);
        assert_eq!(t.header.len, 9);
        out[HEADER_LEN + 2] ^= 0x10;
        let t = parse_tpdu(&out).unwrap();
        assert!(!t.body_ok);
    }

    #[test]
    fn short_datagram_is_truncated_error() {
        let mut out = Vec::new();
        emit_tpdu(header(), b"abc", &mut out).unwrap();
        out.pop();
        assert!(matches!(parse_tpdu(&out), Err(WireError::Truncated { .. })));
    }

    #[test]
    fn body_too_long_is_refused() {
        let body = vec![0u8; 70_000];
        assert_eq!(
            emit_tpdu(header(), &body, &mut Vec::new()),
            Err(WireError::BodyTooLong(70_000))
        );
    }

    #[test]
    fn a_body_written_in_place_appends_after_what_out_holds() {
        let mut out = b"earlier".to_vec();
        emit_tpdu_with(header(), 9, &mut out, |o| {
            o.extend_from_slice(b"telemetry");
            Ok(())
        })
        .unwrap();
        assert_eq!(&out[..7], b"earlier");
        let t = parse_tpdu(&out[7..]).unwrap();
        assert_eq!((t.body, t.body_ok), (&b"telemetry"[..], true));
        let mut copied = Vec::new();
        emit_tpdu(header(), b"telemetry", &mut copied).unwrap();
        assert_eq!(&out[7..], &copied[..]);
    }

    #[test]
    fn a_body_written_short_or_failing_leaves_out_as_it_was() {
        let mut out = b"earlier".to_vec();
        let short = emit_tpdu_with(header(), 9, &mut out, |o| {
            o.extend_from_slice(b"tele");
            Ok(())
        });
        assert_eq!(
            short,
            Err(WireError::BodyLengthMismatch {
                announced: 9,
                written: 4
            })
        );
        let failed = emit_tpdu_with(header(), 9, &mut out, |o| {
            o.push(1);
            Err(WireError::BadReason)
        });
        assert_eq!(failed, Err(WireError::BadReason));
        assert_eq!(out, b"earlier");
    }

    proptest! {
        #[test]
        fn parser_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..2000)) {
            if let Ok(t) = parse_tpdu(&buf) {
                if !t.header.flags.is_data() && t.body_ok {
                    let _ = crate::ControlBody::parse(t.header.flags, t.body);
                }
            }
        }

        #[test]
        fn control_parser_never_panics(flags in any::<u8>(), buf in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = crate::ControlBody::parse(Flags(flags), &buf);
        }
    }
}
