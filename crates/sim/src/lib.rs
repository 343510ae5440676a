//! Deterministic discrete-event simulator and the papers' experiments.
//!
//! [`run_once`] drives two endpoints of the real engine (`aerotp-proto`) over the link model
//! (`aerotp-link`) in virtual time: the same scenario and seed give the same [`RunResult`] bit
//! for bit. [`run_many`] spreads the runs of a point over all cores (rayon) and summarises
//! them. The `plan` module runs experiments written as plan files (grids of scenarios: CSV,
//! PNG, report; docs/experiments.md); `experiment::seeds` runs the papers' experiments, the
//! shipped plan bench/plans/seeds.toml. [`run_many_senders`] runs several senders over the
//! same links (fairness).
//! How it works and what each metric means: `docs/simulator.md`.
//!
//! ```
//! use aerotp_sim::{run_many, Scenario, SimMode, Topology};
//! use aerotp_proto::Mode;
//!
//! let s = Scenario {
//!     mode: SimMode::Aero(Mode::Reliable),
//!     size: 30_000,
//!     topology: Topology::TwoNode,
//!     ..Scenario::default()
//! };
//! let sum = run_many(&s, 2, 1).unwrap();
//! assert_eq!(sum.complete_runs, 2);
//! assert!(sum.goodput_bps < 5e6);
//! ```

mod ceiling;
pub mod experiment;
mod fairness;
pub mod plan;
mod run;
mod scenario;
mod summary;
mod workload;

pub use ceiling::{ceiling_bps, ceiling_bps_over};
pub use fairness::{run_many_senders, summarize_senders, SenderSummary, SendersSummary};
pub use run::{
    addr_sender, jain, mix_seed, run_once, run_once_tapped, run_shared, PathRun, RunResult,
    SenderRun, SharedRun, Tap, TapPoint,
};
pub use scenario::{
    datagram_parity, parse_size, Scenario, Senders, SimError, SimMode, Striping, Topology,
    ENGINE_KEYS, IP_UDP_OVERHEAD, LINK_KEY_FORMS, MAX_SENDERS,
};
pub use summary::{
    run_many, run_seed, summarize, transfer_span, PathStates, Percentiles, Stat, Summary,
};
pub use workload::Workload;
