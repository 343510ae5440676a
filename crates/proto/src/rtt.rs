//! Round-trip time estimation (RFC 6298 smoothing) and the retransmission timeout.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    initial: Duration,
    min_rto: Duration,
    /// Largest acknowledgement delay the peer reported, added to the timeout.
    max_ack_delay: Duration,
    latest: Duration,
    /// Spacing of acknowledgements as the sender sees it (fast rise, slow decay): a TPDU early
    /// in an aggregate waits this long for its MACK on top of the round trip.
    ack_gap: Duration,
    last_feedback: Option<Duration>,
}

impl RttEstimator {
    pub fn new(initial: Duration, min_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: initial / 2,
            initial,
            min_rto,
            max_ack_delay: Duration::ZERO,
            latest: initial,
            ack_gap: Duration::ZERO,
            last_feedback: None,
        }
    }

    pub fn on_sample(&mut self, rtt: Duration, ack_delay: Duration) {
        self.max_ack_delay = self.max_ack_delay.max(ack_delay).min(Duration::from_secs(1));
        self.latest = rtt;
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let diff = if s > rtt { s - rtt } else { rtt - s };
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
    }

    /// An acknowledgement arrived at `now`; `outstanding` says whether data was waiting for it
    /// (the gap to the previous one then measures aggregation, not idleness).
    pub fn on_feedback(&mut self, now: Duration, outstanding: bool) {
        if let (Some(last), true) = (self.last_feedback, outstanding) {
            let gap = now.saturating_sub(last).min(Duration::from_secs(2));
            self.ack_gap = if gap > self.ack_gap { gap } else { (self.ack_gap * 15 + gap) / 16 };
        }
        self.last_feedback = Some(now);
    }

    pub fn smoothed(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    pub fn latest(&self) -> Duration {
        self.latest
    }

    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }

    /// Retransmission timeout: srtt + 4·rttvar + the peer's acknowledgement delay.
    pub fn rto(&self) -> Duration {
        let base = match self.srtt {
            Some(s) => s + self.rttvar * 4,
            None => self.initial * 3,
        };
        (base + self.max_ack_delay + self.ack_gap).max(self.min_rto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_bounds_rto() {
        let mut r = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
        assert_eq!(r.rto(), Duration::from_millis(300));
        for _ in 0..50 {
            r.on_sample(Duration::from_millis(24), Duration::from_millis(2));
        }
        let s = r.smoothed().as_secs_f64();
        assert!((s - 0.024).abs() < 0.001, "{s}");
        assert!(r.rto() >= Duration::from_millis(26) && r.rto() < Duration::from_millis(40), "{:?}", r.rto());
    }
}
