//! Sweeps past one machine: `aerotp experiment run PLAN --shard I/N` runs every N-th point
//! of the plan (points I-1, I-1+N, ... in plan order) into its own output folder, with a
//! `shard.json` (the [`Manifest`]) that says which plan, which shard and which engine;
//! `merge` joins the shards.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::grid::{hex, key_of, point_desc};
use super::{Plan, PlanError};

/// The manifest's file name in a shard's output folder.
pub const FILE: &str = "shard.json";

/// Shard `index` (from 1) of `count`: the points whose index in the plan is `index - 1`
/// modulo `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether point `i` (from 0, in plan order) is this shard's.
    pub fn has(&self, i: usize) -> bool {
        i % self.count == self.index - 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "`{s}` is not I/N: give this shard's number and the number of shards, \
                 e.g. 2/8 for the second of 8"
            )
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i: usize = i.trim().parse().map_err(|_| bad())?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(format!("`{s}`: the number of shards must be at least 1"));
        }
        if i == 0 || i > n {
            return Err(format!(
                "`{s}`: the shard number must be 1 to {n} (shards count from 1)"
            ));
        }
        Ok(Shard { index: i, count: n })
    }
}

/// `shard.json`: what a shard ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The plan's identity (`plan_id`): a hash of every point's scenario, seed and runs.
    pub plan: String,
    /// The plan file as the shard's command named it (for messages).
    pub origin: PathBuf,
    pub shard: usize,
    pub of: usize,
    /// Loaded with `--quick`.
    pub quick: bool,
    pub runs: usize,
    pub seed: u64,
    /// The engine that ran it (`grid::build_id`).
    pub build: String,
    /// How many points are this shard's.
    pub points: usize,
}

impl Manifest {
    pub(super) fn shard(&self) -> Shard {
        Shard {
            index: self.shard,
            count: self.of,
        }
    }

    pub(super) fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join(FILE);
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    pub(super) fn read(dir: &Path) -> anyhow::Result<Manifest> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "{}: no {FILE}: not the output folder of an `aerotp experiment run --shard I/N`",
                dir.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not a shard manifest", path.display()))
    }
}

/// Every point's key as run by the engine `build`, and the plan's identity (which does not
/// depend on the build): both from each point's scenario, seed and runs, so a changed plan
/// file is another plan.
pub(super) fn point_ids(
    plan: &Plan,
    seed: u64,
    runs: usize,
    build: &str,
) -> Result<(Vec<String>, String), PlanError> {
    let ids: Vec<(String, [u8; 32])> = (0..plan.len())
        .into_par_iter()
        .map(|i| {
            let p = plan.point(i);
            let s = plan.scenario(&p)?;
            let d = point_desc(&s, seed, plan.runs_of(p.experiment, runs));
            Ok((key_of(&d, build), Sha256::digest(d.as_bytes()).into()))
        })
        .collect::<Result<_, PlanError>>()?;
    let mut h = Sha256::new();
    for (_, d) in &ids {
        h.update(d);
    }
    let id = hex(&h.finalize()[..16]);
    Ok((ids.into_iter().map(|(k, _)| k).collect(), id))
}
