//! What a path did, counted for its statistics (`PathStats`): time up and down, times it
//! went down, and the datagrams and bytes each way. Nothing here decides anything; it is
//! kept apart from the state the path choice runs on.

use std::time::Duration;

/// Time a path spent up and down since it was added.
#[derive(Debug)]
pub(super) struct UpTime {
    /// When the path last went up or down (or was added); `time_up`/`time_down` hold what
    /// was before.
    since: Duration,
    time_up: Duration,
    time_down: Duration,
    /// Times the path went down.
    downs: u64,
}

impl UpTime {
    /// A path added, up, at `now`.
    pub(super) fn new(now: Duration) -> UpTime {
        UpTime {
            since: now,
            time_up: Duration::ZERO,
            time_down: Duration::ZERO,
            downs: 0,
        }
    }

    /// The path, up until now, went down at `now`.
    pub(super) fn went_down(&mut self, now: Duration) {
        self.time_up += now.saturating_sub(self.since);
        self.since = now;
        self.downs += 1;
    }

    /// The path, down until now, came back up at `now`.
    pub(super) fn came_up(&mut self, now: Duration) {
        self.time_down += now.saturating_sub(self.since);
        self.since = now;
    }

    /// Time up and time down at `now`, the path being `up` since its last change.
    pub(super) fn totals(&self, now: Duration, up: bool) -> (Duration, Duration) {
        let span = now.saturating_sub(self.since);
        if up {
            (self.time_up + span, self.time_down)
        } else {
            (self.time_up, self.time_down + span)
        }
    }

    pub(super) fn downs(&self) -> u64 {
        self.downs
    }
}

/// Datagrams and bytes a path carried each way (control and repairs too).
#[derive(Debug, Default)]
pub(super) struct PathTraffic {
    pub(super) datagrams_sent: u64,
    pub(super) bytes_sent: u64,
    pub(super) datagrams_received: u64,
    pub(super) bytes_received: u64,
}

impl PathTraffic {
    pub(super) fn on_sent(&mut self, bytes: usize) {
        self.datagrams_sent += 1;
        self.bytes_sent += bytes as u64;
    }

    pub(super) fn on_received(&mut self, bytes: usize) {
        self.datagrams_received += 1;
        self.bytes_received += bytes as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn time_up_and_down_add_up_to_the_path_s_age() {
        let mut t = UpTime::new(s(10));
        assert_eq!(t.totals(s(12), true), (s(2), s(0)));
        t.went_down(s(13));
        assert_eq!(t.totals(s(15), false), (s(3), s(2)));
        t.came_up(s(16));
        t.went_down(s(20));
        assert_eq!(t.totals(s(21), false), (s(7), s(4)));
        assert_eq!(t.downs(), 2);
    }

    #[test]
    fn traffic_counts_datagrams_and_bytes_each_way() {
        let mut t = PathTraffic::default();
        t.on_sent(100);
        t.on_sent(50);
        t.on_received(7);
        assert_eq!((t.datagrams_sent, t.bytes_sent), (2, 150));
        assert_eq!((t.datagrams_received, t.bytes_received), (1, 7));
    }
}
