//! A CPU budget for Reed–Solomon decoding of datagrams from peers the endpoint has never
//! received an intact TPDU from. A junk datagram whose header check fails but whose FEC byte
//! says parity 254 costs about 3 ms to decode at 1500 bytes — 600 times ordinary junk — so
//! without a bound about 3 Mb/s of it kept a core busy (issue 14, finding 5). Known peers
//! (whose parity the endpoint remembers) are never limited: a noisy link must keep working.
//!
//! The cost of one attempt is codewords × p × (255 + p), about the decoder's field
//! multiplications (syndromes over 255 symbols, then the p² of Berlekamp–Massey); the bucket
//! refills at `RATE` units per second of the caller's time, up to one second's worth.
//! 1.3·10^7 units/s is about 5 % of a core (a parity-254 attempt at 1500 B is 775,000 units,
//! about 3 ms, issue 14's measurement), and lets through about 1,000 corrupted first TPDUs a
//! second from new peers at parity 8 (6 codewords each).

use std::time::Duration;

/// Units refilled per second (and the bucket's depth).
pub const RATE: u64 = 13_000_000;

#[derive(Debug)]
pub(crate) struct DecodeBudget {
    tokens: u64,
    last: Duration,
}

impl DecodeBudget {
    pub(crate) fn new() -> DecodeBudget {
        DecodeBudget {
            tokens: RATE,
            last: Duration::ZERO,
        }
    }

    /// What one decode attempt of a `len`-byte datagram with parity `p` costs.
    pub(crate) fn cost(len: usize, p: u8) -> u64 {
        let p = u64::from(p);
        (len.div_ceil(255) as u64).max(1) * p * (255 + p)
    }

    /// Takes `cost` units if the bucket holds them at `now`; false (nothing taken) otherwise.
    pub(crate) fn charge(&mut self, now: Duration, cost: u64) -> bool {
        if now > self.last {
            let refill = (now - self.last).as_micros() as u64 * RATE / 1_000_000;
            self.tokens = (self.tokens + refill).min(RATE);
            self.last = now;
        }
        if self.tokens < cost {
            return false;
        }
        self.tokens -= cost;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refills_with_time_and_never_beyond_a_second() {
        let mut b = DecodeBudget::new();
        let worst = DecodeBudget::cost(1500, 254);
        assert_eq!(worst, 6 * 254 * 509);
        let junk = DecodeBudget::cost(65_000, 254);
        let mut n = 0;
        while b.charge(Duration::ZERO, junk) {
            n += 1;
        }
        assert_eq!(n, RATE / junk);
        assert!(!b.charge(Duration::ZERO, junk));
        // Empty it exactly, then time refills it.
        let mut b = DecodeBudget::new();
        assert!(b.charge(Duration::ZERO, RATE));
        assert!(!b.charge(Duration::ZERO, 1));
        assert!(b.charge(Duration::from_millis(1), RATE / 1000));
        assert!(!b.charge(Duration::from_millis(1), 1));
        // A long quiet spell refills one second's worth, no more.
        assert!(b.charge(Duration::from_secs(100), RATE));
        assert!(!b.charge(Duration::from_secs(100), 1));
        // Time going backwards (a caller's clock) refills nothing.
        assert!(!b.charge(Duration::from_secs(50), 1));
    }
}
