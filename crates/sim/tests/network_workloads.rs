//! Several paths, the new counters (spurious retransmissions, wire bytes each way, ceiling)
//! and the workloads beside the bulk file.

use std::time::Duration;

use aerotp_proto::Mode;
use aerotp_sim::{ceiling_bps, run_many, run_once, Scenario, SimMode, Topology, Workload};

fn reliable(size: usize) -> Scenario {
    Scenario {
        mode: SimMode::Aero(Mode::Reliable),
        size,
        topology: Topology::TwoNode,
        ..Scenario::default()
    }
}

#[test]
fn long_delay_retransmissions_are_spurious() {
    // BER 0, no loss, 600 ms one way: nothing is ever lost, yet the engine's first timeout
    // (a guess before any round-trip sample, 300 ms) fires before the first acknowledgement
    // can arrive (1.2 s). Every retransmission then resends a TPDU that had already arrived.
    // Before the first sample a timeout resends only the oldest TPDU, once per backed-off
    // timeout (at 0.3 s and 0.9 s), not the whole first flight.
    let s = reliable(200_000).with_links(|l| l.delay = Duration::from_millis(600));
    let sum = run_many(&s, 2, 1).unwrap();
    assert_eq!(sum.complete_runs, 2);
    assert!(
        (1.0..=2.0).contains(&sum.retransmissions),
        "{}",
        sum.retransmissions
    );
    assert_eq!(sum.spurious_retransmissions, sum.retransmissions);
}

#[test]
fn lossy_short_link_retransmissions_are_mostly_needed() {
    let s = reliable(1_000_000).with_links(|l| l.loss = 0.05);
    let sum = run_many(&s, 3, 1).unwrap();
    assert_eq!(sum.complete_runs, 3);
    assert!(sum.retransmissions > 20.0, "{}", sum.retransmissions);
    assert!(
        sum.spurious_retransmissions < 0.2 * sum.retransmissions,
        "{} of {}",
        sum.spurious_retransmissions,
        sum.retransmissions
    );
}

#[test]
fn wire_bytes_split_by_direction() {
    let s = reliable(100_000);
    let r = run_once(&s, 3);
    assert!(r.complete);
    assert_eq!(r.wire_bytes, r.wire_bytes_forward + r.wire_bytes_reverse);
    // Forward: at least the file plus 52 B (TPDU header, CRC, IPv4/UDP) per 1476-byte body.
    let tpdus = 100_000u64.div_ceil(1476);
    assert!(r.wire_bytes_forward >= 100_000 + 52 * tpdus, "{r:?}");
    // Reverse: acknowledgements only, far less.
    assert!(r.wire_bytes_reverse > 0 && r.wire_bytes_reverse < r.wire_bytes_forward / 5);
    // Plain UDP has no reverse traffic.
    let u = run_once(
        &Scenario {
            mode: SimMode::Udp,
            ..s.clone()
        },
        3,
    );
    assert_eq!(u.wire_bytes_reverse, 0);
    assert_eq!(u.wire_bytes_forward, u.wire_bytes);
}

#[test]
fn ceiling_follows_its_definition() {
    // Clean 5 Mb/s link, no FEC: 5e6 × 1476 / 1528 (a 1500 B datagram carries 1476 B of
    // data after the 20 B header and 4 B CRC; 28 B of IPv4/UDP below it).
    let s = reliable(1000);
    let c = ceiling_bps(&s, 0);
    assert!((c - 5e6 * 1476.0 / 1528.0).abs() < 1e-6, "{c}");
    // BER 1e-5 and 10 % loss: × 0.9 × (1 − 1e-5)^(8 · 1528).
    let b = s.clone().with_links(|l| {
        l.ber = 1e-5;
        l.loss = 0.1;
    });
    let want = 5e6 * 1476.0 / 1528.0 * 0.9 * (1.0f64 - 1e-5).powi(8 * 1528);
    assert!(
        (ceiling_bps(&b, 0) - want).abs() < 1e-3,
        "{}",
        ceiling_bps(&b, 0)
    );
    // FEC parity shrinks the payload but lets a flipped datagram survive.
    let hi = s.clone().with_links(|l| l.ber = 1e-4);
    assert!(ceiling_bps(&hi, 16) > ceiling_bps(&hi, 0));
    assert!(ceiling_bps(&s, 16) < c);
    // Two paths add up; a periodic outage down 25 % of the time takes 25 %.
    let mut two = s.clone();
    two.network.paths.push(two.network.paths[0].clone());
    assert!((ceiling_bps(&two, 0) - 2.0 * c).abs() < 1e-6);
    let out = s.clone().with_links(|l| {
        l.periodic_outage = Some(aerotp_link::PeriodicOutage {
            period: Duration::from_secs(4),
            duration: Duration::from_secs(1),
            offset: Duration::ZERO,
        })
    });
    assert!((ceiling_bps(&out, 0) - 0.75 * c).abs() < 1e-6);
    // The summary reports it, and a clean bulk transfer stays under it.
    let sum = run_many(&reliable(300_000), 1, 1).unwrap();
    assert!((sum.ceiling_bps - c).abs() < 1e-6);
    assert!(sum.goodput_bps < sum.ceiling_bps);
}

#[test]
fn two_paths_carry_more_than_one() {
    // Two 2.5 Mb/s paths and a 5 Mb/s sending rate: the datagrams are spread over both, so
    // the goodput exceeds what one path alone could carry.
    let mut s = reliable(500_000)
        .with_links(|l| l.rate_bps = 2_500_000)
        .with_links(|l| l.queue_bytes = 1_000_000);
    s.network.paths.push(s.network.paths[0].clone());
    s.rate_bps = 5_000_000;
    let sum = run_many(&s, 2, 1).unwrap();
    assert_eq!(sum.complete_runs, 2);
    assert_eq!(sum.paths, 2);
    assert!(sum.goodput_bps > 3.0e6, "{}", sum.goodput_bps);
    // One path at the same sending rate queues at 2.5 Mb/s.
    let one = Scenario {
        network: aerotp_link::Network::single(s.network.paths[0].forward.clone(), None),
        ..s.clone()
    };
    let sum1 = run_many(&one, 2, 1).unwrap();
    assert!(sum1.goodput_bps < 2.5e6, "{}", sum1.goodput_bps);
    // Deterministic with several paths too.
    assert_eq!(run_once(&s, 9), run_once(&s, 9));
}

fn messages(count: u64) -> Workload {
    Workload::Messages {
        size: 200,
        interval: Duration::from_millis(100),
        count: Some(count),
        duration: None,
    }
}

#[test]
fn messages_on_a_clean_link_take_serialisation_plus_propagation() {
    // 200 B of data in a TPDU: + 24 B header and CRC + 28 B IPv4/UDP = 252 B, 0.4032 ms at
    // 5 Mb/s, then 10 ms of propagation. Messages 100 ms apart never queue.
    let s = Scenario {
        workload: messages(30),
        ..reliable(1)
    };
    let sum = run_many(&s, 2, 1).unwrap();
    assert_eq!(sum.complete_runs, 2);
    assert_eq!(sum.delivered_bytes, 6000.0);
    let d = sum.message_delay.unwrap();
    assert_eq!(d.n, 60);
    let expected = 0.010 + 252.0 * 8.0 / 5e6;
    assert!(
        (d.p50 - expected).abs() < 1e-6,
        "p50 {} vs {expected}",
        d.p50
    );
    assert!(d.max < expected + 0.001, "{d:?}");
    // A lossy link retransmits some messages: the tail grows by at least a round trip.
    let lossy = s.clone().with_links(|l| l.loss = 0.1);
    let l = run_many(&lossy, 4, 1).unwrap();
    assert_eq!(l.complete_runs, 4);
    let ld = l.message_delay.unwrap();
    assert!(ld.p99 > d.p99 + 0.02, "{ld:?} vs {d:?}");
    // The bulk workload reports no per-message delays.
    assert!(run_many(&reliable(10_000), 1, 1)
        .unwrap()
        .message_delay
        .is_none());
}

#[test]
fn stream_and_request_response_complete_intact() {
    // 400 kbit/s for 2 s in 1000 B chunks = 100 chunks, 100 000 B.
    let s = Scenario {
        workload: Workload::parse("stream,rate=400kbit,duration=2s,chunk=1000").unwrap(),
        ..reliable(1)
    };
    let sum = run_many(&s, 2, 1).unwrap();
    assert_eq!(sum.complete_runs, 2);
    assert_eq!(sum.delivered_bytes, 100_000.0);
    assert_eq!(sum.message_delay.unwrap().n, 200);
    // Request-response on one connection (the engine's connections carry data both ways):
    // 5 exchanges of 200 B up, 3000 B down, back to back. Each round trip is at least two
    // propagation delays.
    let rr = Scenario {
        workload: Workload::parse("request-response,request=200,response=3000,count=5").unwrap(),
        ..reliable(1)
    };
    let sum = run_many(&rr, 2, 1).unwrap();
    assert_eq!(sum.complete_runs, 2, "{:?}", sum.results[0]);
    assert_eq!(sum.delivered_bytes, 5.0 * 3200.0);
    let d = sum.message_delay.unwrap();
    assert_eq!(d.n, 10);
    assert!(d.p50 > 0.020 && d.p50 < 0.040, "{d:?}");
}
