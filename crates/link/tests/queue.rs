//! The link reports its queue: per-packet queueing delay (offer to start of serialisation)
//! and tail drops, against what the arithmetic of a FIFO at a known rate predicts. Virtual
//! time only: every packet is offered at a computed instant.

use std::time::Duration;

use aerotp_link::{DelayHistogram, Link, LinkConfig, Offer, Path, Trace};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// 1 Mb/s and 1250-byte packets: 10 ms of serialisation each, no framing overhead.
const RATE: u64 = 1_000_000;
const LEN: usize = 1250;
const SER_MS: u64 = 10;

fn config(queue_bytes: u64) -> LinkConfig {
    LinkConfig {
        rate_bps: RATE,
        queue_bytes,
        queue_packets: 100_000,
        ..LinkConfig::default()
    }
}

/// Offers `n` packets, one every `gap`, from time 0.
fn feed(link: &mut Link, n: u64, gap: Duration) -> Vec<Offer> {
    (0..n)
        .map(|k| link.send(gap * k as u32, vec![0u8; LEN]))
        .collect()
}

/// `got` is `want` to within the histogram's error (half a bucket: 1/256 of the value).
fn close(got: Duration, want: Duration) {
    let (g, w) = (got.as_secs_f64(), want.as_secs_f64());
    assert!(
        (g - w).abs() <= w / 256.0 + 1e-9,
        "got {got:?}, want {want:?}"
    );
}

#[test]
fn fed_at_twice_the_rate_the_queue_grows_as_predicted() {
    // 2 s at 2R with room for everything: packet k is offered at 5k ms and starts at 10k ms
    // (the transmitter never idles), so it waits 5k ms. 400 packets: waits 0, 5, ..., 1995 ms.
    let mut link = Link::new(config(10_000_000), 1).unwrap();
    let offers = feed(&mut link, 400, ms(SER_MS / 2));
    assert!(offers.iter().all(Offer::is_queued));
    let s = link.stats();
    assert_eq!(s.dropped_queue_packets, 0);
    let q = &s.queue_delay;
    assert_eq!(q.count(), 400);
    // Nearest rank: p50 is the 200th wait (k = 199), p99 the 396th (k = 395).
    close(q.p50(), ms(5 * 199));
    close(q.p99(), ms(5 * 395));
    assert_eq!(q.max(), ms(5 * 399));
    assert_eq!(q.mean(), Duration::from_micros(5 * 399 * 1000 / 2));
}

#[test]
fn a_full_queue_drops_at_the_tail_and_caps_the_wait() {
    // Room for 10 packets (12 500 B). Packet k is offered at 5k ms; the queue holds the
    // packets not yet fully sent, A − ⌊k/2⌋ of the A accepted so far, and takes one more
    // while that is ≤ 9. So k = 0..18 all enter (waits 5k ms: 0..90 ms), then every odd k is
    // dropped and every even one enters behind 9 others: 90 ms each. 400 offers: 191 drops.
    // Random loss uses the transmitter like any packet: it changes none of this and is
    // counted apart.
    let mut link = Link::new(
        LinkConfig {
            loss: 0.2,
            ..config(10 * LEN as u64)
        },
        7,
    )
    .unwrap();
    feed(&mut link, 400, ms(SER_MS / 2));
    let s = link.stats().clone();
    assert_eq!(s.dropped_queue_packets, 191);
    assert_eq!(s.dropped_queue_bytes, 191 * LEN as u64);
    assert!(s.lost_random > 0, "{s:?}");
    assert_eq!(s.queue_delay.count(), 400 - 191);
    assert_eq!(s.queue_delay.max(), ms(90));
    close(s.queue_delay.p50(), ms(90));
    close(s.queue_delay.p99(), ms(90));
    // Every accepted packet, lost or not, is accounted for.
    let delivered = std::iter::from_fn(|| link.recv(Duration::from_secs(10))).count() as u64;
    assert_eq!(delivered + s.lost_random, 400 - 191);
    // The JSON form the drivers print.
    let v = serde_json::to_value(link.stats()).unwrap();
    assert_eq!(v["dropped_queue_packets"], 191);
    assert!((v["queue_delay"]["max"].as_f64().unwrap() - 0.090).abs() < 1e-12);
}

#[test]
fn fed_below_the_rate_nothing_waits() {
    // R/2 and exactly R: each packet finds the transmitter idle (at R, it frees exactly when
    // the next comes).
    for gap in [2 * SER_MS, SER_MS] {
        let mut link = Link::new(config(150_000), 3).unwrap();
        feed(&mut link, 500, ms(gap));
        let q = &link.stats().queue_delay;
        assert_eq!(q.count(), 500);
        assert_eq!(q.p99(), Duration::ZERO, "gap {gap} ms");
        assert_eq!(q.max(), Duration::ZERO, "gap {gap} ms");
        assert_eq!(link.stats().dropped_queue_packets, 0);
    }
}

#[test]
fn a_rate_step_down_lengthens_the_wait() {
    // A trace halves the rate at 1 s; fed at the first rate throughout, the queue grows only
    // after the step: at 0.5 Mb/s a packet takes 20 ms while one comes every 10 ms.
    let trace = Trace::from_csv_str("time_s,rate_bps\n0,1000000\n1,500000\n", "steps").unwrap();
    let mut link = Link::new(
        LinkConfig {
            trace: Some(trace),
            ..config(10_000_000)
        },
        5,
    )
    .unwrap();
    feed(&mut link, 200, ms(SER_MS));
    let q = &link.stats().queue_delay;
    // The first 100 (before 1 s) never wait. After: packet 100 + j is offered at 1 s + 10j ms
    // and starts at 1 s + 20j ms, so it waits 10j ms: the last one 990 ms.
    assert_eq!(q.max(), ms(990));
    close(q.p99(), ms(10 * 97));
    assert_eq!(q.p50(), Duration::ZERO);
}

#[test]
fn a_path_reports_its_bottleneck_queue() {
    // The papers' topology: the LAN hops never queue, the 1 Mb/s hop does.
    let mut path = Path::papers(config(10_000_000), 9).unwrap();
    assert_eq!(path.bottleneck(), 1);
    for k in 0..100u32 {
        path.send(ms(5) * k, vec![0u8; LEN]);
    }
    // Forwarding between hops is lazy: collect everything so every hop has seen every packet.
    let got = std::iter::from_fn(|| path.recv(Duration::from_secs(10))).count();
    assert_eq!(got, 100);
    let s = path.stats();
    assert_eq!(s.queue_delay, path.hops()[1].stats().queue_delay);
    assert_eq!(s.queue_delay.max(), ms(5 * 99));
    assert_eq!(path.hops()[0].stats().queue_delay.max(), Duration::ZERO);
    // A trace below the other hops' rates makes its hop the bottleneck.
    let slow = Trace::from_csv_str("time_s,rate_bps\n5,1000\n", "slow").unwrap();
    let lan = LinkConfig {
        rate_bps: 10_000_000,
        trace: Some(slow),
        ..LinkConfig::default()
    };
    let p = Path::new(vec![config(150_000), lan], 1).unwrap();
    assert_eq!(p.bottleneck(), 1);
}

#[test]
fn histograms_pool_across_links() {
    let mut a = Link::new(config(10_000_000), 1).unwrap();
    let mut b = Link::new(config(10_000_000), 2).unwrap();
    feed(&mut a, 10, ms(SER_MS / 2));
    feed(&mut b, 10, ms(2 * SER_MS));
    let mut all = DelayHistogram::new();
    all.merge(&a.stats().queue_delay);
    all.merge(&b.stats().queue_delay);
    assert_eq!(all.count(), 20);
    assert_eq!(all.max(), ms(45));
    // Half the samples are b's zeros plus a's first: the median is a zero.
    assert_eq!(all.p50(), Duration::ZERO);
}

#[test]
fn trace_spans_cover_an_interval_row_by_row() {
    let t = Trace::from_csv_str("time_s,rate_bps\n1,5000000\n3,1000000\n", "t").unwrap();
    let spans: Vec<_> = t
        .spans(Duration::ZERO, Duration::from_secs(5))
        .map(|(a, b, r)| (a.as_secs(), b.as_secs(), r.and_then(|r| r.rate_bps)))
        .collect();
    assert_eq!(
        spans,
        [
            (0, 1, None),
            (1, 3, Some(5_000_000)),
            (3, 5, Some(1_000_000))
        ]
    );
    assert!(t.spans(ms(7), ms(7)).next().is_none());
    // Repeating (period 3 + 2 = 5 s): the second cycle starts on the last row until 1 s in.
    let r = Trace {
        repeat: true,
        ..t.clone()
    };
    let spans: Vec<_> = r
        .spans(Duration::from_secs(4), Duration::from_secs(12))
        .map(|(a, b, r)| (a.as_secs(), b.as_secs(), r.and_then(|r| r.rate_bps)))
        .collect();
    assert_eq!(
        spans,
        [
            (4, 5, Some(1_000_000)),
            (5, 6, Some(1_000_000)),
            (6, 8, Some(5_000_000)),
            (8, 10, Some(1_000_000)),
            (10, 11, Some(1_000_000)),
            (11, 12, Some(5_000_000)),
        ]
    );
    assert_eq!(t.min_rate_bps(), Some(1_000_000));
}
