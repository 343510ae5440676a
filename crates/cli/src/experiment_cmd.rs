//! `aerotp experiment run PLAN.toml`: experiments as plan files; `aerotp experiment seeds`
//! runs the shipped seeds plan (embedded in the binary).

use std::path::{Path, PathBuf};
use std::time::Duration;

use aerotp_sim::plan::run::Progress;
use aerotp_sim::plan::{run_plan, Options, Outcome, Plan};

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
    #[command(flatten)]
    common: Common,
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
    o.progress = Progress::On {
        every: Duration::from_secs(10),
    };
    o.command = std::iter::once("aerotp".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    o
}

fn print(out: &Outcome, dir: &Path) {
    for (c, ok) in &out.checks {
        println!("[{}] {c}", if *ok { "met" } else { "NOT met" });
    }
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let (plan, o) = match args.which {
        Which::Run(a) => {
            let plan = Plan::load(&a.plan, a.common.quick)?;
            let out = a.out.or_else(|| plan.out.clone()).unwrap_or_else(|| {
                Path::new("results").join(a.plan.file_stem().unwrap_or_default())
            });
            (plan, options(out, &a.common))
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
