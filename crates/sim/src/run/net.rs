//! The network between the two endpoints, built from the scenario: per path a forward and a
//! reverse `Path` (the papers' LAN hops around the path's impaired link, or the link alone),
//! spread over by `aerotp_pair::Links` in proportion to the paths' rates.

use std::time::Duration;

use aerotp_link::{mix_seed, Path};
use aerotp_pair::Links;

use crate::scenario::Scenario;

/// Seed streams of path `i`: path 0 keeps the streams of the single-link simulator (1, 2) so
/// its results are unchanged; the others take their own. The path-level random outage's
/// schedule seed is shared by both directions of the path.
fn path_seeds(seed: u64, i: usize) -> (u64, u64, u64) {
    let i = i as u64;
    let (f, r) = if i == 0 {
        (1, 2)
    } else {
        (100 + 2 * i, 101 + 2 * i)
    };
    (mix_seed(seed, f), mix_seed(seed, r), mix_seed(seed, 50 + i))
}

/// The scenario's paths, forward weighted by their forward rates and reverse by their reverse
/// rates.
pub(super) fn links(s: &Scenario, seed: u64) -> Links {
    let (mut fwd, mut rev) = (Vec::new(), Vec::new());
    for (i, p) in s.network.paths.iter().enumerate() {
        let (fs, rs, os) = path_seeds(seed, i);
        let f = Path::new(s.hops(i, true, os), fs).expect("validated scenario");
        let r = Path::new(s.hops(i, false, os), rs).expect("validated scenario");
        fwd.push((f, p.forward.rate_bps));
        rev.push((r, p.reverse_config(0).rate_bps));
    }
    Links::new(fwd, rev)
}

/// Path `i`'s forward outages `[start, end)` that begin before `until`, as its links apply
/// them in run `seed`.
pub(super) fn forward_outages(
    s: &Scenario,
    seed: u64,
    i: usize,
    until: Duration,
) -> Vec<(Duration, Duration)> {
    let (fs, _, os) = path_seeds(seed, i);
    Path::new(s.hops(i, true, os), fs)
        .expect("validated scenario")
        .outage_intervals(until)
}
