//! The sender's side of several paths (docs/spec.md §9): a loss-detection lane per path, its
//! timing, its statistics, and what a path going down leaves to resend.

use super::record::current;
use super::{LaneStats, Sender};
use std::time::Duration;

/// Several paths (docs/spec.md §9): what the connection's path set asks of the sender.
impl Sender {
    /// Keeps a lane for `path` (0-based; bounded by `MAX_LANES`).
    pub fn add_path(&mut self, path: usize) {
        self.lanes.ensure(path);
    }

    pub fn path_stats(&self) -> Vec<LaneStats> {
        self.lanes.stats()
    }

    /// See `Lanes::take_latency`.
    pub fn take_path_latency(&mut self, path: usize) -> Option<Duration> {
        self.lanes.take_latency(path)
    }

    /// Since when `path` has carried TPDUs without an acknowledgement of any (its first
    /// transmission after its latest acknowledgement).
    pub fn unanswered_since(&self, path: usize) -> Option<Duration> {
        self.lanes.unanswered_since(path)
    }

    /// `path` went down: what is in flight on it is lost and queued for the other paths.
    pub fn path_down(&mut self, path: usize) -> usize {
        let mut lost = std::mem::take(&mut self.lost);
        let (entries, base) = (&self.entries, self.base);
        self.lanes
            .drain(path, |t| current(entries, base, t.seq, t.tx), &mut lost);
        self.lanes.clear_unanswered(path);
        let mut n = 0;
        for seq in lost.drain(..) {
            n += usize::from(self.lose(seq));
        }
        self.lost = lost;
        n
    }
}
