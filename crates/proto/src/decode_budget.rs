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

//!
//! A known peer is charged too, per source address, for attempts at a parity above the one
//! it uses (the parity of its last intact TPDU): the header of a datagram spoofed from a
//! sender's address may check and name parity 254, 600 times the sender's own parity 8 in
//! CPU (issue 39: 40 such datagrams a second took an 89 Mb/s transfer down to 5 Mb/s). Such
//! attempts draw on `SOURCE_RATE` per source — a real peer raising its parity gets its first
//! TPDUs at the new parity decoded at once, and from then on it is the parity it uses; a
//! spoofer gets about four parity-254 decodes a second per address it spoofs. Attempts at
//! the peer's own parity or below are never limited.

use crate::table::{table, Table};
use std::net::SocketAddr;
use std::time::Duration;

/// Units refilled per second (and the bucket's depth).
pub const RATE: u64 = 13_000_000;

/// Units refilled per second (and the depth) of one known source's bucket for attempts above
/// the parity it uses: about 1 % of a core, four parity-254 attempts at 1275 bytes, 200 at
/// parity 16 and 1500 bytes.
pub const SOURCE_RATE: u64 = 2_600_000;

/// Sources with a bucket of their own, at most (as many as the FEC hints they follow).
const SOURCE_LIMIT: usize = 4096;

#[derive(Debug)]
pub(crate) struct DecodeBudget {
    tokens: u64,
    last: Duration,
    rate: u64,
}

impl DecodeBudget {
    pub(crate) fn new() -> DecodeBudget {
        DecodeBudget::with_rate(RATE, Duration::ZERO)
    }

    /// A full bucket of `rate` units, refilled at `rate` per second from `now`.
    fn with_rate(rate: u64, now: Duration) -> DecodeBudget {
        DecodeBudget {
            tokens: rate,
            last: now,
            rate,
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
            let micros = u64::try_from((now - self.last).as_micros()).unwrap_or(u64::MAX);
            let refill = micros.saturating_mul(self.rate) / 1_000_000;
            self.tokens = self.tokens.saturating_add(refill).min(self.rate);
            self.last = now;
        }
        if self.tokens < cost {
            return false;
        }
        self.tokens -= cost;
        true
    }
}

/// The buckets of known sources for their attempts above the parity they use.
#[derive(Debug)]
pub(crate) struct SourceBudgets {
    by_source: Table<SocketAddr, DecodeBudget>,
}

impl SourceBudgets {
    pub(crate) fn new(seed: u64) -> SourceBudgets {
        SourceBudgets {
            by_source: table(seed),
        }
    }

    /// Takes `cost` units from `from`'s bucket at `now` if it holds them.
    pub(crate) fn charge(&mut self, from: SocketAddr, now: Duration, cost: u64) -> bool {
        if self.by_source.len() >= SOURCE_LIMIT && !self.by_source.contains_key(&from) {
            self.by_source.clear();
        }
        self.by_source
            .entry(from)
            .or_insert_with(|| DecodeBudget::with_rate(SOURCE_RATE, now))
            .charge(now, cost)
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

    #[test]
    fn each_source_has_its_own_bucket_above_its_parity() {
        let mut b = SourceBudgets::new(1);
        let (x, y): (SocketAddr, SocketAddr) =
            ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
        let worst = DecodeBudget::cost(1275, 254);
        let t = Duration::from_secs(3);
        let mut n = 0;
        while b.charge(x, t, worst) {
            n += 1;
        }
        assert_eq!(n, SOURCE_RATE / worst);
        assert!((3..=5).contains(&n), "{n} parity-254 attempts");
        // Another source is not held by the first's spending; the first refills with time.
        assert!(b.charge(y, t, worst));
        assert!(!b.charge(x, t + Duration::from_millis(100), worst));
        assert!(b.charge(x, t + Duration::from_millis(300), worst));
        // A 65 kB datagram at parity 254 is never decoded.
        assert!(!b.charge(
            y,
            t + Duration::from_secs(60),
            DecodeBudget::cost(65_000, 254)
        ));
    }
}
