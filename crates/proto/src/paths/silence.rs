//! When a busy path's acknowledgements are overdue: the intervals between the feedback that
//! acknowledges its TPDUs, smoothed as RFC 6298 smooths round trips.
//!
//! Why not the round trip alone: on a serial channel with a queue (seed 003's 2.4 kb/s
//! Iridium channels), a TPDU's round trip is seconds of queue plus up to 3.6 s of jitter, so
//! "the first TPDU sent after the latest acknowledgement is a smoothed round trip and four
//! variations late" waits for a TPDU sent *after* the drop to be overdue: 14-15 s from the
//! drop in the simulator (median over 8 runs of 47 min). While the path is busy, the TPDUs
//! in flight were sent *before* the drop and are acknowledged one interval apart (the
//! channel's serialisation time, ~1.8 s for 540 bytes); their acknowledgements stopping is
//! seen an interval and its variation after the last one.

use std::time::Duration;

/// Intervals measured before the rule is used: fewer say little of the spread.
const MIN_SAMPLES: u32 = 8;

#[derive(Debug, Default, Clone)]
pub(super) struct AckGaps {
    /// TPDUs acknowledged on the path when last looked at.
    acked_seen: u64,
    /// When feedback last acknowledged a TPDU of the path, and whether TPDUs were still in
    /// flight on it then (only then is the next acknowledgement due an interval later).
    last: Option<Duration>,
    busy: bool,
    avg: Duration,
    var: Duration,
    samples: u32,
}

impl AckGaps {
    /// After feedback at `now`: `acked` is the path's count of acknowledged TPDUs, `busy`
    /// whether TPDUs are still in flight on it.
    pub(super) fn on_feedback(&mut self, now: Duration, acked: u64, busy: bool) {
        if acked <= self.acked_seen {
            return;
        }
        self.acked_seen = acked;
        if let (Some(last), true) = (self.last, self.busy) {
            let sample = now.saturating_sub(last);
            if self.samples == 0 {
                self.avg = sample;
                self.var = sample / 2;
            } else {
                let diff = self.avg.abs_diff(sample);
                self.var = (self.var * 3 + diff) / 4;
                self.avg = (self.avg * 7 + sample) / 8;
            }
            self.samples = self.samples.saturating_add(1);
        }
        self.last = Some(now);
        self.busy = busy;
    }

    /// The path went down (or came back): the next interval starts from its next
    /// acknowledgement; what was learned of the spread stays.
    pub(super) fn restart(&mut self) {
        self.last = None;
        self.busy = false;
    }

    /// When the path's acknowledgements are overdue: an interval, four variations and the
    /// peer's acknowledgement hold (at least `floor`) after the latest, or after the oldest
    /// TPDU in flight (sent at `oldest`) can first be acknowledged (`min_rtt` after it),
    /// whichever is later. `None` while nothing is in flight, or before enough intervals.
    pub(super) fn overdue_at(
        &self,
        oldest: Option<Duration>,
        min_rtt: Option<Duration>,
        peer_hold: Duration,
        floor: Duration,
    ) -> Option<Duration> {
        let (last, oldest) = (self.last?, oldest?);
        if !self.busy || self.samples < MIN_SAMPLES {
            return None;
        }
        let from = last.max(oldest + min_rtt.unwrap_or_default());
        Some(from + (self.avg + self.var * 4 + peer_hold).max(floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Acknowledgements every 1.8 s ± 0.5 s while busy.
    fn steady() -> AckGaps {
        let mut g = AckGaps::default();
        let mut t = ms(10_000);
        for k in 1..=20u64 {
            t += ms(if k % 2 == 0 { 1_300 } else { 2_300 });
            g.on_feedback(t, k, true);
        }
        g
    }

    #[test]
    fn a_busy_path_is_overdue_an_interval_and_its_spread_after_its_last_acknowledgement() {
        let g = steady();
        let last = g.last.unwrap();
        let at = g.overdue_at(Some(last - ms(6_000)), Some(ms(3_000)), ms(0), ms(250));
        let wait = at.unwrap() - last;
        // Mean 1.8 s, deviation 0.5 s: about 1.8 + 4 × 0.5 = 3.8 s.
        assert!(wait > ms(3_000) && wait < ms(4_500), "{wait:?}");
    }

    #[test]
    fn nothing_in_flight_or_too_few_intervals_gives_no_deadline() {
        let g = steady();
        assert_eq!(g.overdue_at(None, Some(ms(3_000)), ms(0), ms(250)), None);
        let mut few = AckGaps::default();
        for k in 1..=MIN_SAMPLES as u64 {
            few.on_feedback(ms(1_000 * k), k, true);
        }
        assert_eq!(few.overdue_at(Some(ms(1)), None, ms(0), ms(250)), None);
        few.on_feedback(ms(20_000), u64::from(MIN_SAMPLES) + 1, true);
        assert!(few.overdue_at(Some(ms(1)), None, ms(0), ms(250)).is_some());
    }

    #[test]
    fn idle_periods_are_no_interval_and_leave_no_deadline() {
        let mut g = steady();
        let (avg, samples) = (g.avg, g.samples);
        let last = g.last.unwrap();
        // The last acknowledgement emptied the flight; the next one comes a minute later.
        g.on_feedback(last + ms(100), 21, false);
        assert_eq!(g.overdue_at(Some(last), None, ms(0), ms(250)), None);
        g.on_feedback(last + ms(60_000), 22, true);
        assert_eq!(
            g.samples,
            samples + 1,
            "the busy interval before is measured"
        );
        assert!(g.avg < avg + ms(100), "the idle minute is not: {:?}", g.avg);
    }

    #[test]
    fn a_tpdu_sent_late_is_given_its_round_trip() {
        let g = steady();
        let last = g.last.unwrap();
        // The only TPDU in flight went 1 s after the last acknowledgement: it cannot be
        // acknowledged before 1 s + the smallest round trip.
        let at = g
            .overdue_at(Some(last + ms(1_000)), Some(ms(3_000)), ms(0), ms(250))
            .unwrap();
        assert!(at > last + ms(4_000) + ms(3_000), "{at:?}");
    }

    #[test]
    fn the_wait_covers_the_peer_hold_and_the_floor() {
        let mut g = AckGaps::default();
        for k in 1..=20u64 {
            g.on_feedback(ms(k), k, true);
        }
        let last = g.last.unwrap();
        assert_eq!(
            g.overdue_at(Some(last), None, ms(0), ms(250)),
            Some(last + ms(250))
        );
        let at = g.overdue_at(Some(last), None, ms(400), ms(250)).unwrap();
        assert!(at >= last + ms(401), "{at:?}");
    }

    #[test]
    fn a_restart_waits_for_a_new_busy_interval() {
        let mut g = steady();
        g.restart();
        assert_eq!(g.overdue_at(Some(ms(1)), None, ms(0), ms(250)), None);
    }
}
