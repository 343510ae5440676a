//! A keyed transfer recorded on the wire and replayed to a restarted receiver is never proven,
//! so nothing of it reaches an application that waits for the proof (`aerotp recv`, the egress
//! gateway, `aerotp_net::Connection` reads); the sender's first connection to a receiver pays
//! one challenge round trip, its later ones keep 0-RTT (docs/security.md, "Replays").

use aerotp_proto::{
    AuthConfig, AuthKey, CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint,
    EndpointConfig, Event, KeySet, Mode, KEY_LEN,
};
use std::net::SocketAddr;
use std::time::Duration;

fn addr_a() -> SocketAddr {
    "10.0.0.1:4000".parse().unwrap()
}
fn addr_b() -> SocketAddr {
    "10.0.0.2:4000".parse().unwrap()
}

fn keyed(seed: u8) -> Endpoint {
    let cfg = EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: AuthKey::new(1, [0x42; KEY_LEN]).unwrap(),
                previous: None,
            },
            encrypt: true,
            nonce_seed: [seed; 12],
        }),
        setup_timeout: Duration::from_secs(5),
        ..EndpointConfig::default()
    };
    Endpoint::new(cfg, u64::from(seed))
}

fn ccfg() -> ConnectionConfig {
    ConnectionConfig {
        mode: Mode::Reliable,
        rate_bps: 10_000_000,
        ..ConnectionConfig::default()
    }
}

/// Two endpoints joined by a 5 ms wire each way; `a_to_b` records every datagram A sent.
struct Wire {
    now: Duration,
    in_flight: Vec<(Duration, bool, Vec<u8>)>,
    a_to_b: Vec<Vec<u8>>,
}

const ONE_WAY: Duration = Duration::from_millis(5);

impl Wire {
    fn new() -> Wire {
        Wire {
            now: Duration::ZERO,
            in_flight: Vec::new(),
            a_to_b: Vec::new(),
        }
    }

    /// Moves datagrams and time until `done` or `limit` of virtual time has passed.
    fn run(
        &mut self,
        a: &mut Endpoint,
        b: &mut Endpoint,
        limit: Duration,
        mut done: impl FnMut(&mut Endpoint, &mut Endpoint) -> bool,
    ) {
        let end = self.now + limit;
        let mut buf = Vec::new();
        for _ in 0..2_000_000 {
            if done(a, b) || self.now >= end {
                return;
            }
            for (to_b, e) in [(true, &mut *a), (false, &mut *b)] {
                buf.clear();
                while let Some(t) = e.poll_transmit(self.now, &mut buf) {
                    let d = buf[buf.len() - t.len..].to_vec();
                    if to_b {
                        self.a_to_b.push(d.clone());
                    }
                    self.in_flight.push((self.now + ONE_WAY, to_b, d));
                    buf.clear();
                }
            }
            let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
                .into_iter()
                .partition(|(at, _, _)| *at <= self.now);
            self.in_flight = later;
            for (_, to_b, d) in due {
                if to_b {
                    b.handle_datagram(self.now, addr_a(), &d);
                } else {
                    a.handle_datagram(self.now, addr_b(), &d);
                }
            }
            a.handle_timeout(self.now);
            b.handle_timeout(self.now);
            let next = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .chain(self.in_flight.iter().map(|(at, _, _)| *at))
                .min()
                .unwrap_or(self.now + Duration::from_millis(1));
            self.now = next.clamp(self.now + Duration::from_micros(10), end);
        }
        panic!("the exchange did not settle within its step bound");
    }
}

/// Opens a connection A→B, writes `len` bytes and closes; runs until B read them all.
/// Returns whether B held the connection that carried them proven as soon as it was accepted.
/// (B may accept others meanwhile: TPDUs of A's earlier connection reaching a receiver that
/// forgot it.)
fn transfer(w: &mut Wire, a: &mut Endpoint, b: &mut Endpoint, len: usize) -> bool {
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let tx = a.connect(w.now, addr_b(), 7, ccfg()).unwrap();
    let mut written = 0;
    // Per accepted connection: proven when accepted, and what the application read.
    let mut rx: Vec<(ConnectionHandle, bool, Vec<u8>)> = Vec::new();
    w.run(a, b, Duration::from_secs(20), |a, b| {
        if written < data.len() {
            written += a.write(tx, &data[written..]).unwrap_or(0);
            if written == data.len() {
                a.close(tx).unwrap();
            }
        }
        while a.poll_event().is_some() {}
        while let Some(e) = b.poll_event() {
            if let Event::Accepted(h) = e {
                rx.push((h, b.is_proven(h), Vec::new()));
            }
        }
        let mut buf = vec![0u8; 65536];
        for (h, _, got) in &mut rx {
            // As the runtime reads: only once the peer is proven.
            while b.is_proven(*h) {
                match b.read(*h, &mut buf) {
                    Ok(n @ 1..) => got.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        }
        rx.iter().any(|(_, _, got)| got.len() == data.len())
    });
    let carried = rx.iter().find(|(_, _, got)| *got == data);
    assert!(
        carried.is_some(),
        "the transfer arrived whole by {:?}: read {:?} of {} bytes; receiver {:?}",
        w.now,
        rx.iter().map(|(_, _, g)| g.len()).collect::<Vec<_>>(),
        data.len(),
        b.stats
    );
    carried.is_some_and(|(_, at_once, _)| *at_once)
}

/// Replays `recording` into `b` from A's address, paced 1 ms apart, and runs until every
/// connection it opened has closed. Returns (accepted, proven, closed by set-up timeout).
fn replay(w: &mut Wire, b: &mut Endpoint, recording: &[Vec<u8>]) -> (usize, usize, usize) {
    let mut accepted = Vec::new();
    let (mut proven, mut timed_out) = (0, 0);
    let mut buf = Vec::new();
    let mut take = |b: &mut Endpoint, accepted: &mut Vec<ConnectionHandle>| {
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) => accepted.push(h),
                Event::Closed(_, CloseOutcome::SetupTimeout) => timed_out += 1,
                _ => {}
            }
        }
    };
    for d in recording {
        b.handle_datagram(w.now, addr_a(), d);
        take(b, &mut accepted);
        proven += accepted.iter().filter(|h| b.is_proven(**h)).count();
        // B's answers go to A's address, where nobody answers them.
        buf.clear();
        while b.poll_transmit(w.now, &mut buf).is_some() {
            buf.clear();
        }
        w.now += Duration::from_millis(1);
        b.handle_timeout(w.now);
    }
    let end = w.now + Duration::from_secs(60);
    while w.now < end {
        take(b, &mut accepted);
        proven += accepted.iter().filter(|h| b.is_proven(**h)).count();
        buf.clear();
        while b.poll_transmit(w.now, &mut buf).is_some() {
            buf.clear();
        }
        w.now = b
            .poll_timeout()
            .unwrap_or(end)
            .clamp(w.now + Duration::from_millis(1), end);
        b.handle_timeout(w.now);
    }
    take(b, &mut accepted);
    (accepted.len(), proven, timed_out)
}

#[test]
fn a_recorded_keyed_transfer_replayed_to_a_restarted_receiver_is_never_proven() {
    let (mut a, mut b) = (keyed(1), keyed(2));
    b.listen(7, ccfg()).unwrap();
    let mut w = Wire::new();
    // A's first connection to B: B challenges it (it has never heard A's instance answer).
    let proven_at_once = transfer(&mut w, &mut a, &mut b, 40_000);
    assert!(!proven_at_once, "the first connection pays one challenge");
    // A's second: 0-RTT, proven from its first TPDU.
    let proven_at_once = transfer(&mut w, &mut a, &mut b, 40_000);
    assert!(
        proven_at_once,
        "later connections of the same sender keep 0-RTT"
    );
    let recording = std::mem::take(&mut w.a_to_b);
    assert!(
        recording.len() > 40,
        "{} datagrams recorded",
        recording.len()
    );

    // B restarts (same key, fresh state) and hears the whole recording again.
    let mut b2 = keyed(3);
    b2.listen(7, ccfg()).unwrap();
    let (accepted, proven, timed_out) = replay(&mut w, &mut b2, &recording);
    assert!(accepted >= 1, "the replayed ASYNs open connections (held)");
    assert_eq!(proven, 0, "no replayed connection is ever proven");
    assert_eq!(timed_out, accepted, "each is dropped at its set-up timeout");
    assert_eq!(b2.stats.proven, 0);

    // The live sender, still running, reaches the restarted receiver: challenged once more,
    // then proven; a replay of its recorded (pre-restart) connections is still refused.
    let proven_at_once = transfer(&mut w, &mut a, &mut b2, 40_000);
    assert!(
        !proven_at_once,
        "a restarted receiver challenges a sender it knew before"
    );
    let (_, proven, _) = replay(&mut w, &mut b2, &recording);
    assert_eq!(
        proven, 0,
        "pre-restart TPDUs are no fresher after the sender's proof"
    );
    let proven_at_once = transfer(&mut w, &mut a, &mut b2, 40_000);
    assert!(
        proven_at_once,
        "and 0-RTT is back for the sender's next connection"
    );
}
