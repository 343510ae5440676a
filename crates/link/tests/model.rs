//! Behaviour of the link model: timing, queue, BER, losses, outages, determinism, paths.

use std::time::Duration;

use aerotp_link::{
    DropReason, GilbertElliott, Link, LinkConfig, LossReason, Offer, Outage, Path, PeriodicOutage,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

fn arrival(o: Offer) -> Duration {
    match o {
        Offer::Queued { arrival, .. } => arrival,
        other => panic!("expected Queued, got {other:?}"),
    }
}

/// Drains everything due at `now`.
fn drain(link: &mut Link, now: Duration) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| link.recv(now)).collect()
}

fn check_conservation(link: &Link) {
    let s = link.stats();
    assert_eq!(
        s.offered_packets + s.duplicated,
        s.dropped_packets() + s.lost_packets() + s.delivered_packets + link.in_flight() as u64,
        "{s:?}"
    );
}

#[test]
fn serialisation_timing_is_exact() {
    let mut link = Link::new(LinkConfig::default(), 1).unwrap();
    assert_eq!(link.serialisation_time(1500), us(2400));
    // Three back-to-back packets: FIFO, each 2.4 ms on the transmitter, then 10 ms.
    let a: Vec<_> = (0..3)
        .map(|_| arrival(link.send(Duration::ZERO, vec![7; 1500])))
        .collect();
    assert_eq!(a, vec![us(12_400), us(14_800), us(17_200)]);
    // A packet offered while the transmitter is idle starts at once.
    assert_eq!(arrival(link.send(ms(100), vec![0; 1500])), us(112_400));
    assert_eq!(link.next_arrival(), Some(us(12_400)));
    assert!(link.recv(us(12_399)).is_none());
    assert_eq!(link.recv(us(12_400)).unwrap(), vec![7; 1500]);
    assert_eq!(drain(&mut link, ms(20)).len(), 2);
    assert_eq!(link.next_arrival(), Some(us(112_400)));

    // Per-packet overhead counts for time: (1500 + 28) * 8 / 5e6 = 2.4448 ms.
    let cfg = LinkConfig {
        per_packet_overhead: 28,
        delay: Duration::ZERO,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    assert_eq!(
        arrival(link.send(Duration::ZERO, vec![0; 1500])),
        Duration::from_nanos(2_444_800)
    );
    // 2.4 kbit/s (Iridium channel): 100 B take 1/3 s, rounded up to the nanosecond.
    let slow = Link::new(
        LinkConfig {
            rate_bps: 2400,
            ..LinkConfig::default()
        },
        1,
    )
    .unwrap();
    assert_eq!(
        slow.serialisation_time(100),
        Duration::from_nanos(333_333_334)
    );
}

#[test]
fn queue_overflow_drops_tail() {
    let mut link = Link::new(LinkConfig::default(), 1).unwrap(); // 150 000 B queue
    let offers: Vec<_> = (0..120)
        .map(|_| link.send(Duration::ZERO, vec![0; 1500]))
        .collect();
    assert!(offers[..100].iter().all(Offer::is_queued));
    assert!(offers[100..]
        .iter()
        .all(|o| *o == Offer::Dropped(DropReason::QueueFull)));
    assert_eq!(link.stats().dropped_queue_packets, 20);
    assert_eq!(link.stats().dropped_queue_bytes, 30_000);
    // Once the first packet has left the transmitter there is room for exactly one more.
    assert!(link.send(us(2400), vec![0; 1500]).is_queued());
    assert!(!link.send(us(2400), vec![0; 1500]).is_queued());
    // A small packet fits in the bytes left if the packet limit allows it.
    let mut link = Link::new(
        LinkConfig {
            queue_packets: 3,
            ..LinkConfig::default()
        },
        1,
    )
    .unwrap();
    let n = (0..5)
        .filter(|_| link.send(Duration::ZERO, vec![0; 10]).is_queued())
        .count();
    assert_eq!(n, 3);
    check_conservation(&link);
}

#[test]
fn ber_flip_count_is_binomial() {
    let ber = 1e-4;
    let cfg = LinkConfig {
        ber,
        rate_bps: 1_000_000_000,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 7).unwrap();
    let n_packets = 10_000u64;
    let len = 1500usize;
    let mut zero_flip = 0u64;
    let mut t = Duration::ZERO;
    for i in 0..n_packets {
        t += us(20);
        let original = vec![(i % 251) as u8; len];
        let o = link.send(t, original.clone());
        let flipped = match o {
            Offer::Queued { flipped_bits, .. } => flipped_bits,
            other => panic!("{other:?}"),
        };
        let d = link.recv_delivery(t + ms(11)).unwrap();
        // The flips reported are exactly the bits that differ.
        let diff: u32 = d
            .packet
            .iter()
            .zip(&original)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(diff, flipped);
        assert_eq!(d.flipped_bits, flipped);
        zero_flip += u64::from(flipped == 0);
    }
    let s = link.stats();
    let expected = n_packets as f64 * len as f64 * 8.0 * ber; // 12 000
    let got = s.bits_flipped as f64;
    assert!(
        (got / expected - 1.0).abs() < 0.03,
        "flips {got} vs expected {expected}"
    );
    // P(no flip) = (1 - ber)^12000 ≈ e^-1.2 ≈ 0.301.
    let p0 = zero_flip as f64 / n_packets as f64;
    let p0_expected = (1.0 - ber).powi((len * 8) as i32);
    assert!(
        (p0 - p0_expected).abs() < 0.02,
        "P(0 flips) {p0} vs {p0_expected}"
    );
    assert_eq!(s.corrupted_packets, n_packets - zero_flip);
    check_conservation(&link);
}

#[test]
fn determinism_same_seed_same_output() {
    let cfg = LinkConfig {
        ber: 1e-4,
        loss: 0.05,
        jitter: ms(3),
        allow_reorder: true,
        duplicate: 0.05,
        protected_prefix: 28,
        burst: Some(GilbertElliott::per_packet(0.02, 0.3, 0.8)),
        ..LinkConfig::default()
    };
    let run = |seed: u64| {
        let mut link = Link::new(cfg.clone(), seed).unwrap();
        let mut out = Vec::new();
        for i in 0..2000u64 {
            let now = us(i * 2500);
            link.send(now, (0..700).map(|b| (b ^ i) as u8).collect());
            while let Some(d) = link.recv_delivery(now) {
                out.push(d);
            }
        }
        while let Some(t) = link.next_arrival() {
            out.push(link.recv_delivery(t).unwrap());
        }
        (out, link.stats().clone())
    };
    let (a, sa) = run(99);
    let (b, sb) = run(99);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let (c, _) = run(100);
    assert_ne!(a, c);
    // All the impairments were exercised.
    assert!(
        sa.lost_random > 0 && sa.lost_burst > 0 && sa.lost_header_corrupt > 0,
        "{sa:?}"
    );
    assert!(sa.duplicated > 0 && sa.corrupted_packets > 0, "{sa:?}");
}

#[test]
fn jitter_never_reorders_unless_allowed() {
    let cfg = LinkConfig {
        jitter: ms(20),
        ..LinkConfig::default()
    };
    let order = |allow_reorder: bool| {
        let mut link = Link::new(
            LinkConfig {
                allow_reorder,
                ..cfg.clone()
            },
            3,
        )
        .unwrap();
        for i in 0..200u32 {
            link.send(ms(u64::from(i) * 3), i.to_be_bytes().to_vec());
        }
        let mut ids = Vec::new();
        while let Some(t) = link.next_arrival() {
            let p = link.recv(t).unwrap();
            ids.push(u32::from_be_bytes(p.try_into().unwrap()));
        }
        ids
    };
    let in_order = order(false);
    assert_eq!(in_order, (0..200).collect::<Vec<_>>());
    let reordered = order(true);
    assert_eq!(reordered.len(), 200);
    assert!(
        reordered.windows(2).any(|w| w[1] < w[0]),
        "jitter 20 ms should reorder"
    );
}

#[test]
fn outage_loses_packets_on_the_air() {
    let cfg = LinkConfig {
        outages: vec![Outage {
            start: ms(1000),
            duration: ms(500),
        }],
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    assert!(link.is_up(ms(999)));
    assert!(!link.is_up(ms(1000)));
    assert!(!link.is_up(ms(1499)));
    assert!(link.is_up(ms(1500)));
    let mut lost_at = Vec::new();
    for i in 0..200u64 {
        let t = ms(i * 10);
        match link.send(t, vec![0; 1500]) {
            Offer::Lost(LossReason::Outage) => lost_at.push(i * 10),
            o => assert!(o.is_queued(), "{o:?}"),
        }
    }
    // Transmission [t, t + 2.4 ms] meets [1000, 1500) ms exactly for t = 1000..=1490.
    assert_eq!(lost_at, (100..150).map(|i| i * 10).collect::<Vec<_>>());
    check_conservation(&link);
    // A packet straddling the start of the outage is lost; one whose transmission ends
    // exactly when the outage starts survives.
    let mut link = Link::new(link.config().clone(), 1).unwrap();
    assert_eq!(
        link.send(us(998_000), vec![0; 1500]),
        Offer::Lost(LossReason::Outage)
    );
    let mut link = Link::new(link.config().clone(), 1).unwrap();
    assert!(link.send(us(997_600), vec![0; 1500]).is_queued());
    assert_eq!(link.stats().lost_outage, 0);
}

#[test]
fn periodic_outages() {
    let cfg = LinkConfig {
        periodic_outage: Some(PeriodicOutage {
            period: ms(1000),
            duration: ms(100),
            offset: ms(500),
        }),
        delay: Duration::ZERO,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1).unwrap();
    for (t, up) in [
        (0, true),
        (499, true),
        (500, false),
        (599, false),
        (600, true),
        (1550, false),
        (3_600_499, true),
        (3_600_500, false),
    ] {
        assert_eq!(link.is_up(ms(t)), up, "at {t} ms");
    }
    // One 100-byte packet per ms for 10 s: 160 µs on the air each; 10 outages of 100 ms.
    let mut lost = 0;
    for i in 0..10_000u64 {
        if let Offer::Lost(LossReason::Outage) = link.send(ms(i), vec![0; 100]) {
            lost += 1;
        }
        drain(&mut link, ms(i));
    }
    assert_eq!(lost, 10 * 100);
}

#[test]
fn header_flips_drop_the_packet() {
    let ber = 1e-3;
    let len = 100;
    let prefix = 28u32;
    let cfg = LinkConfig {
        ber,
        protected_prefix: prefix,
        rate_bps: 1_000_000_000,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg.clone(), 11).unwrap();
    let n = 20_000;
    for i in 0..n {
        link.send(us(i * 10), vec![0; len]);
        drain(&mut link, us(i * 10));
    }
    let s = link.stats();
    let p_header = 1.0 - (1.0 - ber).powi(8 * prefix as i32); // ≈ 0.2008
    let got = s.lost_header_corrupt as f64 / n as f64;
    assert!(
        (got - p_header).abs() < 0.015,
        "header-corrupt {got} vs {p_header}"
    );
    // Packets that survive still see payload flips at the BER.
    assert!(s.corrupted_packets > 0);
    // Without a virtual header nothing is dropped for corruption.
    let mut link = Link::new(
        LinkConfig {
            protected_prefix: 0,
            ..cfg
        },
        11,
    )
    .unwrap();
    for i in 0..2000 {
        link.send(us(i * 10), vec![0; len]);
    }
    assert_eq!(link.stats().lost_header_corrupt, 0);
    check_conservation(&link);
}

#[test]
fn random_loss_rate() {
    let cfg = LinkConfig {
        loss: 0.1,
        rate_bps: 1_000_000_000,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 5).unwrap();
    for i in 0..50_000 {
        link.send(us(i), vec![0; 10]);
        drain(&mut link, us(i));
    }
    let rate = link.stats().lost_random as f64 / 50_000.0;
    assert!((rate - 0.1).abs() < 0.006, "loss {rate}");
    check_conservation(&link);
}

#[test]
fn gilbert_elliott_mean_loss_and_bursts() {
    let ge = GilbertElliott::per_packet(0.01, 0.1, 1.0);
    let cfg = LinkConfig {
        burst: Some(ge),
        rate_bps: 1_000_000_000,
        delay: Duration::ZERO,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 21).unwrap();
    let n = 200_000u64;
    let mut lost = Vec::with_capacity(n as usize);
    for i in 0..n {
        lost.push(matches!(
            link.send(us(i), vec![0; 10]),
            Offer::Lost(LossReason::Burst)
        ));
        drain(&mut link, us(i));
    }
    let mean = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    let expected = ge.mean_loss(); // 0.0909
    assert!(
        (mean / expected - 1.0).abs() < 0.15,
        "mean loss {mean} vs {expected}"
    );
    // Loss runs last 1 / p_bg = 10 packets on average: bursty, not independent.
    let runs = lost.windows(2).filter(|w| w[0] && !w[1]).count();
    let mean_run = lost.iter().filter(|&&l| l).count() as f64 / runs as f64;
    assert!(
        (mean_run - 10.0).abs() < 2.0,
        "mean burst length {mean_run}"
    );
}

#[test]
fn duplication_delivers_copies() {
    let cfg = LinkConfig {
        duplicate: 0.5,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 2).unwrap();
    for i in 0..1000u64 {
        link.send(ms(i * 3), vec![i as u8; 100]);
    }
    let mut n = 0;
    while let Some(t) = link.next_arrival() {
        n += drain(&mut link, t).len();
    }
    let s = link.stats();
    assert!((400..600).contains(&s.duplicated), "{s:?}");
    assert_eq!(n as u64, 1000 + s.duplicated);
    check_conservation(&link);
}

#[test]
fn papers_path_timing_and_router_queue() {
    let mut path = Path::papers(LinkConfig::default(), 4).unwrap();
    assert_eq!(path.hops().len(), 3);
    path.send(Duration::ZERO, vec![1; 1500]);
    // 1.2 µs (10 Gb/s) + 2.4 ms + 10 ms (lossy hop) + 1.2 µs.
    let expected = Duration::from_nanos(1_200 + 12_400_000 + 1_200);
    let mut got = None;
    while let Some(t) = path.next_arrival() {
        if let Some(p) = path.recv(t) {
            assert_eq!(p, vec![1; 1500]);
            got = Some(t);
        }
    }
    assert_eq!(got, Some(expected));

    // 150 packets at LAN pace: the LAN hop passes them all, the router queue in front of
    // the 5 Mb/s hop (100 × 1500 B) drops the last 50.
    let mut path = Path::papers(LinkConfig::default(), 4).unwrap();
    for i in 0..150u64 {
        assert!(path
            .send(Duration::from_nanos(i * 1_200), vec![0; 1500])
            .is_queued());
    }
    let mut delivered = 0;
    while let Some(t) = path.next_arrival() {
        while path.recv(t).is_some() {
            delivered += 1;
        }
    }
    assert_eq!(delivered, 100);
    assert_eq!(path.hops()[1].stats().dropped_queue_packets, 50);
    let s = path.stats();
    assert_eq!(
        (
            s.offered_packets,
            s.delivered_packets,
            s.dropped_queue_packets
        ),
        (150, 100, 50)
    );
    assert!(Path::new(vec![], 1).is_err());
}
