//! Running a plan: check every point, skip those already in `points.jsonl`, run the rest
//! in parallel (every point's runs on all cores) with a progress bar, then write the CSVs,
//! plots and report.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::grid::build_id;
use super::row::{flatten, Row, SIM_SOURCE};
use super::shard::{point_ids, Manifest, Shard};
use super::store::Store;
use super::{join, output, report, Plan};
use crate::run::{run_once, RunResult};
use crate::summary::{run_seed, summarize};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing (tests).
    Off,
    /// A bar on a terminal, else a plain line every `every` (so CI logs show progress).
    On { every: Duration },
}

/// Options of one run of a plan.
#[derive(Debug, Clone)]
pub struct Options {
    pub out: PathBuf,
    /// Runs per point instead of the plan's.
    pub runs: Option<usize>,
    /// Seed instead of the plan's.
    pub seed: Option<u64>,
    /// Worker threads (default: all cores).
    pub jobs: Option<usize>,
    pub progress: Progress,
    /// The command line, for the report.
    pub command: String,
    /// Ignore and replace the results of earlier runs.
    pub fresh: bool,
    /// Stop after this many newly run points, as an interruption would (tests).
    pub stop_after: Option<usize>,
    /// Folder the join files are read from instead of the plan's (`seeds --ns3`).
    pub join_dir: Option<PathBuf>,
    /// Run only this shard's points and write only `points.jsonl` and `shard.json`
    /// (`--shard I/N`; `shard::merge` joins the shards).
    pub shard: Option<Shard>,
    /// The plan was loaded with `--quick` (recorded in a shard's manifest, so that the
    /// merge loads it the same way).
    pub quick: bool,
}

impl Options {
    pub fn new(out: PathBuf) -> Options {
        Options {
            out,
            runs: None,
            seed: None,
            jobs: None,
            progress: Progress::Off,
            command: String::new(),
            fresh: false,
            stop_after: None,
            join_dir: None,
            shard: None,
            quick: false,
        }
    }
}

/// What a run of a plan produced.
#[derive(Debug)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub files: Vec<PathBuf>,
    pub wall: Duration,
    /// Simulated runs done by this run (points kept from earlier runs not counted).
    pub sim_runs: usize,
    pub points: usize,
    pub resumed: usize,
    pub report: String,
    pub checks: Vec<(String, bool)>,
    /// Stopped before every point was done (`stop_after`); nothing but points.jsonl written.
    pub interrupted: bool,
    /// The shard this run was (`points` is then the shard's points): only points.jsonl and
    /// shard.json written.
    pub shard: Option<Shard>,
}

/// Done/total with an ETA: a bar on a terminal, plain lines otherwise.
struct Meter {
    bar: Option<ProgressBar>,
    every: Duration,
    total: usize,
    done: AtomicUsize,
    start_done: usize,
    start: Instant,
    last: Mutex<Instant>,
}

impl Meter {
    fn new(p: Progress, total: usize, done: usize) -> Meter {
        let now = Instant::now();
        let (bar, every) = match p {
            Progress::On { every } if std::io::stderr().is_terminal() => {
                let b =
                    ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
                b.set_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                );
                b.set_position(done as u64);
                // Runs kept from an earlier run must not count towards the rate.
                b.reset_eta();
                (Some(b), every)
            }
            Progress::On { every } => (None, every),
            Progress::Off => (None, Duration::MAX),
        };
        Meter {
            bar,
            every,
            total,
            done: AtomicUsize::new(done),
            start_done: done,
            start: now,
            last: Mutex::new(now),
        }
    }

    fn add(&self, n: usize) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(b) = &self.bar {
            b.inc(n as u64);
            return;
        }
        if self.every == Duration::MAX {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < self.every && done < self.total {
            return;
        }
        *last = Instant::now();
        let el = self.start.elapsed().as_secs_f64();
        let now = (done - self.start_done).max(1) as f64;
        let eta = el / now * (self.total - done) as f64;
        eprintln!(
            "experiment: {done}/{} runs ({:.1} %), {} elapsed, eta {}",
            self.total,
            100.0 * done as f64 / self.total.max(1) as f64,
            hms(el),
            hms(eta)
        );
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn hms(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Runs a checked plan. Every point's scenario is built and checked first: a bad point
/// stops the run before anything is simulated.
pub fn run_plan(plan: &Plan, o: &Options) -> anyhow::Result<Outcome> {
    match o.jobs {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .context("starting the worker threads")?
            .install(|| run_in_pool(plan, o)),
        None => run_in_pool(plan, o),
    }
}

fn run_in_pool(plan: &Plan, o: &Options) -> anyhow::Result<Outcome> {
    let start = Instant::now();
    let runs = o.runs.unwrap_or(plan.runs);
    anyhow::ensure!(runs > 0, "--runs must be at least 1");
    let seed = o.seed.unwrap_or(plan.seed);
    // Check every point and key it (in parallel: a 10 000-point plan takes a blink), also
    // when running one shard: a bad point stops every shard before anything runs.
    let (keys, plan_id) = point_ids(plan, seed, runs, build_id())?;
    // The points this run runs: all, or every N-th of a shard.
    let mine: Vec<usize> = (0..plan.len())
        .filter(|&i| o.shard.is_none_or(|s| s.has(i)))
        .collect();
    let batch = Batch {
        plan,
        runs,
        seed,
        keys,
        mine,
    };
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let manifest = match o.shard {
        Some(sh) => Some(batch.manifest(sh, plan_id, o.quick).write(&o.out)?),
        None => None,
    };
    let (store, done) = Store::open(&o.out, o.fresh)?;
    let pending = batch.resume(done);
    let resumed = batch.mine.len() - pending.todo.len();
    let (total_runs, done_runs) = (pending.total_runs, pending.done_runs);
    let rows = batch.run_todo(o, &store, pending)?;
    let new_runs: usize = total_runs - done_runs;
    let outcome = |rows: Vec<Option<Row>>, files, sim_runs, interrupted| Outcome {
        rows: rows.into_iter().flatten().collect(),
        files,
        wall: start.elapsed(),
        sim_runs,
        points: batch.mine.len(),
        resumed,
        report: String::new(),
        checks: Vec::new(),
        interrupted,
        shard: o.shard,
    };
    if rows.iter().any(Option::is_none) {
        return Ok(outcome(rows, vec![o.out.join(super::store::FILE)], 0, true));
    }
    if let Some(m) = manifest {
        // A shard's CSVs, plots and report would be of a part of the plan: the merge
        // writes them.
        let files = vec![o.out.join(super::store::FILE), m];
        return Ok(outcome(rows, files, new_runs, false));
    }
    let rows: Vec<Row> = rows.into_iter().flatten().collect();
    finish(plan, o, rows, new_runs, resumed, start, 0)
}

/// A kept row (from `points.jsonl`) of point `i`: names and x come from the plan as it is
/// now; the numbers from the file.
pub(super) fn with_current_names(plan: &Plan, i: usize, row: &mut Row) {
    let p = plan.point(i);
    let ex = &plan.experiments[p.experiment];
    row.experiment.clone_from(&ex.name);
    row.series.clone_from(&ex.series[p.series].name);
    row.x = ex.x_of(&p);
}

/// The points one run of a plan runs, with the runs per point and the seed.
struct Batch<'p> {
    plan: &'p Plan,
    runs: usize,
    seed: u64,
    /// Every point's key in `points.jsonl`.
    keys: Vec<String>,
    /// The points of this run (all, or a shard's), in plan order.
    mine: Vec<usize>,
}

/// This run's points: the rows kept from earlier runs (in `mine`'s order, `None` where
/// still to run) and the points still to run (slot in `rows`, point index).
struct Pending {
    rows: Vec<Option<Row>>,
    todo: Vec<(usize, usize)>,
    total_runs: usize,
    done_runs: usize,
}

impl Batch<'_> {
    /// The manifest of shard `sh` of this run.
    fn manifest(&self, sh: Shard, plan_id: String, quick: bool) -> Manifest {
        Manifest {
            plan: plan_id,
            origin: self.plan.origin.clone(),
            shard: sh.index,
            of: sh.count,
            quick,
            runs: self.runs,
            seed: self.seed,
            build: build_id().to_owned(),
            points: self.mine.len(),
        }
    }

    /// Which points were done by an earlier run (their rows in `done`, by key).
    fn resume(&self, mut done: HashMap<String, Row>) -> Pending {
        let mut pending = Pending {
            rows: Vec::with_capacity(self.mine.len()),
            todo: Vec::new(),
            total_runs: 0,
            done_runs: 0,
        };
        for (slot, &i) in self.mine.iter().enumerate() {
            let r = self.plan.runs_of(self.plan.point(i).experiment, self.runs);
            pending.total_runs += r;
            match done.remove(&self.keys[i]) {
                Some(mut row) => {
                    with_current_names(self.plan, i, &mut row);
                    pending.done_runs += r;
                    pending.rows.push(Some(row));
                }
                None => {
                    pending.rows.push(None);
                    pending.todo.push((slot, i));
                }
            }
        }
        pending
    }

    /// Runs the pending points in parallel, each stored as it is done; `None` remains for
    /// those not run (`stop_after`).
    fn run_todo(
        &self,
        o: &Options,
        store: &Store,
        pending: Pending,
    ) -> anyhow::Result<Vec<Option<Row>>> {
        let meter = Meter::new(o.progress, pending.total_runs, pending.done_runs);
        let rows = Mutex::new(pending.rows);
        let started = AtomicUsize::new(0);
        let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let fail = |e: anyhow::Error| *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        pending.todo.par_iter().for_each(|&(slot, i)| {
            if o.stop_after
                .is_some_and(|k| started.fetch_add(1, Ordering::SeqCst) >= k)
            {
                return;
            }
            let row = match self.run_point(i) {
                Ok(row) => row,
                Err(e) => return fail(e.into()),
            };
            if let Err(e) = store.append(&self.keys[i], &row) {
                fail(e);
            }
            rows.lock().unwrap_or_else(|e| e.into_inner())[slot] = Some(row);
            meter.add(self.plan.runs_of(self.plan.point(i).experiment, self.runs));
        });
        meter.finish();
        if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        Ok(rows.into_inner().unwrap_or_else(|e| e.into_inner()))
    }

    /// Point `i`'s runs (in parallel) summarized as its row.
    fn run_point(&self, i: usize) -> Result<Row, super::PlanError> {
        let (plan, seed) = (self.plan, self.seed);
        let p = plan.point(i);
        let ex = &plan.experiments[p.experiment];
        let s = plan.scenario(&p)?;
        let r = plan.runs_of(p.experiment, self.runs);
        let results: Vec<RunResult> = (0..r)
            .into_par_iter()
            .map(|j| run_once(&s, run_seed(seed, j)))
            .collect();
        // The summary's run list (and any trace in it) is dropped here: memory stays at
        // one row of numbers per point.
        let mut metrics = flatten(&summarize(&s, seed, results));
        for (g, &c) in ex.grid.iter().zip(&p.coords) {
            metrics.insert(format!("set.{}", g.key), g.values[c].1);
        }
        Ok(Row {
            experiment: ex.name.clone(),
            series: ex.series[p.series].name.clone(),
            source: SIM_SOURCE.into(),
            x: ex.x_of(&p),
            metrics,
        })
    }
}

/// Writes the outputs of a plan whose every point is done (`rows`, in plan order): runs
/// the timelines, joins the peers' rows, writes the CSVs, plots and report. `new_runs`
/// runs were simulated for the rows and `resumed` points kept from an earlier run; a
/// merge of `shards` shards gives their number (0: not a merge).
pub(super) fn finish(
    plan: &Plan,
    o: &Options,
    mut rows: Vec<Row>,
    new_runs: usize,
    resumed: usize,
    start: Instant,
    shards: usize,
) -> anyhow::Result<Outcome> {
    let runs = o.runs.unwrap_or(plan.runs);
    let seed = o.seed.unwrap_or(plan.seed);
    let n = plan.len();
    let timelines = timeline_runs(plan, seed)?;
    let timeline_runs: usize = timelines.iter().map(Vec::len).sum();
    let joined = join_peer_rows(plan, o, &mut rows)?;
    let out = o.out.as_path();
    let mut files = write_experiments(plan, out, &rows, &timelines)?;
    let checks: Vec<(String, bool)> = plan
        .checks
        .iter()
        .map(|c| {
            let e = plan
                .experiments
                .iter()
                .position(|e| e.name == c.experiment)
                .unwrap_or(0);
            c.evaluate(&rows, plan.runs_of(e, runs))
        })
        .collect();
    let wall = start.elapsed();
    let sim_runs = new_runs + timeline_runs;
    let report = report::report(
        plan,
        &report::RunInfo {
            command: &o.command,
            runs,
            seed,
            sim_runs,
            wall_s: wall.as_secs_f64(),
            threads: rayon::current_num_threads(),
            points: n,
            resumed,
            joined: &joined,
            shards,
        },
        &rows,
        &timelines,
        &checks,
    );
    let rp = out.join("report.md");
    std::fs::write(&rp, &report).with_context(|| format!("writing {}", rp.display()))?;
    files.push(rp);
    Ok(Outcome {
        rows,
        files,
        wall,
        sim_runs,
        points: n,
        resumed,
        report,
        checks,
        interrupted: false,
        shard: None,
    })
}

/// One run per series kept with its delivery timeline, for each experiment that has a
/// timeline (a handful of runs; rerun each time rather than stored).
fn timeline_runs(plan: &Plan, seed: u64) -> anyhow::Result<Vec<Vec<(String, RunResult)>>> {
    let timelines = plan
        .experiments
        .iter()
        .enumerate()
        .map(|(e, ex)| {
            let Some(t) = &ex.timeline else {
                return Ok(Vec::new());
            };
            let pts: Vec<_> = (0..ex.len())
                .map(|i| ex.point(e, i))
                .filter(|p| ex.x_of(p) == t.x)
                .collect();
            pts.par_iter()
                .map(|p| {
                    let mut s = plan.scenario(p)?;
                    s.timeline = true;
                    Ok((
                        ex.series[p.series].name.clone(),
                        run_once(&s, run_seed(seed, t.run)),
                    ))
                })
                .collect::<Result<Vec<_>, super::PlanError>>()
        })
        .collect::<Result<_, _>>()?;
    Ok(timelines)
}

/// Adds the peers' rows of the plan's joins to `rows` (an optional join whose file is
/// absent is skipped); the files read.
fn join_peer_rows(plan: &Plan, o: &Options, rows: &mut Vec<Row>) -> anyhow::Result<Vec<PathBuf>> {
    let mut joined = Vec::new();
    for j in &plan.joins {
        let file = match &o.join_dir {
            Some(d) => d.join(j.file.file_name().unwrap_or_default()),
            None => j.file.clone(),
        };
        if j.optional && !file.exists() {
            continue;
        }
        rows.extend(join::ns3_rows(
            &file,
            &plan.experiments[j.experiment].name,
            &j.x,
        )?);
        joined.push(file);
    }
    Ok(joined)
}

/// Writes each experiment's CSV, plots and timelines into `out`; the files written.
fn write_experiments(
    plan: &Plan,
    out: &Path,
    rows: &[Row],
    timelines: &[Vec<(String, RunResult)>],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for ((ex, cols), tl) in plan.experiments.iter().zip(&plan.columns).zip(timelines) {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.experiment == ex.name).collect();
        let path = out.join(format!("{}.csv", ex.name));
        output::write_csv(&path, cols, &rs)?;
        files.push(path);
        files.extend(output::plots(out, ex, &rs)?);
        files.extend(output::timelines(out, ex, tl)?);
    }
    Ok(files)
}
