//! The plan file as written: TOML tables deserialised as they are, before any checking.
//! `plan::Plan::from_toml_str` turns this into a checked plan; docs/experiments.md is the
//! reference for every key.

use serde::Deserialize;

/// The top level of a plan file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    /// Heading of the report.
    pub title: Option<String>,
    /// Prose put under the heading.
    pub description: Option<String>,
    /// Base seed: run i of every point uses `run_seed(seed, i)` (common random numbers).
    pub seed: Option<u64>,
    /// Runs per point.
    pub runs: Option<u64>,
    /// A scenario file (the network), relative to the plan.
    pub network: Option<String>,
    /// Output folder, relative to the plan.
    pub out: Option<String>,
    /// Prefix of image links in the report (e.g. `seeds/` when the report is pasted into a
    /// page one folder up).
    pub image_prefix: Option<String>,
    /// Settings applied to every point (`Scenario::set` keys).
    #[serde(default)]
    pub base: toml::Table,
    /// CSV columns, for every experiment.
    pub columns: Option<Vec<String>>,
    #[serde(rename = "experiment", default)]
    pub experiments: Vec<ExperimentSpec>,
    #[serde(rename = "check", default)]
    pub checks: Vec<CheckSpec>,
    #[serde(rename = "join", default)]
    pub joins: Vec<JoinSpec>,
}

/// One `[[experiment]]`: a grid of points, each one scenario run `runs` times.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// Names the CSV (`NAME.csv`) and the rows; letters, digits, `-` and `_`.
    pub name: String,
    pub title: Option<String>,
    pub text: Option<String>,
    /// The scenario file of this experiment, replacing the plan's.
    pub network: Option<String>,
    /// Runs per point as a multiple of the plan's runs (the papers ran set-up 5x more).
    pub runs_factor: Option<u64>,
    /// The grid key on the x axis (CSV `x`, plots, table columns).
    pub x: String,
    /// Loop nesting of the grid keys and `series`, outermost first: the order of the rows.
    pub order: Option<Vec<String>>,
    /// Settings of every point of this experiment.
    #[serde(default)]
    pub set: toml::Table,
    /// key = [values]: every combination is a point.
    #[serde(default)]
    pub grid: toml::Table,
    #[serde(default)]
    pub series: Vec<SeriesSpec>,
    /// What `--quick` keeps.
    pub quick: Option<QuickSpec>,
    #[serde(default)]
    pub plot: Vec<PlotSpec>,
    #[serde(default)]
    pub table: Vec<TableSpec>,
    /// Images shown in the report section, in this order (default: every plot).
    pub images: Option<Vec<String>>,
    pub timeline: Option<TimelineSpec>,
}

/// A named set of settings: one line of a plot, one row of a table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesSpec {
    pub name: String,
    #[serde(default)]
    pub set: toml::Table,
}

/// `--quick`: shorter value lists for some grid keys, and a subset of the series.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickSpec {
    #[serde(default)]
    pub grid: toml::Table,
    pub series: Option<Vec<String>>,
}

/// A PNG: one metric against x, one line per series.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// File name (a template when `facet` is given: `goodput_ber{ber:e}.png`).
    pub file: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The metric expression on the y axis.
    pub y: String,
    /// x is multiplied by this on the plot (e.g. 1000 for seconds shown as ms).
    pub x_scale: Option<f64>,
    /// x tick labels in scientific notation.
    #[serde(default)]
    pub x_sci: bool,
    /// Legend position: `low` (lower left) or `high` (upper right, the default).
    pub legend: Option<String>,
    /// One plot per value of this metric (e.g. `ber`); file and title are templates of it.
    pub facet: Option<String>,
}

/// A report table: one line per series, one column per x.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// A line above the table.
    pub caption: Option<String>,
    /// Template of a cell, e.g. `{goodput_bps/1e6:.3}`.
    pub cell: String,
    /// Header of the series column's x (`series \ BER`).
    pub x_header: String,
    /// Template of a column header, reading `x`.
    pub x_format: String,
    /// Only these series.
    pub series: Option<Vec<String>>,
    /// One table per value of this metric; `caption` and `image` are templates of it.
    pub facet: Option<String>,
    /// An image above each (faceted) table.
    pub image: Option<String>,
}

/// One run per series kept with its delivery timeline (bytes delivered over time).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineSpec {
    /// The x of the points whose run is kept.
    pub x: f64,
    /// Which run (0-based).
    #[serde(default)]
    pub run: u64,
    pub csv: String,
    pub plot: String,
    pub title: String,
    /// Caption of the report table (delivered bytes, last delivery per series).
    pub caption: String,
}

/// Rows of another tool joined into an experiment's CSV, plots and tables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinSpec {
    pub experiment: String,
    /// The CSV, relative to the plan.
    pub file: String,
    /// Its format: `ns3-tcp` (bench/ns3/tcp_lossy.py).
    pub format: String,
    /// The column that is x: `ber` or `delay_s`.
    pub x: String,
    /// Skip silently when the file is absent.
    #[serde(default)]
    pub optional: bool,
}

/// A headline figure as data.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// `every`, `best`, `point` or `compare`.
    pub kind: String,
    /// What is claimed, as the report says it.
    pub text: String,
    pub experiment: String,
    /// The series the check reads (`compare`: the first is a, the second, if any, b).
    #[serde(default)]
    pub series: Vec<String>,
    /// Only rows at this x (`every`, `best`, `point`).
    pub x: Option<f64>,
    /// Only rows whose metrics equal these (e.g. `{ ber = 1e-4 }` in a faceted experiment).
    #[serde(default, rename = "where")]
    pub filter: toml::Table,
    /// Only rows where every run was complete (`best`).
    #[serde(default)]
    pub complete: bool,
    pub metric: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, or `within` (|v| <= value).
    pub op: String,
    /// Compared with a number...
    pub value: Option<f64>,
    /// ...or with another metric of the same row (`every`, `point`).
    pub than: Option<String>,
    /// `compare`: x of point a and of point b; the check is on b/a - 1.
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// How the value is shown (a template of the row), and what is needed.
    pub show: Option<String>,
    pub need: Option<String>,
}
