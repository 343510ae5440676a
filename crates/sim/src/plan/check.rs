//! Headline figures as data: each check reads rows picked by experiment, series, x and
//! metric values (never by code keyed on labels) and says whether the figure is met.

use super::row::Row;
use super::spec::CheckSpec;
use super::template::{Expr, Lookup, Template};
use super::Experiment;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Every picked row meets the condition.
    Every,
    /// The picked row with the largest metric meets it.
    Best,
    /// The one picked row meets it.
    Point,
    /// b/a - 1 of two points meets it.
    Compare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// |v| <= value.
    Within,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "within" => Op::Within,
            _ => return None,
        })
    }

    pub fn holds(self, v: f64, w: f64) -> bool {
        match self {
            Op::Eq => v == w,
            Op::Ne => v != w,
            Op::Lt => v < w,
            Op::Le => v <= w,
            Op::Gt => v > w,
            Op::Ge => v >= w,
            Op::Within => v.abs() <= w,
        }
    }
}

/// A checked `[[check]]`.
#[derive(Debug, Clone)]
pub struct Check {
    pub kind: Kind,
    pub text: String,
    pub experiment: String,
    pub series: Vec<String>,
    pub x: Option<f64>,
    pub filter: Vec<(String, f64)>,
    pub complete: bool,
    pub metric: Expr,
    pub op: Op,
    pub value: Option<f64>,
    pub than: Option<Expr>,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub show: Option<Template>,
    pub need: Option<String>,
}

type SpecError = (String, String);

impl Check {
    /// Checks a spec against the plan's experiments; the error is (key, problem).
    pub fn from_spec(c: &CheckSpec, experiments: &[Experiment]) -> Result<Check, SpecError> {
        let kind = parse_kind(&c.kind)?;
        check_series(c, experiments)?;
        let op = Op::parse(&c.op).ok_or_else(|| {
            err(
                "op",
                format!(
                    "{:?} is not known: give ==, !=, <, <=, >, >= or within",
                    c.op
                ),
            )
        })?;
        let metric = Expr::parse(&c.metric).map_err(|m| err("metric", m))?;
        let than = c
            .than
            .as_deref()
            .map(Expr::parse)
            .transpose()
            .map_err(|m| err("than", m))?;
        check_operands(c, kind, than.is_some())?;
        let mut filter = Vec::new();
        for (k, v) in &c.filter {
            let f = super::numeric(v)
                .ok_or_else(|| err(&format!("where.{k}"), format!("= {v}: give a number")))?;
            filter.push((k.clone(), f));
        }
        Ok(Check {
            kind,
            text: c.text.clone(),
            experiment: c.experiment.clone(),
            series: c.series.clone(),
            x: c.x,
            filter,
            complete: c.complete,
            metric,
            op,
            value: c.value,
            than,
            a: c.a,
            b: c.b,
            show: c
                .show
                .as_deref()
                .map(Template::parse)
                .transpose()
                .map_err(|m| err("show", m))?,
            need: c.need.clone(),
        })
    }

    fn picks<'a>(&self, rows: &'a [Row], series: &[String], x: Option<f64>) -> Vec<&'a Row> {
        rows.iter()
            .filter(|r| r.is_sim() && r.experiment == self.experiment)
            .filter(|r| series.is_empty() || series.contains(&r.series))
            .filter(|r| x.is_none_or(|x| r.x == x))
            .filter(|r| self.filter.iter().all(|(k, v)| r.number(k) == Some(*v)))
            .filter(|r| !self.complete || r.complete())
            .collect()
    }

    fn show(&self, r: &Row) -> String {
        match &self.show {
            Some(t) => t.render(r),
            None => self
                .metric
                .eval(r)
                .map_or("-".into(), |v| format!("{} = {v}", self.metric)),
        }
    }

    fn need(&self) -> String {
        self.need
            .clone()
            .unwrap_or_else(|| match (&self.than, self.value) {
                (Some(t), _) => format!("need {} {t}", op_text(self.op)),
                (None, Some(v)) => format!("need {} {v}", op_text(self.op)),
                _ => String::new(),
            })
    }

    fn holds(&self, r: &Row) -> bool {
        let v = self.metric.eval(r);
        let w = match &self.than {
            Some(t) => t.eval(r),
            None => self.value,
        };
        matches!((v, w), (Some(v), Some(w)) if self.op.holds(v, w))
    }

    /// The report line and whether the figure is met. `runs` = runs per point of the
    /// experiment (for the wording).
    pub fn evaluate(&self, rows: &[Row], runs: usize) -> (String, bool) {
        match self.kind {
            Kind::Every => self.evaluate_every(rows, runs),
            Kind::Best => self.evaluate_best(rows),
            Kind::Point => match self.picks(rows, &self.series, self.x).as_slice() {
                [r] => (
                    format!("{}: {} ({})", self.text, self.show(r), self.need()),
                    self.holds(r),
                ),
                rs => (
                    format!(
                        "{}: NO ({} rows match, need exactly 1)",
                        self.text,
                        rs.len()
                    ),
                    false,
                ),
            },
            Kind::Compare => self.evaluate_compare(rows),
        }
    }

    /// An `every` check: met when there are picked rows and each holds.
    fn evaluate_every(&self, rows: &[Row], runs: usize) -> (String, bool) {
        let picked = self.picks(rows, &self.series, self.x);
        let bad: Vec<String> = picked
            .iter()
            .filter(|r| !self.holds(r))
            .map(|r| self.show(r))
            .collect();
        if picked.is_empty() {
            (format!("{}: NO (no rows)", self.text), false)
        } else if bad.is_empty() {
            (
                format!("{}: yes ({} points x {runs} runs)", self.text, picked.len()),
                true,
            )
        } else {
            (format!("{}: NO ({})", self.text, bad.join(", ")), false)
        }
    }

    /// A `best` check: the picked row with the largest metric holds.
    fn evaluate_best(&self, rows: &[Row]) -> (String, bool) {
        let best = self
            .picks(rows, &self.series, self.x)
            .into_iter()
            .filter(|r| self.metric.eval(*r).is_some())
            .max_by(|a, b| {
                let m = |r: &Row| self.metric.eval(r).unwrap_or(f64::NEG_INFINITY);
                m(a).total_cmp(&m(b))
            });
        match best {
            Some(b) => (
                format!(
                    "{}: {} at {} ({})",
                    self.text,
                    b.series,
                    self.show(b),
                    self.need()
                ),
                self.holds(b),
            ),
            None => (format!("{}: NO (no row qualifies)", self.text), false),
        }
    }

    /// A `compare` check: b/a - 1 of the metric at the points a and b holds.
    fn evaluate_compare(&self, rows: &[Row]) -> (String, bool) {
        let sa = &self.series[..1];
        let sb = &self.series[self.series.len() - 1..];
        let a = self.picks(rows, sa, self.a);
        let b = self.picks(rows, sb, self.b);
        let (Some(a), Some(b)) = (a.first(), b.first()) else {
            return (format!("{}: NO (a point is missing)", self.text), false);
        };
        let (Some(va), Some(vb)) = (self.metric.eval(*a), self.metric.eval(*b)) else {
            return (
                format!("{}: NO ({} is missing)", self.text, self.metric),
                false,
            );
        };
        let rel = vb / va - 1.0;
        (
            format!(
                "{}: {} vs {} ({:+.1} %, {})",
                self.text,
                self.show(b),
                self.show(a),
                rel * 100.0,
                self.need()
            ),
            self.op.holds(rel, self.value.unwrap_or(f64::NAN)),
        )
    }
}

fn err(k: &str, m: String) -> SpecError {
    (k.to_owned(), m)
}

fn parse_kind(kind: &str) -> Result<Kind, SpecError> {
    Ok(match kind {
        "every" => Kind::Every,
        "best" => Kind::Best,
        "point" => Kind::Point,
        "compare" => Kind::Compare,
        o => {
            return Err(err(
                "kind",
                format!("{o:?} is not known: give every, best, point or compare"),
            ))
        }
    })
}

/// The check's experiment is one of the plan's, and its series are that experiment's.
fn check_series(c: &CheckSpec, experiments: &[Experiment]) -> Result<(), SpecError> {
    let ex = experiments
        .iter()
        .find(|e| e.name == c.experiment)
        .ok_or_else(|| {
            err(
                "experiment",
                format!("{:?} is not an experiment of this plan", c.experiment),
            )
        })?;
    for s in &c.series {
        if !ex.series.iter().any(|e| &e.name == s) {
            return Err(err(
                "series",
                format!(
                    "names {s:?}, which is not a series of experiment {:?}",
                    ex.name
                ),
            ));
        }
    }
    Ok(())
}

/// The check of kind `kind` has what it compares with (`value` or `than`, as the kind
/// needs) and the points and series it reads.
fn check_operands(c: &CheckSpec, kind: Kind, has_than: bool) -> Result<(), SpecError> {
    match (kind, c.value.is_some(), has_than) {
        (Kind::Every | Kind::Point, true, true) | (Kind::Every | Kind::Point, false, false) => {
            return Err(err(
                "value",
                "give either `value` (a number) or `than` (a metric)".into(),
            ))
        }
        (Kind::Best | Kind::Compare, false, _) => {
            return Err(err(
                "value",
                format!("is missing: a {} check compares with a number", c.kind),
            ))
        }
        (Kind::Best | Kind::Compare, _, true) => {
            return Err(err(
                "than",
                format!("is not used by a {} check: give `value`", c.kind),
            ))
        }
        _ => {}
    }
    if kind == Kind::Compare {
        if c.a.is_none() || c.b.is_none() {
            return Err(err(
                "a",
                "and `b` (the x of the two points) are needed by a compare check".into(),
            ));
        }
        if c.series.is_empty() || c.series.len() > 2 {
            return Err(err(
                "series",
                "give one series (a and b in it) or two (a in the first, b in the second)".into(),
            ));
        }
    }
    if kind == Kind::Point && c.series.len() != 1 {
        return Err(err(
            "series",
            "a point check reads one series: give exactly one".into(),
        ));
    }
    Ok(())
}

fn op_text(op: Op) -> &'static str {
    match op {
        Op::Eq => "==",
        Op::Ne => "!=",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Within => "within ±",
    }
}
