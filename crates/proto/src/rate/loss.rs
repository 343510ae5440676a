//! The share of a path's TPDUs lost at random (corruption beyond the FEC, fading), told
//! apart from what a queue dropped. Two meters, each averaging rounds that carried at least
//! `LOSS_MIN_TPDUS`:
//!
//! - **scaling**: the rounds that neither probed nor met a queue by the model's own minimum
//!   round trip. The delivery samples are scaled by it (`RateModel::departure_rate`), as
//!   they were before the second meter existed.
//! - **link**: the rounds whose every round trip stood within the queue threshold of the
//!   smallest the path ever showed, whatever the pacing gain: no queue stood, so none
//!   dropped. It decides whether the link loses so much that samples count what the path
//!   carried rather than what arrived, and how much of what is in flight is lost unseen.
//!
//! Why two: the model's minimum ages out (`model::MIN_RTT_WINDOW`), so behind a queue that
//! never drains (several senders filling one drop-tail buffer) it rises to include the queue,
//! and the queue's drops look random to the first meter: four connections on one 5 Mb/s
//! bottleneck measured 50-77 %. Counting lost TPDUs as carried on that reading (measured with
//! a first version that counted them over spans of 64 TPDUs) took the link from the short
//! round trips (Jain 0.70 instead of 0.918, `crates/proto/tests/fairness.rs`); the
//! smallest round trip ever seen does not age, and the link meter stays at what the link
//! itself lost. Scaling the samples by the link meter instead changed how those four share
//! the queue too (Jain 0.84), so the first meter keeps its job. The link meter's cost, on a
//! path whose delay grows for good (a longer route): it stops measuring and keeps its last
//! value; it never grows on a queue's drops.

use std::time::Duration;

/// Most of the loss taken for random rather than congestion: beyond it the link is unusable
/// anyway, and a wrong estimate cannot make the sender more than double.
pub(super) const MAX_RANDOM_LOSS: f64 = 0.5;
/// Share of a loss measurement in the estimate.
const LOSS_GAIN: f64 = 0.5;
/// TPDUs a loss measurement spans (rounds are added up until they carried this many): at
/// 10 % loss its standard error is 2.7 points, halved again by the averaging.
const LOSS_MIN_TPDUS: u64 = 128;
/// TPDUs the first measurement of the link's loss spans: a quarter, so a link that loses
/// much is known as such within the first second (at 30 % loss its standard error is 8
/// points, enough to tell it from a clean link).
const FIRST_LOSS_TPDUS: u64 = 32;

/// Loss over rounds added up until they carried enough, averaged.
#[derive(Debug, Clone, Copy, Default)]
struct LossMeter {
    delivered: u64,
    lost: u64,
    share: f64,
    measured: bool,
}

impl LossMeter {
    /// Adds a round; `first_whole`: the first measurement, over `FIRST_LOSS_TPDUS`, is
    /// taken as it is rather than averaged with the zero before it.
    fn add(&mut self, delivered: u64, lost: u64, mss: u64, first_whole: bool) {
        self.delivered += delivered;
        self.lost += lost;
        let total = self.delivered + self.lost;
        let first = first_whole && !self.measured;
        let enough = if first {
            FIRST_LOSS_TPDUS
        } else {
            LOSS_MIN_TPDUS
        };
        if total < enough * mss {
            return;
        }
        let p = self.lost as f64 / total as f64;
        (self.delivered, self.lost) = (0, 0);
        let gain = if first { 1.0 } else { LOSS_GAIN };
        self.measured = true;
        self.share = (self.share + gain * (p - self.share)).clamp(0.0, MAX_RANDOM_LOSS);
    }
}

/// The random-loss estimate of one path, two ways.
#[derive(Debug, Clone, Default)]
pub(super) struct RandomLoss {
    /// Over the rounds that neither probed nor queued by the model's own minimum round
    /// trip: what the delivery samples are scaled by (`RateModel::departure_rate`).
    scaling: LossMeter,
    /// Over the rounds whose every round trip stood close to the smallest the path ever
    /// showed, whatever the pacing gain: no queue stood, so none dropped. Decides whether
    /// the link loses so much at random that samples count what the path carried.
    link: LossMeter,
    /// The smallest round trip the path ever showed: its propagation delay.
    base_rtt: Option<Duration>,
    /// The smallest and the largest round trip of the current round.
    round_rtt: Option<(Duration, Duration)>,
}

impl RandomLoss {
    /// The share of what is sent taken for lost at random, 0 to `MAX_RANDOM_LOSS`, for
    /// scaling delivery samples.
    pub fn share(&self) -> f64 {
        self.scaling.share
    }

    /// The share the link loses at random, measured only where no queue stood: 0 to
    /// `MAX_RANDOM_LOSS`.
    pub fn link_share(&self) -> f64 {
        self.link.share
    }

    /// A round-trip sample of this round.
    pub fn on_rtt(&mut self, rtt: Duration) {
        self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
        self.round_rtt = Some(
            self.round_rtt
                .map_or((rtt, rtt), |(lo, hi)| (lo.min(rtt), hi.max(rtt))),
        );
    }

    /// A round ended having delivered and lost these bytes; `clean`: it neither probed nor
    /// met a queue by the model's reckoning; `threshold`: the queueing delay taken for a
    /// queue; `mss`: bytes of a full TPDU's body.
    pub fn end_round(
        &mut self,
        delivered: u64,
        lost: u64,
        clean: bool,
        threshold: Duration,
        mss: u64,
    ) {
        let round_rtt = self.round_rtt.take();
        if clean {
            self.scaling.add(delivered, lost, mss, false);
        }
        // A round without a round-trip sample (every TPDU it acknowledged was a
        // retransmission) cannot show that no queue stood: not counted.
        let queue_free = match (round_rtt, self.base_rtt) {
            (Some((_, hi)), Some(base)) => hi <= base + threshold,
            _ => false,
        };
        if queue_free {
            self.link.add(delivered, lost, mss, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const MSS: u64 = 1000;

    /// Rounds of 64 TPDUs each losing `lost` of them, with this smallest round trip.
    fn rounds(l: &mut RandomLoss, n: usize, lost: u64, rtt: Duration) {
        for _ in 0..n {
            l.on_rtt(rtt);
            l.end_round((64 - lost) * MSS, lost * MSS, true, 5 * MS, MSS);
        }
    }

    #[test]
    fn clean_rounds_measure_the_loss() {
        let mut l = RandomLoss::default();
        rounds(&mut l, 40, 19, 20 * MS);
        assert!((l.share() - 19.0 / 64.0).abs() < 0.01, "{}", l.share());
        assert!((l.share() - l.link_share()).abs() < 0.01);
    }

    #[test]
    fn rounds_behind_a_standing_queue_are_not_counted_even_once_the_minimum_would_have_aged() {
        let mut l = RandomLoss::default();
        rounds(&mut l, 40, 3, 20 * MS);
        let before = l.link_share();
        // A queue 100 ms deep that never drains, dropping half of what arrives.
        rounds(&mut l, 400, 32, 120 * MS);
        assert_eq!(l.link_share(), before);
        assert!((l.share() - 0.5).abs() < 0.01, "{}", l.share());
        // Once it drains the link's own loss is measured again.
        rounds(&mut l, 40, 6, 22 * MS);
        assert!(
            (l.link_share() - 6.0 / 64.0).abs() < 0.01,
            "{}",
            l.link_share()
        );
    }

    #[test]
    fn probing_rounds_count_for_the_link_only_while_no_queue_stood_and_the_share_is_bounded() {
        let mut l = RandomLoss::default();
        // Rounds that probed, at the path's smallest round trip: the link's loss.
        for _ in 0..40 {
            l.on_rtt(20 * MS);
            l.end_round(48 * MSS, 16 * MSS, false, 5 * MS, MSS);
        }
        assert_eq!(l.share(), 0.0);
        assert!((l.link_share() - 0.25).abs() < 0.01, "{}", l.link_share());
        // Rounds that probed into a queue (their last round trip 30 ms above the smallest).
        let before = l.link_share();
        for _ in 0..40 {
            l.on_rtt(20 * MS);
            l.on_rtt(50 * MS);
            l.end_round(10 * MSS, 54 * MSS, false, 5 * MS, MSS);
        }
        assert_eq!(l.link_share(), before);
        rounds(&mut l, 40, 60, 20 * MS);
        assert_eq!(
            (l.share(), l.link_share()),
            (MAX_RANDOM_LOSS, MAX_RANDOM_LOSS)
        );
    }

    #[test]
    fn the_links_first_measurement_is_taken_whole_after_a_quarter_of_the_span() {
        let mut l = RandomLoss::default();
        // 32 TPDUs at 25 % loss.
        l.on_rtt(20 * MS);
        l.end_round(24 * MSS, 8 * MSS, true, 5 * MS, MSS);
        assert_eq!(l.link_share(), 0.25);
        // The scaling meter waits for its full span and averages from zero.
        assert_eq!(l.share(), 0.0);
    }

    #[test]
    fn a_round_without_a_round_trip_sample_is_not_counted_for_the_link() {
        let mut l = RandomLoss::default();
        l.on_rtt(20 * MS);
        l.end_round(64 * MSS, 0, true, 5 * MS, MSS);
        l.end_round(32 * MSS, 32 * MSS, true, 5 * MS, MSS);
        l.end_round(32 * MSS, 32 * MSS, true, 5 * MS, MSS);
        assert_eq!(l.link_share(), 0.0);
    }
}
