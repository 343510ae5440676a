//! Many runs of one scenario (in parallel) and their summary.

use std::time::Duration;

use rayon::prelude::*;
use serde::Serialize;

use aerotp_link::{DelayHistogram, DelaySummary};

use crate::ceiling::ceiling_bps_over;
use crate::run::{mix_seed, run_once, RunResult};
use crate::scenario::{datagram_parity, Scenario, SimError, SimMode};
use crate::workload::Workload;

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

/// Percentiles of per-message delivery delays pooled over all runs of a point (seconds;
/// nearest rank: the smallest delay with at least that share of the messages at or below).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Messages the percentiles are over (delivered messages of all runs).
    pub n: usize,
}

impl Percentiles {
    /// None if there are no values.
    pub fn of(values: &[f64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Percentiles {
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: v[v.len() - 1],
            n: v.len(),
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
    /// Means per run: data TPDUs lost on the link before repair, rebuilt by erasure
    /// decoding, and repair TPDUs sent.
    pub wire_lost: f64,
    pub tpdus_rebuilt: f64,
    pub repairs_sent: f64,
    /// Mean per run: data TPDUs sent for the first time.
    pub data_tpdus: f64,
    /// Longest one-way delay of any data TPDU in any run, seconds.
    pub max_delay_s: Option<f64>,
    /// Means over runs: retransmissions of a TPDU already delivered intact (see
    /// `RunResult::spurious_retransmissions`), and the bytes on the wire each way.
    pub spurious_retransmissions: f64,
    pub wire_bytes_forward: f64,
    pub wire_bytes_reverse: f64,
    /// What the forward links can carry in application bytes (bit/s), mean over runs of
    /// [`crate::ceiling_bps_over`] with each run's final FEC parity, over the run's transfer
    /// (see [`transfer_span`]; it matters only for links with a trace).
    pub ceiling_bps: f64,
    /// Queueing delay at the bottleneck of the forward paths (`aerotp_link::Path::bottleneck`),
    /// every packet of every run pooled: `{n, p50, p99, max, mean}`, seconds.
    pub queue_delay: DelaySummary,
    /// Mean per run: forward packets refused by a full drop-tail queue (any hop of the path;
    /// not a loss: the link never carried them).
    pub queue_drops: f64,
    /// The same two for the reverse paths (acknowledgements).
    pub queue_delay_reverse: DelaySummary,
    pub queue_drops_reverse: f64,
    /// Number of paths of the network.
    pub paths: usize,
    /// The workload (`--workload` form).
    pub workload: String,
    /// Per-message delivery delays pooled over runs (non-bulk workloads; else null).
    pub message_delay: Option<Percentiles>,
    /// With several paths used by the engine: per path, its outages against the sender's
    /// down declarations, over all runs (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path_states: Vec<PathStates>,
    #[serde(skip)]
    pub results: Vec<RunResult>,
}

/// One path's outages against the sender's down declarations, summed over the runs (see
/// `crate::run::PathRun`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathStates {
    pub outages: usize,
    /// Outages a declaration began in (or within `DECLARATION_GRACE` of the end of).
    pub outages_declared: usize,
    pub declarations: usize,
    /// Declarations outside every outage and its grace.
    pub false_declarations: usize,
    /// Median time from an outage's start to its declaration, seconds (null if none).
    pub detection_median_s: Option<f64>,
    /// Means per run: seconds held up while the link was down, and down while it was up.
    pub up_while_down_s: f64,
    pub down_while_up_s: f64,
}

impl PathStates {
    fn of(results: &[RunResult]) -> Vec<PathStates> {
        let n = results.iter().map(|r| r.paths.len()).max().unwrap_or(0);
        (0..n)
            .map(|i| {
                let runs: Vec<_> = results.iter().filter_map(|r| r.paths.get(i)).collect();
                let mut det: Vec<f64> = runs.iter().flat_map(|p| p.detection_s.clone()).collect();
                det.sort_by(f64::total_cmp);
                let per_run = |f: &dyn Fn(&crate::run::PathRun) -> f64| {
                    runs.iter().map(|p| f(p)).sum::<f64>() / runs.len().max(1) as f64
                };
                PathStates {
                    outages: runs.iter().map(|p| p.outages.len()).sum(),
                    outages_declared: runs.iter().map(|p| p.outages_declared).sum(),
                    declarations: runs.iter().map(|p| p.declared.len()).sum(),
                    false_declarations: runs.iter().map(|p| p.false_declarations).sum(),
                    detection_median_s: (!det.is_empty()).then(|| det[det.len() / 2]),
                    up_while_down_s: per_run(&|p| p.up_while_down_s),
                    down_while_up_s: per_run(&|p| p.down_while_up_s),
                }
            })
            .collect()
    }
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
    let runs = Runs(&results);
    let goodput = runs.stat(&|r| r.goodput_bps).expect("runs > 0");
    let delivered = runs.stat(&|r| r.delivered_bytes as f64).expect("runs > 0");
    let overhead = runs.stat(&|r| r.overhead_bytes as f64).expect("runs > 0");
    let setup_delay = Stat::of(&runs.present(&|r| r.setup_delay_s));
    let mean_delay = Stat::of(&runs.present(&|r| r.mean_delay_s));
    let mean = |f: &dyn Fn(&RunResult) -> f64| runs.mean(f);
    let fec_parity = mean(&|r| f64::from(r.fec_parity));
    let fec_words = mean(&|r| aerotp_fec::words_for_parity(r.fec_parity, s.mtu));
    let ceiling = mean(&|r| {
        let (from, to) = transfer_span(r);
        ceiling_bps_over(s, run_parity(s, r), from, to)
    });
    Summary {
        mode: s.mode.name().to_owned(),
        ber: s.ber(),
        loss: s.loss(),
        rate_bps: s.rate_bps,
        delay_s: s.delay().as_secs_f64(),
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
        wire_lost: mean(&|r| r.wire_lost as f64),
        tpdus_rebuilt: mean(&|r| r.tpdus_rebuilt as f64),
        repairs_sent: mean(&|r| r.repairs_sent as f64),
        data_tpdus: mean(&|r| r.data_tpdus as f64),
        max_delay_s: runs.max_delay_s(),
        spurious_retransmissions: mean(&|r| r.spurious_retransmissions as f64),
        wire_bytes_forward: mean(&|r| r.wire_bytes_forward as f64),
        wire_bytes_reverse: mean(&|r| r.wire_bytes_reverse as f64),
        ceiling_bps: ceiling,
        queue_delay: runs.pool(&|r| &r.queue_delay_forward),
        queue_drops: mean(&|r| r.queue_drops_forward as f64),
        queue_delay_reverse: runs.pool(&|r| &r.queue_delay_reverse),
        queue_drops_reverse: mean(&|r| r.queue_drops_reverse as f64),
        paths: s.network.paths.len(),
        workload: s.workload.to_string(),
        message_delay: if s.workload == Workload::Bulk {
            None
        } else {
            Percentiles::of(&runs.message_delays())
        },
        path_states: PathStates::of(&results),
        results,
    }
}

/// The runs of one point, read one figure at a time.
struct Runs<'r>(&'r [RunResult]);

impl Runs<'_> {
    /// The figure `f` of every run.
    fn each(&self, f: &dyn Fn(&RunResult) -> f64) -> Vec<f64> {
        self.0.iter().map(f).collect()
    }

    /// The figure `f` of the runs that have it.
    fn present(&self, f: &dyn Fn(&RunResult) -> Option<f64>) -> Vec<f64> {
        self.0.iter().filter_map(f).collect()
    }

    fn stat(&self, f: &dyn Fn(&RunResult) -> f64) -> Option<Stat> {
        Stat::of(&self.each(f))
    }

    fn mean(&self, f: &dyn Fn(&RunResult) -> f64) -> f64 {
        self.each(f).iter().sum::<f64>() / self.0.len() as f64
    }

    /// The delay histograms `f` of every run pooled.
    fn pool(&self, f: &dyn Fn(&RunResult) -> &DelayHistogram) -> DelaySummary {
        let mut h = DelayHistogram::new();
        for r in self.0 {
            h.merge(f(r));
        }
        h.summary()
    }

    /// Longest one-way delay of any data TPDU in any run.
    fn max_delay_s(&self) -> Option<f64> {
        self.0
            .iter()
            .filter_map(|r| r.max_delay_s)
            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))))
    }

    /// Every run's per-message delays, in run order.
    fn message_delays(&self) -> Vec<f64> {
        self.0
            .iter()
            .flat_map(|r| r.message_delays.iter().copied())
            .collect()
    }
}

/// The interval a run's goodput is measured over, and so its ceiling: first send to last
/// delivery; without a delivery, the whole run.
pub fn transfer_span(r: &RunResult) -> (Duration, Duration) {
    let secs = |v: f64| Duration::try_from_secs_f64(v).unwrap_or_default();
    match (r.first_send_s, r.last_delivery_s) {
        (Some(f), Some(l)) if l > f => (secs(f), secs(l)),
        _ => (Duration::ZERO, secs(r.elapsed_s)),
    }
}

/// The FEC parity a run's full datagrams carried: the engine's at the end of the run, the
/// fixed one of datagram mode, none for UDP.
fn run_parity(s: &Scenario, r: &RunResult) -> u8 {
    match s.mode {
        SimMode::Udp => 0,
        SimMode::Aero(aerotp_proto::Mode::Datagram) => datagram_parity(s),
        SimMode::Aero(_) => r.fec_parity,
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
