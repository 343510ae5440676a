//! Address validation (docs/spec.md §9): a listener proves that an initiator receives what is
//! sent to its address before it gives the connection to the application. It sends a
//! CHALLENGE carrying a cookie — or, under load, a RETRY (the same TPDU, keeping no state) —
//! and the initiator answers with an ECHO of the cookie. In the spirit of QUIC's Retry and
//! TCP's SYN cookies; the cookie's contents are the listener's business (see
//! `crates/proto/src/admission.rs`), the wire carries 16 opaque bytes.
//!
//! Both also carry the sender's **connection identifier** (`cid`): 64 random bits each end
//! draws for a connection and the other learns from the set-up's CHALLENGE and ECHO. Ports
//! and `tag` (24–40 bits, in every header) find a connection for a TPDU from a new address;
//! where two connections share them, the identifier in the CHALLENGE and ECHO exchanged with
//! that address says which one it is (docs/spec.md §9).

use crate::error::WireError;

/// Bytes of a cookie.
pub const COOKIE_LEN: usize = 16;
/// Bytes of a connection identifier.
pub const CID_LEN: usize = 8;
/// Bytes of a CHALLENGE body: kind, echoed timestamp, cookie, the sender's identifier.
pub const CHALLENGE_LEN: usize = 1 + 4 + COOKIE_LEN + CID_LEN;
/// Bytes of an ECHO body: the cookie, the sender's identifier.
pub const ECHO_LEN: usize = COOKIE_LEN + CID_LEN;

const KIND_CHALLENGE: u8 = 0;
const KIND_RETRY: u8 = 1;

/// A listener's CHALLENGE (flags exactly `ASYN | RST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Challenge {
    /// RETRY: the listener kept no state for the TPDU that drew this answer (it is under
    /// load); the initiator must send again what it sent. Otherwise the listener holds the
    /// connection and only waits for the echo.
    pub retry: bool,
    /// The `timestamp` of the TPDU that drew this answer, so the initiator can tell a RETRY
    /// for its set-up from one for a TPDU sent after it heard from the peer.
    pub ts_echo: u32,
    pub cookie: [u8; COOKIE_LEN],
    /// The sender's identifier of the connection (0: none, as in a RETRY, which keeps no
    /// state).
    pub cid: u64,
}

impl Challenge {
    pub fn parse(body: &[u8]) -> Result<Challenge, WireError> {
        if body.len() != CHALLENGE_LEN {
            return Err(WireError::BadLength {
                what: "CHALLENGE",
                need: CHALLENGE_LEN,
                have: body.len(),
            });
        }
        let retry = match body[0] {
            KIND_CHALLENGE => false,
            KIND_RETRY => true,
            _ => return Err(WireError::BadKind(body[0])),
        };
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&body[5..5 + COOKIE_LEN]);
        Ok(Challenge {
            retry,
            ts_echo: u32::from_be_bytes([body[1], body[2], body[3], body[4]]),
            cookie,
            cid: cid_at(&body[5 + COOKIE_LEN..]),
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(if self.retry {
            KIND_RETRY
        } else {
            KIND_CHALLENGE
        });
        out.extend_from_slice(&self.ts_echo.to_be_bytes());
        out.extend_from_slice(&self.cookie);
        out.extend_from_slice(&self.cid.to_be_bytes());
    }
}

/// The identifier in the last `CID_LEN` bytes of a body already checked for length.
fn cid_at(b: &[u8]) -> u64 {
    let mut a = [0u8; CID_LEN];
    a.copy_from_slice(&b[..CID_LEN]);
    u64::from_be_bytes(a)
}

/// An ECHO (flags exactly `ASYN | RPT`): the cookie of a CHALLENGE or RETRY, and the
/// answering end's identifier of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    pub cookie: [u8; COOKIE_LEN],
    /// The sender's identifier of the connection (0: none, as for a connection it no longer
    /// has).
    pub cid: u64,
}

impl Echo {
    pub fn parse(body: &[u8]) -> Result<Echo, WireError> {
        if body.len() != ECHO_LEN {
            return Err(WireError::BadLength {
                what: "ECHO",
                need: ECHO_LEN,
                have: body.len(),
            });
        }
        let mut cookie = [0u8; COOKIE_LEN];
        cookie.copy_from_slice(&body[..COOKIE_LEN]);
        Ok(Echo {
            cookie,
            cid: cid_at(&body[COOKIE_LEN..]),
        })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.cookie);
        out.extend_from_slice(&self.cid.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_round_trips_and_refuses_bad_bodies() {
        for retry in [false, true] {
            let c = Challenge {
                retry,
                ts_echo: 0xDEAD_BEEF,
                cookie: [7; COOKIE_LEN],
                cid: 0x0102_0304_0506_0708,
            };
            let mut b = Vec::new();
            c.emit(&mut b);
            assert_eq!(b.len(), CHALLENGE_LEN);
            assert_eq!(&b[21..], &[1, 2, 3, 4, 5, 6, 7, 8], "cid last, big-endian");
            assert_eq!(Challenge::parse(&b), Ok(c));
            b[0] = 2;
            assert_eq!(Challenge::parse(&b), Err(WireError::BadKind(2)));
            for short in [0, 20, 21, 28] {
                assert!(matches!(
                    Challenge::parse(&b[..short]),
                    Err(WireError::BadLength { need: 29, .. })
                ));
            }
            b.push(0);
            assert!(Challenge::parse(&b).is_err());
        }
    }

    #[test]
    fn echo_round_trips_and_refuses_bad_lengths() {
        let e = Echo {
            cookie: [9; COOKIE_LEN],
            cid: u64::MAX - 1,
        };
        let mut b = Vec::new();
        e.emit(&mut b);
        assert_eq!(b.len(), ECHO_LEN);
        assert_eq!(Echo::parse(&b), Ok(e));
        b.push(0);
        assert!(matches!(
            Echo::parse(&b),
            Err(WireError::BadLength { have: 25, .. })
        ));
        assert!(Echo::parse(&b[..16]).is_err(), "the cookie alone");
        assert!(Echo::parse(&[]).is_err());
    }
}
