//! The processes that run in time, independently of the traffic (the time-form
//! Gilbert–Elliott chain, random outages): alternating off/on periods drawn from random
//! streams of their own, so their schedules are a function of the seed and of time only.

use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;

use crate::seed::splitmix64;

/// Stream numbers of the processes that have their own random stream.
pub(super) const STREAM_BURST_TIME: u64 = 1;
pub(super) const STREAM_RANDOM_OUTAGE: u64 = 2;

/// The generator of stream `stream` of `seed`. Two SplitMix64 one-step hashes
/// (`splitmix64(x, 1)`) make the 128-bit PCG state, so the streams of one seed, and the
/// streams of nearby seeds, start at unrelated points of the generator's cycle (a plain XOR
/// of the seed would put them close together).
pub(super) fn stream_rng(seed: u64, stream: u64) -> Pcg64Mcg {
    let a = splitmix64(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03), 1);
    let b = splitmix64(a ^ 0x5851_F42D_4C95_7F2D, 1);
    Pcg64Mcg::new((u128::from(a) << 64) | u128::from(b))
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How long one period of an alternating process lasts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Span {
    /// Exponential with this mean, in ns, rounded to the ns.
    Exp(f64),
    /// Uniform over these whole ns, both ends included.
    Uniform(u64, u64),
}

impl Span {
    pub(super) fn sample(self, rng: &mut Pcg64Mcg) -> u64 {
        match self {
            // `as` saturates: a draw beyond u64::MAX ns (585 years) is the end of time.
            Span::Exp(mean_ns) => {
                let x: f64 = Exp1.sample(rng);
                (x * mean_ns).round() as u64
            }
            Span::Uniform(lo, hi) => rng.gen_range(lo..=hi),
        }
    }
}

/// A process that alternates between an "off" state (Gilbert–Elliott Good, link up) and an
/// "on" state (Bad, down), starting off at the epoch: off for a draw of `off`, on for a draw
/// of `on`, off again, ... Each cycle draws the off span, then the on span, from its own
/// stream. Times are ns since the epoch.
///
/// Memory is bounded: only a cursor is kept (the on period in force or next, and the one
/// before it). Questions about earlier times regenerate the process from `origin` (the
/// stream at the epoch), so every answer is a function of the seed and the time only.
#[derive(Debug, Clone)]
pub(super) struct Alternating {
    off: Span,
    on: Span,
    /// The stream as it was at the epoch.
    origin: Pcg64Mcg,
    rng: Pcg64Mcg,
    /// The on period before `cur`.
    prev: Option<(u64, u64)>,
    /// An on period `[start, end)`; the cursor keeps it the first one ending after the
    /// latest time advanced to.
    pub(super) cur: (u64, u64),
    /// How many on periods precede `cur`.
    pub(super) index: u64,
}

impl Alternating {
    pub(super) fn new(off: Span, on: Span, origin: Pcg64Mcg) -> Alternating {
        let mut rng = origin.clone();
        let cur = Alternating::draw(off, on, &mut rng, 0);
        Alternating {
            off,
            on,
            origin,
            rng,
            prev: None,
            cur,
            index: 0,
        }
    }

    fn draw(off: Span, on: Span, rng: &mut Pcg64Mcg, after: u64) -> (u64, u64) {
        let start = after.saturating_add(off.sample(rng));
        (start, start.saturating_add(on.sample(rng)))
    }

    pub(super) fn restarted(&self) -> Alternating {
        Alternating::new(self.off, self.on, self.origin.clone())
    }

    /// Moves the cursor to the first on period ending after `t` (never backwards).
    pub(super) fn advance(&mut self, t: u64) {
        // At the end of time the process stops: u64::MAX ns is 585 years.
        while self.cur.1 <= t && self.cur.1 != u64::MAX {
            let next = Alternating::draw(self.off, self.on, &mut self.rng, self.cur.1);
            self.prev = Some(self.cur);
            self.cur = next;
            self.index += 1;
        }
    }

    /// The first on period ending after `t` (or the last one, at the end of time), without
    /// moving the cursor.
    pub(super) fn period_ending_after(&self, t: u64) -> (u64, u64) {
        match self.prev {
            // `prev` starts after its predecessor ended, so for t in [prev.start, prev.end)
            // prev is the first period ending after t.
            Some(p) if t < p.1 && t >= p.0 => p,
            Some(p) if t < p.1 => {
                let mut fresh = self.restarted();
                fresh.advance(t);
                fresh.cur
            }
            _ if self.cur.1 > t => self.cur,
            _ => {
                let mut ahead = self.clone();
                ahead.advance(t);
                ahead.cur
            }
        }
    }

    /// On periods that start before `until`, from the epoch.
    pub(super) fn periods(&self, until: u64) -> Vec<(u64, u64)> {
        let mut p = self.restarted();
        let mut out = Vec::new();
        while p.cur.0 < until {
            out.push(p.cur);
            if p.cur.1 == u64::MAX {
                break;
            }
            let end = p.cur.1;
            p.advance(end);
        }
        out
    }
}

/// The on periods of `process` (none without one) that start before `until`.
pub(super) fn intervals(
    process: Option<&Alternating>,
    until: Duration,
) -> Vec<(Duration, Duration)> {
    process.map_or_else(Vec::new, |p| {
        p.periods(nanos(until))
            .into_iter()
            .map(|(s, e)| (Duration::from_nanos(s), Duration::from_nanos(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: the first period of the full list that ends after `t`.
    fn expected(all: &[(u64, u64)], t: u64) -> (u64, u64) {
        *all.iter().find(|p| p.1 > t).unwrap()
    }

    #[test]
    fn lookups_agree_with_the_full_schedule_from_any_cursor() {
        let p = Alternating::new(
            Span::Exp(3e6),
            Span::Uniform(500_000, 2_000_000),
            stream_rng(17, STREAM_RANDOM_OUTAGE),
        );
        let all = p.periods(2_000_000_000);
        assert!(all.len() > 300, "{}", all.len());
        assert!(all.windows(2).all(|w| w[0].1 <= w[1].0));
        let mut cursor = p.clone();
        let mut probe = stream_rng(5, 99);
        for step in 0..400u64 {
            // Move the cursor forward; ask about times behind it (regenerated or `prev`),
            // at it, and ahead of it (looked up on a copy).
            let at = step * 4_000_000;
            cursor.advance(at);
            assert_eq!(cursor.cur, expected(&all, at));
            for _ in 0..5 {
                let t = probe.gen_range(0..1_700_000_000u64);
                assert_eq!(
                    cursor.period_ending_after(t),
                    expected(&all, t),
                    "t {t} at {at}"
                );
            }
            if let Some(prev) = cursor.prev {
                assert_eq!(cursor.period_ending_after(prev.0), prev);
            }
        }
        // `index` counts the periods the cursor passed (it keeps only `prev` and `cur`).
        assert_eq!(
            cursor.index as usize,
            all.iter().filter(|p| p.1 <= 1_596_000_000).count()
        );
    }

    #[test]
    fn streams_differ_by_seed_and_stream() {
        let draw = |seed, stream| stream_rng(seed, stream).gen::<u64>();
        assert_ne!(draw(1, STREAM_BURST_TIME), draw(2, STREAM_BURST_TIME));
        assert_ne!(draw(1, STREAM_BURST_TIME), draw(1, STREAM_RANDOM_OUTAGE));
        assert_eq!(draw(3, STREAM_RANDOM_OUTAGE), draw(3, STREAM_RANDOM_OUTAGE));
    }
}
