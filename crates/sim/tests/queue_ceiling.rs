//! The simulator reports the bottleneck's queue (delay and tail drops) and reads a trace's
//! rates into the ceiling. Plain UDP keeps the sender out of it: it paces at the scenario's
//! rate whatever the link does, so the queue is the arithmetic of the link alone.

use std::time::Duration;

use aerotp_link::Trace;
use aerotp_proto::Mode;
use aerotp_sim::{
    ceiling_bps, ceiling_bps_over, run_many, transfer_span, Scenario, SimMode, Topology,
};

fn secs(v: f64) -> Duration {
    Duration::from_secs_f64(v)
}

fn with_trace(mut s: Scenario, csv: &str) -> Scenario {
    let t = Trace::from_csv_str(csv, "test").unwrap();
    s.network.paths[0].forward.trace = Some(t);
    s
}

/// A 1500-byte UDP datagram carries 1500 B of data in 1528 B on the wire; an AeroTP one
/// without FEC 1476 B.
const UDP_SHARE: f64 = 1500.0 / 1528.0;
const AERO_SHARE: f64 = 1476.0 / 1528.0;

#[test]
fn a_step_trace_ceiling_is_its_time_average() {
    // The steps: 5 → 1 → 2.5 → 5 Mb/s at 4, 12 and 20 s, with BER 1e-5 during the
    // 2.5 Mb/s phase only (an empty cell keeps the configured BER, 0).
    let s = with_trace(
        Scenario {
            mode: SimMode::Aero(Mode::Reliable),
            ..Scenario::default()
        },
        "time_s,rate_bps,ber\n0,5000000,\n4,1000000,\n12,2500000,1e-5\n20,5000000,\n",
    );
    let f = (1.0f64 - 1e-5).powi(8 * 1528);
    // Over 30 s: (5·4 + 1·8 + 2.5·f·8 + 5·10) / 30 Mb/s.
    let want = (20.0 + 8.0 + 20.0 * f + 50.0) / 30.0 * 1e6 * AERO_SHARE;
    let got = ceiling_bps_over(&s, 0, Duration::ZERO, secs(30.0));
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    // Over [2 s, 6 s): (5·2 + 1·2) / 4 = 3 Mb/s.
    let got = ceiling_bps_over(&s, 0, secs(2.0), secs(6.0));
    assert!((got - 3e6 * AERO_SHARE).abs() < 1e-3, "{got}");
    // An instant takes the row in force; without an interval, the one at 0.
    let got = ceiling_bps_over(&s, 0, secs(5.0), secs(5.0));
    assert!((got - 1e6 * AERO_SHARE).abs() < 1e-6, "{got}");
    assert!((ceiling_bps(&s, 0) - 5e6 * AERO_SHARE).abs() < 1e-6);
    // Without a trace the interval changes nothing.
    let plain = Scenario::default();
    let c = ceiling_bps(&plain, 0);
    assert_eq!(ceiling_bps_over(&plain, 0, secs(1.0), secs(9.0)), c);
}

#[test]
fn a_rate_step_fills_the_queue_and_the_summary_says_so() {
    // 1.25 MB paced at 5 Mb/s over a link that drops from 5 to 1 Mb/s at 1 s. After the step
    // the 150 kB queue (100 datagrams) fills and drops at the tail. A datagram accepted into a
    // full queue waits for the 98 ahead of it plus what is left of the one on the air:
    // (98, 99] × 1528 B × 8 / 1 Mb/s = (1.1980, 1.2102] s.
    let s = with_trace(
        Scenario {
            mode: SimMode::Udp,
            size: 1_250_000,
            topology: Topology::Papers,
            ..Scenario::default()
        },
        "time_s,rate_bps\n0,5000000\n1,1000000\n",
    );
    let sum = run_many(&s, 1, 1).unwrap();
    let r = &sum.results[0];
    let q = sum.queue_delay;
    assert!(q.max > 1.198 && q.max <= 1.2103, "{q:?}");
    assert!(q.p99 > 1.19 && q.p99 <= q.max, "{q:?}");
    assert_eq!(q.n, r.queue_delay_forward.count());
    // Every datagram the receiver missed was a tail drop: none was lost on the air.
    assert!(r.queue_drops_forward > 150, "{r:?}");
    assert_eq!(r.queue_drops_forward, r.tpdus_lost);
    assert_eq!(sum.queue_drops, r.queue_drops_forward as f64);
    assert_eq!(
        q.n + r.queue_drops_forward,
        834,
        "every datagram offered once"
    );
    // Nothing went the other way.
    assert_eq!(sum.queue_delay_reverse.n, 0);
    // The ceiling is the trace's average over the transfer, not the configured 5 Mb/s:
    // 5 Mb/s for the first second, 1 Mb/s after, until the last delivery.
    let (from, to) = transfer_span(r);
    assert_eq!(from, Duration::ZERO);
    assert!(to > secs(3.0), "{to:?}");
    let t = to.as_secs_f64();
    let want = (5e6 * 1.0 + 1e6 * (t - 1.0)) / t * UDP_SHARE;
    assert!((sum.ceiling_bps - want).abs() < 1e-6 * want, "{sum:?}");
    assert!(sum.goodput_bps <= sum.ceiling_bps, "{sum:?}");
}

#[test]
fn below_the_link_rate_nothing_waits() {
    // 5 Mb/s paced into a 10 Mb/s link: each datagram finds the transmitter idle.
    let s = Scenario {
        mode: SimMode::Udp,
        size: 300_000,
        ..Scenario::default()
    }
    .with_links(|l| l.rate_bps = 10_000_000);
    let sum = run_many(&s, 2, 1).unwrap();
    assert_eq!(sum.queue_delay.n, 2 * 200);
    assert_eq!(sum.queue_delay.p99, 0.0);
    assert_eq!(sum.queue_delay.max, 0.0);
    assert_eq!(sum.queue_drops, 0.0);
}
