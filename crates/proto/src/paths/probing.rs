//! When a down path is probed (`Paths::set_down`): a PROBE at once, then at doubling
//! intervals up to `MAX_PATH_PROBE_INTERVAL`, until anything heard on the path brings it
//! back. One owner for the schedule and its count, so a path's probing state changes only
//! through the steps below.

use std::time::Duration;

/// Longest interval between a down path's probes.
const MAX_PATH_PROBE_INTERVAL: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(super) struct ProbeSchedule {
    /// When the next probe is due.
    next: Duration,
    /// The interval after the next probe (doubles at each one).
    wait: Duration,
    /// A probe is due and not yet taken.
    due: bool,
    /// Probes taken (sent) while the path was down, all time.
    sent: u64,
}

impl ProbeSchedule {
    pub(super) fn new(now: Duration) -> ProbeSchedule {
        ProbeSchedule {
            next: now,
            wait: Duration::ZERO,
            due: false,
            sent: 0,
        }
    }

    /// The path went down at `now`: the first probe is due at once, the next `interval`
    /// after it.
    pub(super) fn start(&mut self, now: Duration, interval: Duration) {
        self.next = now;
        self.wait = interval;
    }

    /// Whether a probe is due and not taken.
    pub(super) fn is_due(&self) -> bool {
        self.due
    }

    /// When the next probe falls due (meaningful while none is due).
    pub(super) fn next(&self) -> Duration {
        self.next
    }

    /// Marks the probe due if its time has come at `now`, and schedules the following one
    /// at the current interval, doubled for the one after (up to the longest interval).
    pub(super) fn fire_if_time(&mut self, now: Duration) {
        if now >= self.next {
            self.due = true;
            self.next = now + self.wait;
            self.wait = (self.wait * 2).min(MAX_PATH_PROBE_INTERVAL);
        }
    }

    /// A probe is due at once (the radio says the destination is up again); the following
    /// one an interval later, without doubling it.
    pub(super) fn due_now(&mut self, now: Duration) {
        self.due = true;
        self.next = now + self.wait;
    }

    /// The due probe is sent: counted.
    pub(super) fn take(&mut self) {
        self.due = false;
        self.sent += 1;
    }

    /// No probe is due any more (the path came back, or its radio says it is down).
    pub(super) fn cancel(&mut self) {
        self.due = false;
    }

    pub(super) fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn probes_fall_due_at_doubling_intervals_up_to_the_longest() {
        let mut p = ProbeSchedule::new(ms(0));
        p.start(ms(1000), ms(500));
        let mut at = Vec::new();
        let mut now = ms(1000);
        while now < ms(10_000) {
            p.fire_if_time(now);
            if p.is_due() {
                at.push(now.as_millis());
                p.take();
            }
            now += ms(50);
        }
        assert_eq!(at, [1000, 1500, 2500, 4500, 6500, 8500]);
        assert_eq!(p.sent(), 6);
    }

    #[test]
    fn a_probe_due_now_keeps_the_interval_and_a_cancelled_one_is_not_sent() {
        let mut p = ProbeSchedule::new(ms(0));
        p.start(ms(0), ms(250));
        p.fire_if_time(ms(0));
        assert!(p.is_due());
        p.cancel();
        assert!(!p.is_due());
        assert_eq!(p.next(), ms(250));
        p.due_now(ms(100));
        assert!(p.is_due());
        assert_eq!(p.next(), ms(600), "the doubled interval, not doubled again");
        assert_eq!(p.sent(), 0);
    }
}
