//! The entry points: one run of a scenario with a seed, with or without a capture hook.

use aerotp_proto::Mode;

use super::connection::run_connection;
use super::datagrams::run_paced_datagrams;
use super::result::RunResult;
use super::tap::Tap;
use crate::scenario::{Scenario, SimMode};

/// Runs one transfer with `seed`. The scenario must be valid (`Scenario::validate`).
/// Same scenario + same seed = the same result, bit for bit.
pub fn run_once(s: &Scenario, seed: u64) -> RunResult {
    run_inner(s, seed, None)
}

/// [`run_once`] with a capture hook: the same result, and `tap` sees every datagram sent and
/// every datagram delivered by the link.
pub fn run_once_tapped(s: &Scenario, seed: u64, tap: &mut dyn Tap) -> RunResult {
    run_inner(s, seed, Some(tap))
}

fn run_inner(s: &Scenario, seed: u64, tap: Option<&mut dyn Tap>) -> RunResult {
    match s.mode {
        SimMode::Aero(Mode::Datagram) | SimMode::Udp => run_paced_datagrams(s, seed, tap),
        SimMode::Aero(_) => run_connection(s, seed, tap),
    }
}
