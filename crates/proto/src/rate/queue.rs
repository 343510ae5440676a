//! What the delay signal has seen of the bottleneck's queue: since when one stands, the most
//! delivered meanwhile, and whether it is another flow's.
//!
//! A queue that stands is taken for this sender's own (the link is full) and drained. But a
//! loss-based flow beside it (kernel TCP CUBIC) keeps the shared queue full whatever this
//! sender does: reading that queue as its own, the model cut its estimate for the lingering
//! queue every few round trips, drained at half the rate without ever emptying it, and kept
//! its window to twice the product of the rate and a round trip that no longer existed, so
//! beside CUBIC it fell to 0.14 of an equal share (docs/results/rate.md, "Beside kernel TCP
//! (lab)"). Copa (Arun and Balakrishnan, NSDI 2018) switches to a competitive mode when the
//! queue does not empty once in five round trips; here the test is direct: a drain that
//! lasted a whole round trip of the queued path left at least three quarters of the queue.
//! When this sender fills the queue, halving its rate for a round trip empties at least half.

use std::time::Duration;

/// Queueing delay below which a queue is never taken for another flow's: a drain of a short
/// queue is short anyway, and jitter of a few milliseconds must not switch the model. With
/// 25 ms and four thresholds, four AeroTP connections of round trips 60-640 ms on one queue
/// took one another's queue for a foreign one (`tests/fairness.rs`: Jain 0.30, from 0.918);
/// 40 ms and six held that, but beside kernel BBR in the lab did no better than this.
const MIN_FOREIGN_QUEUE: Duration = Duration::from_millis(50);
/// A foreign queue is at least this many of the model's queue thresholds.
const FOREIGN_THRESHOLDS: u32 = 8;

/// The delay signal's state (`RateModel::watch_queue`).
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueWatch {
    /// Since when every round-trip sample stood above the minimum by more than the queue
    /// threshold.
    pub since: Option<Duration>,
    /// The largest rate delivered since `since`.
    pub max_bw: f64,
    /// The current drain: when it began and the queueing delay then.
    drain: Option<(Duration, Duration)>,
    /// The queue is another flow's: it outlived a drain. No cut for it, and the window
    /// follows the round trip the path has now.
    competing: bool,
    /// Smoothed round trip (1/8 per sample, as RFC 6298), for the window while competing.
    srtt: Option<Duration>,
}

impl QueueWatch {
    /// A round-trip sample.
    pub fn on_rtt(&mut self, rtt: Duration) {
        self.srtt = Some(self.srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
    }

    pub fn competing(&self) -> bool {
        self.competing
    }

    /// The round trip the window and the in-flight target are reckoned on: the path's
    /// minimum, or while competing the round trip it has now (the other flow's queue is
    /// part of the path, as far as this sender can do anything about it).
    pub fn window_rtt(&self, min_rtt: Duration) -> Duration {
        match (self.competing, self.srtt) {
            (true, Some(s)) => s.max(min_rtt),
            _ => min_rtt,
        }
    }

    /// A drain begins (or goes on): remembered once per drain, at its first sample.
    /// Returns true when it has lasted a round trip of the queued path and left at least
    /// three quarters of the queue it began with, and that queue was long (`threshold`: the
    /// model's queue threshold): the queue is another flow's, and the model stops draining.
    pub fn drain_sample(
        &mut self,
        now: Duration,
        rtt: Duration,
        min_rtt: Duration,
        threshold: Duration,
    ) -> bool {
        let queued = rtt.saturating_sub(min_rtt);
        let (start, q0) = *self.drain.get_or_insert((now, queued));
        let long = q0 >= MIN_FOREIGN_QUEUE.max(threshold * FOREIGN_THRESHOLDS);
        if long && now.saturating_sub(start) >= min_rtt + q0 && queued * 4 >= q0 * 3 {
            self.competing = true;
            self.drain = None;
            return true;
        }
        false
    }

    /// The drain ended (or another phase began).
    pub fn drain_ended(&mut self) {
        self.drain = None;
    }

    /// A sample within the queue threshold of the smallest round trip the path ever showed:
    /// the queue emptied, so no other flow keeps it.
    pub fn emptied(&mut self) {
        self.competing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_drain_that_leaves_a_long_queue_standing_means_another_flows_queue() {
        let mut q = QueueWatch::default();
        let (min, th) = (ms(28), ms(7));
        // 200 ms of queue that does not move while this sender drains.
        assert!(!q.drain_sample(ms(1000), ms(228), min, th));
        assert!(!q.drain_sample(ms(1100), ms(230), min, th), "not yet a round trip");
        assert!(q.drain_sample(ms(1230), ms(225), min, th));
        assert!(q.competing());
        q.on_rtt(ms(228));
        assert_eq!(q.window_rtt(min), ms(228));
        q.emptied();
        assert_eq!(q.window_rtt(min), min);
    }

    #[test]
    fn a_queue_the_drain_empties_is_this_senders_own() {
        let mut q = QueueWatch::default();
        let (min, th) = (ms(20), ms(5));
        // A step down left 1.2 s of queue; draining at half the new rate takes 0.6 s of it
        // away per round trip.
        assert!(!q.drain_sample(ms(0), ms(1220), min, th));
        assert!(!q.drain_sample(ms(1220), ms(620), min, th));
        assert!(!q.drain_sample(ms(1500), ms(400), min, th));
        assert!(!q.competing());
    }

    #[test]
    fn a_short_queue_is_never_taken_for_another_flows() {
        let mut q = QueueWatch::default();
        let (min, th) = (ms(20), ms(5));
        assert!(!q.drain_sample(ms(0), ms(60), min, th));
        assert!(!q.drain_sample(ms(500), ms(60), min, th), "40 ms < 50 ms");
        q.drain_ended();
        assert!(!q.competing());
        assert_eq!(q.window_rtt(min), min);
    }
}
