//! A checked plan's parts: experiments, their grids, series, plots, tables, columns and
//! joins, the error a plan gives, and how a grid value maps to a number.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::template::{Expr, Field, Template};
use crate::scenario::Scenario;

/// A plan that cannot be used: the file, the key, what is wrong and what is accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    pub file: PathBuf,
    pub key: String,
    pub problem: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "plan {}: {}", self.file.display(), self.problem)
        } else {
            write!(
                f,
                "plan {}: `{}` {}",
                self.file.display(),
                self.key,
                self.problem
            )
        }
    }
}

impl std::error::Error for PlanError {}

/// One setting: a `Scenario::set` key and its value.
pub type Setting = (String, toml::Value);

/// A swept key and its values (each with the number it stands for on the x axis).
#[derive(Debug, Clone)]
pub struct GridKey {
    pub key: String,
    pub values: Vec<(toml::Value, f64)>,
}

/// One loop of the grid, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Series,
    Grid(usize),
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub set: Vec<Setting>,
}

/// A PNG of one experiment.
#[derive(Debug, Clone)]
pub struct Plot {
    pub file: Template,
    pub title: Template,
    pub x_label: String,
    pub y_label: String,
    pub y: Expr,
    pub x_scale: Option<f64>,
    pub x_sci: bool,
    pub legend_low: bool,
    pub facet: Option<String>,
    /// The file name as written (for `images`).
    pub file_text: String,
}

/// A report table of one experiment.
#[derive(Debug, Clone)]
pub struct Table {
    pub caption: Option<Template>,
    pub cell: Template,
    pub x_header: String,
    pub x_format: Template,
    pub series: Option<Vec<String>>,
    pub facet: Option<String>,
    pub image: Option<Template>,
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub x: f64,
    pub run: usize,
    pub csv: String,
    pub plot: String,
    pub title: String,
    pub caption: String,
}

/// A checked experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: String,
    pub title: Option<String>,
    pub text: Option<String>,
    pub runs_factor: usize,
    /// The plan's base with this experiment's network and `set` applied.
    pub base: Scenario,
    pub grid: Vec<GridKey>,
    /// Index into `grid` of the x key.
    pub x: usize,
    pub order: Vec<Dim>,
    pub series: Vec<Series>,
    pub plots: Vec<Plot>,
    pub tables: Vec<Table>,
    pub images: Vec<String>,
    pub timeline: Option<Timeline>,
}

/// A CSV column: its header and the value it shows.
#[derive(Debug, Clone)]
pub struct Column {
    pub header: String,
    pub field: Field,
}

/// Rows of another tool joined into an experiment.
#[derive(Debug, Clone)]
pub struct Join {
    pub experiment: usize,
    pub file: PathBuf,
    pub x: String,
    pub optional: bool,
}

/// `a/b/../c` → `a/c` without touching the file system (paths in reports stay short).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    if out.is_empty() {
        PathBuf::from(".")
    } else {
        out.iter().collect()
    }
}

/// The number a grid value stands for on the x axis: numbers as they are, durations in
/// seconds, rates in bit/s, sizes in bytes, booleans 0/1.
pub fn numeric(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::Boolean(b) => Some(f64::from(u8::from(*b))),
        toml::Value::String(s) => aerotp_link::parse_duration(s)
            .map(|d| d.as_secs_f64())
            .or_else(|_| aerotp_link::parse_rate(s).map(|r| r as f64))
            .ok()
            .or_else(|| crate::scenario::parse_size(s).ok().map(|b| b as f64)),
        _ => None,
    }
}
