//! The points of a plan, enumerated by index (mixed radix over each experiment's loops), so
//! a plan of any size is planned without storing its points, and a point is built only
//! when it is checked or run.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::{Dim, Experiment, Plan, PlanError};
use crate::scenario::Scenario;

/// One point: an experiment, a series and one value of every grid key.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub experiment: usize,
    pub series: usize,
    /// Index into each grid key's values (the experiment's `grid` order).
    pub coords: Vec<usize>,
}

impl Experiment {
    /// Points of this experiment.
    pub fn len(&self) -> usize {
        self.series.len() * self.grid.iter().map(|g| g.values.len()).product::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `i` of this experiment, in row order (`order`, outermost loop first).
    pub fn point(&self, experiment: usize, mut i: usize) -> Point {
        let mut p = Point {
            experiment,
            series: 0,
            coords: vec![0; self.grid.len()],
        };
        // Innermost loop varies fastest: peel digits from the last dimension.
        for d in self.order.iter().rev() {
            let n = match d {
                Dim::Series => self.series.len(),
                Dim::Grid(g) => self.grid[*g].values.len(),
            };
            let digit = i % n;
            i /= n;
            match d {
                Dim::Series => p.series = digit,
                Dim::Grid(g) => p.coords[*g] = digit,
            }
        }
        p
    }

    /// x of a point.
    pub fn x_of(&self, p: &Point) -> f64 {
        self.grid[self.x].values[p.coords[self.x]].1
    }

    /// "series `FEC 16 words`, ber = 1e-6": a point as errors name it.
    pub fn describe(&self, p: &Point) -> String {
        let mut s = format!("series {:?}", self.series[p.series].name);
        for (g, &c) in self.grid.iter().zip(&p.coords) {
            s += &format!(", {} = {}", g.key, g.values[c].0);
        }
        s
    }
}

impl Plan {
    /// Points of the whole plan.
    pub fn len(&self) -> usize {
        self.experiments.iter().map(Experiment::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `i` of the plan (experiments in order, each in row order).
    pub fn point(&self, mut i: usize) -> Point {
        for (e, ex) in self.experiments.iter().enumerate() {
            if i < ex.len() {
                return ex.point(e, i);
            }
            i -= ex.len();
        }
        panic!("point index out of range")
    }

    /// Runs of one point of experiment `e` with `runs` runs per point.
    pub fn runs_of(&self, e: usize, runs: usize) -> usize {
        runs * self.experiments[e].runs_factor
    }

    /// The scenario of a point: the experiment's base, then the series' settings, then the
    /// grid values; checked.
    pub fn scenario(&self, p: &Point) -> Result<Scenario, PlanError> {
        let ex = &self.experiments[p.experiment];
        let mut s = ex.base.clone();
        let fail = |problem: String| PlanError {
            file: self.origin.clone(),
            key: format!("experiment[{}]", p.experiment),
            problem: format!("point ({}): {problem}", ex.describe(p)),
        };
        for (k, v) in &ex.series[p.series].set {
            s.set(k, v).map_err(|e| fail(format!("{k} = {v}: {e}")))?;
        }
        for (g, &c) in ex.grid.iter().zip(&p.coords) {
            let v = &g.values[c].0;
            s.set(&g.key, v)
                .map_err(|e| fail(format!("{} = {v}: {e}", g.key)))?;
        }
        s.validate().map_err(|e| fail(e.to_string()))?;
        Ok(s)
    }
}

/// Which build of the engine runs: the size and modification time of this executable. A
/// rebuilt binary (a changed engine) does not reuse results of the old one.
pub(crate) fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        std::env::current_exe()
            .and_then(std::fs::metadata)
            .map(|m| {
                let t = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{}-{t}", m.len())
            })
            .unwrap_or_else(|_| "unknown".into())
    })
}

/// The key of a point's result: a hash of everything that decides it (the whole scenario,
/// the seed, the number of runs and the build of the engine), so a changed plan or engine
/// never reuses a stale result.
pub fn point_key(s: &Scenario, seed: u64, runs: usize) -> String {
    key_of(&point_desc(s, seed, runs), build_id())
}

/// Everything but the engine's build that decides a point's result.
pub(crate) fn point_desc(s: &Scenario, seed: u64, runs: usize) -> String {
    format!("{s:?}|seed={seed}|runs={runs}")
}

/// The key of a point described by `desc` (`point_desc`) as run by the engine `build`.
pub(crate) fn key_of(desc: &str, build: &str) -> String {
    let mut h = Sha256::new();
    h.update(format!("{desc}|build={build}").as_bytes());
    hex(&h.finalize()[..16])
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Plan;

    const PLAN: &str = r#"
runs = 2
[[experiment]]
name = "a"
x = "ber"
order = ["ber", "series", "loss"]
[experiment.grid]
ber = [0.0, 1e-5, 1e-4]
loss = [0.0, 0.1]
[[experiment.series]]
name = "r"
set = { mode = "reliable" }
[[experiment.series]]
name = "h"
set = { mode = "hybrid-nack-mack" }
"#;

    #[test]
    fn points_follow_the_declared_loop_order() {
        let p = Plan::from_toml_str(PLAN, Path::new("t.toml"), Path::new(""), false).unwrap();
        assert_eq!(p.len(), 12);
        let ex = &p.experiments[0];
        let ber = ex.grid.iter().position(|g| g.key == "ber").unwrap();
        let loss = ex.grid.iter().position(|g| g.key == "loss").unwrap();
        let pts: Vec<_> = (0..12).map(|i| p.point(i)).collect();
        // loss varies fastest, then series, then ber.
        assert_eq!((pts[0].coords[loss], pts[1].coords[loss]), (0, 1));
        assert_eq!((pts[1].series, pts[2].series), (0, 1));
        assert_eq!((pts[3].coords[ber], pts[4].coords[ber]), (0, 1));
        assert_eq!(ex.x_of(&pts[11]), 1e-4);
        // Every point is distinct and builds.
        for (i, a) in pts.iter().enumerate() {
            assert!(pts[i + 1..].iter().all(|b| b != a));
            p.scenario(a).unwrap();
        }
    }

    #[test]
    fn keys_change_with_the_scenario_seed_and_runs() {
        let p = Plan::from_toml_str(PLAN, Path::new("t.toml"), Path::new(""), false).unwrap();
        let s0 = p.scenario(&p.point(0)).unwrap();
        let s1 = p.scenario(&p.point(1)).unwrap();
        let k = super::point_key(&s0, 1, 2);
        assert_eq!(k.len(), 32);
        assert_eq!(k, super::point_key(&s0.clone(), 1, 2));
        assert_ne!(k, super::point_key(&s1, 1, 2));
        assert_ne!(k, super::point_key(&s0, 2, 2));
        assert_ne!(k, super::point_key(&s0, 1, 3));
    }

    #[test]
    fn a_ten_thousand_point_plan_is_planned_at_once() {
        let vals: Vec<String> = (0..100).map(|i| format!("{}", i as f64 * 1e-6)).collect();
        let text = format!(
            "[[experiment]]\nname = \"big\"\nx = \"ber\"\n[experiment.grid]\nber = [{}]\nmack = [{}]\n",
            vals.join(", "),
            (1..=100).map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
        );
        let t = std::time::Instant::now();
        let p = Plan::from_toml_str(&text, Path::new("big.toml"), Path::new(""), false).unwrap();
        assert_eq!(p.len(), 10_000);
        let last = p.point(9_999);
        assert_eq!(last.coords.iter().sum::<usize>(), 198);
        for i in 0..p.len() {
            p.scenario(&p.point(i)).unwrap();
        }
        assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
    }
}
