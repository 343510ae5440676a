//! The sender's down declarations against the links' outages, on seed 003's three Iridium
//! channels (2.4 kb/s, up to 1.8 s of jitter each way, call drops of 45-50 s): every drop is
//! found, few declarations are false, and a drop is found within a smoothed round trip and
//! four variations of the first TPDU sent into it (docs/results/multipath.md, "Call drops
//! against down declarations").

use std::path::Path;
use std::time::Duration;

use aerotp_link::Network;
use aerotp_proto::Mode;
use aerotp_sim::{run_many, Scenario, SimMode, Topology};

fn iridium() -> Scenario {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/traces/seed003-iridium.toml");
    let mut s = Scenario {
        mode: SimMode::Aero(Mode::Reliable),
        network: Network::load(&file).expect("the seed 003 scenario loads"),
        size: 3_000_000,
        mtu: 512,
        topology: Topology::TwoNode,
        cap: Duration::from_secs(2820),
        ..Scenario::default()
    };
    s.rate_bps = s.forward_rate_sum();
    s
}

#[test]
fn call_drops_are_declared_and_few_declarations_are_false() {
    let sum = run_many(&iridium(), 8, 7).unwrap();
    assert_eq!(sum.path_states.len(), 3);
    let total = |f: &dyn Fn(&aerotp_sim::PathStates) -> usize| -> usize {
        sum.path_states.iter().map(f).sum()
    };
    let (outages, declared) = (total(&|p| p.outages), total(&|p| p.outages_declared));
    let (declarations, false_ones) = (total(&|p| p.declarations), total(&|p| p.false_declarations));
    assert!(outages > 100, "{outages} outages in 8 × 47 min");
    assert!(
        declared * 100 >= outages * 97,
        "{declared} of {outages} drops declared"
    );
    assert!(
        false_ones * 100 <= declarations * 5,
        "{false_ones} of {declarations} false"
    );
    // The first TPDU sent after the path's latest acknowledgement is overdue a smoothed round
    // trip (6-8 s here) and four variations later: 14.9-16.0 s median from the drop over
    // these 8 runs. Twice the path's timeout instead (the other bound of the rule) is 25 s
    // and more.
    for (i, p) in sum.path_states.iter().enumerate() {
        let median = p
            .detection_median_s
            .expect("drops on every channel in 8 runs");
        assert!(
            median < 17.0,
            "path {i}: median {median:.1} s from drop to declaration"
        );
    }
    // Per run: the declared intervals are the engine's and within the run.
    for r in &sum.results {
        for p in &r.paths {
            assert!(p
                .declared
                .iter()
                .all(|d| d[0] <= d[1] && d[1] <= r.elapsed_s + 1e-9));
            assert!(p
                .outages
                .iter()
                .all(|o| o[0] <= o[1] && o[1] <= r.elapsed_s + 1e-9));
        }
    }
}

/// One channel whose call drops 0.3 s after the listener accepted (run 3 of seed 1's runs):
/// the listener's challenge goes into the drop, its unproven connection closes at the set-up
/// timeout, and the sender's TPDUs open another when the channel is back, which the sender
/// proves and fills from TPDU 0. The receiving application, as `aerotp recv`, reads that one
/// (before, the simulator's stayed on the closed one: 478 bytes of 300,000).
#[test]
fn a_connection_accepted_into_a_dropped_call_still_delivers_everything() {
    let mut s = iridium();
    s.network.paths.truncate(1);
    s.rate_bps = s.forward_rate_sum();
    s.size = 300_000;
    let seed = aerotp_sim::run_seed(1, 3);
    assert_eq!(seed, 2385602568054367950, "the run the defect was found in");
    let r = aerotp_sim::run_once(&s, seed);
    assert_eq!(r.delivered_bytes, 300_000, "{r:?}");
    assert!(r.complete, "{}", r.sender_close);
}
