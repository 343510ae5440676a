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

/// Two endpoints joined by a 5 ms wire each way; `a_to_b` records every datagram A sent,
/// `elsewhere` what B sent to addresses other than A's (nobody there answers).
struct Wire {
    now: Duration,
    in_flight: Vec<(Duration, bool, Vec<u8>)>,
    a_to_b: Vec<Vec<u8>>,
    elsewhere: Vec<(SocketAddr, Vec<u8>)>,
}

const ONE_WAY: Duration = Duration::from_millis(5);

impl Wire {
    fn new() -> Wire {
        Wire {
            now: Duration::ZERO,
            in_flight: Vec::new(),
            a_to_b: Vec::new(),
            elsewhere: Vec::new(),
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
                    buf.clear();
                    if to_b {
                        self.a_to_b.push(d.clone());
                    } else if t.remote != addr_a() {
                        self.elsewhere.push((t.remote, d));
                        continue;
                    }
                    self.in_flight.push((self.now + ONE_WAY, to_b, d));
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

/// Fuzz finding K2 (docs/results/fuzz.md): a sender's later connection is proven at once only
/// from the address its instance proved. An on-path attacker copies the first TPDU of A's
/// second connection and sends it from its own address first: B holds that connection
/// half-open there and sends it nothing but challenges; A's own TPDUs, the original refused as
/// a replay, get the connection proven at A's address, and the transfer completes.
#[test]
fn a_fresh_first_tpdu_raced_in_from_another_address_proves_nothing_there() {
    let x: SocketAddr = "10.0.0.3:4000".parse().unwrap();
    let (mut a, mut b) = (keyed(1), keyed(2));
    b.listen(7, ccfg()).unwrap();
    let mut w = Wire::new();
    assert!(
        !transfer(&mut w, &mut a, &mut b, 40_000),
        "the first connection pays one challenge (A's instance now fresh at its address)"
    );
    while b.poll_event().is_some() {}

    let data: Vec<u8> = (0..20_000).map(|i| (i * 11 + 5) as u8).collect();
    let tx = a.connect(w.now, addr_b(), 7, ccfg()).unwrap();
    let mut written = a.write(tx, &data).unwrap();
    let mut first = Vec::new();
    let t = a.poll_transmit(w.now, &mut first).expect("A's first TPDU");
    assert_eq!(t.remote, addr_b());
    // The attacker's copy, from X, reaches B before the original (still on the wire).
    b.handle_datagram(w.now, x, &first);
    w.in_flight.push((w.now + ONE_WAY, true, first));
    let raced = match b.poll_event() {
        Some(Event::Accepted(h)) => h,
        e => panic!("B accepts the copy (held until proven): {e:?}"),
    };
    assert_eq!(b.peer(raced).map(|p| p.remote), Some(x));
    assert!(
        !b.is_proven(raced),
        "a fresh TPDU from an address A never answered at proves nothing: {:?}",
        b.stats
    );

    let mut rx: Vec<(ConnectionHandle, Vec<u8>)> = vec![(raced, Vec::new())];
    let mut raced_proven = false;
    w.run(&mut a, &mut b, Duration::from_secs(20), |a, b| {
        if written < data.len() {
            written += a.write(tx, &data[written..]).unwrap_or(0);
            if written == data.len() {
                a.close(tx).unwrap();
            }
        }
        while a.poll_event().is_some() {}
        while let Some(e) = b.poll_event() {
            if let Event::Accepted(h) = e {
                rx.push((h, Vec::new()));
            }
        }
        let at_x = b.peer(raced).is_some_and(|p| p.remote == x);
        raced_proven |= at_x && b.is_proven(raced);
        let mut buf = vec![0u8; 65536];
        for (h, got) in &mut rx {
            while b.is_proven(*h) {
                match b.read(*h, &mut buf) {
                    Ok(n @ 1..) => got.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        }
        rx.iter().any(|(_, got)| got.len() == data.len())
    });
    assert!(
        !raced_proven,
        "B proved the connection while its address was X"
    );
    let (carrier, _) = rx
        .iter()
        .find(|(_, got)| *got == data)
        .unwrap_or_else(|| panic!("the transfer arrived whole by {:?}: {:?}", w.now, b.stats));
    assert_eq!(
        b.peer(*carrier).map(|p| p.remote),
        Some(addr_a()),
        "the connection that carried it is at A's address"
    );
    assert!(b.stats.auth_replayed >= 1, "A's original was the replay");
    // The copy's connection, never answered at X, goes at its set-up timeout.
    let mut timed_out = false;
    w.run(&mut a, &mut b, Duration::from_secs(10), |a, b| {
        while a.poll_event().is_some() {}
        while let Some(e) = b.poll_event() {
            timed_out |= matches!(e, Event::Closed(h, CloseOutcome::SetupTimeout) if h == raced);
        }
        raced_proven |= b.is_proven(raced);
        timed_out
    });
    assert!(
        timed_out && !raced_proven,
        "the connection at X ends unproven at its set-up timeout: {:?}",
        b.stats
    );
    // To X: the challenges of the half-open connection and its acknowledgement of the copy,
    // as to any address an unproven first TPDU came from; nothing else of the connection.
    let flags: Vec<_> = w
        .elsewhere
        .iter()
        .map(|(to, d)| (*to, aerotp_wire::Header::parse_any(d).unwrap().0.flags))
        .collect();
    assert!(
        flags.iter().all(|(to, _)| *to == x),
        "B sent only to A and X: {flags:?}"
    );
    let others = flags.iter().filter(|(_, f)| !f.is_challenge()).count();
    assert!(
        others <= 1 && flags.len() > others,
        "B sent X challenges and at most the acknowledgement of the copy: {flags:?}"
    );
}
