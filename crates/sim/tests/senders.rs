//! Several senders sharing one scenario's links (`aerotp sim --senders N`): each discovering
//! its rate, they converge to equal shares of the bottleneck; the summary has each sender's
//! figures and Jain's index; combinations that cannot run are refused.

use std::time::Duration;

use aerotp_proto::{Mode, RateControl, DEFAULT_RATE_CAP_BPS};
use aerotp_sim::{
    run_many, run_many_senders, Scenario, Senders, SimMode, Striping, Workload, MAX_SENDERS,
};

/// The papers' 5 Mb/s, 10 ms link; each sender discovers its rate.
fn auto(size: usize) -> Scenario {
    Scenario {
        mode: SimMode::Aero(Mode::Reliable),
        size,
        rate_bps: DEFAULT_RATE_CAP_BPS,
        rate_control: RateControl::Discover,
        ..Scenario::default()
    }
}

#[test]
fn two_auto_rate_senders_share_five_mbit_equally_from_five_seconds() {
    let s = auto(6_000_000);
    let senders = Senders::new(2);
    let sum = run_many_senders(&s, &senders, 1, 1).unwrap();
    let v = serde_json::to_value(&sum).unwrap();
    eprintln!(
        "jain {:?} over {:?}-{:?} s, shares {:?}, goodputs {:?}",
        sum.jain,
        sum.jain_from_s,
        sum.jain_to_s,
        sum.senders.iter().map(|x| x.share_bps).collect::<Vec<_>>(),
        sum.senders
            .iter()
            .map(|x| x.goodput_bps)
            .collect::<Vec<_>>()
    );
    // The aggregate keys of one sender's summary, and the senders' own.
    for k in [
        "mode",
        "runs",
        "complete_runs",
        "delivered_bytes",
        "goodput_bps",
        "queue_delay",
        "queue_drops",
        "ceiling_bps",
        "senders",
        "jain",
        "jain_from_s",
        "jain_to_s",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    assert_eq!(v["senders"].as_array().map(Vec::len), Some(2), "{v}");
    for x in v["senders"].as_array().unwrap() {
        for k in [
            "goodput_bps",
            "delivered_bytes",
            "start_s",
            "finish_s",
            "share_bps",
        ] {
            assert!(x[k].as_f64().is_some(), "sender without {k}: {x}");
        }
        assert_eq!(x["delivered_bytes"].as_f64(), Some(6e6), "{x}");
    }
    assert_eq!(sum.total.complete_runs, 1, "{v}");
    assert_eq!(sum.total.delivered_bytes, 12e6);
    // The interval: 5 s after both started, to the first finish (about 19 s at 2.5 Mb/s each).
    assert_eq!(sum.jain_from_s, Some(5.0));
    let to = sum.jain_to_s.unwrap();
    assert!(to > 15.0, "{v}");
    let j = sum.jain.unwrap();
    assert!(j >= 0.98, "Jain {j}: {v}");
    // Together they fill the link: at least 90 % of its payload rate (5 Mb/s × 1476/1528).
    let together: f64 = sum.senders.iter().filter_map(|x| x.share_bps).sum();
    assert!(together >= 0.9 * 5e6 * 1476.0 / 1528.0, "{together}: {v}");
    // The shares are measured, not copied from the whole transfers: each is what its receiver
    // read in the interval.
    for x in &sum.senders {
        let share = x.share_bps.unwrap();
        assert!(share > 0.4 * 5e6 && share < 0.6 * 5e6, "{share}: {v}");
    }
}

#[test]
fn a_sender_starting_later_is_measured_from_its_start_plus_the_settle_time() {
    let s = auto(300_000);
    let mut senders = Senders::new(2);
    senders.starts[1] = Duration::from_secs(1);
    senders.delays[1] = Duration::from_millis(40);
    senders.settle = Duration::from_millis(200);
    let sum = run_many_senders(&s, &senders, 2, 3).unwrap();
    assert_eq!(sum.total.complete_runs, 2, "{:?}", sum.senders);
    let (a, b) = (&sum.senders[0], &sum.senders[1]);
    assert_eq!((a.start_s, b.start_s), (0.0, 1.0));
    assert_eq!(b.extra_delay_s, 0.04);
    // The second sends nothing before its start, and its round trip is 80 ms longer: its
    // set-up (one round trip at least) takes longer than the first's.
    assert!(b.first_send_s.unwrap() >= 1.0, "{b:?}");
    assert!(
        b.setup_delay_s.unwrap() > a.setup_delay_s.unwrap() + 0.04,
        "{a:?} {b:?}"
    );
    // The interval starts at the last start plus the settle time, whether or not the first
    // sender was still sending then (300 kB at up to 5 Mb/s: about 0.5 s; it is not).
    assert_eq!(sum.jain_from_s, None, "{:?}", sum.runs[0].jain_interval);
    assert_eq!(sum.jain, None);
    // Without the delay the same seeds give a different run: the delay is applied.
    let mut plain = senders.clone();
    plain.delays[1] = Duration::ZERO;
    let p = run_many_senders(&s, &plain, 2, 3).unwrap();
    assert!(p.senders[1].setup_delay_s < b.setup_delay_s, "{p:?}");
}

#[test]
fn combinations_that_cannot_run_are_refused_with_the_reason() {
    let ok = auto(100_000);
    let check = |s: &Scenario, n: &Senders| run_many_senders(s, n, 1, 1).unwrap_err().to_string();
    assert!(check(&ok, &Senders::new(0)).contains("1 to 64"));
    assert!(check(&ok, &Senders::new(MAX_SENDERS + 1)).contains("1 to 64"));
    let mut short = Senders::new(3);
    short.delays.pop();
    assert!(check(&ok, &short).contains("one per sender"));
    let udp = Scenario {
        mode: SimMode::Udp,
        rate_control: RateControl::Fixed,
        rate_bps: 5_000_000,
        ..ok.clone()
    };
    assert!(check(&udp, &Senders::new(2)).contains("mode udp"));
    let msgs = Scenario {
        workload: Workload::parse("messages").unwrap(),
        ..ok.clone()
    };
    assert!(check(&msgs, &Senders::new(2)).contains("bulk"));
    let mut late = Senders::new(2);
    late.starts[1] = ok.cap;
    assert!(check(&ok, &late).contains("before the cap"));
    let mut two = ok.clone();
    two.network.paths.push(two.network.paths[0].clone());
    assert!(check(&two, &Senders::new(2)).contains("--stripe-below"));
    two.striping = Striping::Below;
    assert_eq!(
        run_many_senders(&two, &Senders::new(2), 1, 1)
            .unwrap()
            .total
            .complete_runs,
        1
    );
}

#[test]
fn one_sender_through_the_shared_driver_moves_the_file_like_a_single_run() {
    // Not the same run bit for bit (other seed streams), but the same transfer.
    let s = Scenario {
        rate_control: RateControl::Fixed,
        rate_bps: 5_000_000,
        ..auto(200_000)
    };
    let one = run_many_senders(&s, &Senders::new(1), 2, 1).unwrap();
    let single = run_many(&s, 2, 1).unwrap();
    assert_eq!(one.total.complete_runs, 2);
    assert_eq!(one.total.delivered_bytes, single.delivered_bytes);
    let (g1, g2) = (one.total.goodput_bps, single.goodput_bps);
    assert!((g1 / g2 - 1.0).abs() < 0.05, "{g1} vs {g2}");
    // One sender alone has the link to itself: its index is 1 by definition.
    assert_eq!(one.jain, None, "300 kB is over before the 5 s settle time");
}
