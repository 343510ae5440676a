//! `aerotp experiment run PLAN.toml`: experiments as plan files; `aerotp experiment seeds`
//! runs the shipped seeds plan (embedded in the binary); `aerotp experiment merge` joins the
//! shards of a run split with `--shard I/N` (docs/experiments.md).

use std::path::{Path, PathBuf};
use std::time::Duration;

use aerotp_sim::plan::run::Progress;
use aerotp_sim::plan::{merge, run_plan, Options, Outcome, Plan, Shard};

/// Run experiment plans (grids of simulated scenarios) and the papers' experiments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, clap::Subcommand)]
enum Which {
    /// Run a plan file: every point in parallel, CSV + PNG + report.md; an interrupted run
    /// resumes where it stopped (points.jsonl in the output folder). Format:
    /// docs/experiments.md.
    Run(RunArgs),
    /// Join the output folders of the N shards of a plan run with `--shard I/N` (on other
    /// machines: a batch scheduler's job array) into what a single run writes: CSV + PNG +
    /// report. Refuses shards of another plan, missing, overlapping or unfinished ones.
    Merge(MergeArgs),
    /// The papers' experiments (set-up delay vs loss, FEC strength, MACK aggregation, modes
    /// over BER, link delay): the shipped plan bench/plans/seeds.toml.
    Seeds(SeedsArgs),
}

#[derive(Debug, clap::Args)]
struct Common {
    /// Runs per point instead of the plan's.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    runs: Option<u64>,
    /// Base seed instead of the plan's.
    #[arg(long)]
    seed: Option<u64>,
    /// Worker threads (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    /// The plan's shorter value lists (its `quick` tables): a smoke test.
    #[arg(long)]
    quick: bool,
    /// Rerun every point, discarding the results of earlier runs in the output folder.
    #[arg(long)]
    fresh: bool,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The plan file (TOML).
    plan: PathBuf,
    /// Output folder (default: the plan's `out`, else results/<plan name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run only every N-th point (points I-1, I-1+N, ...; I from 1 to N) and write only
    /// points.jsonl and shard.json: `aerotp experiment merge` joins the N shards' folders.
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// The plan file the shards ran (TOML).
    plan: PathBuf,
    /// The output folders of all the shards (`run --shard I/N --out DIR`).
    #[arg(required = true, value_name = "SHARD_DIR")]
    shards: Vec<PathBuf>,
    /// Output folder (default: the plan's `out`, else results/<plan name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads for the timeline runs (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
}

#[derive(Debug, clap::Args)]
struct SeedsArgs {
    /// Output directory for the CSVs, PNGs and report.md.
    #[arg(long, default_value = "docs/results/seeds")]
    out: PathBuf,
    /// Directory of the ns-3 TCP CSVs to join (ber_sweep.csv, delay_sweep.csv), if present.
    #[arg(long, default_value = "docs/results/ns3")]
    ns3: PathBuf,
    #[command(flatten)]
    common: Common,
}

fn options(out: PathBuf, c: &Common) -> Options {
    let mut o = Options::new(out);
    o.runs = c.runs.map(|r| r as usize);
    o.seed = c.seed;
    o.jobs = c.jobs.map(|j| j as usize);
    o.fresh = c.fresh;
    o.quick = c.quick;
    o.progress = Progress::On {
        every: Duration::from_secs(10),
    };
    o.command = std::iter::once("aerotp".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    o
}

fn print_checks(out: &Outcome) {
    for (c, ok) in &out.checks {
        println!("[{}] {c}", if *ok { "met" } else { "NOT met" });
    }
}

fn print(out: &Outcome, dir: &Path) {
    if let Some(s) = out.shard {
        println!(
            "shard {s}: {} points ({} kept from an earlier run), {} runs in {:.1} s; wrote \
             points.jsonl and shard.json to {}; `aerotp experiment merge PLAN` with the \
             folders of all {} shards writes the CSVs, plots and report",
            out.points,
            out.resumed,
            out.sim_runs,
            out.wall.as_secs_f64(),
            dir.display(),
            s.count
        );
        return;
    }
    print_checks(out);
    println!(
        "{} points ({} kept from an earlier run), {} runs in {:.1} s; wrote {} files to {}",
        out.points,
        out.resumed,
        out.sim_runs,
        out.wall.as_secs_f64(),
        out.files.len(),
        dir.display()
    );
}

/// The output folder: `--out`, else the plan's `out`, else results/<plan name>.
fn out_dir(out: Option<PathBuf>, plan: &Plan, file: &Path) -> PathBuf {
    out.or_else(|| plan.out.clone())
        .unwrap_or_else(|| Path::new("results").join(file.file_stem().unwrap_or_default()))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (plan, o) = match args.which {
        Which::Run(a) => {
            let plan = Plan::load(&a.plan, a.common.quick)?;
            let mut o = options(out_dir(a.out, &plan, &a.plan), &a.common);
            o.shard = a.shard;
            (plan, o)
        }
        Which::Merge(a) => {
            // The plan as a full run reads it, for its `out` only: the merge loads it as
            // the shards did (`--quick` or not).
            let plan = Plan::load(&a.plan, false)?;
            let mut o = options(
                out_dir(a.out, &plan, &a.plan),
                &Common {
                    runs: None,
                    seed: None,
                    jobs: a.jobs,
                    quick: false,
                    fresh: false,
                },
            );
            o.progress = Progress::Off;
            let out = merge(&a.plan, &a.shards, &o)?;
            print_checks(&out);
            println!(
                "merged {} shards: {} points, {} timeline runs in {:.1} s; wrote {} files to {}",
                a.shards.len(),
                out.points,
                out.sim_runs,
                out.wall.as_secs_f64(),
                out.files.len(),
                o.out.display()
            );
            return Ok(());
        }
        Which::Seeds(a) => {
            let plan = Plan::seeds(a.common.quick)?;
            let mut o = options(a.out, &a.common);
            o.join_dir = Some(a.ns3);
            (plan, o)
        }
    };
    let out = run_plan(&plan, &o)?;
    print(&out, &o.out);
    Ok(())
}
