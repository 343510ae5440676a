//! The receiver's feedback budget: a token bucket that keeps acknowledgements, NACKs, SNACKs
//! and reports within a set share of the return link's rate.
//!
//! The papers aggregate acknowledgements into MACKs so a thin return channel is not flooded;
//! a fixed aggregate size cannot know how thin the channel is. The bucket can: its rate is
//! `share × return rate`, so feedback never builds a standing queue on the return link, and
//! when traffic is sparse the bucket is full and each TPDU is acknowledged at once (which is
//! what keeps a lost interactive message from waiting for a long timeout).

use std::time::Duration;

/// Feedback TPDUs the bucket lets go back to back after a quiet spell (in bytes, at least
/// this many typical MACKs).
const BURST_TPDUS: f64 = 3.0;
/// A typical feedback datagram (MACK without entries, IPv4/UDP included), bytes.
pub const TYPICAL_FEEDBACK_BYTES: usize = 100;
/// The bucket also holds this much of its rate, so fast links can burst more.
const BURST_TIME: f64 = 0.02;

#[derive(Debug, Clone)]
pub struct FeedbackBudget {
    /// Refill rate, bytes per second.
    rate: f64,
    depth: f64,
    /// Tokens at `at` (bytes); negative while a feedback TPDU sent on credit is paid off.
    tokens: f64,
    at: Duration,
}

impl FeedbackBudget {
    /// A full bucket for feedback of at most `share` of `return_rate_bps`.
    pub fn new(return_rate_bps: u64, share: f64) -> FeedbackBudget {
        let mut b = FeedbackBudget {
            rate: 1.0,
            depth: 0.0,
            tokens: 0.0,
            at: Duration::ZERO,
        };
        b.set_rate(return_rate_bps, share);
        b.tokens = b.depth;
        b
    }

    /// A new return rate or share (the runtime re-paces a connection); keeps the tokens.
    pub fn set_rate(&mut self, return_rate_bps: u64, share: f64) {
        self.rate = (return_rate_bps as f64 * share / 8.0).max(1.0);
        self.depth = (TYPICAL_FEEDBACK_BYTES as f64 * BURST_TPDUS).max(self.rate * BURST_TIME);
        self.tokens = self.tokens.min(self.depth);
    }

    fn tokens_at(&self, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        (self.tokens + elapsed * self.rate).min(self.depth)
    }

    /// The earliest time feedback may be sent (the bucket is out of debt).
    pub fn ready_at(&self) -> Duration {
        if self.tokens >= 0.0 {
            self.at
        } else {
            self.at + Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    /// Pays for `bytes` of feedback sent at `now` (on credit if the bucket runs dry).
    pub fn spend(&mut self, now: Duration, bytes: usize) {
        self.tokens = self.tokens_at(now) - bytes as f64;
        self.at = self.at.max(now);
    }

    /// How long the budget takes to pay for `bytes`: the spacing of back-to-back feedback of
    /// that size once the burst is used up.
    pub fn interval(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn sparse_feedback_goes_at_once() {
        // 5 Mb/s return link, 10 %: 62.5 kB/s; a 100-byte MACK every 100 ms never waits.
        let mut b = FeedbackBudget::new(5_000_000, 0.1);
        for i in 0..100 {
            let now = ms(100 * i);
            assert!(b.ready_at() <= now, "{i}");
            b.spend(now, 100);
        }
    }

    #[test]
    fn dense_feedback_is_held_to_the_share() {
        // 10 kb/s return link, 10 %: 125 B/s. Send whenever allowed for 100 s.
        let mut b = FeedbackBudget::new(10_000, 0.1);
        let mut now = Duration::ZERO;
        let mut bytes = 0usize;
        while now < Duration::from_secs(100) {
            now = now.max(b.ready_at());
            b.spend(now, 100);
            bytes += 100;
        }
        let rate = bytes as f64 / 100.0;
        // Within the share plus the initial burst.
        assert!(rate <= 125.0 + 300.0 / 100.0 + 1.0, "{rate}");
        assert!(rate >= 120.0, "{rate}");
        assert_eq!(b.interval(125), Duration::from_secs(1));
    }

    #[test]
    fn a_burst_after_quiet_then_spacing() {
        let mut b = FeedbackBudget::new(10_000, 0.1);
        let t = Duration::from_secs(10);
        // Four back to back (three paid by the full bucket, the fourth on credit), then the
        // fifth waits until the debt is paid.
        for _ in 0..3 {
            assert!(b.ready_at() <= t);
            b.spend(t, 100);
        }
        assert!(b.ready_at() <= t);
        b.spend(t, 100);
        assert!(b.ready_at() > t);
        assert!(b.ready_at() <= t + Duration::from_millis(801));
    }
}
