//! Loss detection and timeouts of the sender (RFC 8985's time and packet thresholds, RFC
//! 6298's timeout, the probe before the first sample): the rules, run per path over the
//! lanes (`lanes`). The round-trip figures come from the estimators at each call
//! (`LossTiming`: the connection's loss time, minimum RTT and timeout, each path's for its
//! lane); the sender keeps only what is its own (the reorder window and its bound, the repair
//! wait it was given, whether reordering was seen).

use super::lanes::{Timing, Transmission};
use super::record::current;
use super::Sender;
use crate::rtt::LossTiming;
use std::time::Duration;

impl Sender {
    /// The erasure repair wait the connection applies from now (see `repair_wait`; it is the
    /// erasure coder's, taken at each chance to send, not a round-trip figure). A shorter
    /// wait can move a loss deadline to `now` or before it; with `detect` (loss detection by
    /// time is live: its timing) those losses are declared at once, so no deadline already
    /// passed is left for the connection to report (with a discovered rate the erasure
    /// choice, and the wait with it, moves as the rate does).
    pub fn set_repair_wait(&mut self, d: Duration, now: Duration, detect: Option<&LossTiming>) {
        let shorter = d < self.repair_wait;
        self.repair_wait = d;
        if let Some(t) = detect.filter(|_| shorter && self.ec.loss_by_time) {
            self.detect_losses(now, t);
        }
    }

    /// When the oldest TPDU overtaken by an acknowledged one is declared lost by time, with
    /// the estimator's timing now.
    #[inline]
    pub fn loss_deadline(&self, t: &LossTiming) -> Option<Duration> {
        let timing = self.timing(t);
        self.lanes
            .loss_deadline(&timing, |t| self.is_current_unacked(t))
    }

    /// Time-threshold loss detection: a TPDU sent `loss_time` (plus the reorder window and
    /// the repair wait) before one that has been acknowledged is lost (QUIC's rule; catches
    /// losses with fewer than three TPDUs behind them, such as the first data TPDU of a
    /// transfer).
    #[inline]
    fn timing<'a>(&self, t: &LossTiming<'a>) -> Timing<'a> {
        Timing {
            loss_time: t.loss_time,
            extra: self.reordering.window + self.repair_wait,
            count_rule: !self.reordering.seen && self.repair_wait.is_zero(),
            path: t.path,
        }
    }

    /// Packet- and time-threshold loss detection, per path, over the transmissions older
    /// than the path's newest acknowledged one.
    pub(super) fn detect_losses(&mut self, now: Duration, t: &LossTiming) {
        let timing = self.timing(t);
        let mut lost = std::mem::take(&mut self.lost);
        let (entries, base) = (&self.entries, self.base);
        self.lanes.detect(
            now,
            &timing,
            |t| current(entries, base, t.seq, t.tx),
            &mut lost,
        );
        self.declare_lost(&mut lost);
        self.lost = lost;
    }

    /// Earliest retransmission-timeout deadline of what is in flight (`t.rto` after it was
    /// sent; each path's own with several).
    #[inline]
    pub fn timeout_deadline(&self, t: &LossTiming) -> Option<Duration> {
        self.lanes
            .timeout_deadline(t.rto, t.path, |x| self.is_current_unacked(x))
    }

    /// Retransmission timeout: transmissions older than `t.rto` (their path's with several)
    /// are declared lost, after loss detection by time.
    pub fn on_timeout(&mut self, now: Duration, t: &LossTiming) -> usize {
        if self.ec.loss_by_time {
            self.detect_losses(now, t);
        }
        let mut lost = std::mem::take(&mut self.lost);
        let (entries, base) = (&self.entries, self.base);
        let live = |x: Transmission| current(entries, base, x.seq, x.tx);
        self.lanes.expired(now, t.rto, t.path, live, &mut lost);
        let mut n = 0;
        for seq in lost.drain(..) {
            n += usize::from(self.lose(seq));
        }
        self.lost = lost;
        self.stats.timeouts += n as u64;
        n
    }

    /// Retransmission timeout before the first round-trip sample. The timeout then is a
    /// guess (3 × the initial RTT), and on a long path it fires while the first flight is
    /// still on its way: retransmitting every TPDU older than it (as `on_timeout` does) would
    /// send the whole first flight twice (493 needless retransmissions for 10 MB over 600 ms
    /// one way). So only the oldest unacknowledged TPDU is resent — a probe, as RFC 8985's
    /// tail-loss probe and RFC 6298's backed-off first timeout do — and the other overdue
    /// transmissions are re-armed from `now`; the caller backs the timeout off. The first
    /// acknowledgement then gives a sample and the normal rules take over. With `lowest`
    /// (a discovered rate) the probe is the lowest-numbered TPDU in flight rather than the
    /// oldest (`Lanes::expire_oldest`).
    pub fn on_timeout_before_sample(
        &mut self,
        now: Duration,
        t: &LossTiming,
        lowest: bool,
    ) -> usize {
        // One timer for the whole flight until the first sample: everything still in flight
        // waits a full (backed-off) timeout from this probe, not from its own sending time,
        // or the TPDUs would expire one by one, a TPDU time apart.
        let (entries, base) = (&self.entries, self.base);
        let live = |x: Transmission| current(entries, base, x.seq, x.tx);
        let Some(oldest) = self.lanes.expire_oldest(now, t.rto, t.path, lowest, live) else {
            return 0;
        };
        let n = usize::from(self.lose(oldest));
        self.stats.timeouts += n as u64;
        n
    }
}
