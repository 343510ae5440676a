//! Two connections that share ports and `tag` at one listener, and one of their peers moves
//! (docs/spec.md §9, "A peer's new address"): the connection identifiers carried by CHALLENGE
//! and ECHO say which connection the new address belongs to. Without them the new address
//! would match neither (ports and tag are all a TPDU from it carries) and the moved peer's
//! transfer would stall for good. Virtual time, three engines joined in memory.

use aerotp_proto::{ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode};
use std::net::SocketAddr;
use std::time::Duration;

fn at(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// One engine at an address.
struct Node {
    ep: Endpoint,
    addr: SocketAddr,
}

/// Queues every datagram the nodes offer for 5 ms later, then delivers what is due to the
/// node at its destination (no node there: lost) and runs the timers.
fn exchange(
    nodes: &mut [Node],
    now: Duration,
    wire: &mut Vec<(Duration, SocketAddr, SocketAddr, Vec<u8>)>,
) {
    let delay = Duration::from_millis(5);
    for n in nodes.iter_mut() {
        let mut out = Vec::new();
        loop {
            out.clear();
            let Some(t) = n.ep.poll_transmit(now, &mut out) else {
                break;
            };
            wire.push((now + delay, n.addr, t.remote, out.clone()));
        }
    }
    let (due, later): (Vec<_>, Vec<_>) = wire.drain(..).partition(|d| d.0 <= now);
    *wire = later;
    for (_, from, to, d) in due {
        if let Some(n) = nodes.iter_mut().find(|n| n.addr == to) {
            n.ep.handle_datagram(now, from, &d);
        }
    }
    for n in nodes.iter_mut() {
        n.ep.handle_timeout(now);
    }
}

#[test]
fn a_moved_peer_is_told_apart_from_another_with_the_same_ports_and_tag() {
    let cfg = ConnectionConfig {
        rate_bps: 20_000_000,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    };
    // The same seed: the two initiators draw the same ephemeral port and tag.
    let mut nodes = vec![
        Node {
            ep: Endpoint::new(EndpointConfig::default(), 42),
            addr: at("10.0.1.1:5000"),
        },
        Node {
            ep: Endpoint::new(EndpointConfig::default(), 42),
            addr: at("10.0.2.1:5000"),
        },
        Node {
            ep: Endpoint::new(EndpointConfig::default(), 7),
            addr: at("10.0.9.1:9000"),
        },
    ];
    nodes[2].ep.listen(7, cfg.clone()).unwrap();
    let listener = nodes[2].addr;
    let c1 = nodes[0]
        .ep
        .connect(Duration::ZERO, listener, 7, cfg.clone())
        .unwrap();
    let c2 = nodes[1]
        .ep
        .connect(Duration::ZERO, listener, 7, cfg)
        .unwrap();
    let (p1, p2) = (nodes[0].ep.peer(c1).unwrap(), nodes[1].ep.peer(c2).unwrap());
    assert_eq!(
        (p1.local_port, p1.tag),
        (p2.local_port, p2.tag),
        "the test needs both connections to share ports and tag"
    );
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut written = [0usize; 2];
    let mut accepted: Vec<ConnectionHandle> = Vec::new();
    let mut got: std::collections::HashMap<ConnectionHandle, Vec<u8>> = Default::default();
    let mut wire = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut now = Duration::ZERO;
    let moved_to = at("10.0.3.1:5000");
    let mut moved_at = None;
    let step = Duration::from_micros(500);
    while now < Duration::from_secs(30) {
        now += step;
        if moved_at.is_none() && now >= Duration::from_millis(300) {
            // The first initiator's radio comes back with another address: what is sent to
            // the old one is lost from now on.
            nodes[0].addr = moved_to;
            moved_at = Some(now);
        }
        for (i, c) in [(0, c1), (1, c2)] {
            if written[i] < data.len() {
                written[i] += nodes[i].ep.write(c, &data[written[i]..]).unwrap_or(0);
            }
        }
        exchange(&mut nodes, now, &mut wire);
        while let Some(e) = nodes[2].ep.poll_event() {
            if let Event::Accepted(h) = e {
                accepted.push(h);
            }
        }
        for &h in &accepted {
            while let Ok(n) = nodes[2].ep.read(h, &mut buf) {
                if n == 0 {
                    break;
                }
                got.entry(h).or_default().extend_from_slice(&buf[..n]);
            }
        }
        if got.len() == 2 && got.values().all(|v| v.len() == data.len()) {
            break;
        }
    }
    assert_eq!(accepted.len(), 2);
    for h in &accepted {
        let v = got.get(h).map_or(0, Vec::len);
        assert_eq!(
            v,
            data.len(),
            "connection {h:?} delivered {v} of {} bytes",
            data.len()
        );
        assert!(got[h] == data, "connection {h:?} delivered other bytes");
    }
    // The move went to the moved peer's connection, and only there.
    let remotes: Vec<SocketAddr> = accepted
        .iter()
        .map(|h| nodes[2].ep.peer(*h).unwrap().remote)
        .collect();
    assert!(remotes.contains(&moved_to), "{remotes:?}");
    assert!(remotes.contains(&at("10.0.2.1:5000")), "{remotes:?}");
    assert_eq!(nodes[2].ep.stats.migrations, 1);
    assert_eq!(nodes[2].ep.stats.paths_added, 0);
}
