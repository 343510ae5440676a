//! Determinism and a small snapshot-style sweep checked against invariants.

use std::time::Duration;

use aerotp_proto::{FecSetting, Mode};
use aerotp_sim::{run_many, run_once, Scenario, SimMode, Topology};

fn small(mode: SimMode, ber: f64) -> Scenario {
    Scenario {
        mode,
        size: 60_000,
        ..Scenario::default()
    }
    .with_links(|l| l.ber = ber)
}

#[test]
fn same_seed_same_result_bit_for_bit() {
    for mode in [
        SimMode::Aero(Mode::Reliable),
        SimMode::Aero(Mode::HybridNackMack),
        SimMode::Udp,
    ] {
        let s = small(mode, 5e-5).with_links(|l| l.loss = 0.02);
        let a = run_once(&s, 42);
        let b = run_once(&s, 42);
        assert_eq!(a, b, "{mode}");
        assert_eq!(a.goodput_bps.to_bits(), b.goodput_bps.to_bits());
        // A different seed draws different impairments.
        let c = run_once(&s, 43);
        assert_ne!(a, c, "{mode}: seed has no effect");
        // Parallel summaries are deterministic too (order of runs fixed).
        let x = run_many(&s, 3, 9).unwrap();
        let y = run_many(&s, 3, 9).unwrap();
        assert_eq!(x, y);
        assert_eq!(x.results, y.results);
    }
}

#[test]
fn small_sweep_meets_invariants() {
    let modes = [
        SimMode::Aero(Mode::Reliable),
        SimMode::Aero(Mode::QuasiReliable),
        SimMode::Aero(Mode::HybridNackMack),
        SimMode::Aero(Mode::HybridNack),
        SimMode::Udp,
    ];
    for mode in modes {
        for ber in [0.0, 1e-4] {
            let s = small(mode, ber);
            let sum = run_many(&s, 3, 1).unwrap();
            for r in &sum.results {
                assert!(r.delivered_bytes <= s.size as u64, "{mode} {ber}");
                // Goodput counts payload only, so it stays under the link rate.
                assert!(
                    r.goodput_bps < s.rate_bps as f64,
                    "{mode} {ber}: {}",
                    r.goodput_bps
                );
                assert!(r.wire_bytes >= r.delivered_bytes, "{mode} {ber}");
                assert!(r.elapsed_s <= s.cap.as_secs_f64());
                if r.delivered_bytes > 0 {
                    // At least the propagation delay (10 ms) plus one serialisation.
                    let d = r.mean_delay_s.unwrap();
                    assert!(d > 0.0112 && d < 10.0, "{mode} {ber}: delay {d}");
                }
            }
            if ber == 0.0 {
                assert_eq!(sum.complete_runs, 3, "{mode} at BER 0");
                assert!(
                    sum.goodput_bps > 3.0e6,
                    "{mode} at BER 0: {}",
                    sum.goodput_bps
                );
            }
            if mode.is_fully_reliable() {
                assert_eq!(
                    sum.complete_runs, 3,
                    "{mode} at {ber}: reliable mode lost data"
                );
            }
        }
    }
    // Plain UDP loses a share at 1e-4 (a 1528-byte packet survives with (1-1e-4)^12224 = 29 %).
    let udp = run_many(&small(SimMode::Udp, 1e-4), 3, 1).unwrap();
    assert!(
        udp.delivered_bytes < 0.5 * 60_000.0 && udp.delivered_bytes > 0.1 * 60_000.0,
        "{}",
        udp.delivered_bytes
    );
    // FEC loses less than UDP.
    let fec = run_many(&small(SimMode::Aero(Mode::QuasiReliable), 1e-4), 3, 1).unwrap();
    assert!(
        fec.delivered_bytes > 0.9 * 60_000.0,
        "{}",
        fec.delivered_bytes
    );
}

#[test]
fn setup_delay_and_caps() {
    // Two nodes, 10 Mb/s, 5 ms: the receiver accepts on the first TPDU that arrives, at least
    // one propagation delay after connect and at most one full 1500-byte serialisation
    // (1528 B at 10 Mb/s = 1.2224 ms) later.
    let s = Scenario {
        topology: Topology::TwoNode,
        ..small(SimMode::Aero(Mode::Reliable), 0.0)
    }
    .with_rate(10_000_000)
    .with_links(|l| l.delay = Duration::from_millis(5));
    let r = run_once(&s, 1);
    let setup = r.setup_delay_s.unwrap();
    assert!((0.005..=0.0062224 + 1e-9).contains(&setup), "{setup}");
    // A cap shorter than the transfer leaves the run incomplete and ends it at the cap.
    let capped = Scenario {
        cap: Duration::from_millis(50),
        ..s
    };
    let r = run_once(&capped, 1);
    assert!(!r.complete);
    assert_eq!(r.elapsed_s, 0.05);
    assert!(r.delivered_bytes < 60_000);
}

#[test]
fn fixed_fec_words_map_to_parity_and_timeline_is_monotone() {
    let s = Scenario {
        fec: Some(FecSetting::Words(96)),
        timeline: true,
        ..small(SimMode::Aero(Mode::QuasiReliable), 1e-4)
    };
    let r = run_once(&s, 5);
    assert_eq!(r.fec_parity, aerotp_fec::parity_for_words(96, 1500));
    assert!(r.tpdus_corrected > 0);
    assert!(!r.timeline.is_empty());
    assert!(r
        .timeline
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    assert_eq!(r.timeline.last().unwrap().1, r.delivered_bytes);
}

#[test]
fn datagram_mode_repairs_at_a_fixed_ratio_and_refuses_auto() {
    let plain = Scenario {
        mode: SimMode::Aero(Mode::Datagram),
        size: 1_000_000,
        ..Scenario::default()
    }
    .with_links(|l| l.loss = 0.10);
    let mut repaired = plain.clone();
    repaired.erasure.mode = Some(aerotp_proto::ErasureMode::Ratio(1.5));
    let (mut lost_plain, mut lost_repaired) = (0, 0);
    for seed in 1..=4 {
        let p = run_once(&plain, seed);
        let r = run_once(&repaired, seed);
        assert_eq!(p.repairs_sent, 0);
        lost_plain += p.tpdus_lost;
        lost_repaired += r.tpdus_lost;
        assert_eq!(r.wire_lost, r.tpdus_rebuilt + r.tpdus_lost);
        // 1.5x spread between the datagrams, and the pause at the end flushes half the last
        // window (about 139 sources within 500 ms at 5 Mb/s): about 0.1x more on 688.
        let ratio = r.datagrams_sent as f64 / r.data_tpdus as f64;
        assert!(
            (1.5..1.65).contains(&ratio),
            "seed {seed}: {ratio}x on the wire"
        );
    }
    // About 10 % of ~690 per run without repair; 1.5x leaves almost none.
    assert!(lost_plain > 200, "{lost_plain}");
    assert!(lost_repaired <= 4, "{lost_repaired} lost with 1.5x repair");
    let mut auto = plain;
    auto.erasure.mode = Some(aerotp_proto::ErasureMode::Auto);
    let e = auto.validate().unwrap_err().to_string();
    assert!(e.contains("fixed ratio"), "{e}");
}
