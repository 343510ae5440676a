use super::*;

fn addr(i: u8) -> PathAddr {
    SocketAddr::from(([10, 0, i, 2], 9000)).into()
}

fn three(now: Duration) -> Paths {
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let mut p = Paths::new(addr(0), now, rtt.fresh());
    assert_eq!(p.add(addr(1), now, rtt.fresh()), Some(1));
    assert_eq!(p.add(addr(2), now, rtt.fresh()), Some(2));
    p
}

fn counts(p: &mut Paths, n: usize, avoid: Option<u8>) -> [usize; 3] {
    let mut c = [0; 3];
    for _ in 0..n {
        c[usize::from(p.pick(avoid))] += 1;
    }
    c
}

#[test]
fn one_path_is_always_path_zero() {
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let mut p = Paths::new(addr(0), Duration::ZERO, rtt);
    assert!(!p.multi());
    assert_eq!(p.pick(None), 0);
    assert_eq!(p.pick(Some(0)), 0);
    assert_eq!(p.control(Duration::from_millis(10)), 0);
    assert_eq!(p.up_fraction(), 1.0);
}

#[test]
fn equal_paths_share_evenly_and_a_retransmission_avoids_its_path() {
    let mut p = three(Duration::ZERO);
    assert_eq!(counts(&mut p, 300, None), [100, 100, 100]);
    let c = counts(&mut p, 300, Some(1));
    assert_eq!(c[1], 0, "{c:?}");
    assert_eq!(c[0] + c[2], 300);
}

#[test]
fn repairs_avoiding_the_latest_data_path_leave_every_path_its_share() {
    // Two equal paths, one repair after every four data TPDUs, each repair on the other path
    // than the data just before it (the rule of `emit_repair`). The data alternates, so the
    // TPDU before a repair is always on the same path: the repairs must still not pile up
    // there, or that path carries 1.5 times its share and queues.
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let mut p = Paths::new(addr(0), Duration::ZERO, rtt.fresh());
    assert_eq!(p.add(addr(1), Duration::ZERO, rtt.fresh()), Some(1));
    let mut all = [0usize; 2];
    let mut repairs = [0usize; 2];
    let mut last_data = 0;
    for i in 0..1000 {
        let path = if i % 5 == 4 {
            let r = p.pick(Some(last_data));
            assert_ne!(r, last_data, "a repair went on the latest data's path");
            repairs[usize::from(r)] += 1;
            r
        } else {
            last_data = p.pick(None);
            last_data
        };
        all[usize::from(path)] += 1;
    }
    assert!(all[0].abs_diff(all[1]) <= 2, "datagrams per path {all:?}");
    assert!(
        repairs[0].abs_diff(repairs[1]) <= 2,
        "repairs per path {repairs:?}"
    );
}

#[test]
fn weights_follow_what_each_path_delivers() {
    let mut p = three(Duration::ZERO);
    // Path 2 delivered a quarter of what the others did, over several intervals.
    let mut acked = vec![LaneStats::default(); 3];
    let mut now = Duration::ZERO;
    for _ in 0..40 {
        now += Duration::from_millis(200);
        acked[0].bytes_acked += 400_000;
        acked[1].bytes_acked += 400_000;
        acked[2].bytes_acked += 100_000;
        for a in &mut acked {
            a.tpdus_acked += 100;
        }
        p.reweigh(now, &acked);
    }
    let c = counts(&mut p, 900, None);
    // 4 : 4 : 1 of the picks, within a pick or two of rounding.
    assert!((395..=405).contains(&c[0]), "{c:?}");
    assert!((95..=105).contains(&c[2]), "{c:?}");
    assert!((p.up_fraction() - 1.0).abs() < 1e-9);
    let s = p.stats(now, &acked);
    assert_eq!(s[0].delivered_bps, 16_000_000);
}

#[test]
fn too_few_acknowledgements_measure_nothing() {
    let mut p = three(Duration::ZERO);
    let mut acked = vec![LaneStats::default(); 3];
    let mut now = Duration::ZERO;
    p.reweigh(now, &acked);
    for _ in 0..40 {
        now += Duration::from_millis(200);
        acked[0].bytes_acked += 1_000;
        acked[0].tpdus_acked += 1;
        p.reweigh(now, &acked);
    }
    // 40 TPDUs, all on path 0: under 16 a path on average, so the weights stand.
    assert_eq!(counts(&mut p, 300, None), [100, 100, 100]);
}

#[test]
fn a_path_that_delivers_nothing_keeps_a_floor() {
    let mut p = three(Duration::ZERO);
    let mut acked = vec![LaneStats::default(); 3];
    let mut now = Duration::ZERO;
    for _ in 0..40 {
        now += Duration::from_millis(200);
        acked[0].bytes_acked += 100_000;
        acked[1].bytes_acked += 100_000;
        acked[0].tpdus_acked += 70;
        acked[1].tpdus_acked += 70;
        p.reweigh(now, &acked);
    }
    let c = counts(&mut p, 1000, None);
    assert!(c[2] > 0 && c[2] < 40, "{c:?}");
}

#[test]
fn a_down_path_takes_its_share_of_the_rate_and_gets_it_back() {
    let mut p = three(Duration::ZERO);
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let pi = Duration::from_millis(250);
    // Path 1 has been silent since 1 s, without a sample: down at 1 s + 100 ms +
    // max(4 × 50 ms, 250 ms), sooner than twice the connection's timeout (3 × the 100 ms
    // guess, twice).
    let at = p.down_at(1, Some(Duration::from_secs(1)), pi, &rtt);
    assert_eq!(at, Some(Duration::from_millis(1350)));
    // With steady samples of 30 ms: twice its timeout, sooner than 30 ms + 250 ms.
    for _ in 0..20 {
        p.on_latency(1, Duration::from_millis(30), Duration::ZERO);
    }
    let (_, rto) = p.timing(1, &rtt);
    assert!(rto * 2 < Duration::from_millis(280), "{rto:?}");
    assert_eq!(
        p.down_at(1, Some(Duration::from_secs(1)), pi, &rtt),
        Some(Duration::from_secs(1) + rto * 2)
    );
    let now = Duration::from_millis(1300);
    p.set_down(now, 1, pi);
    assert!((p.up_fraction() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(counts(&mut p, 100, None)[1], 0, "no data on a down path");
    // Probes at once, then 250 ms, 500 ms, 1 s, 2 s, 2 s apart.
    let mut sent = Vec::new();
    let mut t = now;
    while t < now + Duration::from_secs(8) {
        p.probes_due(t);
        if let Some(i) = p.take_probe() {
            assert_eq!(i, 1);
            sent.push((t - now).as_millis());
        }
        t += Duration::from_millis(50);
    }
    assert_eq!(sent, [0, 250, 750, 1750, 3750, 5750, 7750]);
    // The last path up is never declared down.
    p.set_down(now, 2, pi);
    assert_eq!(p.down_at(0, Some(Duration::ZERO), pi, &rtt), None);
    // Heard again: up, with its old share.
    assert!(p.on_heard(t, 1, 100));
    assert!(!p.on_heard(t, 1, 100), "already up");
    assert!((p.up_fraction() - 2.0 / 3.0).abs() < 1e-9);
    let s = p.stats(t, &[]);
    assert_eq!(s[1].downs, 1);
    assert_eq!(s[1].probes, 7);
    assert_eq!(s[1].time_down, t - now);
    assert!(s[2].time_down > Duration::ZERO && !s[2].up);
}

#[test]
fn control_goes_where_the_peer_was_heard_or_a_probe_came() {
    let mut p = three(Duration::ZERO);
    p.on_heard(Duration::from_millis(1), 2, 60);
    assert_eq!(p.control(Duration::from_millis(10)), 2);
    p.on_heard(Duration::from_millis(2), 1, 60);
    p.reply_on_rx();
    p.on_heard(Duration::from_millis(3), 0, 60);
    assert_eq!(
        p.control(Duration::from_millis(10)),
        1,
        "the answer to a probe goes back on its path"
    );
    assert_eq!(
        p.control(Duration::from_millis(10)),
        0,
        "then the latest path again"
    );
    // Every path in turn for an outage's probes.
    let seq: Vec<u8> = (0..4).map(|_| p.outage_probe()).collect();
    assert_eq!(seq, [0, 1, 2, 0]);
}

#[test]
fn paths_are_bounded() {
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let mut p = Paths::new(addr(0), Duration::ZERO, rtt.fresh());
    for i in 1..MAX_PATHS as u8 {
        assert_eq!(
            p.add(addr(i), Duration::ZERO, rtt.fresh()),
            Some(usize::from(i))
        );
    }
    assert_eq!(p.add(addr(200), Duration::ZERO, rtt.fresh()), None);
    assert_eq!(
        p.add(addr(3), Duration::ZERO, rtt.fresh()),
        Some(3),
        "known"
    );
}

/// Two of this host's addresses reaching one peer address are two paths; the same pair
/// again is the same path.
#[test]
fn a_path_is_its_local_and_its_remote_address() {
    let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(20));
    let ground = SocketAddr::from(([10, 9, 0, 1], 47000));
    let radio = |i: u8| PathAddr::new(Some(IpAddr::from([10, 0, i, 2])), ground);
    let mut p = Paths::new(radio(1), Duration::ZERO, rtt.fresh());
    assert_eq!(p.add(radio(2), Duration::ZERO, rtt.fresh()), Some(1));
    assert_eq!(p.add(radio(1), Duration::ZERO, rtt.fresh()), Some(0));
    assert_eq!(p.index_of(radio(2)), Some(1));
    assert_eq!(p.index_of(ground.into()), None);
    assert_eq!(p.remote(0), p.remote(1));
    let stats = p.stats(Duration::ZERO, &[]);
    assert_eq!(stats[1].local, Some(IpAddr::from([10, 0, 2, 2])));
}
