//! Round-trip time estimation (RFC 6298 smoothing) and the retransmission timeout.

use std::time::Duration;

/// The retransmission timeout's cap when the round trip is short (`RttEstimator::max_rto`).
const MAX_RTO_FLOOR: Duration = Duration::from_secs(60);

/// One path's time threshold and retransmission timeout, for its lane of loss detection
/// (`Paths::lane_timing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathTiming {
    pub loss_time: Duration,
    pub rto: Duration,
}

/// The round-trip figures loss detection and the timeouts read, taken from the estimators at
/// the call that needs them (`RttEstimator::loss_timing`): the sender keeps no copy of them.
#[derive(Clone, Copy)]
pub struct LossTiming<'a> {
    /// Time threshold of loss detection (`RttEstimator::loss_time`).
    pub loss_time: Duration,
    /// The smallest round-trip sample so far (`None` before the first): an acknowledgement
    /// that comes sooner than this after a retransmission answers an earlier copy (RFC 8985
    /// §6.2).
    pub min_rtt: Option<Duration>,
    /// The retransmission timeout (`RttEstimator::rto`).
    pub rto: Duration,
    /// Each path's own, read only with several paths (one path runs on the figures above).
    pub path: &'a dyn Fn(usize) -> PathTiming,
}

#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    initial: Duration,
    min_rto: Duration,
    latest: Duration,
    /// Smallest sample seen.
    min: Option<Duration>,
    /// Backoff after timeouts (1 or 2: doubling beyond that cost pure ARQ at BER 1e-4 more than
    /// it saved on loopback), reset by a clean latency sample.
    backoff: u32,
    last_backoff: Option<Duration>,
    /// The receiver's current aggregation delay, as its MACKs report it.
    peer_max_delay: Duration,
    /// Time from a TPDU's transmission to its acknowledgement, for the TPDU that waited
    /// longest in each aggregate (fast rise, slow decay). It covers the round trip plus the
    /// receiver's MACK aggregation, which the round-trip samples leave out.
    ack_latency: Duration,
    /// `base_rto()`, recomputed by every method that changes what it depends on: the timers
    /// read it on every turn of the engine, the estimates change only on feedback.
    base_rto: Duration,
    /// `loss_time()` and `rto()`, recomputed with `base_rto` and on a backoff (`refresh`):
    /// loss detection reads them at every call (`loss_timing`), and computing them there
    /// (Duration products and quotients) cost 4.5 % of the engine's instructions per byte.
    loss_time: Duration,
    rto: Duration,
}

impl RttEstimator {
    pub fn new(initial: Duration, min_rto: Duration) -> Self {
        let mut r = RttEstimator {
            srtt: None,
            rttvar: initial / 2,
            initial,
            min_rto,
            latest: initial,
            min: None,
            ack_latency: Duration::ZERO,
            peer_max_delay: Duration::ZERO,
            backoff: 1,
            last_backoff: None,
            base_rto: Duration::ZERO,
            loss_time: Duration::ZERO,
            rto: Duration::ZERO,
        };
        r.refresh();
        r
    }

    /// A round-trip sample, the peer's hold already taken out.
    pub fn on_sample(&mut self, rtt: Duration) {
        self.latest = rtt;
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
        self.refresh();
    }

    pub fn on_peer_max_delay(&mut self, d: Duration) {
        self.peer_max_delay = d.min(Duration::from_secs(2));
        self.refresh();
    }

    /// The longest transmission-to-acknowledgement time among the TPDUs one acknowledgement
    /// covered.
    /// Timeouts fired: wait twice as long before the next (a queue building up somewhere makes
    /// every timeout look early; retransmitting into it would only deepen it).
    /// Doubles at most once per timeout interval, like one TCP retransmission timer: TPDUs
    /// expiring one after another in the same interval are one event, not many.
    pub fn on_timeouts(&mut self, now: Duration) {
        if self.last_backoff.is_some_and(|t| now < t + self.rto()) {
            return;
        }
        self.last_backoff = Some(now);
        // Before any sample the timeout is a guess that may be far below the path's round
        // trip (3 s one way): keep doubling (RFC 6298 §5.5) until the first acknowledgement.
        // After one, at most one doubling (see `backoff`).
        let cap = if self.srtt.is_none() { 64 } else { 2 };
        // Never shorter than before: a backoff grown before the first sample stays until a
        // clean sample resets it (shrinking it here made a timeout shorten the close timer,
        // so handling the same instant twice gave two answers).
        self.backoff = (self.backoff * 2).min(cap).max(self.backoff);
        self.refresh();
    }

    /// Recomputes what the timers read from the estimates and the backoff.
    fn refresh(&mut self) {
        self.base_rto = self.compute_base_rto();
        self.loss_time = (self.smoothed().max(self.latest) * 9 / 8).max(Duration::from_millis(1));
        self.rto = (self.base_rto * self.backoff).min(self.max_rto());
    }

    /// The smallest round-trip sample so far.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min
    }

    /// What loss detection reads of this estimator now, with `path` for each path's own.
    #[inline]
    pub fn loss_timing<'a>(&self, path: &'a dyn Fn(usize) -> PathTiming) -> LossTiming<'a> {
        LossTiming {
            loss_time: self.loss_time(),
            min_rtt: self.min,
            rto: self.rto(),
            path,
        }
    }

    /// Whether a round-trip sample has been taken.
    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }

    pub fn on_ack_latency(&mut self, sample: Duration) {
        self.backoff = 1;
        let sample = sample.min(Duration::from_secs(60));
        self.ack_latency = if sample > self.ack_latency {
            sample
        } else {
            (self.ack_latency * 15 + sample) / 16
        };
        self.refresh();
    }

    /// Time threshold for loss detection: 9/8 of the larger of smoothed and latest RTT, at
    /// least 1 ms.
    #[inline]
    pub fn loss_time(&self) -> Duration {
        self.loss_time
    }

    pub fn smoothed(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The smoothed variation of the samples (RFC 6298's RTTVAR).
    pub fn variation(&self) -> Duration {
        self.rttvar
    }

    /// The peer's current acknowledgement hold, as its MACKs report it.
    pub fn peer_max_delay(&self) -> Duration {
        self.peer_max_delay
    }

    /// The floor of the retransmission timeout.
    pub fn min_rto(&self) -> Duration {
        self.min_rto
    }

    /// A fresh estimator with the same initial guess and floor (for a new path).
    pub fn fresh(&self) -> RttEstimator {
        RttEstimator::new(self.initial, self.min_rto)
    }

    /// Retransmission timeout: srtt + 4·rttvar + the peer's current acknowledgement hold (the
    /// aggregation delay or feedback spacing its MACKs report), and never less than 1.25 × the
    /// observed transmission-to-acknowledgement latency. Not the largest hold ever seen: one
    /// MACK sent long after the last arrival (for a report, a probe) would inflate every
    /// later timeout, and a sparse flow's lost message would wait for it (130 ms instead of
    /// 30 ms at 20 ms RTT).
    #[inline]
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// The longest retransmission timeout: 60 s (RFC 6298's least allowed cap), or twice the
    /// smoothed round trip when that is longer. A cap under the round trip times out every
    /// TPDU: at 2.4 kb/s a standing queue of minutes (an Iridium channel's first flight and
    /// call drops) made every TPDU "lost" at 60 s and resent into the same queue, which
    /// grew to a 400 s round trip with 600 needless resends in 2,800 s.
    fn max_rto(&self) -> Duration {
        MAX_RTO_FLOOR.max(self.srtt.map_or(Duration::ZERO, |s| s * 2))
    }

    /// The retransmission timeout before any backoff: how long feedback may normally take.
    /// The round trip and four times its variation, without the peer's acknowledgement
    /// delay: a bound on one round trip, not on when feedback comes.
    pub fn rtt_bound(&self) -> Duration {
        match self.srtt {
            Some(s) => s + self.rttvar * 4,
            None => self.initial * 3,
        }
    }

    pub fn base_rto(&self) -> Duration {
        self.base_rto
    }

    fn compute_base_rto(&self) -> Duration {
        let base = match self.srtt {
            Some(s) => s + self.rttvar * 4,
            None => self.initial * 3,
        };
        (base + self.peer_max_delay)
            .max(self.ack_latency * 5 / 4)
            .max(self.min_rto)
            .min(self.max_rto())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_capped_at_60_s_or_twice_a_longer_round_trip() {
        let mut r = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
        // Round trips of 5 and 45 s: srtt about 25 s, but four variations push the timeout
        // over a minute, where the cap holds it.
        for i in 0..40 {
            r.on_sample(Duration::from_secs(if i % 2 == 0 { 5 } else { 45 }));
        }
        assert!(r.smoothed() < Duration::from_secs(30), "{:?}", r.smoothed());
        assert_eq!(r.rto(), Duration::from_secs(60), "held at the 60 s cap");
        // A standing queue of minutes (2.4 kb/s): the cap follows the round trip, so a TPDU
        // is not taken for lost while its acknowledgement is still on the way.
        for _ in 0..50 {
            r.on_sample(Duration::from_secs(200));
        }
        assert!(r.rto() > Duration::from_secs(200), "{:?}", r.rto());
        assert!(r.rto() <= Duration::from_secs(400), "{:?}", r.rto());
    }

    #[test]
    fn converges_and_bounds_rto() {
        let mut r = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
        assert_eq!(r.rto(), Duration::from_millis(300));
        for _ in 0..50 {
            r.on_sample(Duration::from_millis(24));
        }
        let s = r.smoothed().as_secs_f64();
        assert!((s - 0.024).abs() < 0.001, "{s}");
        assert!(
            r.rto() >= Duration::from_millis(24) && r.rto() < Duration::from_millis(40),
            "{:?}",
            r.rto()
        );
    }

    proptest::proptest! {
        /// The kept timeout is always the one its inputs give, whatever feedback came.
        #[test]
        fn the_kept_base_timeout_follows_every_change(
            ops in proptest::collection::vec((0u8..4, 0u64..5_000_000), 0..60),
        ) {
            let mut r = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
            for (op, us) in ops {
                let d = Duration::from_micros(us);
                match op {
                    0 => r.on_sample(d),
                    1 => r.on_peer_max_delay(d),
                    2 => r.on_ack_latency(d),
                    _ => r.on_timeouts(d),
                }
                proptest::prop_assert_eq!(r.base_rto(), r.compute_base_rto());
                // The kept timer figures are what they would be computed now.
                let loss_time =
                    (r.smoothed().max(r.latest()) * 9 / 8).max(Duration::from_millis(1));
                proptest::prop_assert_eq!(r.loss_time(), loss_time);
                proptest::prop_assert_eq!(r.rto(), (r.base_rto() * r.backoff).min(r.max_rto()));
            }
        }
    }
}
