//! How long the receiver waits on a hole: before lossy modes deliver past it (the minimum
//! hole time, a few repair round trips, the erasure wait while the peer sends repairs), and
//! before near-reliable reports it (the reordering wait) and reports it again (two repair
//! round trips). The repair round trip is measured here, from a NACK or SNACK to the
//! retransmission it asked for.

use crate::error_control::Hole;
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest a near-reliable receiver waits for reordering before it SNACKs a gap.
const MAX_REORDER_WAIT: Duration = Duration::from_millis(500);
/// Longest a near-reliable receiver waits before repeating a SNACK for holes still open.
const MAX_SNACK_REPEAT: Duration = Duration::from_secs(2);
/// Most repair requests remembered (the oldest go first).
const MAX_REQUESTS: usize = 4096;

/// The receiver's waits on holes (see the module documentation).
#[derive(Debug)]
pub(super) struct HoleWait {
    min_hole_timeout: Duration,
    /// While the peer sends erasure repairs, how long a hole may wait for them to rebuild
    /// it before lossy modes deliver past it (the peer's delay bound).
    erasure_wait: Duration,
    /// Round-trip estimate from NACK/SNACK to retransmission, for hole timeouts.
    repair_rtt: Duration,
    /// When each TPDU asked for (NACK, SNACK) was last asked for.
    requested_at: BTreeMap<u64, Duration>,
    /// Near-reliable: how long a gap may stay open before it is SNACKed, learned from the
    /// reordering seen (an original arriving behind a TPDU sent after it); zero until then.
    reorder_wait: Duration,
    /// Near-reliable: arrival of the TPDU that opened the oldest gap not yet SNACKed.
    gap_open_since: Option<Duration>,
    last_snack: Option<Duration>,
}

impl HoleWait {
    pub(super) fn new(min_hole_timeout: Duration, initial_rtt: Duration) -> HoleWait {
        HoleWait {
            min_hole_timeout,
            erasure_wait: Duration::ZERO,
            repair_rtt: initial_rtt,
            requested_at: BTreeMap::new(),
            reorder_wait: Duration::ZERO,
            gap_open_since: None,
            last_snack: None,
        }
    }

    /// TPDU `seq` arrived at `now`: if it was asked for, a repair round-trip sample.
    pub(super) fn on_arrival(&mut self, now: Duration, seq: u64) {
        if let Some(sent) = self.requested_at.remove(&seq) {
            let sample = now.saturating_sub(sent);
            self.repair_rtt = (self.repair_rtt * 7 + sample) / 8;
        }
    }

    /// TPDU `seq` was rebuilt: its request measures nothing.
    pub(super) fn forget(&mut self, seq: u64) {
        self.requested_at.remove(&seq);
    }

    /// TPDU `seq` is asked for at `now` (the latest request counts: a TPDU asked for before
    /// an outage and repaired after it would otherwise read as a round trip of minutes).
    pub(super) fn requested(&mut self, now: Duration, seq: u64) {
        self.requested_at.insert(seq, now);
        while self.requested_at.len() > MAX_REQUESTS {
            self.requested_at.pop_first();
        }
    }

    /// How long a hole may stay open in lossy modes before the TPDUs behind it are delivered.
    pub(super) fn hole_timeout(&self, hole: Hole) -> Duration {
        let repair = match hole {
            Hole::SkipAfterTimeout { nack_repair_rtts } => self.repair_rtt * nack_repair_rtts,
            Hole::Wait => Duration::ZERO,
        };
        self.min_hole_timeout.max(repair).max(self.erasure_wait)
    }

    pub(super) fn set_erasure_wait(&mut self, d: Duration) {
        self.erasure_wait = d;
    }

    /// An overtaken original filled a gap whose opener arrived `opened` ago: gaps should be
    /// given 5/4 of that (at most `MAX_REORDER_WAIT`) before they are SNACKed.
    pub(super) fn learn_reordering(&mut self, opened: Duration) {
        let sample = opened * 5 / 4;
        self.reorder_wait = self.reorder_wait.max(sample).min(MAX_REORDER_WAIT);
    }

    pub(super) fn reorder_wait(&self) -> Duration {
        self.reorder_wait
    }

    /// A new gap opened at `now` (the oldest one not yet SNACKed stands).
    pub(super) fn gap_opened(&mut self, now: Duration) {
        if self.gap_open_since.is_none() {
            self.gap_open_since = Some(now);
        }
    }

    /// When the open holes are (re)reported, the oldest TPDU behind one having arrived at
    /// `oldest_arrival`: once it has waited the minimum hole time (and the reordering wait),
    /// or once the oldest gap not reported has been open the reordering wait; repeats every
    /// two repair round trips, at most `MAX_SNACK_REPEAT` apart (a repair round trip
    /// misjudged long, an outage between request and repair, must not leave a hole
    /// unreported for minutes; the sender ignores a SNACK for what it sent less than a round
    /// trip ago anyway).
    pub(super) fn snack_deadline(&self, oldest_arrival: Duration) -> Duration {
        let oldest = oldest_arrival + self.min_hole_timeout.max(self.reorder_wait);
        let repeat = match self.last_snack {
            Some(l) => oldest.max(l + (self.repair_rtt * 2).min(MAX_SNACK_REPEAT)),
            None => oldest,
        };
        match self.gap_open_since {
            Some(g) => repeat.min(g + self.reorder_wait),
            None => repeat,
        }
    }

    /// Holes were considered for a SNACK at `now`: `later`, when the oldest gap left out
    /// opened; `sent`, whether a SNACK went.
    pub(super) fn snack_considered(&mut self, now: Duration, later: Option<Duration>, sent: bool) {
        self.gap_open_since = later;
        if sent {
            self.last_snack = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_repair_round_trip_is_learned_from_requests_and_sets_the_hole_timeout() {
        let mut w = HoleWait::new(ms(30), ms(80));
        let skip = Hole::SkipAfterTimeout {
            nack_repair_rtts: 2,
        };
        assert_eq!(w.hole_timeout(skip), ms(160));
        assert_eq!(w.hole_timeout(Hole::Wait), ms(30));
        w.requested(ms(100), 7);
        w.on_arrival(ms(140), 7);
        // 7/8 × 80 + 1/8 × 40.
        assert_eq!(w.hole_timeout(skip), ms(150));
        // Not asked for, or rebuilt: no sample.
        w.requested(ms(200), 8);
        w.forget(8);
        w.on_arrival(ms(900), 8);
        w.on_arrival(ms(900), 9);
        assert_eq!(w.hole_timeout(skip), ms(150));
        w.set_erasure_wait(ms(400));
        assert_eq!(w.hole_timeout(skip), ms(400));
    }

    #[test]
    fn requests_are_bounded_oldest_first() {
        let mut w = HoleWait::new(ms(30), ms(80));
        for s in 0..MAX_REQUESTS as u64 + 10 {
            w.requested(ms(0), s);
        }
        assert_eq!(w.requested_at.len(), MAX_REQUESTS);
        assert_eq!(w.requested_at.keys().next(), Some(&10));
    }

    #[test]
    fn snacks_wait_for_reordering_and_repeat_every_two_repair_round_trips() {
        let mut w = HoleWait::new(ms(30), ms(100));
        assert_eq!(w.snack_deadline(ms(0)), ms(30), "the minimum hole time");
        w.learn_reordering(ms(40));
        assert_eq!(w.reorder_wait(), ms(50));
        w.learn_reordering(ms(10_000));
        assert_eq!(w.reorder_wait(), MAX_REORDER_WAIT);
        let mut w = HoleWait::new(ms(30), ms(100));
        w.learn_reordering(ms(16));
        w.gap_opened(ms(5));
        w.gap_opened(ms(9));
        assert_eq!(
            w.snack_deadline(ms(0)),
            ms(25),
            "the gap opened at 5 ms waits 20 ms"
        );
        w.snack_considered(ms(25), None, true);
        assert_eq!(
            w.snack_deadline(ms(0)),
            ms(225),
            "two repair round trips later"
        );
        w.gap_opened(ms(100));
        assert_eq!(w.snack_deadline(ms(0)), ms(120));
    }
}
