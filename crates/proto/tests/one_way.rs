//! A link with no return path (a one-way downlink): nothing the receiver sends arrives, so no
//! CHALLENGE is ever answered. A listener configured for it (`accept_unproven`) takes the
//! peer proven from its first TPDU and delivers a transfer far longer than the set-up timeout;
//! a default listener never proves it, and drops it at the timeout (docs/security.md,
//! "One-way links").

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, ErasureMode,
    ErasureSetting, ErrorControl, Event, Mode,
};
use std::net::SocketAddr;
use std::time::Duration;

fn addr_a() -> SocketAddr {
    "10.0.0.1:4000".parse().unwrap()
}
fn addr_b() -> SocketAddr {
    "10.0.0.2:4000".parse().unwrap()
}

const ONE_WAY: Duration = Duration::from_millis(20);
/// The shortest the engine allows: a half-open connection that keeps sending is kept at most
/// four of it (8 s here), while the transfer takes about 12 s.
const SETUP_TIMEOUT: Duration = Duration::from_secs(2);
const LEN: usize = 1_200_000;

fn ccfg(accept_unproven: bool) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 1_000_000,
        // Nothing comes back: a fixed ratio of repair, whatever is (not) reported.
        erasure: Some(ErasureSetting {
            mode: ErasureMode::Ratio(1.25),
            ..ErrorControl::for_mode(Mode::QuasiReliable).erasure
        }),
        accept_unproven,
        ..ConnectionConfig::with_mode(Mode::QuasiReliable)
    }
}

/// What the receiving application saw of one transfer over the one-way wire.
struct Outcome {
    /// Bytes read, by an application that reads only once the peer is proven (as
    /// `aerotp recv`, the egress gateway and `aerotp_net` readers do).
    read: Vec<u8>,
    proven_at_accept: bool,
    closed: Option<CloseOutcome>,
    setup_timeouts: u64,
    /// Datagrams the receiver sent (all lost).
    answers: usize,
}

/// A→B with every 20th datagram lost, B→A nothing; `LEN` bytes written and closed.
fn one_way_transfer(accept_unproven: bool) -> (Vec<u8>, Outcome) {
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 + 5) as u8).collect();
    let ep = |seed| {
        let cfg = EndpointConfig {
            setup_timeout: SETUP_TIMEOUT,
            ..EndpointConfig::default()
        };
        Endpoint::new(cfg, seed)
    };
    let (mut a, mut b) = (ep(1), ep(2));
    b.listen(7, ccfg(accept_unproven)).unwrap();
    let tx = a.connect(Duration::ZERO, addr_b(), 7, ccfg(false)).unwrap();
    let mut out = Outcome {
        read: Vec::new(),
        proven_at_accept: false,
        closed: None,
        setup_timeouts: 0,
        answers: 0,
    };
    let mut rx: Option<ConnectionHandle> = None;
    let (mut now, mut written, mut sent) = (Duration::ZERO, 0, 0usize);
    let mut in_flight: Vec<(Duration, Vec<u8>)> = Vec::new();
    let (mut buf, mut rbuf) = (Vec::new(), vec![0u8; 65536]);
    let end = Duration::from_secs(300);
    for _ in 0..2_000_000 {
        if now >= end || out.closed.is_some() {
            break;
        }
        if written < data.len() {
            written += a.write(tx, &data[written..]).unwrap_or(0);
            if written == data.len() {
                a.close(tx).unwrap();
            }
        }
        while a.poll_event().is_some() {}
        buf.clear();
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            sent += 1;
            if sent % 20 != 0 {
                in_flight.push((now + ONE_WAY, buf[buf.len() - t.len..].to_vec()));
            }
            buf.clear();
        }
        while b.poll_transmit(now, &mut buf).is_some() {
            out.answers += 1;
            buf.clear();
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut in_flight)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        in_flight = later;
        for (_, d) in due {
            b.handle_datagram(now, addr_a(), &d);
        }
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) if rx.is_none() => {
                    rx = Some(h);
                    out.proven_at_accept = b.is_proven(h);
                }
                Event::Closed(h, o) if Some(h) == rx => out.closed = Some(o),
                _ => {}
            }
        }
        if let Some(h) = rx {
            while b.is_proven(h) {
                match b.read(h, &mut rbuf) {
                    Ok(n @ 1..) => out.read.extend_from_slice(&rbuf[..n]),
                    Ok(_) => {
                        // End of stream: the application closes its (empty) side.
                        let _ = b.close(h);
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .chain(in_flight.iter().map(|(at, _)| *at))
            .min()
            .unwrap_or(end);
        now = next.clamp(now + Duration::from_micros(10), end);
    }
    out.setup_timeouts = b.stats.setup_timeouts;
    (data, out)
}

#[test]
fn a_listener_for_a_one_way_link_delivers_a_transfer_longer_than_the_setup_timeout() {
    let (data, out) = one_way_transfer(true);
    assert!(out.proven_at_accept, "taken proven from the first TPDU");
    assert_eq!(out.setup_timeouts, 0);
    assert_eq!(
        out.read.len(),
        data.len(),
        "every byte delivered (closed {:?})",
        out.closed
    );
    assert!(out.read == data, "delivered intact and in order");
    // Its own (empty) half's AFIN cannot be acknowledged over a one-way link: it ends at
    // the close timeout, after every byte was read.
    assert_eq!(out.closed, Some(CloseOutcome::CloseTimeout));
}

#[test]
fn a_default_listener_never_proves_a_one_way_peer_and_drops_it_at_the_setup_timeout() {
    let (_, out) = one_way_transfer(false);
    assert!(!out.proven_at_accept);
    assert!(out.answers > 0, "it challenged (into the void)");
    assert_eq!(out.closed, Some(CloseOutcome::SetupTimeout));
    assert_eq!(out.setup_timeouts, 1);
    assert!(out.read.is_empty(), "nothing read from an unproven peer");
}
