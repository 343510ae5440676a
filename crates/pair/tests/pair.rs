//! The pair driver: transfers end to end, time jumps to events, the observer's tags and
//! filter, the cap, and the round robin over several paths.

use aerotp_link::{LinkConfig, Path};
use aerotp_pair::{Advance, Delivery, Dir, Links, Observer, Pair, Quiet};
use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Event, Mode};
use std::net::SocketAddr;
use std::time::Duration;

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 9000))
}

fn link(delay_ms: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        rate_bps: 10_000_000,
        delay: Duration::from_millis(delay_ms),
        loss,
        ..LinkConfig::default()
    }
}

fn pair(fwd: LinkConfig, rev: LinkConfig) -> Pair {
    Pair::new(
        Endpoint::new(EndpointConfig::default(), 1),
        Endpoint::new(EndpointConfig::default(), 2),
        Links::single(
            Path::new(vec![fwd], 11).unwrap(),
            Path::new(vec![rev], 12).unwrap(),
        ),
        addr(1),
        addr(2),
    )
}

fn cfg() -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 8_000_000,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    }
}

/// Runs a transfer of `data` from a to b with `obs`; returns what b read and when it was
/// accepted.
fn transfer(
    p: &mut Pair,
    data: &[u8],
    obs: &mut impl Observer,
    cap: Duration,
) -> (Vec<u8>, Option<Duration>) {
    p.b.listen(7, cfg()).unwrap();
    let ch = p.a.connect(Duration::ZERO, addr(2), 7, cfg()).unwrap();
    let (mut written, mut closed) = (0, false);
    let (mut got, mut accepted, mut rx) = (Vec::new(), None, None);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        written += p.a.write(ch, &data[written..]).unwrap_or(0);
        if written == data.len() && !closed {
            p.a.close(ch).unwrap();
            closed = true;
        }
        while let Some(e) = p.b.poll_event() {
            if let Event::Accepted(h) = e {
                rx = Some(h);
                accepted = Some(p.now);
            }
        }
        while p.a.poll_event().is_some() {}
        if let Some(h) = rx {
            while let Ok(n @ 1..) = p.b.read(h, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            if p.b.at_eof(h) {
                return (got, accepted);
            }
        }
        if p.step(obs, None, cap) != Advance::Moved {
            return (got, accepted);
        }
    }
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_transfer_arrives_whole_and_time_jumps_to_the_link_delay() {
    let mut p = pair(link(10, 0.0), link(10, 0.0));
    let d = data(200_000);
    let (got, accepted) = transfer(&mut p, &d, &mut Quiet, Duration::from_secs(60));
    assert_eq!(got, d);
    // The ASYN's serialisation at 10 Mb/s plus 10 ms: accepted at the first arrival.
    let at = accepted.expect("accepted");
    assert!(
        at > Duration::from_millis(10) && at < Duration::from_millis(12),
        "{at:?}"
    );
    // 200 kB at 8 Mb/s is about 200 ms: virtual time, not a busy loop.
    assert!(p.now < Duration::from_millis(400), "{:?}", p.now);
}

#[test]
fn a_lossy_link_still_delivers_every_byte() {
    let mut p = pair(link(5, 0.1), link(5, 0.1));
    let d = data(300_000);
    let (got, _) = transfer(&mut p, &d, &mut Quiet, Duration::from_secs(120));
    assert_eq!(got, d);
    let lost = p.links.paths(Dir::Forward)[0].stats();
    assert!(
        lost.delivered_packets < lost.offered_packets,
        "the link dropped nothing: {lost:?}"
    );
}

/// Tags every forward datagram with its number and drops the reverse ones it is told to.
#[derive(Default)]
struct Tagger {
    sent: u64,
    arrived: Vec<u64>,
    drop_reverse: bool,
    reverse_seen: u64,
    steps: u64,
}

impl Observer for Tagger {
    fn sent(&mut self, _: Duration, dir: Dir, _: &[u8], _: &Endpoint) -> Option<u64> {
        match dir {
            Dir::Forward => {
                self.sent += 1;
                Some(self.sent)
            }
            Dir::Reverse => {
                self.reverse_seen += 1;
                (!self.drop_reverse).then_some(0)
            }
        }
    }

    fn arrived(&mut self, _: Duration, dir: Dir, d: &Delivery) {
        if dir == Dir::Forward {
            self.arrived.push(d.tag);
        }
    }

    fn stepped(&mut self, _: Duration, _: &Endpoint, _: &Endpoint) {
        self.steps += 1;
    }
}

#[test]
fn the_observer_tags_what_it_sends_and_sees_it_arrive_in_order() {
    let mut p = pair(link(10, 0.0), link(10, 0.0));
    let mut t = Tagger::default();
    let d = data(50_000);
    let (got, _) = transfer(&mut p, &d, &mut t, Duration::from_secs(60));
    assert_eq!(got, d);
    assert!(t.sent > 30 && t.steps > 0);
    // Every forward datagram that arrived so far carried its own tag, in sending order.
    let expected: Vec<u64> = (1..=t.arrived.len() as u64).collect();
    assert_eq!(t.arrived, expected);
}

#[test]
fn what_the_observer_drops_never_reaches_the_link() {
    let mut p = pair(link(10, 0.0), link(10, 0.0));
    let mut t = Tagger {
        drop_reverse: true,
        ..Tagger::default()
    };
    let d = data(50_000);
    let (got, _) = transfer(&mut p, &d, &mut t, Duration::from_secs(5));
    // The receiver got the data but its every acknowledgement was dropped: the sender
    // cannot finish, and the reverse link carried nothing.
    assert_eq!(got, d);
    assert!(t.reverse_seen > 0);
    assert_eq!(p.links.paths(Dir::Reverse)[0].stats().offered_packets, 0);
    assert_eq!(p.a.stats.datagrams_in, 0);
}

#[test]
fn advance_stops_at_the_cap_and_reports_idle_with_nothing_left() {
    let mut p = pair(link(10, 0.0), link(10, 0.0));
    assert_eq!(
        p.advance(&mut Quiet, None, Duration::from_secs(1)),
        Advance::Idle
    );
    p.b.listen(7, cfg()).unwrap();
    p.a.connect(Duration::ZERO, addr(2), 7, cfg()).unwrap();
    // The ASYN (and its paced copies) arrive after 10 ms: a cap of 5 ms stops time there,
    // delivering nothing.
    let cap = Duration::from_millis(5);
    let mut turns = 0;
    while p.step(&mut Quiet, None, cap) == Advance::Moved {
        assert!(p.now <= cap, "{:?} past the cap", p.now);
        turns += 1;
        assert!(turns < 100, "never reached the cap");
    }
    assert_eq!(p.now, cap);
    assert_eq!(p.b.connection_count(), 0);
    // A wake-up before any event moves time exactly there.
    let wake = Duration::from_millis(7);
    assert_eq!(
        p.advance(&mut Quiet, Some(wake), Duration::from_secs(1)),
        Advance::Moved
    );
    assert_eq!(p.now, wake);
}

#[test]
fn paths_share_datagrams_by_their_weights() {
    let path = |seed| Path::new(vec![link(10, 0.0)], seed).unwrap();
    let mut links = Links::new(
        vec![(path(1), 3_000_000), (path(2), 1_000_000)],
        vec![(path(3), 1)],
    );
    for i in 0..400u64 {
        links.send(Dir::Forward, Duration::from_millis(i), vec![0u8; 100], i);
    }
    let offered: Vec<u64> = links
        .paths(Dir::Forward)
        .iter()
        .map(|p| p.stats().offered_packets)
        .collect();
    assert_eq!(offered, [300, 100]);
    // Everything comes out, each datagram with its tag.
    let mut tags = Vec::new();
    while let Some(d) = links.recv(Dir::Forward, Duration::from_secs(10)) {
        tags.push(d.tag);
    }
    tags.sort_unstable();
    assert_eq!(tags, (0..400).collect::<Vec<u64>>());
    assert_eq!(links.next_arrival(), None);
}
