//! Keeps a datagram-mode UDP route within the share of the air link that a busy flow of its
//! class would get (docs/gateway.md §Priorities): datagram mode has no connection to pace,
//! so what is over the share is dropped at the ingress rather than queued at the link, where
//! every class would wait behind it.

use std::time::{Duration, Instant};

/// Least bucket depth: one largest UDP datagram with its AeroTP overhead, so that any single
/// datagram within the rate can pass.
const MIN_DEPTH: f64 = 65_536.0;
/// The bucket holds this much time at the current rate: a burst shorter than it passes
/// whole (a telemetry frame sent at once), a sustained excess does not.
const DEPTH_TIME: Duration = Duration::from_millis(100);

/// A token bucket in bytes. Written here because its rate follows the endpoint's link share
/// every period, and `governor` (the usual crate) fixes a limiter's quota when it is built.
#[derive(Debug)]
pub struct Policer {
    tokens: f64,
    last: Instant,
}

fn depth(rate_bps: u64) -> f64 {
    (rate_bps as f64 / 8.0 * DEPTH_TIME.as_secs_f64()).max(MIN_DEPTH)
}

impl Policer {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Policer {
        Policer {
            tokens: f64::INFINITY,
            last: now,
        }
    }

    /// Whether a datagram of `bytes` may go at `now` under `rate_bps` (taking its tokens if
    /// so).
    pub fn admit(&mut self, bytes: usize, rate_bps: u64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        let refill = elapsed * rate_bps as f64 / 8.0;
        self.tokens = (self.tokens + refill).min(depth(rate_bps));
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_within_the_depth_passes_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut p = Policer::new(t0);
        let rate = 8_000_000; // 1 MB/s: depth 100 kB.
        let passed = (0..200).filter(|_| p.admit(1000, rate, t0)).count();
        assert_eq!(passed, 100, "the full bucket lets 100 kB through at once");
        // Then 1000 bytes per millisecond.
        let mut sent = 0;
        for ms in 1..=1000u64 {
            let now = t0 + Duration::from_millis(ms);
            for _ in 0..3 {
                if p.admit(1000, rate, now) {
                    sent += 1;
                }
            }
        }
        assert!((999..=1001).contains(&sent), "{sent} datagrams in a second");
    }

    #[test]
    fn the_largest_datagram_passes_even_at_a_low_rate() {
        let t0 = Instant::now();
        let mut p = Policer::new(t0);
        assert!(p.admit(65_535, 8_000, t0));
        assert!(!p.admit(65_535, 8_000, t0), "the bucket is empty now");
        // 8 kb/s = 1000 B/s: 65.5 s to refill.
        assert!(!p.admit(65_535, 8_000, t0 + Duration::from_secs(60)));
        assert!(p.admit(65_535, 8_000, t0 + Duration::from_secs(66)));
    }

    #[test]
    fn a_lower_rate_shrinks_what_was_saved() {
        let t0 = Instant::now();
        let mut p = Policer::new(t0);
        assert!(p.admit(1, 80_000_000, t0));
        // 10 MB/s would allow a 1 MB bucket; at 8 kb/s the depth is 65 536 bytes.
        let passed = (0..100).filter(|_| p.admit(1000, 8_000, t0)).count();
        assert_eq!(passed, 65);
    }
}
