//! Statistical and exact tests of the link's dynamic processes: the Gilbert–Elliott channel in
//! its three sojourn forms with per-state loss and BER, random outages (own seed or shared),
//! trace replay, and determinism with all of them on.
//!
//! Tolerances. A measured mean is compared with the model's value within 5 standard errors,
//! the standard error being derived from the model in each test (the reasoning is next to
//! each check). With every seed fixed the tests are deterministic; 5 standard errors means
//! that a correct model would fail a check for a new seed with probability below 1e-6, while
//! a wrong rate (a swapped state, a per-packet chain run in time, a mean off by 10 %) is
//! many standard errors away.

use std::time::Duration;

use aerotp_link::{
    GilbertElliott, Link, LinkConfig, LossReason, Offer, PathSpec, RandomOutage, Trace,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn secs(v: f64) -> Duration {
    Duration::from_secs_f64(v)
}

/// A link with no delay and a rate so high that a small packet's serialisation is negligible
/// (10 B in 80 ns), so a packet sent at `t` is on the air at `t` and arrives at once.
fn fast(cfg: LinkConfig) -> LinkConfig {
    LinkConfig {
        rate_bps: 1_000_000_000,
        delay: Duration::ZERO,
        ..cfg
    }
}

/// True if `t` lies in one of the sorted, disjoint intervals; `cursor` walks forward with `t`.
fn inside(intervals: &[(Duration, Duration)], cursor: &mut usize, t: Duration) -> bool {
    while *cursor < intervals.len() && intervals[*cursor].1 <= t {
        *cursor += 1;
    }
    intervals
        .get(*cursor)
        .is_some_and(|&(s, e)| s <= t && t < e)
}

/// Lengths of the runs of `true` in `v`.
fn runs(v: &[bool]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut n = 0;
    for &x in v {
        if x {
            n += 1;
        } else if n > 0 {
            out.push(n);
            n = 0;
        }
    }
    if n > 0 {
        out.push(n);
    }
    out
}

fn mean(v: impl IntoIterator<Item = f64>) -> f64 {
    let (mut s, mut n) = (0.0, 0usize);
    for x in v {
        s += x;
        n += 1;
    }
    s / n as f64
}

fn assert_within(what: &str, got: f64, expected: f64, tolerance: f64) {
    assert!(
        (got - expected).abs() <= tolerance,
        "{what}: measured {got}, model {expected}, tolerance ±{tolerance}"
    );
}

/// Time form: a continuous-time chain with exponential sojourns, independent of traffic.
#[test]
fn timed_gilbert_elliott_loss_and_burst_lengths() {
    let (m_good, m_bad) = (0.090, 0.010); // seconds
    let ge = GilbertElliott::timed(secs(m_good), secs(m_bad), 1.0);
    let mut link = Link::new(
        fast(LinkConfig {
            burst: Some(ge),
            ..LinkConfig::default()
        }),
        11,
    )
    .unwrap();
    let h = ms(2);
    let n = 200_000u64; // 400 s
    let horizon = h * n as u32;
    let bad = link.burst_bad_intervals(horizon);
    let mut cursor = 0;
    let mut lost = Vec::with_capacity(n as usize);
    let mut in_bad = 0u64;
    for k in 0..n {
        let t = h * k as u32;
        let l = matches!(link.send(t, vec![0; 10]), Offer::Lost(LossReason::Burst));
        while link.recv(t).is_some() {}
        // Exact: with loss_bad = 1 and loss_good = 0 a packet is lost iff its transmission
        // starts inside a Bad period of the published timeline.
        let b = inside(&bad, &mut cursor, t);
        assert_eq!(l, b, "packet at {t:?}");
        in_bad += u64::from(b);
        lost.push(l);
    }
    assert_eq!(link.stats().burst_bad_packets, in_bad);
    assert_eq!(link.stats().lost_burst, in_bad);

    // Sojourns in time. Exponential sojourns have SD = mean, so the mean of n of them has a
    // standard error of mean / sqrt(n); about 4000 periods of each state in 400 s.
    let bad_len: Vec<f64> = bad.iter().map(|(s, e)| (*e - *s).as_secs_f64()).collect();
    let good_len: Vec<f64> = std::iter::once(bad[0].0.as_secs_f64())
        .chain(bad.windows(2).map(|w| (w[1].0 - w[0].1).as_secs_f64()))
        .collect();
    let nb = bad_len.len() as f64;
    assert_within(
        "mean Bad time",
        mean(bad_len),
        m_bad,
        5.0 * m_bad / nb.sqrt(),
    );
    let ng = good_len.len() as f64;
    assert_within(
        "mean Good time",
        mean(good_len),
        m_good,
        5.0 * m_good / ng.sqrt(),
    );

    // Mean loss = stationary Bad share m_bad / (m_good + m_bad) = 0.1. For a two-state chain
    // with rates a = 1/m_good, b = 1/m_bad the autocovariance of the Bad indicator is
    // pi_b pi_g e^{-(a+b)tau}, so the time average over T has variance
    // 2 pi_b pi_g / ((a+b) T) (sampling every 2 ms adds a little, well inside 5 SE).
    let (a, b) = (1.0 / m_good, 1.0 / m_bad);
    let (pi_b, pi_g) = (a / (a + b), b / (a + b));
    let t_total = horizon.as_secs_f64();
    let loss = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    let sd = (2.0 * pi_b * pi_g / ((a + b) * t_total)).sqrt();
    assert_within("mean loss", loss, ge.mean_loss(), 5.0 * sd);

    // Bursts in packets. Sampled every h, the chain is a discrete Markov chain with
    // P(Bad -> Good) = pi_g (1 - e^{-(a+b)h}) (Markov property of the continuous chain), so
    // runs of lost packets are geometric with mean 1/p (5.57 here; this counts Good periods
    // that no packet saw, which merge two runs). A geometric run has SD sqrt(1-p)/p.
    let p = pi_g * (1.0 - (-(a + b) * h.as_secs_f64()).exp());
    let r = runs(&lost);
    let nr = r.len() as f64;
    let mean_run = mean(r.iter().map(|&x| x as f64));
    assert_within(
        "mean burst in packets",
        mean_run,
        1.0 / p,
        5.0 * (1.0 - p).sqrt() / p / nr.sqrt(),
    );
}

/// The timeline of the time form does not depend on the traffic: two links with the same
/// seed and different traffic publish the same Bad periods and see the same states.
#[test]
fn timed_chain_is_independent_of_traffic() {
    let ge = GilbertElliott::timed(ms(30), ms(20), 1.0);
    let cfg = fast(LinkConfig {
        burst: Some(ge),
        ..LinkConfig::default()
    });
    let mut sparse = Link::new(cfg.clone(), 3).unwrap();
    let mut dense = Link::new(cfg, 3).unwrap();
    for k in 0..20_000u64 {
        let t = Duration::from_micros(500 * k);
        let d = dense.send(t, vec![0; 10]);
        if k % 7 == 0 {
            assert_eq!(sparse.send(t, vec![0; 10]), d, "at {t:?}");
        }
    }
    let until = Duration::from_secs(10);
    assert_eq!(
        sparse.burst_bad_intervals(until),
        dense.burst_bad_intervals(until)
    );
    assert!(dense.stats().lost_burst > 1000);
}

/// Per-state BER in the time form: flips per bit measured separately in each state.
#[test]
fn per_state_ber_timed() {
    let (ber_good, ber_bad) = (1e-5, 1e-3);
    let ge = GilbertElliott {
        loss_bad: 0.0,
        ber_good: Some(ber_good),
        ber_bad: Some(ber_bad),
        ..GilbertElliott::timed(ms(50), ms(50), 0.0)
    };
    // The link's own ber is overridden in both states.
    let cfg = fast(LinkConfig {
        burst: Some(ge),
        ber: 0.3,
        ..LinkConfig::default()
    });
    let mut link = Link::new(cfg, 5).unwrap();
    let len = 1500usize;
    let n = 40_000u64;
    let h = ms(1);
    let bad = link.burst_bad_intervals(h * n as u32);
    let mut cursor = 0;
    let (mut bits, mut flips) = ([0u64; 2], [0u64; 2]);
    for k in 0..n {
        let t = h * k as u32;
        let state = usize::from(inside(&bad, &mut cursor, t));
        match link.send(t, vec![0; len]) {
            Offer::Queued { flipped_bits, .. } => {
                bits[state] += len as u64 * 8;
                flips[state] += u64::from(flipped_bits);
            }
            other => panic!("{other:?}"),
        }
        while link.recv(t).is_some() {}
    }
    // Flips in a state are Binomial(bits, ber): SD sqrt(bits ber (1-ber)).
    for (state, ber) in [(0, ber_good), (1, ber_bad)] {
        let nb = bits[state] as f64;
        let sd = (nb * ber * (1.0 - ber)).sqrt();
        assert_within(
            &format!("flips in state {state}"),
            flips[state] as f64,
            nb * ber,
            5.0 * sd,
        );
    }
}

/// Per-state BER in the packet form; a state without its own BER uses the link's `ber`.
#[test]
fn per_state_ber_per_packet_defaults_to_link_ber() {
    let (ber, ber_bad) = (1e-4, 2e-3);
    let ge = GilbertElliott {
        loss_bad: 0.0,
        ber_bad: Some(ber_bad),
        ..GilbertElliott::per_packet(0.1, 0.1, 0.0)
    };
    let cfg = fast(LinkConfig {
        burst: Some(ge),
        ber,
        ..LinkConfig::default()
    });
    let mut link = Link::new(cfg, 8).unwrap();
    let len = 1000u64;
    let n = 30_000u64;
    for k in 0..n {
        let t = Duration::from_micros(100 * k);
        assert!(link.send(t, vec![0; len as usize]).is_queued());
        while link.recv(t).is_some() {}
    }
    let s = link.stats();
    let bad_bits = (s.burst_bad_packets * len * 8) as f64;
    let good_bits = ((n - s.burst_bad_packets) * len * 8) as f64;
    // Half the packets in each state (p_gb = p_bg): the Bad share is itself checked, with the
    // chain's variance pi(1-pi)(1+l)/(1-l)/n, l = 1 - p_gb - p_bg.
    let l: f64 = 0.8;
    let share_sd = (0.25 * (1.0 + l) / (1.0 - l) / n as f64).sqrt();
    assert_within(
        "Bad share",
        s.burst_bad_packets as f64 / n as f64,
        0.5,
        5.0 * share_sd,
    );
    // Given the states, flips are a sum of two binomials.
    let expected = bad_bits * ber_bad + good_bits * ber;
    let sd = (bad_bits * ber_bad * (1.0 - ber_bad) + good_bits * ber * (1.0 - ber)).sqrt();
    assert_within("flips", s.bits_flipped as f64, expected, 5.0 * sd);
    // Without the Good state's BER (ber = 1e-4) the total would be 16 % lower: far outside.
    assert!((expected - bad_bits * ber_bad) > 5.0 * sd);
}

/// Packet forms: good_packets/bad_packets are the chain p_gb = 1/good, p_bg = 1/bad, draw for
/// draw; loss runs are geometric with mean bad_packets.
#[test]
fn packet_form_burst_lengths() {
    let by_count = GilbertElliott {
        good_packets: Some(50.0),
        bad_packets: Some(5.0),
        ..GilbertElliott::per_packet(0.0, 0.0, 1.0)
    };
    let by_prob = GilbertElliott::per_packet(1.0 / 50.0, 1.0 / 5.0, 1.0);
    let run_link = |ge: GilbertElliott| {
        let mut link = Link::new(
            fast(LinkConfig {
                burst: Some(ge),
                ..LinkConfig::default()
            }),
            21,
        )
        .unwrap();
        (0..200_000u64)
            .map(|k| {
                let t = Duration::from_micros(k);
                let lost = matches!(link.send(t, vec![0; 10]), Offer::Lost(LossReason::Burst));
                while link.recv(t).is_some() {}
                lost
            })
            .collect::<Vec<bool>>()
    };
    let lost = run_link(by_count);
    assert_eq!(
        lost,
        run_link(by_prob),
        "the two packet forms must be the same chain"
    );

    // Runs in Bad are geometric with p = p_bg = 0.2: mean 5, SD sqrt(1-p)/p; the Good
    // runs likewise with mean 50.
    let p_bg: f64 = 0.2;
    let bad_runs = runs(&lost);
    let nb = bad_runs.len() as f64;
    let got = mean(bad_runs.iter().map(|&x| x as f64));
    assert_within(
        "mean Bad run",
        got,
        5.0,
        5.0 * (1.0 - p_bg).sqrt() / p_bg / nb.sqrt(),
    );
    let kept: Vec<bool> = lost.iter().map(|l| !l).collect();
    let good_runs = runs(&kept);
    let p_gb: f64 = 0.02;
    let ng = good_runs.len() as f64;
    let got = mean(good_runs.iter().map(|&x| x as f64));
    assert_within(
        "mean Good run",
        got,
        50.0,
        5.0 * (1.0 - p_gb).sqrt() / p_gb / ng.sqrt(),
    );
    // Mean loss pi_b = 5/55, variance pi(1-pi)(1+l)/((1-l) n) for l = 1 - p_gb - p_bg.
    let pi = 5.0 / 55.0;
    let l = 1.0 - p_gb - p_bg;
    let sd = (pi * (1.0 - pi) * (1.0 + l) / ((1.0 - l) * lost.len() as f64)).sqrt();
    let loss = lost.iter().filter(|&&x| x).count() as f64 / lost.len() as f64;
    assert_within("mean loss", loss, by_count.mean_loss(), 5.0 * sd);
}

fn random_outage(seed: Option<u64>) -> RandomOutage {
    RandomOutage {
        mean_up: Duration::from_secs(2),
        down_min: ms(500),
        down_max: ms(1500),
        seed,
    }
}

/// Random outages: exponential up-times, uniform down-times, and losses exactly where the
/// schedule says.
#[test]
fn random_outage_schedule_and_losses() {
    let cfg = fast(LinkConfig {
        random_outage: Some(random_outage(None)),
        ..LinkConfig::default()
    });
    let link = Link::new(cfg.clone(), 4).unwrap();

    // The schedule over 20 000 s: about 6700 cycles of mean 3 s.
    let sched = link.random_outage_intervals(Duration::from_secs(20_000));
    let ups: Vec<f64> = std::iter::once(sched[0].0.as_secs_f64())
        .chain(sched.windows(2).map(|w| (w[1].0 - w[0].1).as_secs_f64()))
        .collect();
    let downs: Vec<f64> = sched.iter().map(|(s, e)| (*e - *s).as_secs_f64()).collect();
    let n = downs.len() as f64;
    // Exponential up-times: SE = mean / sqrt(n).
    assert_within(
        "mean up-time",
        mean(ups.iter().copied()),
        2.0,
        5.0 * 2.0 / n.sqrt(),
    );
    // Uniform down-times on [0.5, 1.5]: every one inside, mean 1, SD 1/sqrt(12).
    assert!(
        downs.iter().all(|d| (0.5..=1.5).contains(d)),
        "a down-time out of range"
    );
    assert_within(
        "mean down-time",
        mean(downs.iter().copied()),
        1.0,
        5.0 / 12f64.sqrt() / n.sqrt(),
    );
    // The ends of the range are reached: P(min > 0.51) = 0.99^n < 1e-29.
    let (lo, hi) = downs
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &d| (lo.min(d), hi.max(d)));
    assert!(lo < 0.51 && hi > 1.49, "down-times span [{lo}, {hi}]");

    // Losses: a packet every 10 ms for 1200 s.
    let mut link = Link::new(cfg, 4).unwrap();
    let h = ms(10);
    let n = 120_000u64;
    let horizon = h * n as u32;
    let down = link.random_outage_intervals(horizon);
    let mut cursor = 0;
    let mut lost = 0u64;
    for k in 0..n {
        let t = h * k as u32;
        let o = link.send(t, vec![0; 10]);
        while link.recv(t).is_some() {}
        // The packet is on the air for 80 ns from t: lost iff that meets a down period.
        let d = inside(&down, &mut cursor, t)
            || down
                .get(cursor)
                .is_some_and(|&(s, _)| s > t && s < t + Duration::from_nanos(80));
        assert_eq!(matches!(o, Offer::Lost(LossReason::Outage)), d, "at {t:?}");
        assert_eq!(
            link.is_up(t),
            !inside(&down, &mut cursor.clone(), t),
            "is_up at {t:?}"
        );
        lost += u64::from(d);
    }
    assert_eq!(link.stats().lost_outage, lost);
    let begun = down
        .iter()
        .filter(|(s, _)| *s <= h * (n - 1) as u32)
        .count() as u64;
    assert_eq!(link.stats().random_outages, begun);
    // Loss share = down share of time, 1 / (2 + 1). For an alternating renewal process the
    // time average over T has variance (s_u^2 m_d^2 + s_d^2 m_u^2) / (m_u + m_d)^3 / T with
    // m_u = s_u = 2 (exponential), m_d = 1, s_d^2 = 1/12.
    let t_total = horizon.as_secs_f64();
    let sd = ((4.0 * 1.0 + 4.0 / 12.0) / 27.0 / t_total).sqrt();
    assert_within("loss share", lost as f64 / n as f64, 1.0 / 3.0, 5.0 * sd);

    // is_up for times far behind the cursor (the schedule is regenerated from the epoch)
    // and far ahead of it agrees with the published schedule.
    for t in [
        secs(0.5),
        secs(7.25),
        secs(300.0),
        secs(1199.0),
        secs(5000.0),
    ] {
        let all = link.random_outage_intervals(t + Duration::from_secs(10));
        let mut c = 0;
        assert_eq!(link.is_up(t), !inside(&all, &mut c, t), "is_up({t:?})");
    }
    assert_eq!(link.outage_intervals(horizon), down);
}

/// Same outage seed: two links (the two directions of a path) drop at exactly the same times.
#[test]
fn shared_outage_seed_drops_together() {
    let spec = PathSpec {
        random_outage: Some(random_outage(None)),
        ..PathSpec::new(
            fast(LinkConfig::default()),
            // Asymmetric in delay only, so both directions put a packet on the air for the
            // same 80 ns and any difference in losses would be the schedule's.
            Some(LinkConfig {
                delay: ms(300),
                ..fast(LinkConfig::default())
            }),
        )
    };
    let mut fwd = Link::new(spec.forward_config(77), 1).unwrap();
    let mut rev = Link::new(spec.reverse_config(77), 2).unwrap();
    let until = Duration::from_secs(600);
    let sched = fwd.random_outage_intervals(until);
    assert!(sched.len() > 100);
    assert_eq!(sched, rev.random_outage_intervals(until));
    let mut lost = 0;
    for k in 0..60_000u64 {
        let t = ms(10 * k);
        let a = matches!(fwd.send(t, vec![0; 10]), Offer::Lost(LossReason::Outage));
        let b = matches!(rev.send(t, vec![0; 10]), Offer::Lost(LossReason::Outage));
        assert_eq!(a, b, "at {t:?}");
        assert_eq!(fwd.is_up(t), rev.is_up(t));
        lost += u64::from(a);
        while fwd.recv(t).is_some() {}
        while rev.recv(t).is_some() {}
    }
    assert!(lost > 10_000, "{lost}");
    // Without a shared seed each link draws from its own seed: different schedules.
    let own = fast(LinkConfig {
        random_outage: Some(random_outage(None)),
        ..LinkConfig::default()
    });
    let x = Link::new(own.clone(), 1)
        .unwrap()
        .random_outage_intervals(until);
    let y = Link::new(own, 2).unwrap().random_outage_intervals(until);
    assert_ne!(x, y);
    // An explicit seed wins over the link seed and over the path's.
    let pinned = PathSpec {
        random_outage: Some(random_outage(Some(9))),
        ..spec
    };
    let p = Link::new(pinned.forward_config(77), 1)
        .unwrap()
        .random_outage_intervals(until);
    let q = Link::new(pinned.reverse_config(5), 8)
        .unwrap()
        .random_outage_intervals(until);
    assert_eq!(p, q);
    assert_ne!(p, sched);
}

fn trace(text: &str, repeat: bool) -> Trace {
    let mut t = Trace::from_csv_str(text, "test.csv").unwrap();
    t.repeat = repeat;
    t
}

fn arrival(o: Offer) -> Duration {
    match o {
        Offer::Queued { arrival, .. } => arrival,
        other => panic!("expected Queued, got {other:?}"),
    }
}

/// Trace replay: each row's rate, delay, BER and loss apply from its time on; the rate at a
/// packet's transmission start applies to the whole packet.
#[test]
fn trace_steps_apply_at_their_times() {
    let t = trace(
        "# steps\ntime_s,rate_bps,delay_ms,ber,loss\n0.5,1000000,20,,\n1,500000,50,1e-3,\n2,,,,1\n3,,5,0,0\n",
        false,
    );
    let cfg = LinkConfig {
        rate_bps: 2_000_000,
        delay: ms(10),
        trace: Some(t),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    // Before the first row: the configured 2 Mb/s and 10 ms. 1000 B = 4 ms at 2 Mb/s.
    assert_eq!(arrival(link.send(ms(100), vec![0; 1000])), ms(114));
    // Row 0.5 s: 1 Mb/s (8 ms), 20 ms.
    assert_eq!(link.rate_at(ms(600)), 1_000_000);
    assert_eq!(arrival(link.send(ms(600), vec![0; 1000])), ms(628));
    // A packet whose transmission starts at 0.996 s (1 Mb/s) runs past the 1 s step: the
    // whole packet at 1 Mb/s, ends at 1.004 s; the one queued behind it starts at 1.004 s at
    // 500 kb/s (16 ms) and takes the 50 ms delay.
    assert_eq!(arrival(link.send(ms(996), vec![0; 1000])), ms(1024));
    assert_eq!(
        arrival(link.send(ms(997), vec![0; 1000])),
        ms(1004 + 16 + 50)
    );
    assert_eq!(link.serialisation_time_at(1000, ms(1500)), ms(16));
    // Row 1 s also sets ber = 1e-3: 8000 bits per packet, 8 flips on average. Over 50
    // packets (one per 18 ms, each 16 ms on the air, all inside the row) the total is
    // Binomial(4e5, 1e-3): 400 ± 5·20.
    let mut flips = 0u64;
    for k in 0..50u64 {
        let now = ms(1100 + 18 * k);
        if let Offer::Queued { flipped_bits, .. } = link.send(now, vec![0; 1000]) {
            flips += u64::from(flipped_bits);
        } else {
            panic!("lost in the BER row");
        }
    }
    assert_within(
        "flips at ber 1e-3",
        flips as f64,
        400.0,
        5.0 * 400f64.sqrt(),
    );
    // Row 2 s: loss 1 (rate, delay and ber carried over from no row: the configured ones).
    for k in 0..50u64 {
        let now = ms(2100 + 10 * k);
        assert_eq!(
            link.send(now, vec![0; 100]),
            Offer::Lost(LossReason::Random)
        );
    }
    assert!(link.is_up(ms(2500)), "a loss of 1 is not an outage");
    // Row 3 s: loss 0, delay 5 ms, configured rate (2 Mb/s: 100 B = 0.4 ms), ber 0.
    let late = arrival(link.send(ms(3000), vec![0; 100]));
    assert_eq!(late, ms(3000) + Duration::from_micros(400) + ms(5));
    assert_eq!(link.stats().lost_random, 50);
}

/// When the delay drops, the no-reorder clamp holds back the packets behind.
#[test]
fn trace_delay_drop_keeps_order() {
    let t = trace("time_s,delay_ms\n0,100\n1,10\n", false);
    let cfg = LinkConfig {
        trace: Some(t),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    let a = arrival(link.send(ms(999), vec![0; 100])); // 0.999 + 0.16 ms + 100 ms
    let b = arrival(link.send(ms(1000), vec![0; 100])); // would arrive at ~1.010 s
    assert_eq!(a, ms(1099) + Duration::from_micros(160));
    assert_eq!(b, a, "clamped to the previous arrival");
    let with_reorder = LinkConfig {
        allow_reorder: true,
        trace: Some(trace("time_s,delay_ms\n0,100\n1,10\n", false)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(with_reorder, 1).unwrap();
    link.send(ms(999), vec![0; 100]);
    assert_eq!(
        arrival(link.send(ms(1000), vec![0; 100])),
        ms(1010) + Duration::from_micros(160)
    );
}

/// A repeating trace starts again after its period (last row + first gap).
#[test]
fn trace_repeats() {
    let t = trace("time_s,rate_bps,loss\n0,1000000,0\n2,,1\n", true);
    let cfg = LinkConfig {
        delay: Duration::ZERO,
        trace: Some(t),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    // Period 4 s: [0, 2) 1 Mb/s and no loss, [2, 4) lost, then again.
    for cycle in 0..3u64 {
        let base = ms(4000 * cycle);
        assert_eq!(
            arrival(link.send(base + ms(100), vec![0; 125])),
            base + ms(101)
        );
        assert_eq!(
            link.send(base + ms(2100), vec![0; 125]),
            Offer::Lost(LossReason::Random)
        );
        // 3.9 s: still in the lossy row; the configured rate in it (5 Mb/s, 125 B = 0.2 ms).
        assert_eq!(
            link.serialisation_time_at(125, base + ms(3900)),
            Duration::from_micros(200)
        );
    }
}

/// All the new processes at once: same seed, same outputs; queries change nothing.
#[test]
fn deterministic_with_every_process() {
    let cfg = LinkConfig {
        ber: 1e-5,
        loss: 0.01,
        jitter: ms(2),
        protected_prefix: 28,
        duplicate: 0.01,
        burst: Some(GilbertElliott {
            ber_bad: Some(1e-3),
            loss_good: 0.001,
            ..GilbertElliott::timed(ms(400), ms(40), 0.3)
        }),
        random_outage: Some(RandomOutage {
            mean_up: Duration::from_secs(3),
            down_min: ms(200),
            down_max: ms(600),
            seed: None,
        }),
        trace: Some(trace(
            "time_s,rate_bps,delay_ms,ber\n0,5000000,10,\n5,2000000,40,1e-4\n10,1000000,80,\n",
            true,
        )),
        ..LinkConfig::default()
    };
    let run = |seed: u64, query: bool| {
        let mut link = Link::new(cfg.clone(), seed).unwrap();
        let mut out = Vec::new();
        for i in 0..8000u64 {
            let now = Duration::from_micros(i * 3750); // 30 s
            if query {
                // Pure queries, interleaved: must not disturb any stream.
                let _ = link.is_up(now / 2);
                let _ = link.outage_intervals(now + ms(1));
                let _ = link.burst_bad_intervals(now);
            }
            out.push(format!(
                "{:?}",
                link.send(now, (0..500).map(|b| (b ^ i) as u8).collect())
            ));
            while let Some(d) = link.recv_delivery(now) {
                out.push(format!("{d:?}"));
            }
        }
        (out, link.stats().clone())
    };
    let (a, sa) = run(5, false);
    let (b, sb) = run(5, true);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    assert_ne!(a, run(6, false).0);
    assert!(
        sa.lost_outage > 0 && sa.lost_burst > 0 && sa.lost_random > 0 && sa.corrupted_packets > 0,
        "{sa:?}"
    );
    assert!(sa.burst_bad_packets > 0 && sa.random_outages > 0, "{sa:?}");
}
