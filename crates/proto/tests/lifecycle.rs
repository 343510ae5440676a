//! Connection and endpoint life cycle in virtual time: a refused connection, a full endpoint,
//! the idle and close timeouts, a late AFIN whose AFINACK was lost, and many connections at
//! once. A small two-endpoint network of its own (fixed delay, a filter that may drop chosen
//! datagrams) so each test decides exactly what is lost.

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode,
};
use aerotp_wire::Flags;
use std::collections::HashMap;
use std::time::Duration;

mod harness;

use harness::addr_b;
use harness::filtered;

const DELAY: Duration = Duration::from_millis(10);

/// The filtered link (`harness::filtered`), and what b's application did: the connections b
/// accepted, and what it read from each (it reads everything and closes its side at the end
/// of the stream, in `run_until`).
struct Link {
    net: filtered::Link,
    accepted: Vec<ConnectionHandle>,
    got: HashMap<ConnectionHandle, Vec<u8>>,
}

impl std::ops::Deref for Link {
    type Target = filtered::Link;
    fn deref(&self) -> &filtered::Link {
        &self.net
    }
}

impl std::ops::DerefMut for Link {
    fn deref_mut(&mut self) -> &mut filtered::Link {
        &mut self.net
    }
}

impl Link {
    fn new(b_cfg: EndpointConfig) -> Link {
        let a = Endpoint::new(EndpointConfig::default(), 1);
        let b = Endpoint::new(b_cfg, 2);
        Link {
            net: filtered::Link::new(a, b, DELAY),
            accepted: Vec::new(),
            got: HashMap::new(),
        }
    }

    /// Sends what is due, then moves to the next event; false when nothing is left or
    /// `limit` is reached.
    fn step(&mut self, limit: Duration) -> bool {
        self.net.transmit(|_, _, _| {});
        match self.net.next_event() {
            Some(next) if next <= limit => {
                self.net.advance(next);
                true
            }
            _ => false,
        }
    }
}

fn cfg(mode: Mode) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 10_000_000,
        ..ConnectionConfig::with_mode(mode)
    }
}

/// Runs until `done` says so (checked after each step) or `limit`; returns the closes seen.
fn run_until(
    link: &mut Link,
    limit: Duration,
    mut done: impl FnMut(&mut Link, &HashMap<ConnectionHandle, CloseOutcome>) -> bool,
) -> (
    HashMap<ConnectionHandle, CloseOutcome>,
    HashMap<ConnectionHandle, (CloseOutcome, Duration)>,
) {
    let mut a_closed = HashMap::new();
    let mut b_closed = HashMap::new();
    for _ in 0..2_000_000 {
        while let Some(e) = link.a.poll_event() {
            if let Event::Closed(h, o) = e {
                a_closed.insert(h, o);
            }
        }
        while let Some(e) = link.b.poll_event() {
            match e {
                Event::Closed(h, o) => {
                    b_closed.insert(h, (o, link.now));
                }
                Event::Accepted(h) => link.accepted.push(h),
                _ => {}
            }
        }
        let mut buf = [0u8; 8192];
        for &r in &link.accepted {
            while let Ok(k @ 1..) = link.net.b.read(r, &mut buf) {
                link.got.entry(r).or_default().extend_from_slice(&buf[..k]);
            }
            if link.net.b.at_eof(r) {
                let _ = link.net.b.close(r);
            }
        }
        if done(link, &a_closed) || !link.step(limit) {
            break;
        }
    }
    (a_closed, b_closed)
}

#[test]
fn a_connection_to_a_port_nobody_listens_on_is_reset_within_a_round_trip() {
    let mut link = Link::new(EndpointConfig::default());
    link.b.listen(7, cfg(Mode::Reliable)).unwrap();
    let h = link
        .a
        .connect(Duration::ZERO, addr_b(), 8, cfg(Mode::Reliable))
        .unwrap();
    link.a.write(h, b"hello").unwrap();
    let (closed, _) = run_until(&mut link, Duration::from_secs(5), |_, c| !c.is_empty());
    match closed.get(&h) {
        Some(CloseOutcome::Reset(why)) => assert!(why.contains("refused"), "{why}"),
        other => panic!("expected a reset, got {other:?}"),
    }
    assert!(
        link.now <= DELAY * 2 + Duration::from_millis(5),
        "{:?}",
        link.now
    );
    // One refusal per redundant ASYN copy that arrived.
    assert_eq!(link.b.stats.refused, 3);
    assert_eq!(
        link.b.connection_count(),
        0,
        "no state kept for a refused peer"
    );
}

#[test]
fn a_full_endpoint_refuses_the_next_connection_and_keeps_the_others() {
    let mut link = Link::new(EndpointConfig {
        max_connections: 2,
        ..EndpointConfig::default()
    });
    link.b.listen(7, cfg(Mode::Reliable)).unwrap();
    let hs: Vec<ConnectionHandle> = (0..3)
        .map(|_| {
            let h = link
                .a
                .connect(Duration::ZERO, addr_b(), 7, cfg(Mode::Reliable))
                .unwrap();
            link.a.write(h, &[7u8; 3000]).unwrap();
            link.a.close(h).unwrap();
            h
        })
        .collect();
    let (closed, _) = run_until(&mut link, Duration::from_secs(10), |_, c| c.len() == 3);
    let resets = hs
        .iter()
        .filter(|h| matches!(closed.get(h), Some(CloseOutcome::Reset(w)) if w.contains("too many")))
        .count();
    assert_eq!(resets, 1, "{closed:?}");
    let finished = hs
        .iter()
        .filter(|h| {
            matches!(
                closed.get(h),
                Some(CloseOutcome::Finished { confirmed: true })
            )
        })
        .count();
    assert_eq!(finished, 2, "{closed:?}");
}

#[test]
fn a_peer_that_vanishes_ends_the_connection_at_the_idle_timeout() {
    let mut link = Link::new(EndpointConfig::default());
    let mut c = cfg(Mode::Reliable);
    c.idle_timeout = Duration::from_secs(5);
    link.b.listen(7, c.clone()).unwrap();
    let h = link.a.connect(Duration::ZERO, addr_b(), 7, c).unwrap();
    link.a.write(h, &[1u8; 20_000]).unwrap();
    // Everything after 100 ms is lost, both ways, for good.
    link.drop = Box::new(|now, _, _| now >= Duration::from_millis(100));
    let (closed, b_closed) = run_until(&mut link, Duration::from_secs(60), |_, c| !c.is_empty());
    assert_eq!(closed.get(&h), Some(&CloseOutcome::IdleTimeout));
    // Last heard just before 100 ms + a path delay: the timeout 5 s after that.
    let at = link.now.as_secs_f64();
    assert!((5.0..5.2).contains(&at), "sender gave up at {at} s");
    let (o, t) = b_closed.values().next().expect("the receiver gave up too");
    assert_eq!(o, &CloseOutcome::IdleTimeout);
    assert!(t.as_secs_f64() < 5.2, "receiver at {t:?}");
}

#[test]
fn an_afin_nobody_acknowledges_ends_at_the_close_timeout() {
    let mut link = Link::new(EndpointConfig::default());
    let mut c = cfg(Mode::QuasiReliable);
    c.close_timeout = Duration::from_secs(3);
    link.b.listen(7, c.clone()).unwrap();
    let h = link.a.connect(Duration::ZERO, addr_b(), 7, c).unwrap();
    link.a.write(h, &[2u8; 5000]).unwrap();
    // The data arrives; from 200 ms on nothing does (the AFIN goes after that).
    link.drop = Box::new(|now, _, _| now >= Duration::from_millis(200));
    run_until(&mut link, Duration::from_millis(300), |_, _| false);
    link.a.close(h).unwrap();
    let closed_at = link.now;
    let (closed, _) = run_until(&mut link, Duration::from_secs(60), |_, c| !c.is_empty());
    assert_eq!(closed.get(&h), Some(&CloseOutcome::CloseTimeout));
    let waited = (link.now - closed_at).as_secs_f64();
    assert!(
        (2.9..3.5).contains(&waited),
        "closed {waited} s after the AFIN"
    );
}

#[test]
fn a_late_afin_after_a_lost_afinack_is_answered_and_both_ends_finish() {
    for mode in [Mode::Reliable, Mode::QuasiReliable, Mode::NearReliable] {
        let mut link = Link::new(EndpointConfig::default());
        link.b.listen(7, cfg(mode)).unwrap();
        let h = link
            .a
            .connect(Duration::ZERO, addr_b(), 7, cfg(mode))
            .unwrap();
        link.a.write(h, &[3u8; 8000]).unwrap();
        link.a.close(h).unwrap();
        // Drop the receiver's first AFINACK (control TPDU with AFIN|ACK), whenever it goes.
        let dropped = std::rc::Rc::new(std::cell::Cell::new(0));
        let d = dropped.clone();
        link.drop = Box::new(move |_, from_a, hd| {
            let afinack =
                !from_a && hd.flags.contains(Flags::AFIN) && hd.flags.contains(Flags::ACK);
            if afinack && d.get() == 0 {
                d.set(1);
                return true;
            }
            false
        });
        let (closed, _) = run_until(&mut link, Duration::from_secs(60), |_, c| !c.is_empty());
        assert_eq!(dropped.get(), 1, "{mode:?}: no AFINACK was dropped");
        let got: usize = link.got.values().map(Vec::len).sum();
        assert_eq!(got, 8000, "{mode:?}");
        let expected_confirmed = aerotp_proto::ErrorControl::for_mode(mode).delivers_everything();
        assert_eq!(
            closed.get(&h),
            Some(&CloseOutcome::Finished {
                confirmed: expected_confirmed
            }),
            "{mode:?}: the AFIN was retransmitted and answered"
        );
        assert!(
            link.now < Duration::from_secs(15),
            "{mode:?} at {:?}",
            link.now
        );
    }
}

#[test]
fn two_hundred_connections_at_once_all_deliver_intact() {
    let mut link = Link::new(EndpointConfig::default());
    link.b.listen(7, cfg(Mode::Reliable)).unwrap();
    let n = 200;
    let mut sent: HashMap<ConnectionHandle, Vec<u8>> = HashMap::new();
    for i in 0..n {
        let h = link
            .a
            .connect(Duration::ZERO, addr_b(), 7, cfg(Mode::Reliable))
            .unwrap();
        let data: Vec<u8> = (0..5000u32).map(|k| (k * 7 + i) as u8).collect();
        assert_eq!(link.a.write(h, &data).unwrap(), data.len());
        link.a.close(h).unwrap();
        sent.insert(h, data);
    }
    let (closed, _) = run_until(&mut link, Duration::from_secs(120), |_, c| {
        c.len() == n as usize
    });
    assert_eq!(link.accepted.len(), n as usize);
    assert!(
        closed
            .values()
            .all(|o| *o == CloseOutcome::Finished { confirmed: true }),
        "{closed:?}"
    );
    // Every stream arrived whole: the multiset of received streams equals what was sent.
    let mut a: Vec<&Vec<u8>> = sent.values().collect();
    let mut b: Vec<&Vec<u8>> = link.got.values().collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// An idle connection with `keep_alive` set: nothing to send for a minute, five times its
/// idle timeout. Its PROBEs, answered with feedback, keep both ends up, and data written
/// after the minute still arrives. Without `keep_alive` the same silence ends it at the idle
/// timeout; with it, a peer that vanishes still ends it there.
#[test]
fn keep_alive_holds_an_idle_connection_until_its_peer_vanishes() {
    for (keep_alive, vanish) in [(None, false), (Some(4), false), (Some(4), true)] {
        let mut link = Link::new(EndpointConfig::default());
        let mut c = cfg(Mode::Reliable);
        c.idle_timeout = Duration::from_secs(12);
        c.keep_alive = keep_alive.map(Duration::from_secs);
        link.b.listen(7, c.clone()).unwrap();
        let h = link.a.connect(Duration::ZERO, addr_b(), 7, c).unwrap();
        link.a.write(h, &[5u8; 3000]).unwrap();
        if vanish {
            link.drop = Box::new(|now, _, _| now >= Duration::from_secs(20));
        }
        let (closed, b_closed) =
            run_until(&mut link, Duration::from_secs(60), |_, c| !c.is_empty());
        let what = format!("keep_alive {keep_alive:?}, vanish {vanish}");
        match (keep_alive, vanish) {
            (None, _) => {
                // Its own idle timeout, or the peer's, which tells it (a RST, docs/spec.md §4).
                let idle = match closed.get(&h) {
                    Some(CloseOutcome::IdleTimeout) => true,
                    Some(CloseOutcome::Reset(why)) => why.contains("idle timeout"),
                    _ => false,
                };
                assert!(idle, "{what}: {closed:?}");
                let at = link.now.as_secs_f64();
                assert!((12.0..12.5).contains(&at), "{what}: ended at {at} s");
            }
            (Some(_), false) => {
                assert!(
                    closed.is_empty() && b_closed.is_empty(),
                    "{what}: {closed:?}"
                );
                let sa = link.a.stats(h).unwrap().sender.keepalives;
                let sb = link.b.stats(link.accepted[0]).unwrap().sender.keepalives;
                // The initiator probes every 4 s after it last heard; each answer resets the
                // acceptor's timer (8 s), so it never needs to.
                assert!(
                    (13..=15).contains(&sa) && sb == 0,
                    "{what}: a {sa}, b {sb} PROBEs"
                );
                link.a.write(h, &[6u8; 3000]).unwrap();
                run_until(&mut link, Duration::from_secs(61), |_, _| false);
                assert_eq!(link.got[&link.accepted[0]].len(), 6000, "{what}");
            }
            (Some(_), true) => {
                assert_eq!(closed.get(&h), Some(&CloseOutcome::IdleTimeout), "{what}");
                let (o, _) = b_closed.values().next().expect("the receiver ended too");
                assert_eq!(o, &CloseOutcome::IdleTimeout, "{what}");
                // Last heard before 20 s: ended 12 s after, not later.
                let at = link.now.as_secs_f64();
                assert!(at < 32.1, "{what}: ended at {at} s");
            }
        }
    }
}

#[test]
fn a_keep_alive_not_shorter_than_the_idle_timeout_is_refused() {
    for k in [
        Duration::ZERO,
        Duration::from_secs(40 * 60),
        Duration::from_secs(3600),
    ] {
        let c = ConnectionConfig {
            keep_alive: Some(k),
            ..cfg(Mode::Reliable)
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("keep_alive") && e.contains("idle_timeout"),
            "{e}"
        );
    }
    let ok = ConnectionConfig {
        keep_alive: Some(Duration::from_secs(60)),
        ..cfg(Mode::Reliable)
    };
    ok.validate().unwrap();
}

/// Keep-alives 10 s apart on a 20 ms round trip: each answer echoes a data TPDU held longer
/// than the MACK's delay field can say (6.55 s). Taken as round-trip samples they made the
/// smoothed RTT the idle time (14 s in the gateway lab) and a lost TPDU waited that long.
/// Neither end may take them: after 80 s idle the RTT is the path's, and a message written
/// then arrives within a round trip.
#[test]
fn keep_alive_answers_are_no_round_trip_samples() {
    let mut link = Link::new(EndpointConfig::default());
    let mut c = cfg(Mode::Reliable);
    c.idle_timeout = Duration::from_secs(30);
    c.keep_alive = Some(Duration::from_secs(10));
    link.b.listen(7, c.clone()).unwrap();
    let h = link.a.connect(Duration::ZERO, addr_b(), 7, c).unwrap();
    link.a.write(h, &[5u8; 100]).unwrap();
    run_until(&mut link, Duration::from_secs(80), |_, _| false);
    let srtt = link.a.stats(h).unwrap().srtt;
    assert!(
        srtt < Duration::from_millis(40),
        "srtt {srtt:?} after 80 s idle"
    );
    let t0 = link.now;
    link.a.write(h, &[6u8; 100]).unwrap();
    run_until(&mut link, Duration::from_secs(200), |l, _| {
        l.got.get(&l.accepted[0]).is_some_and(|g| g.len() >= 200)
    });
    let took = link.now - t0;
    assert!(
        took <= Duration::from_millis(20),
        "the message took {took:?}"
    );
}

#[test]
fn a_wildcard_listener_accepts_any_port_and_a_named_one_takes_precedence() {
    let mut link = Link::new(EndpointConfig::default());
    // Port 7 by name at half the rate; every other port through `listen_any`.
    let named = ConnectionConfig {
        rate_bps: 5_000_000,
        ..cfg(Mode::Reliable)
    };
    link.b.listen(7, named).unwrap();
    link.b.listen_any(cfg(Mode::Reliable)).unwrap();
    let mut hs = Vec::new();
    for (port, from) in [
        (7, Some(40_000)),
        (80, Some(40_000)),
        (8443, Some(51_234)),
        (80, Some(40_000)),
    ] {
        let h = link
            .a
            .connect_from(Duration::ZERO, addr_b(), port, from, cfg(Mode::Reliable))
            .unwrap();
        link.a.write(h, &[port as u8; 2000]).unwrap();
        link.a.close(h).unwrap();
        hs.push((h, port, from));
    }
    // The source port asked for is used while free; the second flow from 40000 to port 80
    // gets an ephemeral one (the first holds (b, 40000, 80)).
    let local: Vec<u16> = hs
        .iter()
        .map(|(h, ..)| link.a.peer(*h).unwrap().local_port)
        .collect();
    assert_eq!(&local[..3], &[40_000, 40_000, 51_234]);
    assert!((49_152..=65_000).contains(&local[3]), "{local:?}");
    run_until(&mut link, Duration::from_secs(10), |l, _| {
        l.got.len() == 4 && l.got.values().all(|g| g.len() == 2000)
    });
    let mut ports: Vec<u16> = link
        .accepted
        .iter()
        .map(|h| link.b.peer(*h).map_or(0, |p| p.local_port))
        .collect();
    ports.sort_unstable();
    assert_eq!(
        ports,
        [7, 80, 80, 8443],
        "each accepted on the port it was sent to"
    );
    for h in &link.accepted {
        assert_eq!(link.got[h].len(), 2000);
        let p = link.b.peer(*h).unwrap();
        let rate = link.b.stats(*h).unwrap().rate_bps;
        let want = if p.local_port == 7 {
            5_000_000
        } else {
            10_000_000
        };
        assert_eq!(rate, want, "port {}", p.local_port);
    }
    // Without the wildcard, port 80 is refused again.
    link.b.unlisten_any();
    let now = link.now;
    let h = link
        .a
        .connect(now, addr_b(), 81, cfg(Mode::Reliable))
        .unwrap();
    link.a.write(h, b"x").unwrap();
    let limit = link.now + Duration::from_secs(5);
    let (closed, _) = run_until(&mut link, limit, |_, c| !c.is_empty());
    assert!(
        matches!(closed.get(&h), Some(CloseOutcome::Reset(_))),
        "{closed:?}"
    );
}

#[test]
fn a_lost_reset_is_sent_again_to_the_next_tpdu() {
    let mut link = Link::new(EndpointConfig::default());
    link.b.listen(7, cfg(Mode::Reliable)).unwrap();
    let h = link
        .a
        .connect(Duration::ZERO, addr_b(), 7, cfg(Mode::Reliable))
        .unwrap();
    link.a.write(h, &[1u8; 1000]).unwrap();
    run_until(&mut link, Duration::from_millis(100), |l, _| {
        !l.accepted.is_empty()
    });
    let hb = link.accepted[0];
    // B aborts; its RSTs of the moment are lost. A goes on writing; a later TPDU of A's (a
    // retransmission) gets the RST again (B has not released the connection).
    let until = link.now + Duration::from_millis(50);
    link.drop =
        Box::new(move |now, from_a, h| !from_a && h.flags.contains(Flags::RST) && now < until);
    link.b.abort(hb, "refused: no route").unwrap();
    link.a.write(h, &[2u8; 1000]).unwrap();
    let limit = link.now + Duration::from_secs(5);
    let (closed, _) = run_until(&mut link, limit, |_, c| !c.is_empty());
    match closed.get(&h) {
        Some(CloseOutcome::Reset(why)) => {
            assert!(why.starts_with("refused: no route"), "{why}");
            assert!(why.contains("reset by the peer"), "{why}");
        }
        other => panic!("expected the repeated reset, got {other:?}"),
    }
    assert!(
        link.now < limit - Duration::from_secs(4),
        "took until {:?}",
        link.now
    );
}
