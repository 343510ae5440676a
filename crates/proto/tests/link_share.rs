//! An endpoint sharing one link among its connections by traffic class
//! (`EndpointConfig::link_share`), in virtual time: what each connection actually puts on the
//! wire follows the policy, datagram-mode traffic is kept from the connections, and a class
//! changed on a live connection takes effect.

mod harness;

use aerotp_proto::{
    ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, LinkShareConfig, Mode,
    SharePolicy, TrafficClass, SHARE_PERIOD,
};
use harness::{addr_b, Impair, Net};
use std::collections::HashMap;
use std::time::Duration;

const LINK: u64 = 2_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A sender endpoint `a` with a link share, a receiver `b` that reads everything, and
/// connections of the given classes from a to b, each kept saturated by the test.
struct Bench {
    net: Net,
    conns: Vec<ConnectionHandle>,
    readers: Vec<ConnectionHandle>,
    data: Vec<u8>,
    buf: Vec<u8>,
}

impl Bench {
    fn new(policy: SharePolicy, classes: &[TrafficClass]) -> Bench {
        Bench::with_buffer(policy, classes, 256 << 10)
    }

    /// As `new`, each connection with a send buffer of `send_buffer` bytes.
    fn with_buffer(policy: SharePolicy, classes: &[TrafficClass], send_buffer: usize) -> Bench {
        let imp = Impair {
            delay: ms(10),
            ..Impair::default()
        };
        let mut net = Net::new(3, imp);
        net.a = Endpoint::new(
            EndpointConfig {
                link_share: Some(LinkShareConfig {
                    rate_bps: LINK,
                    policy,
                }),
                ..EndpointConfig::default()
            },
            3,
        );
        let cfg = ConnectionConfig {
            mode: Mode::Unreliable,
            // The share overrides this at once: every connection starts at its busy share.
            rate_bps: 100 * LINK,
            send_buffer: Some(send_buffer),
            ..ConnectionConfig::default()
        };
        net.b.listen(7, cfg.clone()).unwrap();
        let conns = classes
            .iter()
            .map(|&class| {
                let c = ConnectionConfig {
                    class,
                    ..cfg.clone()
                };
                net.a.connect(Duration::ZERO, addr_b(), 7, c).unwrap()
            })
            .collect();
        Bench {
            net,
            conns,
            readers: Vec::new(),
            data: vec![0x5a; 64 << 10],
            buf: vec![0; 64 << 10],
        }
    }

    /// Runs until `until`, keeping every connection's send buffer full (the ones listed in
    /// `quiet` get nothing) and `b` reading all; `datagram_bps` of datagram-mode messages
    /// are sent from a beside them.
    fn run(&mut self, until: Duration, quiet: &[usize], datagram_bps: u64) {
        self.run_fed(until, quiet, datagram_bps, None);
    }

    /// As `run`, with connection `fed.0` given 8000-byte writes at `fed.1` b/s instead of a
    /// full buffer.
    fn run_fed(
        &mut self,
        until: Duration,
        quiet: &[usize],
        datagram_bps: u64,
        fed: Option<(usize, u64)>,
    ) {
        let mut next_datagram = self.net.now;
        let mut next_record = self.net.now;
        let mut steps = 0u64;
        while self.net.now < until {
            steps += 1;
            assert!(steps < 5_000_000, "runaway test");
            for (i, &h) in self.conns.iter().enumerate() {
                if let Some((f, bps)) = fed.filter(|f| f.0 == i) {
                    while next_record <= self.net.now {
                        assert_eq!(self.net.a.write(h, &self.data[..8000]).unwrap(), 8000);
                        next_record += Duration::from_secs_f64(64_000.0 / bps as f64);
                    }
                    let _ = f;
                } else if !quiet.contains(&i) {
                    let _ = self.net.a.write(h, &self.data);
                }
            }
            while datagram_bps > 0 && next_datagram <= self.net.now {
                self.net
                    .a
                    .send_datagram(addr_b(), 9, 9, &[1u8; 1000], 0, 1500)
                    .unwrap();
                let wire = self.net.a.stats.datagram_bytes_sent;
                assert!(wire > 0);
                next_datagram += Duration::from_secs_f64(1028.0 * 8.0 / datagram_bps as f64);
            }
            self.step();
        }
    }

    /// One step of the pair: `a`'s events dropped, `b` accepting and reading everything.
    fn step(&mut self) {
        while self.net.a.poll_event().is_some() {}
        while let Some(e) = self.net.b.poll_event() {
            if let Event::Accepted(h) = e {
                self.readers.push(h);
            }
        }
        while self.net.b.take_datagram().is_some() {}
        for &h in &self.readers {
            while matches!(self.net.b.read(h, &mut self.buf), Ok(n) if n > 0) {}
        }
        assert!(self.net.step(), "nothing left to do at {:?}", self.net.now);
    }

    /// Wire bits per second each connection sent between the two snapshots.
    fn wire(&self) -> HashMap<ConnectionHandle, u64> {
        self.conns
            .iter()
            .map(|&h| (h, self.net.a.stats(h).unwrap().bytes_sent_wire))
            .collect()
    }
}

fn rates(
    before: &HashMap<ConnectionHandle, u64>,
    after: &HashMap<ConnectionHandle, u64>,
    conns: &[ConnectionHandle],
    secs: f64,
) -> Vec<f64> {
    conns
        .iter()
        .map(|h| (after[h] - before[h]) as f64 * 8.0 / secs)
        .collect()
}

#[test]
fn weighted_busy_connections_share_the_link_eight_to_one() {
    let mut b = Bench::new(
        SharePolicy::Weighted { weights: [8, 4, 1] },
        &[TrafficClass::Control, TrafficClass::Bulk],
    );
    b.run(ms(500), &[], 0);
    let w0 = b.wire();
    b.run(ms(2500), &[], 0);
    let r = rates(&w0, &b.wire(), &b.conns, 2.0);
    // Pacers count 28 bytes of IP/UDP per datagram that bytes_sent_wire does not: the two
    // together stay at or below the link rate.
    let total = r[0] + r[1];
    assert!(total <= LINK as f64 && total > 0.9 * LINK as f64, "{r:?}");
    let ratio = r[0] / r[1];
    assert!(
        (7.0..9.0).contains(&ratio),
        "control : bulk = {ratio:.2} ({r:?})"
    );
}

#[test]
fn strict_gives_the_top_busy_class_all_but_the_floor_and_a_quiet_one_yields() {
    let mut b = Bench::new(
        SharePolicy::Strict { floor: 0.02 },
        &[TrafficClass::Telemetry, TrafficClass::Bulk],
    );
    b.run(ms(500), &[], 0);
    let w0 = b.wire();
    b.run(ms(1500), &[], 0);
    let r = rates(&w0, &b.wire(), &b.conns, 1.0);
    assert!(r[0] > 0.9 * LINK as f64, "telemetry {r:?}");
    assert!(r[1] < 0.03 * LINK as f64, "bulk keeps only the floor {r:?}");
    // Telemetry gets nothing more: once its buffer (256 KiB, about 1.1 s at its rate) has
    // drained and its reservation decayed (about a second), bulk has the link.
    b.run(ms(3500), &[0], 0);
    let w1 = b.wire();
    b.run(ms(4500), &[0], 0);
    let r = rates(&w1, &b.wire(), &b.conns, 1.0);
    assert!(r[1] > 0.9 * LINK as f64, "bulk alone {r:?}");
}

#[test]
fn datagram_traffic_is_kept_from_a_busy_connection() {
    let mut b = Bench::new(SharePolicy::default(), &[TrafficClass::Bulk]);
    let dgram_bps = 400_000;
    b.run(ms(500), &[], dgram_bps);
    let w0 = b.wire();
    let d0 = b.net.a.stats.datagram_bytes_sent;
    b.run(ms(2500), &[], dgram_bps);
    let r = rates(&w0, &b.wire(), &b.conns, 2.0);
    let d = (b.net.a.stats.datagram_bytes_sent - d0) as f64 * 8.0 / 2.0;
    assert!(
        (0.9..1.1).contains(&(d / dgram_bps as f64)),
        "datagrams {d}"
    );
    // Bulk gets the link less 1.25 x the datagrams' rate (counted with their IP/UDP headers
    // by the pacer, not by these counters).
    let expect = LINK as f64 - 1.25 * d;
    assert!(
        (0.85 * expect..1.02 * expect).contains(&r[0]),
        "bulk {} b/s, expected about {expect}",
        r[0]
    );
    assert!(r[0] + d <= LINK as f64, "together within the link");
}

/// Connections that never hold a period's worth of bytes (a 4 KiB send buffer topped up at
/// every step, as an end-to-end window feeds a gateway's flows a little at a time) are never
/// "busy", so each is paced at the rate it would get if it were; together they fill the
/// link. They must still leave the datagrams their part of it: the endpoint paces them as
/// one at the link less the datagrams' reservation. Paced at the whole link, they put the
/// datagrams on top (2.35 Mb/s on this 2 Mb/s link): a standing queue that every class,
/// control included, waits in (docs/results/gw.md, "Datagrams on top of a full link").
#[test]
fn connections_that_are_never_busy_still_leave_the_datagrams_room() {
    let mut b = Bench::with_buffer(SharePolicy::default(), &[TrafficClass::Bulk; 8], 4 << 10);
    let dgram_bps = 400_000;
    b.run(ms(500), &[], dgram_bps);
    let w0 = b.wire();
    let (d0, n0) = (
        b.net.a.stats.datagram_bytes_sent,
        b.net.a.stats.datagrams_sent,
    );
    b.run(ms(2500), &[], dgram_bps);
    let r = rates(&w0, &b.wire(), &b.conns, 2.0);
    let d = (b.net.a.stats.datagram_bytes_sent - d0) as f64 * 8.0 / 2.0;
    let n = (b.net.a.stats.datagrams_sent - n0) as f64 / 2.0;
    assert!(
        (0.9..1.1).contains(&(d / dgram_bps as f64)),
        "datagrams {d}"
    );
    let conns: f64 = r.iter().sum();
    // With the datagrams' IP/UDP headers (the connections' are left out: a lower bound).
    let on_link = conns + d + n * 28.0 * 8.0;
    assert!(
        on_link <= LINK as f64,
        "connections {conns:.0} b/s + datagrams {d:.0} b/s: {on_link:.0} b/s on a {LINK} b/s \
         link"
    );
    assert!(
        conns > 0.6 * LINK as f64,
        "the connections still have the rest of the link: {conns:.0} b/s"
    );
}

#[test]
fn a_class_changed_on_a_live_connection_takes_its_new_share() {
    let mut b = Bench::new(
        SharePolicy::Weighted { weights: [8, 4, 1] },
        &[TrafficClass::Bulk, TrafficClass::Bulk],
    );
    b.run(ms(500), &[], 0);
    let w0 = b.wire();
    b.run(ms(1500), &[], 0);
    let r = rates(&w0, &b.wire(), &b.conns, 1.0);
    assert!((0.8..1.25).contains(&(r[0] / r[1])), "equal {r:?}");
    let first = b.conns[0];
    b.net.a.set_class(first, TrafficClass::Control).unwrap();
    b.run(ms(1500) + 2 * SHARE_PERIOD, &[], 0);
    let w1 = b.wire();
    b.run(ms(2500) + 2 * SHARE_PERIOD, &[], 0);
    let r = rates(&w1, &b.wire(), &b.conns, 1.0);
    assert!((7.0..9.0).contains(&(r[0] / r[1])), "8:1 after {r:?}");
    assert_eq!(
        b.net.a.link_share().map(|s| s.rate_bps),
        Some(LINK),
        "the share in force is reported"
    );
    assert!(b.net.a.datagram_rate(TrafficClass::Bulk).is_some());
}

#[test]
fn without_a_link_share_each_connection_keeps_its_own_rate() {
    let mut net = Net::new(5, Impair::default());
    let cfg = ConnectionConfig {
        rate_bps: 300_000,
        class: TrafficClass::Control,
        ..ConnectionConfig::default()
    };
    net.b.listen(7, cfg.clone()).unwrap();
    let h = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    net.a.handle_timeout(ms(100));
    assert_eq!(net.a.stats(h).unwrap().rate_bps, 300_000);
    assert_eq!(net.a.datagram_rate(TrafficClass::Control), None);
    assert_eq!(net.a.link_share(), None);
}

#[test]
fn a_connection_fed_below_its_share_is_not_busy_and_keeps_only_what_it_sends() {
    // Telemetry written in 8000-byte bursts at 0.8 Mb/s beside a saturating bulk connection,
    // strict priority: telemetry has bytes queued for a while after each burst (a third of
    // the time), but never a backlog that outlasts a period at its rate, so it is not busy;
    // bulk gets what telemetry's reservation leaves, not the 2 % floor a busy higher class
    // would leave it.
    let mut b = Bench::new(
        SharePolicy::Strict { floor: 0.02 },
        &[TrafficClass::Telemetry, TrafficClass::Bulk],
    );
    let fed = Some((0, 800_000));
    b.run_fed(ms(1000), &[], 0, fed);
    let w0 = b.wire();
    b.run_fed(ms(3000), &[], 0, fed);
    let r = rates(&w0, &b.wire(), &b.conns, 2.0);
    assert!(
        (0.75e6..0.9e6).contains(&r[0]),
        "telemetry sends what it is fed {r:?}"
    );
    // The usage estimate holds a burst's peak (8000 bytes in one 50 ms period: 1.28 Mb/s)
    // and decays between bursts, so telemetry keeps at most 1.25 x 1.28 = 1.6 Mb/s: bulk has
    // at least 0.4 Mb/s. Counted busy whenever bytes were queued, telemetry would leave bulk
    // about the 2 % floor (0.09 Mb/s measured that way).
    assert!(r[1] > 0.4e6, "bulk {r:?}");
    assert!(r[0] + r[1] <= LINK as f64, "within the link {r:?}");
}

/// With a link share the endpoint paces the link as a whole: 200 idle connections answered at
/// the same instant (each paced alone at its class's rate) go out no faster than the link,
/// beyond a few milliseconds of credit, and the control connection's datagram, written last,
/// goes first. Counted per connection, such a burst queued 85 kB at a 5 Mb/s link in the
/// gateway lab and the control class waited behind it.
#[test]
fn a_burst_of_many_connections_is_paced_as_one_link_and_control_goes_first() {
    let mut a = Endpoint::new(
        EndpointConfig {
            link_share: Some(LinkShareConfig {
                rate_bps: LINK,
                policy: SharePolicy::Strict { floor: 0.02 },
            }),
            max_connections: 1000,
            ..EndpointConfig::default()
        },
        5,
    );
    let cfg = |class| ConnectionConfig {
        mode: Mode::Reliable,
        class,
        ..ConnectionConfig::default()
    };
    let mut hs: Vec<ConnectionHandle> = (0..200)
        .map(|_| {
            a.connect(Duration::ZERO, addr_b(), 7, cfg(TrafficClass::Telemetry))
                .unwrap()
        })
        .collect();
    hs.push(
        a.connect(Duration::ZERO, addr_b(), 8, cfg(TrafficClass::Control))
            .unwrap(),
    );
    for &h in &hs {
        a.write(h, &[7u8; 100]).unwrap();
    }
    let mut now = Duration::ZERO;
    let mut sent: Vec<(Duration, usize, u16)> = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..100_000 {
        loop {
            buf.clear();
            if a.poll_transmit(now, &mut buf).is_none() {
                break;
            }
            let h = aerotp_wire::Header::parse(&buf).unwrap();
            sent.push((now, buf.len(), h.dst_port));
        }
        match a.poll_timeout() {
            Some(t) if t <= ms(500) => {
                assert!(t > now || sent.is_empty(), "deadline {t:?} at {now:?}");
                now = now.max(t);
                a.handle_timeout(now);
            }
            _ => break,
        }
    }
    // Every connection's opening TPDU went (ASYN copies too), the control one first.
    assert!(sent.len() >= 201, "{} datagrams", sent.len());
    assert_eq!(
        sent[0].2, 8,
        "the first datagram is the control connection's"
    );
    // Never ahead of the link: bytes (with IP/UDP headers) sent by each time within the
    // link's rate since 0 plus 10 ms of credit and one datagram.
    let mut total = 0.0;
    for &(t, len, _) in &sent {
        total += ((len + 28) * 8) as f64;
        let allowed = LINK as f64 * (t.as_secs_f64() + 0.010) + 1500.0 * 8.0;
        assert!(
            total <= allowed,
            "{total} bits by {t:?}, the link allows {allowed}"
        );
    }
    let span = sent.last().unwrap().0.as_secs_f64();
    let rate = total / span;
    assert!(
        rate > LINK as f64 * 0.8,
        "the burst went at {rate} b/s, not the link's rate"
    );
}

impl Bench {
    /// As `run` with 4 KiB buffers, connection `sparse` given a 200-byte message every
    /// `every` instead (from `self.net.now`), until `until`: how long each message waited at
    /// `a` before its connection sent it.
    fn run_sparse(&mut self, until: Duration, sparse: usize, every: Duration) -> Vec<Duration> {
        let h = self.conns[sparse];
        let (mut next, mut written) = (self.net.now, Vec::new());
        let mut waits = Vec::new();
        let mut steps = 0u64;
        while self.net.now < until {
            steps += 1;
            assert!(steps < 5_000_000, "runaway test");
            if self.net.now >= next {
                assert_eq!(self.net.a.write(h, &[1u8; 200]).unwrap(), 200);
                written.push(self.net.now);
                next += every;
            }
            for (i, &c) in self.conns.iter().enumerate() {
                if i != sparse {
                    let _ = self.net.a.write(c, &self.data);
                }
            }
            while self.net.a.poll_event().is_some() {}
            while let Some(e) = self.net.b.poll_event() {
                if let Event::Accepted(r) = e {
                    self.readers.push(r);
                }
            }
            for &r in &self.readers {
                while matches!(self.net.b.read(r, &mut self.buf), Ok(n) if n > 0) {}
            }
            assert!(self.net.step(), "nothing left to do at {:?}", self.net.now);
            let sent = self.net.a.stats(h).unwrap().sender.bytes_sent_payload as usize / 200;
            while waits.len() < sent.min(written.len()) {
                waits.push(self.net.now - written[waits.len()]);
            }
        }
        waits
    }
}

/// A sparse connection in a busy class: twenty bulk connections that are never busy (a 4 KiB
/// send buffer topped up at every step, as an end-to-end window feeds a gateway's uploads)
/// fill the link, each paced at the rate it would get if busy, the whole link, so each is
/// due whenever the link is free; a twenty-first, also bulk, writes a 200-byte message every
/// 100 ms. Served round robin, a message waited for up to a round of the others' full
/// datagrams, 20 × 5.7 ms on this 2 Mb/s link: 61 ms at the median, 120 ms at most (the
/// lab's control flow beside 50 uploads waited two such rounds: docs/results/gw.md, "Where a
/// sparse flow in a busy class waited"). Served as a sparse connection it goes after the
/// datagram on the link (4.0 ms at the median, 6.7 ms at most); the others still share the
/// rest evenly.
#[test]
fn a_sparse_connection_in_a_busy_class_is_not_held_behind_its_round() {
    let mut b = Bench::with_buffer(SharePolicy::default(), &[TrafficClass::Bulk; 21], 4 << 10);
    b.run(ms(500), &[20], 0);
    let w0 = b.wire();
    let mut waits = b.run_sparse(ms(3500), 20, ms(100));
    let r = rates(&w0, &b.wire(), &b.conns[..20], 3.0);
    waits.sort();
    assert!(waits.len() >= 29, "{} messages sent", waits.len());
    let (p50, max) = (waits[waits.len() / 2], waits[waits.len() - 1]);
    // One datagram on the link (5.7 ms) and the endpoint's own step, at most two.
    assert!(
        p50 <= ms(7) && max <= ms(13),
        "the sparse connection's messages waited {p50:?} at the median, at most {max:?}"
    );
    let (lo, hi) = r
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    let sum: f64 = r.iter().sum();
    assert!(hi / lo < 1.2, "the bulk connections share evenly: {r:?}");
    assert!(sum > 0.85 * LINK as f64, "and fill the link: {sum:.0} b/s");
}

/// A bulk-class datagram flood policed to its cap (`datagram_rate`, as the gateway's ingress
/// polices one) beside a telemetry connection fed 1,000-byte records at a fifth of the link,
/// and nothing else: telemetry keeps its rate and the flood gets the rest of the link. When
/// the connections' pace reserved 1.25 times the flood's usage on top of its cap (which
/// already leaves telemetry its reservation), the two reservations left part of the link to
/// no one: here the flood got 1.02 Mb/s of the 1.44 it was allowed (the test fails), and in
/// the lab, where the flood's cap was higher, the squeeze fell on telemetry instead, a lower
/// class's datagrams ahead of a higher class's connection (docs/results/gw.md, "Every gateway
/// figure re-measured": telemetry 103 ms old at the median beside a UDP flood).
#[test]
fn a_lower_class_datagram_flood_does_not_squeeze_a_higher_class_connection() {
    let mut b = Bench::new(SharePolicy::default(), &[TrafficClass::Telemetry]);
    let (h, fed_bps, offered_bps) = (b.conns[0], 400_000u64, 4_000_000u64);
    let (mut next_record, mut next_datagram) = (Duration::ZERO, Duration::ZERO);
    let mut run = |b: &mut Bench, until: Duration| {
        while b.net.now < until {
            while next_record <= b.net.now {
                assert_eq!(b.net.a.write(h, &b.data[..1000]).unwrap(), 1000);
                next_record += Duration::from_secs_f64(8000.0 / fed_bps as f64);
            }
            while next_datagram <= b.net.now {
                b.net
                    .a
                    .send_datagram(addr_b(), 9, 9, &[1u8; 1000], 0, 1500)
                    .unwrap();
                // Policed as the gateway's ingress does: at most the class's cap.
                let cap = b.net.a.datagram_rate(TrafficClass::Bulk).unwrap();
                let bps = offered_bps.min(cap).max(1000);
                next_datagram += Duration::from_secs_f64(1028.0 * 8.0 / bps as f64);
            }
            b.step();
        }
    };
    run(&mut b, ms(1000));
    let w0 = b.wire();
    let d0 = b.net.a.stats.datagram_bytes_sent;
    run(&mut b, ms(4000));
    let r = rates(&w0, &b.wire(), &b.conns, 3.0);
    let d = (b.net.a.stats.datagram_bytes_sent - d0) as f64 * 8.0 / 3.0;
    assert!(
        r[0] > 0.95 * fed_bps as f64,
        "telemetry {:.0} b/s of the {fed_bps} b/s it is fed (the flood {d:.0} b/s)",
        r[0]
    );
    // 2 Mb/s less telemetry's 0.41 and the datagrams' own headers: about 1.4 Mb/s.
    assert!(d > 0.62 * LINK as f64, "the flood has the rest: {d:.0} b/s");
}

/// A send buffer smaller than one recomputation period of the connection's rate can never
/// hold a period's backlog; a saturating application keeps it near full, and that counts as
/// busy: the weights still hold.
#[test]
fn a_saturating_connection_whose_buffer_is_below_a_period_of_its_rate_is_busy() {
    // 4 KiB is 18 ms of control's 1.78 Mb/s share: a third of the 50 ms period.
    let mut b = Bench::with_buffer(
        SharePolicy::Weighted { weights: [8, 4, 1] },
        &[TrafficClass::Control, TrafficClass::Bulk],
        4 << 10,
    );
    b.run(ms(500), &[], 0);
    let w0 = b.wire();
    b.run(ms(2500), &[], 0);
    let r = rates(&w0, &b.wire(), &b.conns, 2.0);
    let ratio = r[0] / r[1];
    assert!(
        (7.0..9.0).contains(&ratio),
        "control : bulk = {ratio:.2} ({r:?})"
    );
}
