//! Loss on the link as the two ends see it, before any repair: the receiver counts TPDUs that
//! never arrived intact and the runs they came in ([`WireLoss`], reported in RPT); the sender
//! turns the reports into a smoothed loss rate and mean burst length ([`LossEstimate`]) for the
//! strength controller.

use aerotp_wire::Report;

/// What a data TPDU's arrival was, as far as the link is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The highest TPDU number so far (possibly after a gap).
    First,
    /// Below the highest: an original overtaken by later TPDUs (reordering, not loss).
    Reordered,
    /// Below the highest and sent after it: a retransmission filling a hole.
    Retransmission,
}

/// Receiver side: TPDUs lost or corrupted on the link and the runs they form.
#[derive(Debug, Clone, Default)]
pub struct WireLoss {
    /// One past the highest data TPDU number seen (arrived, corrupted or rebuilt).
    top: u64,
    /// Sender timestamp of the TPDU at `top - 1`.
    top_ts: u32,
    lost: u64,
    bursts: u64,
    last_lost: bool,
}

impl WireLoss {
    /// A new data TPDU `seq` arrived (`intact`: its body checked; otherwise it arrived
    /// corrupted, which loses it as surely as a drop).
    pub fn on_arrival(&mut self, seq: u64, ts: u32, intact: bool) -> Arrival {
        if seq >= self.top {
            self.skip_to(seq);
            if intact {
                self.last_lost = false;
            } else {
                self.count_lost(1);
            }
            self.top = seq + 1;
            self.top_ts = ts;
            return Arrival::First;
        }
        // Timestamps wrap (32-bit microseconds): compare as a signed difference.
        if intact && (ts.wrapping_sub(self.top_ts) as i32) < 0 {
            // Counted lost when the gap opened; it was only late.
            self.lost = self.lost.saturating_sub(1);
            Arrival::Reordered
        } else {
            Arrival::Retransmission
        }
    }

    /// A TPDU rebuilt by erasure decoding: lost on the link, wherever it falls.
    pub fn on_rebuilt(&mut self, seq: u64) {
        if seq >= self.top {
            self.skip_to(seq);
            self.count_lost(1);
            self.top = seq + 1;
        }
    }

    fn skip_to(&mut self, seq: u64) {
        let gap = seq - self.top;
        if gap > 0 {
            self.count_lost(gap);
        }
    }

    fn count_lost(&mut self, n: u64) {
        if !self.last_lost {
            self.bursts += 1;
        }
        self.lost += n;
        self.last_lost = true;
    }

    /// Data TPDUs known to have been sent.
    pub fn seen(&self) -> u64 {
        self.top
    }
    pub fn lost(&self) -> u64 {
        self.lost
    }
    pub fn bursts(&self) -> u64 {
        self.bursts
    }
}

/// One exponentially smoothed view of the reports: older TPDUs weigh `e^(-age/horizon)`.
#[derive(Debug, Clone)]
struct Smoothed {
    horizon: f64,
    seen: f64,
    lost: f64,
    bursts: f64,
}

impl Smoothed {
    fn new(horizon: f64, initial_loss: f64) -> Smoothed {
        let prior = horizon / 4.0;
        Smoothed {
            horizon,
            seen: prior,
            lost: initial_loss * prior,
            bursts: initial_loss * prior,
        }
    }

    /// Folds in `ds` TPDUs with `dl` losses in `db` runs, taken as spread evenly over them:
    /// the chunk weighs `horizon * (1 - e^(-ds/horizon))`, as `ds` single TPDUs would.
    fn add(&mut self, ds: u32, dl: u32, db: u32) {
        let decay = (-f64::from(ds) / self.horizon).exp();
        let w = self.horizon * (1.0 - decay) / f64::from(ds);
        self.seen = self.seen * decay + w * f64::from(ds);
        self.lost = self.lost * decay + w * f64::from(dl);
        self.bursts = self.bursts * decay + w * f64::from(db);
    }

    fn loss(&self) -> f64 {
        if self.seen <= 0.0 {
            return 0.0;
        }
        (self.lost / self.seen).clamp(0.0, 0.45)
    }

    fn burst(&self) -> f64 {
        if self.bursts <= 1e-9 {
            return 1.0;
        }
        (self.lost / self.bursts).clamp(1.0, 1000.0)
    }
}

/// Sender side: loss rate and mean burst from the receiver's cumulative counters. Two
/// smoothings, a fast one (about 150 TPDUs) and a slow one (about 1500), and the worse of the
/// two counts: protection rises within a fraction of a second when loss appears and falls
/// only after a long clean stretch (the receiver's loss would otherwise be paid for before
/// the estimate caught up). Both start from an assumed loss rate.
#[derive(Debug, Clone)]
pub struct LossEstimate {
    fast: Smoothed,
    slow: Smoothed,
    last: Option<(u32, u32, u32)>,
    /// `(loss, burst)` of the worse smoothing, as of the last report: read on every turn of
    /// the sender (`ErasureTx::rechoose_at`), changed only by a report.
    current: (f64, f64),
}

/// Largest plausible growth of a counter between two reports; more is an old report
/// arriving late (the counters wrapped backwards) or garbage.
const MAX_STEP: u32 = 1 << 30;

impl LossEstimate {
    pub fn new(initial_loss: f64) -> LossEstimate {
        let mut e = LossEstimate {
            fast: Smoothed::new(150.0, initial_loss),
            slow: Smoothed::new(1500.0, initial_loss),
            last: None,
            current: (0.0, 1.0),
        };
        e.current = e.compute();
        e
    }

    fn compute(&self) -> (f64, f64) {
        let w = self.worse();
        (w.loss(), w.burst())
    }

    /// Folds in a report; returns whether it brought anything.
    pub fn on_report(&mut self, r: &Report) -> bool {
        let (s0, l0, b0) = self.last.unwrap_or((0, 0, 0));
        let ds = r.seen.wrapping_sub(s0);
        let dl = r.wire_lost.wrapping_sub(l0);
        let db = r.bursts.wrapping_sub(b0);
        if ds == 0 || ds > MAX_STEP || dl > ds || db > dl.max(1) {
            return false;
        }
        self.last = Some((r.seen, r.wire_lost, r.bursts));
        self.fast.add(ds, dl, db);
        self.slow.add(ds, dl, db);
        self.current = self.compute();
        true
    }

    fn worse(&self) -> &Smoothed {
        if self.fast.loss() >= self.slow.loss() {
            &self.fast
        } else {
            &self.slow
        }
    }

    /// Smoothed loss rate, below 0.5.
    pub fn loss(&self) -> f64 {
        self.current.0
    }

    /// Mean burst length of the same smoothing, at least 1.
    pub fn burst(&self) -> f64 {
        self.current.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_corruption_and_reordering_are_counted_as_the_link_saw_them() {
        let mut w = WireLoss::default();
        assert_eq!(w.on_arrival(0, 10, true), Arrival::First);
        assert_eq!(w.on_arrival(3, 40, true), Arrival::First); // 1, 2 lost: one burst
        assert_eq!((w.lost(), w.bursts()), (2, 1));
        assert_eq!(w.on_arrival(4, 50, false), Arrival::First); // corrupted, a new burst
        assert_eq!((w.lost(), w.bursts()), (3, 2));
        assert_eq!(w.on_arrival(5, 60, true), Arrival::First);
        // 2 was sent before 5 (older timestamp): reordered, not lost.
        assert_eq!(w.on_arrival(2, 30, true), Arrival::Reordered);
        assert_eq!(w.lost(), 2);
        // 1 comes back newer than 5: a retransmission of a real loss.
        assert_eq!(w.on_arrival(1, 70, true), Arrival::Retransmission);
        assert_eq!(w.lost(), 2);
        w.on_rebuilt(7); // 6 and 7 lost, rebuilt 7
        assert_eq!((w.lost(), w.bursts(), w.seen()), (4, 3, 8));
    }

    fn report(seen: u32, wire_lost: u32, bursts: u32) -> Report {
        Report {
            seen,
            wire_lost,
            bursts,
            ..Default::default()
        }
    }

    #[test]
    fn estimate_follows_reports_and_ignores_stale_ones() {
        let mut e = LossEstimate::new(0.01);
        assert!((e.loss() - 0.01).abs() < 1e-12);
        assert!(e.on_report(&report(10_000, 1000, 100)));
        assert!((e.loss() - 0.1).abs() < 0.01, "{}", e.loss());
        assert!((e.burst() - 10.0).abs() < 0.5, "{}", e.burst());
        // An older report arriving late changes nothing.
        assert!(!e.on_report(&report(9_000, 900, 90)));
        // Loss rises: the fast view sees it within a couple of hundred TPDUs.
        let mut r = LossEstimate::new(0.0);
        assert!(r.on_report(&report(1000, 0, 0)));
        assert!(r.on_report(&report(1200, 40, 40)));
        assert!(r.loss() > 0.1, "{}", r.loss());
        // A long clean stretch brings the estimate down.
        assert!(e.on_report(&report(30_000, 1000, 100)));
        assert!(e.loss() < 0.001, "{}", e.loss());
        // Garbage: more lost than seen.
        assert!(!e.on_report(&report(20_010, 1100, 101)));
    }
}
