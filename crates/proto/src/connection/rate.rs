//! The connection's side of the rate control (`crate::rate`): what the acknowledgements
//! tell each path's model, the window discovery keeps, and the rate the pacer runs at.

use super::Connection;
use crate::rate::{PathRate, RateReason};
use std::time::Duration;

impl Connection {
    /// After feedback: each path's delivery sample to its model, then the pacer's rate.
    /// `echo_rtt`: the round trip of the newest data TPDU the peer received, from its echoed
    /// timestamp (a retransmission's too: the timestamp names the copy). On one path it is
    /// that path's; with several, which path the echoed TPDU took is not known here.
    pub(super) fn measure_rate(&mut self, now: Duration, echo_rtt: Option<Duration>) {
        if !self.rate.discovers() {
            return;
        }
        let echo_rtt = echo_rtt.filter(|_| self.paths.len() == 1);
        for i in 0..self.paths.len() {
            let (sample, acked) = self.tx.take_rate_sample(i);
            if let Some(d) = self.tx.delivery(i) {
                self.rate.on_feedback(now, i, sample, acked, d, echo_rtt);
            }
        }
        self.rate
            .on_link_totals(self.link_bytes_sent(), self.tx.body_bytes_sent());
        self.apply_path_rate();
        let shared = self.rate.cap() < self.cfg.rate_bps;
        if shared && self.path_rate_now().1 == RateReason::Capped {
            // The endpoint's link share holds the rate under what the model would pace at:
            // what is sent now measures the connection's part, not the link, and may raise
            // the estimate but not lower it. Read as the link's, each connection's estimate
            // would fall to its part, and the share's total, made of the estimates, with
            // them. (The configured cap is left as it was: at it the model's estimate
            // follows what the capped pacing delivers.)
            self.tx.on_app_limited();
        }
    }

    /// The rate discovered for the paths that are up, b/s on the link (their estimates
    /// summed), if the connection discovers and has measured one.
    pub(crate) fn discovered_bps(&self) -> Option<u64> {
        if !self.rate.discovers() {
            return None;
        }
        let sum: u64 = (0..self.paths.len())
            .filter(|&i| self.paths.is_usable(i))
            .map(|i| self.rate.path(i).estimate_bps)
            .sum();
        (sum > 0).then_some(sum)
    }

    /// Whether discovery's window lets new data go: what is in flight on the paths that are
    /// up is under the sum of their windows. Always with a fixed rate.
    pub(super) fn window_open(&self) -> bool {
        if !self.rate.discovers() {
            return true;
        }
        let (mut flight, mut window) = (0u64, 0u64);
        for i in (0..self.paths.len()).filter(|&i| self.paths.is_usable(i)) {
            flight += self.tx.delivery(i).map_or(0, |d| d.in_flight());
            window += self.rate.window(i).unwrap_or(u64::MAX / 16);
        }
        flight < window
    }

    /// The pacer had a slot and nothing waited: the application is what limits the rate.
    pub(super) fn note_app_limited(&mut self) {
        if self.rate.discovers() && self.window_open() {
            self.tx.on_app_limited();
        }
    }

    /// The rate of the paths that are up, from the rate control: fixed (times the share of
    /// the paths that are up) or discovered.
    pub(super) fn path_rate_now(&self) -> (u64, RateReason) {
        let paths = &self.paths;
        self.rate.pacing(|i| paths.is_usable(i))
    }

    /// Why the rate in force is what it is.
    pub(super) fn rate_reason(&self) -> RateReason {
        self.path_rate_now().1
    }

    /// What the rate control says of path `i`.
    pub(super) fn path_rate(&self, i: usize) -> PathRate {
        self.rate.path(i)
    }
}
