//! `aerotp experiment seeds`: reproduce the papers' experiments in the simulator.

use std::path::PathBuf;

use aerotp_sim::experiment::{seeds, Options};

/// Reproduce experiments of the papers in the simulator (CSV, PNG, Markdown report).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, clap::Subcommand)]
enum Which {
    /// Set-up delay vs loss, FEC strength, MACK aggregation, modes over BER, link delay.
    Seeds(SeedsArgs),
}

#[derive(Debug, clap::Args)]
struct SeedsArgs {
    /// Output directory for the CSVs, PNGs and report.md.
    #[arg(long, default_value = "docs/results/seeds")]
    out: PathBuf,
    /// Runs per point (the set-up experiment uses 5x this).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Fewer points per experiment (smoke test).
    #[arg(long)]
    quick: bool,
    /// Base seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory of the ns-3 TCP CSVs to join (ber_sweep.csv, delay_sweep.csv), if present.
    #[arg(long, default_value = "docs/results/ns3")]
    ns3: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Which::Seeds(a) = args.which;
    let command = std::iter::once("aerotp".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Options {
        out: a.out,
        runs: a.runs as usize,
        quick: a.quick,
        seed: a.seed,
        ns3_dir: a.ns3,
        progress: true,
        command,
    };
    let out = seeds(&o)?;
    for (c, ok) in &out.checks {
        println!("[{}] {c}", if *ok { "met" } else { "NOT met" });
    }
    println!(
        "{} runs in {:.1} s; wrote {} files to {}",
        out.runs_total,
        out.wall.as_secs_f64(),
        out.files.len(),
        o.out.display()
    );
    Ok(())
}
