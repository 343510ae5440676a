//! Many runs of several senders sharing the scenario's links (`aerotp sim --senders N`), and
//! their summary: the figures of all senders together (the one-sender [`Summary`]), each
//! sender's, and Jain's fairness index between them.

use rayon::prelude::*;
use serde::Serialize;

use crate::run::{run_shared, SharedRun};
use crate::scenario::{Scenario, Senders, SimError};
use crate::summary::{run_seed, summarize, Stat, Summary};

/// One sender over the runs: means over runs unless said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SenderSummary {
    /// Its index (0 = the first sender).
    pub sender: usize,
    pub start_s: f64,
    pub extra_delay_s: f64,
    /// Runs in which its whole file arrived (fully reliable modes: close confirmed).
    pub complete_runs: usize,
    pub delivered_bytes: f64,
    /// Its goodput over its own transfer (first send to last delivery).
    pub goodput_bps: f64,
    pub goodput: Stat,
    /// Its goodput over the fairness interval (the runs that have one; else null).
    pub share_bps: Option<f64>,
    /// First send and last delivery (the runs in which it sent, delivered), seconds.
    pub first_send_s: Option<f64>,
    pub finish_s: Option<f64>,
    /// Connect call to its receiver's accept (the runs that accepted).
    pub setup_delay_s: Option<f64>,
    pub retransmissions: f64,
    pub wire_bytes_forward: f64,
    /// One-way delay per TPDU (the runs that delivered).
    pub mean_delay_s: Option<f64>,
}

/// The summary of runs with several senders. Serialised flat: every key of [`Summary`] (all
/// senders together: delivered bytes and wire bytes summed, goodput from the first send to the
/// last delivery of any, the shared links' queues), then `senders`, `jain`, `jain_stat`,
/// `jain_from_s`, `jain_to_s`, `settle_s`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SendersSummary {
    #[serde(flatten)]
    pub total: Summary,
    pub senders: Vec<SenderSummary>,
    /// Mean over the runs with a fairness interval of Jain's index of the senders' shares in
    /// it; null if no run has one.
    pub jain: Option<f64>,
    pub jain_stat: Option<Stat>,
    /// The fairness interval (`SharedRun::jain_interval`), mean over the runs with one.
    pub jain_from_s: Option<f64>,
    pub jain_to_s: Option<f64>,
    /// How long after the last start the interval begins.
    pub settle_s: f64,
    #[serde(skip)]
    pub runs: Vec<SharedRun>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Runs `runs` runs of `senders` over the links of `s` (run i with `run_seed(seed, i)`, as
/// [`crate::run_many`]) on all cores, and summarises them.
pub fn run_many_senders(
    s: &Scenario,
    senders: &Senders,
    runs: usize,
    seed: u64,
) -> Result<SendersSummary, SimError> {
    s.validate()?;
    senders.validate(s)?;
    if runs == 0 {
        return Err(SimError::Runs);
    }
    let shared: Vec<SharedRun> = (0..runs)
        .into_par_iter()
        .map(|i| run_shared(s, senders, run_seed(seed, i)))
        .collect();
    Ok(summarize_senders(s, senders, seed, shared))
}

/// The summary of shared runs already computed (at least one).
pub fn summarize_senders(
    s: &Scenario,
    senders: &Senders,
    seed: u64,
    runs: Vec<SharedRun>,
) -> SendersSummary {
    let total = summarize(s, seed, runs.iter().map(|r| r.total.clone()).collect());
    let per = (0..senders.count())
        .map(|i| {
            let of: Vec<_> = runs.iter().map(|r| &r.senders[i]).collect();
            let col = |f: &dyn Fn(&crate::run::SenderRun) -> Option<f64>| {
                of.iter().filter_map(|r| f(r)).collect::<Vec<f64>>()
            };
            let goodputs = col(&|r| Some(r.goodput_bps));
            SenderSummary {
                sender: i,
                start_s: senders.starts[i].as_secs_f64(),
                extra_delay_s: senders.delays[i].as_secs_f64(),
                complete_runs: of.iter().filter(|r| r.complete).count(),
                delivered_bytes: mean(&col(&|r| Some(r.delivered_bytes as f64))).unwrap_or(0.0),
                goodput_bps: mean(&goodputs).unwrap_or(0.0),
                goodput: Stat::of(&goodputs).expect("at least one run"),
                share_bps: mean(&col(&|r| r.share_bps)),
                first_send_s: mean(&col(&|r| r.first_send_s)),
                finish_s: mean(&col(&|r| r.finish_s)),
                setup_delay_s: mean(&col(&|r| r.setup_delay_s)),
                retransmissions: mean(&col(&|r| Some(r.retransmissions as f64))).unwrap_or(0.0),
                wire_bytes_forward: mean(&col(&|r| Some(r.wire_bytes_forward as f64)))
                    .unwrap_or(0.0),
                mean_delay_s: mean(&col(&|r| r.mean_delay_s)),
            }
        })
        .collect();
    let jains: Vec<f64> = runs.iter().filter_map(|r| r.jain).collect();
    let intervals: Vec<(f64, f64)> = runs.iter().filter_map(|r| r.jain_interval).collect();
    SendersSummary {
        total,
        senders: per,
        jain: mean(&jains),
        jain_stat: Stat::of(&jains),
        jain_from_s: mean(&intervals.iter().map(|i| i.0).collect::<Vec<_>>()),
        jain_to_s: mean(&intervals.iter().map(|i| i.1).collect::<Vec<_>>()),
        settle_s: senders.settle.as_secs_f64(),
        runs,
    }
}
