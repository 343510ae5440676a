//! Loss patterns for tests and measurement, from a seeded generator: independent losses, and
//! the Gilbert channel (a Gilbert–Elliott chain whose good state loses nothing and whose bad
//! state loses everything), parametrised as the receiver reports it: mean loss rate and mean
//! burst length. The strength controller assumes exactly this model.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A two-state loss chain: `P(loss | previous lost) = 1 - 1/burst`,
/// `P(loss | previous arrived) = q` with `q` set so the stationary loss rate is `loss`.
/// `burst = 1/(1-loss)` is independent loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossModel {
    /// Probability of loss after a loss.
    pub stay_bad: f64,
    /// Probability of loss after an arrival.
    pub enter_bad: f64,
}

impl LossModel {
    /// Independent losses at rate `loss`.
    pub fn iid(loss: f64) -> LossModel {
        let loss = loss.clamp(0.0, 1.0);
        LossModel {
            stay_bad: loss,
            enter_bad: loss,
        }
    }

    /// Mean loss rate `loss` in bursts of mean length `burst` symbols. Bursts shorter than
    /// independent loss gives (`1/(1-loss)`) are raised to it: the model has no
    /// anti-correlation.
    pub fn bursty(loss: f64, burst: f64) -> LossModel {
        let loss = loss.clamp(0.0, 0.999_999);
        let burst = burst.max(1.0 / (1.0 - loss));
        let leave = 1.0 / burst;
        // Stationary: loss = enter / (enter + leave).
        let enter = (loss * leave / (1.0 - loss)).min(1.0);
        LossModel {
            stay_bad: 1.0 - leave,
            enter_bad: enter,
        }
    }

    /// Stationary loss rate.
    pub fn loss_rate(&self) -> f64 {
        let leave = 1.0 - self.stay_bad;
        if self.enter_bad + leave == 0.0 {
            return 0.0;
        }
        self.enter_bad / (self.enter_bad + leave)
    }
}

/// A seeded loss process following a [`LossModel`].
#[derive(Debug)]
pub struct LossChannel {
    model: LossModel,
    lost_last: bool,
    rng: Pcg64,
}

impl LossChannel {
    /// Starts in the stationary distribution, from `seed`.
    pub fn new(model: LossModel, seed: u64) -> LossChannel {
        let mut rng = Pcg64::seed_from_u64(seed);
        let lost_last = rng.gen_bool(model.loss_rate().clamp(0.0, 1.0));
        LossChannel {
            model,
            lost_last,
            rng,
        }
    }

    /// Whether the next symbol is lost.
    pub fn lose(&mut self) -> bool {
        let p = if self.lost_last {
            self.model.stay_bad
        } else {
            self.model.enter_bad
        };
        self.lost_last = self.rng.gen_bool(p.clamp(0.0, 1.0));
        self.lost_last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_rate_and_burst_match_the_parameters() {
        for (loss, burst) in [(0.03, 10.0), (0.1, 1.0 / 0.9), (0.02, 3.0)] {
            let mut ch = LossChannel::new(LossModel::bursty(loss, burst), 7);
            let n = 2_000_000;
            let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
            for _ in 0..n {
                let l = ch.lose();
                lost += l as u64;
                bursts += (l && !prev) as u64;
                prev = l;
            }
            let rate = lost as f64 / n as f64;
            let mean_burst = lost as f64 / bursts as f64;
            assert!((rate - loss).abs() < 0.1 * loss, "rate {rate} vs {loss}");
            assert!(
                (mean_burst - burst).abs() < 0.1 * burst,
                "burst {mean_burst} vs {burst}"
            );
        }
    }
}
