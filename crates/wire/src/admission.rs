//! Address validation (docs/spec.md §9): a listener proves that an initiator receives what is
//! sent to its address before it gives the connection to the application. It sends a
//! CHALLENGE carrying a cookie — or, under load, a RETRY (the same TPDU, keeping no state) —
//! and the initiator answers with an ECHO of the cookie. In the spirit of QUIC's Retry and
//! TCP's SYN cookies; the cookie's contents are the listener's business (see
//! `crates/proto/src/admission.rs`), the wire carries 16 opaque bytes.

use crate::error::WireError;

/// Bytes of a cookie.
pub const COOKIE_LEN: usize = 16;
/// Bytes of a CHALLENGE body: kind, echoed timestamp, cookie.
pub const CHALLENGE_LEN: usize = 1 + 4 + COOKIE_LEN;
/// Bytes of an ECHO body: the cookie.
pub const ECHO_LEN: usize = COOKIE_LEN;

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
        cookie.copy_from_slice(&body[5..]);
        Ok(Challenge {
            retry,
            ts_echo: u32::from_be_bytes([body[1], body[2], body[3], body[4]]),
            cookie,
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
    }
}

/// An initiator's ECHO (flags exactly `ASYN | RPT`): the cookie of a CHALLENGE or RETRY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    pub cookie: [u8; COOKIE_LEN],
}

impl Echo {
    pub fn parse(body: &[u8]) -> Result<Echo, WireError> {
        let cookie: [u8; COOKIE_LEN] = body.try_into().map_err(|_| WireError::BadLength {
            what: "ECHO",
            need: ECHO_LEN,
            have: body.len(),
        })?;
        Ok(Echo { cookie })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.cookie);
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
            };
            let mut b = Vec::new();
            c.emit(&mut b);
            assert_eq!(b.len(), CHALLENGE_LEN);
            assert_eq!(Challenge::parse(&b), Ok(c));
            b[0] = 2;
            assert_eq!(Challenge::parse(&b), Err(WireError::BadKind(2)));
            assert!(matches!(
                Challenge::parse(&b[..20]),
                Err(WireError::BadLength {
                    need: 21,
                    have: 20,
                    ..
                })
            ));
        }
    }

    #[test]
    fn echo_round_trips_and_refuses_bad_lengths() {
        let e = Echo {
            cookie: [9; COOKIE_LEN],
        };
        let mut b = Vec::new();
        e.emit(&mut b);
        assert_eq!(Echo::parse(&b), Ok(e));
        b.push(0);
        assert!(matches!(
            Echo::parse(&b),
            Err(WireError::BadLength { have: 17, .. })
        ));
        assert!(Echo::parse(&[]).is_err());
    }
}
