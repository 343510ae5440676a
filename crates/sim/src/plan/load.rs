//! How a plan file becomes a checked [`Plan`]: every key read, checked and named in errors.

use std::path::{Path, PathBuf};

use super::check;
use super::model::{
    normalize, numeric, Column, Dim, Experiment, GridKey, Join, PlanError, Plot, Series, Setting,
    Table, Timeline,
};
use super::spec::{CheckSpec, ExperimentSpec, JoinSpec, PlanSpec, PlotSpec, TableSpec};
use super::template::{Expr, Field, Template};
use super::{SEEDS_PLAN, SEEDS_PLAN_PATH};
use crate::scenario::Scenario;

/// A checked plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file (as named in errors and the report).
    pub origin: PathBuf,
    /// Heading of the report (none: the report starts with how it was made).
    pub title: Option<String>,
    pub description: Option<String>,
    pub seed: u64,
    pub runs: usize,
    pub out: Option<PathBuf>,
    pub image_prefix: String,
    pub experiments: Vec<Experiment>,
    /// Columns of each experiment's CSV (the plan's, or the defaults).
    pub columns: Vec<Vec<Column>>,
    pub checks: Vec<check::Check>,
    pub joins: Vec<Join>,
}

/// Settings of a table in the order they are applied: plain keys before dotted or indexed
/// ones (so `jitter` then `forward.jitter`: the more specific one wins), then by name.
fn settings(t: &toml::Table) -> Vec<Setting> {
    let mut v: Vec<Setting> = t.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let depth = |k: &str| k.matches(['.', '[']).count();
    v.sort_by(|a, b| depth(&a.0).cmp(&depth(&b.0)).then(a.0.cmp(&b.0)));
    v
}

const COLUMN_DEFAULTS: &[&str] = &[
    "runs",
    "complete_runs",
    "delivered_bytes:.1",
    "goodput_bps:.1",
    "goodput_ci95=goodput.ci95:.1",
    "ceiling_bps:.1",
    "ceiling_share:.4",
    "mean_delay_s",
    "overhead_bytes:.1",
    "setup_delay_s",
    "retransmissions:.2",
    "spurious_retransmissions:.2",
    "wire_bytes_forward:.1",
    "wire_bytes_reverse:.1",
    "fec_words:.2",
];

fn column(s: &str) -> Result<Column, String> {
    let (header, field) = match s.split_once('=') {
        Some((h, f)) => (h.trim().to_owned(), f),
        None => (s.split(':').next().unwrap_or(s).trim().to_owned(), s),
    };
    Ok(Column {
        header,
        field: Field::parse(field)?,
    })
}

struct Ctx<'a> {
    file: &'a Path,
    base_dir: &'a Path,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, problem: impl Into<String>) -> PlanError {
        PlanError {
            file: self.file.to_path_buf(),
            key: key.into(),
            problem: problem.into(),
        }
    }

    fn apply(&self, s: &mut Scenario, set: &[Setting], at: &str) -> Result<(), PlanError> {
        for (k, v) in set {
            s.set(k, v)
                .map_err(|e| self.err(format!("{at}.{k}"), format!("= {v}: {e}")))?;
        }
        Ok(())
    }

    fn network(&self, s: &mut Scenario, file: &str, at: &str) -> Result<(), PlanError> {
        let path = normalize(&self.base_dir.join(file));
        let net = aerotp_link::Network::load(&path)
            .map_err(|e| self.err(at, format!("= {file:?}: {e}")))?;
        s.network = net;
        Ok(())
    }

    fn template(&self, s: &str, at: &str) -> Result<Template, PlanError> {
        Template::parse(s).map_err(|e| self.err(at, e))
    }
}

impl Plan {
    /// Reads and checks a plan file; its relative paths are relative to its folder.
    pub fn load(path: &Path, quick: bool) -> Result<Plan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            file: path.to_path_buf(),
            key: String::new(),
            problem: format!("cannot be read: {e}"),
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        Plan::from_toml_str(&text, path, dir, quick)
    }

    /// Parses and checks a plan. `origin` names it in errors and reports, `base_dir` is
    /// where its relative paths start; `quick` applies its `quick` tables.
    pub fn from_toml_str(
        text: &str,
        origin: &Path,
        base_dir: &Path,
        quick: bool,
    ) -> Result<Plan, PlanError> {
        let cx = Ctx {
            file: origin,
            base_dir,
        };
        let spec = parse_spec(&cx, text)?;
        let runs = spec.runs.unwrap_or(20);
        if runs == 0 || runs > 1_000_000 {
            return Err(cx.err("runs", format!("is {runs}; give 1 to 1000000")));
        }
        if spec.experiments.is_empty() {
            return Err(cx.err("experiment", "is missing: give at least one [[experiment]]"));
        }
        let experiments = checked_experiments(&cx, &spec, quick)?;
        let columns = experiments
            .iter()
            .map(|e| experiment_columns(&cx, spec.columns.as_deref(), e))
            .collect::<Result<Vec<_>, _>>()?;
        let checks = spec
            .checks
            .iter()
            .enumerate()
            .map(|(i, c)| check_spec(&cx, &experiments, c, i))
            .collect::<Result<Vec<_>, _>>()?;
        let joins = spec
            .joins
            .iter()
            .enumerate()
            .map(|(i, j)| join(&cx, &experiments, j, i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            origin: origin.to_path_buf(),
            title: spec.title,
            description: spec.description,
            seed: spec.seed.unwrap_or(1),
            runs: runs as usize,
            out: spec.out.map(|o| normalize(&base_dir.join(o))),
            image_prefix: spec.image_prefix.unwrap_or_default(),
            experiments,
            columns,
            checks,
            joins,
        })
    }

    /// The embedded seeds plan (bench/plans/seeds.toml).
    pub fn seeds(quick: bool) -> Result<Plan, PlanError> {
        let origin = Path::new(SEEDS_PLAN_PATH);
        Plan::from_toml_str(
            SEEDS_PLAN,
            origin,
            origin.parent().unwrap_or(Path::new("")),
            quick,
        )
    }
}

/// The plan file's TOML as a [`PlanSpec`]; a syntax error names its line.
fn parse_spec(cx: &Ctx, text: &str) -> Result<PlanSpec, PlanError> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        let msg = e.message().to_string();
        cx.err(
            "",
            match line {
                Some(l) => format!("line {l}: {msg}"),
                None => msg,
            },
        )
    })
}

/// The plan's experiments, each on the plan's base scenario (its `network` and `base`
/// settings); two with one name are refused.
fn checked_experiments(
    cx: &Ctx,
    spec: &PlanSpec,
    quick: bool,
) -> Result<Vec<Experiment>, PlanError> {
    let mut base = Scenario::default();
    if let Some(n) = &spec.network {
        cx.network(&mut base, n, "network")?;
    }
    cx.apply(&mut base, &settings(&spec.base), "base")?;
    let mut experiments = Vec::new();
    for (i, e) in spec.experiments.iter().enumerate() {
        let ex = experiment(cx, &base, e, i, quick)?;
        if experiments.iter().any(|o: &Experiment| o.name == ex.name) {
            return Err(cx.err(
                format!("experiment[{i}].name"),
                format!(
                    "{:?} is used twice; every experiment needs its own name",
                    ex.name
                ),
            ));
        }
        experiments.push(ex);
    }
    Ok(experiments)
}

/// The CSV columns of experiment `e`: the plan's `columns`, or the defaults (its grid keys
/// among them).
fn experiment_columns(
    cx: &Ctx,
    plan_columns: Option<&[String]>,
    e: &Experiment,
) -> Result<Vec<Column>, PlanError> {
    let list: Vec<String> = match plan_columns {
        Some(c) => c.to_vec(),
        None => ["experiment", "series", "source", "x"]
            .iter()
            .map(|s| s.to_string())
            .chain(e.grid.iter().map(|g| format!("set.{}", g.key)))
            .chain(COLUMN_DEFAULTS.iter().map(|s| s.to_string()))
            .collect(),
    };
    let mut cols = Vec::new();
    for (j, c) in list.iter().enumerate() {
        cols.push(column(c).map_err(|m| cx.err(format!("columns[{j}]"), m))?);
    }
    Ok(cols)
}

/// The `i`th `[[join]]`: an experiment of the plan, a known format and x column.
fn join(cx: &Ctx, experiments: &[Experiment], j: &JoinSpec, i: usize) -> Result<Join, PlanError> {
    let at = |k: &str| format!("join[{i}].{k}");
    let experiment = experiments
        .iter()
        .position(|e| e.name == j.experiment)
        .ok_or_else(|| {
            cx.err(
                at("experiment"),
                format!("{:?} is not an experiment of this plan", j.experiment),
            )
        })?;
    if j.format != "ns3-tcp" {
        return Err(cx.err(
            at("format"),
            format!("{:?} is not known: give ns3-tcp", j.format),
        ));
    }
    if !["ber", "delay_s"].contains(&j.x.as_str()) {
        return Err(cx.err(
            at("x"),
            format!("{:?} is not a column: give ber or delay_s", j.x),
        ));
    }
    Ok(Join {
        experiment,
        file: normalize(&cx.base_dir.join(&j.file)),
        x: j.x.clone(),
        optional: j.optional,
    })
}

fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn experiment(
    cx: &Ctx,
    plan_base: &Scenario,
    e: &ExperimentSpec,
    i: usize,
    quick: bool,
) -> Result<Experiment, PlanError> {
    let at = |k: &str| format!("experiment[{i}].{k}");
    if !name_ok(&e.name) {
        return Err(cx.err(
            at("name"),
            format!(
                "{:?} is not a name: give 1-64 letters, digits, - or _ (it names the CSV)",
                e.name
            ),
        ));
    }
    let runs_factor = e.runs_factor.unwrap_or(1);
    if !(1..=1000).contains(&runs_factor) {
        return Err(cx.err(
            at("runs_factor"),
            format!("is {runs_factor}; give 1 to 1000"),
        ));
    }
    let mut base = plan_base.clone();
    if let Some(n) = &e.network {
        cx.network(&mut base, n, &at("network"))?;
    }
    cx.apply(&mut base, &settings(&e.set), &at("set"))?;
    let mut series = experiment_series(cx, &base, e, i)?;
    let grid_table = apply_quick(cx, e, i, quick, &mut series)?;
    let grid = grid_table
        .iter()
        .map(|(k, v)| grid_key(cx, &base, i, k, v))
        .collect::<Result<Vec<_>, _>>()?;
    let x = x_dimension(cx, &grid, &e.x, i)?;
    let order = loop_order(cx, &grid, e.order.as_deref(), i)?;
    let plots = (e.plot.iter().enumerate())
        .map(|(j, p)| plot(cx, p, i, j))
        .collect::<Result<Vec<_>, _>>()?;
    let tables = (e.table.iter().enumerate())
        .map(|(j, t)| table(cx, e, t, i, j))
        .collect::<Result<Vec<_>, _>>()?;
    let timeline = e.timeline.as_ref().map(|t| Timeline {
        x: t.x,
        run: t.run as usize,
        csv: t.csv.clone(),
        plot: t.plot.clone(),
        title: t.title.clone(),
        caption: t.caption.clone(),
    });
    let images = e.images.clone().unwrap_or_else(|| {
        plots
            .iter()
            .filter(|p| p.facet.is_none())
            .map(|p| p.file_text.clone())
            .chain(timeline.iter().map(|t| t.plot.clone()))
            .collect()
    });
    Ok(Experiment {
        name: e.name.clone(),
        title: e.title.clone(),
        text: e.text.clone(),
        runs_factor: runs_factor as usize,
        base,
        grid,
        x,
        order,
        series,
        plots,
        tables,
        images,
        timeline,
    })
}

/// The series of experiment `i`: the experiment's name alone when none is given.
fn experiment_series(
    cx: &Ctx,
    base: &Scenario,
    e: &ExperimentSpec,
    i: usize,
) -> Result<Vec<Series>, PlanError> {
    let mut series = Vec::new();
    for (j, s) in e.series.iter().enumerate() {
        if series.iter().any(|o: &Series| o.name == s.name) {
            return Err(cx.err(
                format!("experiment[{i}].series[{j}].name"),
                format!("{:?} is used twice in this experiment", s.name),
            ));
        }
        let set = settings(&s.set);
        // Each series' settings are tried once here so a bad one is named by its series.
        cx.apply(
            &mut base.clone(),
            &set,
            &format!("experiment[{i}].series[{j}].set"),
        )?;
        series.push(Series {
            name: s.name.clone(),
            set,
        });
    }
    if series.is_empty() {
        series.push(Series {
            name: e.name.clone(),
            set: Vec::new(),
        });
    }
    Ok(series)
}

/// The grid table of experiment `i`, with its `quick` table applied when `quick` (and the
/// series it keeps). The quick tables are checked whether or not --quick is given, so they
/// cannot rot.
fn apply_quick(
    cx: &Ctx,
    e: &ExperimentSpec,
    i: usize,
    quick: bool,
    series: &mut Vec<Series>,
) -> Result<toml::Table, PlanError> {
    let mut grid_table = e.grid.clone();
    let Some(q) = &e.quick else {
        return Ok(grid_table);
    };
    for (k, v) in &q.grid {
        if !e.grid.contains_key(k) {
            return Err(cx.err(
                format!("experiment[{i}].quick.grid.{k}"),
                format!(
                    "is not a key of experiment[{i}].grid (give one of: {})",
                    e.grid.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if quick {
            grid_table.insert(k.clone(), v.clone());
        }
    }
    if let Some(keep) = &q.series {
        if let Some(n) = keep.iter().find(|n| !series.iter().any(|s| &s.name == *n)) {
            return Err(cx.err(
                format!("experiment[{i}].quick.series"),
                format!("names {n:?}, which is not a series of this experiment"),
            ));
        }
        if quick {
            series.retain(|s| keep.contains(&s.name));
        }
    }
    Ok(grid_table)
}

/// The grid key `k` of experiment `i` and its values `v`, each tried on `base` and given
/// the number it stands for.
fn grid_key(
    cx: &Ctx,
    base: &Scenario,
    i: usize,
    k: &str,
    v: &toml::Value,
) -> Result<GridKey, PlanError> {
    let key = format!("experiment[{i}].grid.{k}");
    let toml::Value::Array(vals) = v else {
        return Err(cx.err(
            key,
            format!("= {v}: give a list of values, e.g. {k} = [0, 1e-5, 1e-4]"),
        ));
    };
    if vals.is_empty() {
        return Err(cx.err(key, "is an empty list: give at least one value"));
    }
    let mut values = Vec::new();
    for (n, v) in vals.iter().enumerate() {
        // `{ x = 60, value = [...] }`: a value with no number of its own (a list of
        // outages, a burst table) and the x it stands for.
        let (v, x) = match v.as_table() {
            Some(t) if t.len() == 2 && t.contains_key("x") && t.contains_key("value") => {
                (&t["value"], numeric(&t["x"]))
            }
            _ => (v, numeric(v)),
        };
        let x = x.ok_or_else(|| cx.err(format!("{key}[{n}]"), format!("= {v}: a grid value must be a number, a boolean, a duration, rate or size (10ms, 5mbit, 1MB), or {{ x = NUMBER, value = ANY }}")))?;
        // Each value is tried once here so a bad one is named by its place in the list.
        cx.apply(
            &mut base.clone(),
            &[(k.to_owned(), v.clone())],
            &format!("experiment[{i}].grid"),
        )
        .map_err(|mut e| {
            e.key = format!("{key}[{n}]");
            e
        })?;
        values.push((v.clone(), x));
    }
    Ok(GridKey {
        key: k.to_owned(),
        values,
    })
}

/// Which grid key of experiment `i` is its x axis.
fn x_dimension(cx: &Ctx, grid: &[GridKey], x: &str, i: usize) -> Result<usize, PlanError> {
    grid.iter().position(|g| g.key == x).ok_or_else(|| {
        cx.err(
            format!("experiment[{i}].x"),
            format!(
                "{:?} is not a key of experiment[{i}].grid (give one of: {})",
                x,
                grid.iter()
                    .map(|g| g.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })
}

/// The loops of experiment `i`, outermost first: its `order`, or the series then the grid
/// keys.
fn loop_order(
    cx: &Ctx,
    grid: &[GridKey],
    order: Option<&[String]>,
    i: usize,
) -> Result<Vec<Dim>, PlanError> {
    let at = format!("experiment[{i}].order");
    let Some(o) = order else {
        return Ok(std::iter::once(Dim::Series)
            .chain((0..grid.len()).map(Dim::Grid))
            .collect());
    };
    let mut dims = Vec::new();
    for name in o {
        let d = if name == "series" {
            Dim::Series
        } else {
            Dim::Grid(grid.iter().position(|g| &g.key == name).ok_or_else(|| {
                cx.err(
                    &at,
                    format!("names {name:?}, which is neither `series` nor a grid key"),
                )
            })?)
        };
        if dims.contains(&d) {
            return Err(cx.err(&at, format!("names {name:?} twice")));
        }
        dims.push(d);
    }
    if dims.len() != grid.len() + 1 {
        return Err(cx.err(at, "must name `series` and every grid key exactly once"));
    }
    Ok(dims)
}

/// Plot `j` of experiment `i`.
fn plot(cx: &Ctx, p: &PlotSpec, i: usize, j: usize) -> Result<Plot, PlanError> {
    let pk = |k: &str| format!("experiment[{i}].plot[{j}].{k}");
    let legend_low = match p.legend.as_deref() {
        None | Some("high") => false,
        Some("low") => true,
        Some(o) => {
            return Err(cx.err(
                pk("legend"),
                format!("{o:?} is not known: give low or high"),
            ))
        }
    };
    if let Some(s) = p.x_scale {
        if !s.is_finite() || s == 0.0 {
            return Err(cx.err(
                pk("x_scale"),
                format!("is {s}; give a finite non-zero number"),
            ));
        }
    }
    let plot = Plot {
        file: cx.template(&p.file, &pk("file"))?,
        title: cx.template(&p.title, &pk("title"))?,
        x_label: p.x_label.clone(),
        y_label: p.y_label.clone(),
        y: Expr::parse(&p.y).map_err(|m| cx.err(pk("y"), m))?,
        x_scale: p.x_scale,
        x_sci: p.x_sci,
        legend_low,
        facet: p.facet.clone(),
        file_text: p.file.clone(),
    };
    if !p.file.ends_with(".png") {
        return Err(cx.err(pk("file"), format!("{:?} must end in .png", p.file)));
    }
    Ok(plot)
}

/// Table `j` of experiment `i` (`e`): the series it names are the experiment's.
fn table(
    cx: &Ctx,
    e: &ExperimentSpec,
    t: &TableSpec,
    i: usize,
    j: usize,
) -> Result<Table, PlanError> {
    let tk = |k: &str| format!("experiment[{i}].table[{j}].{k}");
    if let Some(names) = &t.series {
        if let Some(n) = names
            .iter()
            .find(|n| !e.series.iter().any(|s| &s.name == *n))
        {
            return Err(cx.err(
                tk("series"),
                format!("names {n:?}, which is not a series of this experiment"),
            ));
        }
    }
    Ok(Table {
        caption: t
            .caption
            .as_deref()
            .map(|c| cx.template(c, &tk("caption")))
            .transpose()?,
        cell: cx.template(&t.cell, &tk("cell"))?,
        x_header: t.x_header.clone(),
        x_format: cx.template(&t.x_format, &tk("x_format"))?,
        series: t.series.clone(),
        facet: t.facet.clone(),
        image: t
            .image
            .as_deref()
            .map(|c| cx.template(c, &tk("image")))
            .transpose()?,
    })
}

fn check_spec(
    cx: &Ctx,
    experiments: &[Experiment],
    c: &CheckSpec,
    i: usize,
) -> Result<check::Check, PlanError> {
    check::Check::from_spec(c, experiments).map_err(|(k, m)| cx.err(format!("check[{i}].{k}"), m))
}
