//! `aerotp`: one command-line front end over the engine, simulator, runtime and emulators.

mod admission_flags;
#[cfg(feature = "assets")]
mod assets_cmd;
#[cfg(feature = "dev")]
mod bench_cmd;
mod common;
#[cfg(feature = "dev")]
mod demo_cmd;
mod dlep_flags;
mod erasure_flags;
#[cfg(feature = "dev")]
mod experiment_cmd;
mod gw_cmd;
mod key_flags;
mod keygen_cmd;
#[cfg(feature = "dev")]
mod lab_bench_cmd;
#[cfg(feature = "dev")]
mod lab_cmd;
mod link_cmd;
mod link_flags;
mod listener_config;
mod mark_flags;
mod paths_report;
mod qlog_tap;
mod rate_flags;
mod recv_cmd;
mod recv_output;
mod send_args;
mod send_cmd;
#[cfg(feature = "dev")]
mod sim_cmd;
#[cfg(feature = "dev")]
mod trace_cmd;
mod transfer_end;

use clap::{Parser, Subcommand};

/// `aerotp --version`: the package version and the commit it was built from (build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("AEROTP_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "aerotp",
    version = VERSION,
    about = "AeroTP: multi-mode transport for airborne telemetry networks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// UDP relay through an emulated link (rate, delay, bit errors, loss, outages).
    Link(link_cmd::Args),
    /// Two network namespaces (air, ground) joined by an emulated link; run commands in them (root).
    #[cfg(feature = "dev")]
    Lab(lab_cmd::Args),
    /// Send a file (or stdin) to `aerotp recv` over AeroTP.
    Send(send_cmd::Args),
    /// Receive files sent with `aerotp send` (many transfers, in turn or at once).
    Recv(recv_cmd::Args),
    /// Write a new pre-shared key file for --key-file (mode 600), or rotate its keys.
    Keygen(keygen_cmd::Args),
    /// Receiver, emulated lossy link and sender in one process: what each mode delivers.
    #[cfg(feature = "dev")]
    Demo(demo_cmd::Args),
    /// Benchmarks (loopback: AeroTP reliable vs QUIC).
    #[cfg(feature = "dev")]
    Bench(bench_cmd::Args),
    /// AeroGW gateways: TCP/UDP ⇄ AeroTP (ingress, egress, stats).
    Gw(gw_cmd::Args),
    /// Simulate transfers over an impaired link in virtual time (deterministic, parallel runs).
    #[cfg(feature = "dev")]
    Sim(sim_cmd::Args),
    /// Run experiment plans in the simulator (sweeps of any setting; CSV, PNG, report), or the papers' experiments.
    #[cfg(feature = "dev")]
    Experiment(experiment_cmd::Args),
    /// A trace written with --qlog as a time-sequence chart (PNG) and a summary.
    #[cfg(feature = "dev")]
    Trace(trace_cmd::Args),
}

/// Errors print as their chain of messages (`error: what: why`) and exit 1, never as a
/// backtrace: returning them from `main` would print one whenever RUST_BACKTRACE is set.
fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    #[cfg(feature = "assets")]
    if let Some(out) = std::env::var_os(assets_cmd::ENV) {
        return assets_cmd::run(out.into(), <Cli as clap::CommandFactory>::command());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Link(args) => tokio::runtime::Runtime::new()?.block_on(link_cmd::run(args)),
        #[cfg(feature = "dev")]
        Command::Lab(args) => std::process::exit(lab_cmd::run(args)?),
        Command::Send(args) => {
            std::process::exit(tokio::runtime::Runtime::new()?.block_on(send_cmd::run(args)))
        }
        Command::Recv(args) => {
            std::process::exit(tokio::runtime::Runtime::new()?.block_on(recv_cmd::run(args)))
        }
        Command::Keygen(args) => keygen_cmd::run(args),
        #[cfg(feature = "dev")]
        Command::Demo(args) => std::process::exit(demo_cmd::run(args)),
        #[cfg(feature = "dev")]
        Command::Bench(args) => std::process::exit(bench_cmd::run(args)),
        Command::Gw(args) => std::process::exit(gw_cmd::run(args)?),
        #[cfg(feature = "dev")]
        Command::Sim(args) => sim_cmd::run(args),
        #[cfg(feature = "dev")]
        Command::Experiment(args) => experiment_cmd::run(args),
        #[cfg(feature = "dev")]
        Command::Trace(args) => trace_cmd::run(args),
    }
}
