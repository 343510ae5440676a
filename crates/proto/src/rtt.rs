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
        (base + self.max_ack_delay).max(self.min_rto)
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
