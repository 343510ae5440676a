//! Experiments as plan files: `aerotp experiment run PLAN.toml`.
//!
//! A plan is data: a base scenario, and experiments that are each a grid over any settings
//! (`Scenario::set` keys) times named series, with the metrics to tabulate and plot and the
//! headline checks to evaluate. `load` reads and checks a plan; [`grid`] enumerates its
//! points without storing them, [`run`] runs them (in parallel, resumable), [`output`] and
//! [`report`] write CSV, PNG and Markdown. The format is documented in docs/experiments.md.
//!
//! One job per module: `model` the checked plan's parts, `load` reading and checking a plan
//! file, `spec` the file's raw form, `template` the text templates and expressions, `check`
//! the headline checks, `grid` the points, `run` running them, `store` the resumable
//! results, `row` and `join` the rows of results and of other tools, `output` CSV and PNG,
//! `report` the Markdown report, `shard` splitting a run across machines, `merge` joining the shards.

pub mod check;
pub mod grid;
pub mod join;
mod load;
pub mod merge;
mod model;
pub mod output;
pub mod report;
pub mod row;
pub mod run;
pub mod shard;
mod spec;
pub mod store;
pub mod template;
#[cfg(test)]
mod tests;

pub use load::Plan;
pub use merge::merge;
pub use model::{
    normalize, numeric, Column, Dim, Experiment, GridKey, Join, PlanError, Plot, Series, Setting,
    Table, Timeline,
};
pub use run::{run_plan, Options, Outcome};
pub use shard::Shard;

/// The seeds plan shipped in bench/plans/, embedded so `aerotp experiment seeds` runs with
/// no files around.
pub const SEEDS_PLAN: &str = include_str!("../../../../bench/plans/seeds.toml");
/// Where the embedded seeds plan lives in the repository (its relative paths start there).
pub const SEEDS_PLAN_PATH: &str = "bench/plans/seeds.toml";
