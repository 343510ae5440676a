//! `aerotp experiment seeds`: the papers' experiments that need no TCP (set-up delay vs
//! loss, FEC strength, MACK aggregation, modes over BER, link delay), reproduced in the
//! simulator and joined with the ns-3 TCP rows when present.
//!
//! They are the plan file bench/plans/seeds.toml (embedded in the binary), run by the plan
//! engine like any other plan (`crate::plan`, docs/experiments.md): the points, series,
//! tables, plots and headline checks are all in the plan.

use std::path::PathBuf;

use crate::plan::{run_plan, Options as PlanOptions, Outcome, Plan};

/// Options of `aerotp experiment seeds`.
#[derive(Debug, Clone)]
pub struct Options {
    pub out: PathBuf,
    pub runs: usize,
    /// The plan's `quick` tables: fewer points, the same experiments.
    pub quick: bool,
    pub seed: u64,
    /// Where the ns-3 TCP CSVs are (joined if present).
    pub ns3_dir: PathBuf,
    /// The command line, for the report.
    pub command: String,
}

/// Runs the seeds plan into `o.out` (resuming a run interrupted there).
pub fn seeds(o: &Options) -> anyhow::Result<Outcome> {
    let plan = Plan::seeds(o.quick)?;
    let mut p = PlanOptions::new(o.out.clone());
    p.runs = Some(o.runs);
    p.seed = Some(o.seed);
    p.join_dir = Some(o.ns3_dir.clone());
    p.command.clone_from(&o.command);
    run_plan(&plan, &p)
}
