//! `aerotp experiment merge PLAN SHARD_DIR...`: checks that the folders are all the N
//! shards (`--shard I/N`, module `shard`) of one run of that plan, each finished, and writes
//! what a single run of the plan writes (its `points.jsonl`, CSVs, plots and report) from
//! their `points.jsonl`, simulating nothing but the timeline runs a single run also makes.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use super::row::Row;
use super::run::{finish, with_current_names, Options, Outcome};
use super::shard::{point_ids, Manifest, Shard, FILE};
use super::store::Store;
use super::Plan;

fn describe(dir: &Path, m: &Manifest) -> String {
    format!(
        "{} (shard {} of the plan {}, runs {}, seed {}{}, plan id {})",
        dir.display(),
        m.shard(),
        m.origin.display(),
        m.runs,
        m.seed,
        if m.quick { ", --quick" } else { "" },
        m.plan
    )
}

/// Checks that `dirs` are the output folders of all the shards of one run of the plan at
/// `plan_path`, each finished, and writes into `o.out` what a single run writes. The runs
/// per point, seed and `--quick` are the shards'.
pub fn merge(plan_path: &Path, dirs: &[PathBuf], o: &Options) -> anyhow::Result<Outcome> {
    match o.jobs {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .context("starting the worker threads")?
            .install(|| merge_in_pool(plan_path, dirs, o)),
        None => merge_in_pool(plan_path, dirs, o),
    }
}

fn merge_in_pool(plan_path: &Path, dirs: &[PathBuf], o: &Options) -> anyhow::Result<Outcome> {
    let start = Instant::now();
    anyhow::ensure!(
        !dirs.is_empty(),
        "give the output folders of the shards to merge"
    );
    let shards: Vec<(&PathBuf, Manifest)> = dirs
        .iter()
        .map(|d| Ok((d, Manifest::read(d)?)))
        .collect::<anyhow::Result<_>>()?;
    check_one_run(&shards)?;
    let (d0, m0) = &shards[0];
    let n = m0.of;
    let by_index = every_shard_once(&shards, n)?;
    let plan = Plan::load(plan_path, m0.quick)?;
    let (keys, id) = point_ids(&plan, m0.seed, m0.runs, &m0.build)?;
    if id != m0.plan {
        bail!(
            "{} is not the plan the shards ran{} (plan id {id}; the shards: {}): the plan file \
             changed since, or it is another plan",
            plan_path.display(),
            if m0.quick { " with --quick" } else { "" },
            describe(d0, m0)
        );
    }
    if o.out.join(FILE).exists() {
        bail!(
            "{} is a shard's output folder: merge into another one",
            o.out.display()
        );
    }
    let found = finished_shards(&by_index, &keys, n)?;
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let rows = merged_rows(&plan, &keys, (found, n), &o.out)?;
    let mut o = o.clone();
    o.runs = Some(m0.runs);
    o.seed = Some(m0.seed);
    finish(&plan, &o, rows, 0, 0, start, n)
}

/// Checks that the shards are of one run: one plan, runs, seed and `--quick`, split into
/// one number of shards, run by one build.
fn check_one_run(shards: &[(&PathBuf, Manifest)]) -> anyhow::Result<()> {
    let (d0, m0) = &shards[0];
    for (d, m) in &shards[1..] {
        if (&m.plan, m.runs, m.seed, m.quick) != (&m0.plan, m0.runs, m0.seed, m0.quick) {
            bail!(
                "the shards are of different plans: {} and {}",
                describe(d0, m0),
                describe(d, m)
            );
        }
        if m.of != m0.of {
            bail!(
                "the shards split the plan differently: {} is shard {} and {} is shard {}",
                d0.display(),
                m0.shard(),
                d.display(),
                m.shard()
            );
        }
        if m.build != m0.build {
            bail!(
                "the shards ran different builds of aerotp ({} ran {}, {} ran {}), whose \
                 results may differ: run every shard with the same executable",
                d0.display(),
                m0.build,
                d.display(),
                m.build
            );
        }
    }
    Ok(())
}

/// The shards' folders by shard number, each of the `n` shards given exactly once.
fn every_shard_once<'d>(
    shards: &[(&'d PathBuf, Manifest)],
    n: usize,
) -> anyhow::Result<BTreeMap<usize, &'d PathBuf>> {
    let mut by_index: BTreeMap<usize, &PathBuf> = BTreeMap::new();
    for (d, m) in shards {
        if let Some(other) = by_index.insert(m.shard, d) {
            bail!(
                "overlapping shards: shard {} is both {} and {}",
                m.shard(),
                other.display(),
                d.display()
            );
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        bail!(
            "missing shard{} {}: give the output folders of all {n} shards",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", ")
        );
    }
    Ok(by_index)
}

/// Each shard's results (in shard order), checked complete before anything is written.
fn finished_shards(
    by_index: &BTreeMap<usize, &PathBuf>,
    keys: &[String],
    n: usize,
) -> anyhow::Result<Vec<HashMap<String, Row>>> {
    let mut found: Vec<HashMap<String, Row>> = Vec::with_capacity(n);
    for (&i, d) in by_index {
        let done = Store::read(d)?;
        let shard = Shard { index: i, count: n };
        let mine: Vec<&String> = keys
            .iter()
            .enumerate()
            .filter(|(j, _)| shard.has(*j))
            .map(|(_, k)| k)
            .collect();
        let absent = mine.iter().filter(|k| !done.contains_key(**k)).count();
        if absent > 0 {
            bail!(
                "shard {shard} ({}) is not finished: {absent} of its {} points are not in its \
                 points.jsonl; rerun its command (the same --shard and --out) to finish it",
                d.display(),
                mine.len()
            );
        }
        found.push(done);
    }
    Ok(found)
}

/// The plan's rows in plan order, taken from the results of the `n` shards (point `i` is
/// shard `i % n`'s) and written to a fresh `points.jsonl` in `out`.
fn merged_rows(
    plan: &Plan,
    keys: &[String],
    (mut found, n): (Vec<HashMap<String, Row>>, usize),
    out: &Path,
) -> anyhow::Result<Vec<Row>> {
    let (store, _) = Store::open(out, true)?;
    let mut rows = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let mut row = found[i % n]
            .remove(k)
            .expect("every shard's points were checked present");
        // Names and x come from the plan as it is now, as in a resumed run.
        with_current_names(plan, i, &mut row);
        store.append(k, &row)?;
        rows.push(row);
    }
    Ok(rows)
}
