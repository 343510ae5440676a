//! Many runs of one scenario (in parallel) and their summary.

use rayon::prelude::*;
use serde::Serialize;

use crate::run::{mix_seed, run_once, RunResult};
use crate::scenario::{Scenario, SimError};

/// Mean, spread and extremes of one metric over runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// Half-width of the 95 % confidence interval of the mean (normal approximation).
    pub ci95: f64,
    /// Runs the statistic is over.
    pub n: usize,
}

impl Stat {
    /// None if there are no values.
    pub fn of(values: &[f64]) -> Option<Stat> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let stddev = var.sqrt();
        Some(Stat {
            mean,
            stddev,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ci95: 1.96 * stddev / (n as f64).sqrt(),
            n,
        })
    }
}

/// The summary of `runs` runs of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub mode: String,
    pub ber: f64,
    pub loss: f64,
    pub rate_bps: u64,
    pub delay_s: f64,
    pub size: usize,
    pub mtu: usize,
    /// FEC setting as given ("off", "auto", "N words", "pN").
    pub fec: String,
    pub mack: u16,
    pub topology: String,
    pub seed: u64,
    pub runs: usize,
    pub complete_runs: usize,
    /// Means over runs.
    pub delivered_bytes: f64,
    pub goodput_bps: f64,
    /// Mean over the runs that delivered something; null if none did.
    pub mean_delay_s: Option<f64>,
    pub overhead_bytes: f64,
    /// Mean over the runs whose receiver accepted; null if none did.
    pub setup_delay_s: Option<f64>,
    pub elapsed_s: f64,
    pub goodput: Stat,
    pub delivered: Stat,
    pub setup_delay: Option<Stat>,
    pub mean_delay: Option<Stat>,
    pub overhead: Stat,
    /// Mean parity bytes per codeword at the end of a run, and the same on the papers'
    /// scale (32-bit words per MTU-sized TPDU).
    pub fec_parity: f64,
    pub fec_words: f64,
    pub retransmissions: f64,
    pub tpdus_corrected: f64,
    pub tpdus_lost: f64,
    #[serde(skip)]
    pub results: Vec<RunResult>,
}

/// Seed of run `i` of a sweep point whose base seed is `seed`.
pub fn run_seed(seed: u64, i: usize) -> u64 {
    mix_seed(seed, 1000 + i as u64)
}

/// Runs `runs` transfers of `s` (run i with `run_seed(seed, i)`) on all cores and summarises.
pub fn run_many(s: &Scenario, runs: usize, seed: u64) -> Result<Summary, SimError> {
    s.validate()?;
    if runs == 0 {
        return Err(SimError::Runs);
    }
    let results: Vec<RunResult> = (0..runs)
        .into_par_iter()
        .map(|i| run_once(s, run_seed(seed, i)))
        .collect();
    Ok(summarize(s, seed, results))
}

fn fec_name(s: &Scenario) -> String {
    match s.fec_setting() {
        aerotp_proto::FecSetting::Off => "off".into(),
        aerotp_proto::FecSetting::Auto => "auto".into(),
        aerotp_proto::FecSetting::Words(w) => format!("{w}"),
        aerotp_proto::FecSetting::Parity(p) => format!("p{p}"),
    }
}

/// The summary of results already computed.
pub fn summarize(s: &Scenario, seed: u64, results: Vec<RunResult>) -> Summary {
    let col = |f: &dyn Fn(&RunResult) -> f64| results.iter().map(f).collect::<Vec<f64>>();
    let opt =
        |f: &dyn Fn(&RunResult) -> Option<f64>| results.iter().filter_map(f).collect::<Vec<f64>>();
    let goodput = Stat::of(&col(&|r| r.goodput_bps)).expect("runs > 0");
    let delivered = Stat::of(&col(&|r| r.delivered_bytes as f64)).expect("runs > 0");
    let overhead = Stat::of(&col(&|r| r.overhead_bytes as f64)).expect("runs > 0");
    let setup_delay = Stat::of(&opt(&|r| r.setup_delay_s));
    let mean_delay = Stat::of(&opt(&|r| r.mean_delay_s));
    let mean = |f: &dyn Fn(&RunResult) -> f64| col(f).iter().sum::<f64>() / results.len() as f64;
    let fec_parity = mean(&|r| f64::from(r.fec_parity));
    let fec_words = mean(&|r| aerotp_fec::words_for_parity(r.fec_parity, s.mtu));
    Summary {
        mode: s.mode.name().to_owned(),
        ber: s.ber,
        loss: s.loss,
        rate_bps: s.rate_bps,
        delay_s: s.delay.as_secs_f64(),
        size: s.size,
        mtu: s.mtu,
        fec: fec_name(s),
        mack: s.mack,
        topology: s.topology.name().to_owned(),
        seed,
        runs: results.len(),
        complete_runs: results.iter().filter(|r| r.complete).count(),
        delivered_bytes: delivered.mean,
        goodput_bps: goodput.mean,
        mean_delay_s: mean_delay.map(|d| d.mean),
        overhead_bytes: overhead.mean,
        setup_delay_s: setup_delay.map(|d| d.mean),
        elapsed_s: mean(&|r| r.elapsed_s),
        goodput,
        delivered,
        setup_delay,
        mean_delay,
        overhead,
        fec_parity,
        fec_words,
        retransmissions: mean(&|r| r.retransmissions as f64),
        tpdus_corrected: mean(&|r| r.tpdus_corrected as f64),
        tpdus_lost: mean(&|r| r.tpdus_lost as f64),
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_known_values() {
        let s = Stat::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        assert!((s.stddev - 1.290_994).abs() < 1e-5);
        assert!(Stat::of(&[]).is_none());
        assert_eq!(Stat::of(&[5.0]).unwrap().stddev, 0.0);
    }
}
