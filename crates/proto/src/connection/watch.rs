//! What the connection hears from its peer, and the PROBEs it sends when it hears nothing: when
//! the peer was last heard, how long its silences normally last, whether it is silent now (an
//! outage), and the keep-alives, outage probes and outages counted where they happen.

use crate::liveness::Liveness;
use std::time::Duration;

#[derive(Debug)]
pub(super) struct Watch {
    /// Whether the peer has been heard, and whether it is silent (an outage) or new data is
    /// paused on a suspected one.
    pub(super) liveness: Liveness,
    pub(super) last_heard: Duration,
    /// The longest recent gap between TPDUs heard while data was unacknowledged (decaying):
    /// how long silence is normal on this connection, so an outage is suspected sooner than
    /// 1.5 RTOs where feedback comes often (`timers::pause_at`).
    pub(super) heard_gap: Duration,
    /// How many gaps `heard_gap` has seen; it is trusted from `GAP_SAMPLES` on.
    pub(super) heard_gaps: u32,
    /// When the last keep-alive was queued: the next waits `keep_alive` after it too.
    pub(super) last_keepalive: Duration,
    /// Keep-alive PROBEs sent (`SenderStats::keepalives`).
    keepalives: u64,
    /// Outage PROBEs sent (`SenderStats::probes`).
    probes: u64,
    /// Times the peer was declared silent (`ConnectionStats::outages`).
    outages: u64,
}

impl Watch {
    /// Nothing heard yet, at `now`.
    pub(super) fn new(now: Duration) -> Watch {
        Watch {
            liveness: Liveness::Unheard,
            last_heard: now,
            heard_gap: Duration::ZERO,
            heard_gaps: 0,
            last_keepalive: Duration::ZERO,
            keepalives: 0,
            probes: 0,
            outages: 0,
        }
    }

    /// A TPDU was heard at `now`; `outstanding`: data is unacknowledged. Returns the gap since
    /// the last one when it says how long silence lasts here (heard before, data in flight).
    pub(super) fn on_heard(&mut self, now: Duration, outstanding: bool) -> Option<Duration> {
        let mut measured = None;
        if self.liveness.heard() && outstanding {
            let gap = now.saturating_sub(self.last_heard);
            self.heard_gap = if gap > self.heard_gap {
                gap
            } else {
                (self.heard_gap * 7 + gap) / 8
            };
            self.heard_gaps = self.heard_gaps.saturating_add(1);
            measured = Some(gap);
        }
        self.last_heard = now;
        measured
    }

    /// Anything heard ends an outage (or its suspicion); true if it ended one.
    pub(super) fn resume(&mut self) -> bool {
        let resumed = self.liveness.silent();
        self.liveness = Liveness::Heard { paused: false };
        resumed
    }

    /// The peer is silent from `now`: an outage, probed at once and then every `wait`.
    pub(super) fn enter_outage(&mut self, now: Duration, wait: Duration) {
        self.outages += 1;
        self.liveness = Liveness::Silent {
            next_probe: now,
            wait,
        };
    }

    pub(super) fn keepalive_sent(&mut self) {
        self.keepalives += 1;
    }

    pub(super) fn probe_sent(&mut self) {
        self.probes += 1;
    }

    /// Keep-alives and outage probes sent, and outages entered.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (self.keepalives, self.probes, self.outages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn gaps_count_only_once_heard_with_data_outstanding_and_decay() {
        let mut w = Watch::new(Duration::ZERO);
        // Not heard yet: no gap, whatever is outstanding.
        assert_eq!(w.on_heard(10 * MS, true), None);
        assert!(!w.resume(), "nothing to resume from");
        // Nothing outstanding: silence says nothing.
        assert_eq!(w.on_heard(50 * MS, false), None);
        assert_eq!(w.on_heard(90 * MS, true), Some(40 * MS));
        assert_eq!((w.heard_gap, w.heard_gaps), (40 * MS, 1));
        // A shorter gap moves the estimate an eighth of the way down.
        assert_eq!(w.on_heard(98 * MS, true), Some(8 * MS));
        assert_eq!((w.heard_gap, w.heard_gaps), (36 * MS, 2));
        assert_eq!(w.last_heard, 98 * MS);
    }

    #[test]
    fn the_watch_counts_its_outages_and_probes() {
        let mut w = Watch::new(Duration::ZERO);
        w.on_heard(MS, false);
        w.resume();
        w.keepalive_sent();
        w.enter_outage(5 * MS, 200 * MS);
        assert_eq!(w.liveness.next_probe(), Some(5 * MS));
        w.probe_sent();
        w.probe_sent();
        assert!(w.resume(), "hearing the peer ends the outage");
        assert!(w.liveness.heard() && !w.liveness.silent());
        assert_eq!(w.counts(), (1, 2, 1));
    }
}
