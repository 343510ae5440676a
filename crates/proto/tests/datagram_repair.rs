//! Erasure repair on datagram-mode routes, in virtual time: lost datagrams are rebuilt with no
//! feedback at all, a late copy of a rebuilt one is not delivered twice, a route that pauses
//! flushes its tail, a sender that starts again is not confused with the old one, bad
//! settings are refused with a reason, and the receiver's state stays bounded
//! (docs/spec.md §7, "Datagram routes").

use aerotp_proto::{
    AuthConfig, AuthKey, DatagramRoute, Endpoint, EndpointConfig, EndpointError, ErasureMode,
    ErasureSetting, KeySet, KEY_LEN,
};
use aerotp_wire::{Flags, Header};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 4000))
}

fn route(ratio: f64) -> DatagramRoute {
    DatagramRoute {
        erasure: Some(ErasureSetting {
            mode: ErasureMode::Ratio(ratio),
            ..ErasureSetting::OFF
        }),
        ..DatagramRoute::plain(addr(2), 7, 9, 0, 1400)
    }
}

/// A message that names itself: its index, then filler of a length that varies with it.
fn message(i: usize) -> Vec<u8> {
    let mut m = (i as u32).to_be_bytes().to_vec();
    m.extend(std::iter::repeat_n((i % 251) as u8, 40 + (i * 37) % 1200));
    m
}

/// Everything `a` has queued, as (flags, datagram).
fn drain(a: &mut Endpoint, now: Duration) -> Vec<(Flags, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = a.poll_transmit(now, &mut buf) {
        assert_eq!(t.remote, addr(2));
        let flags = Header::parse(&buf).map(|h| h.flags).unwrap_or(Flags(0xFF));
        out.push((flags, std::mem::take(&mut buf)));
    }
    out
}

/// Messages `b` has delivered, counted by index.
fn delivered(b: &mut Endpoint, got: &mut HashMap<usize, usize>) {
    while let Some(m) = b.take_datagram() {
        assert_eq!((m.remote, m.src_port, m.dst_port), (addr(1), 7, 9));
        let i = u32::from_be_bytes(m.data[..4].try_into().unwrap()) as usize;
        assert_eq!(m.data, message(i), "message {i} delivered altered");
        *got.entry(i).or_default() += 1;
    }
}

/// Sends `n` messages 2 ms apart on `r`, dropping the sources `lose` picks, then lets the
/// tail flush run; returns how often each message was delivered.
fn run(
    a: &mut Endpoint,
    b: &mut Endpoint,
    r: &DatagramRoute,
    n: usize,
    mut lose: impl FnMut(usize, Flags) -> bool,
) -> HashMap<usize, usize> {
    let mut got = HashMap::new();
    let mut now = Duration::ZERO;
    let mut k = 0usize;
    let mut deliver = |a: &mut Endpoint, b: &mut Endpoint, now: Duration| {
        for (flags, d) in drain(a, now) {
            let drop = lose(k, flags);
            k += 1;
            if !drop {
                b.handle_datagram(now, addr(1), &d);
            }
        }
    };
    for i in 0..n {
        a.send_datagram_with(now, r, &message(i)).unwrap();
        deliver(a, b, now);
        delivered(b, &mut got);
        now += Duration::from_millis(2);
    }
    // The tail: at most a few flushes, each at the deadline the endpoint reports.
    for _ in 0..4 {
        let Some(t) = a.poll_timeout() else { break };
        assert!(
            t <= now + Duration::from_secs(1),
            "a tail deadline {t:?} past the delay bound"
        );
        now = now.max(t);
        a.handle_timeout(now);
        deliver(a, b, now);
        delivered(b, &mut got);
    }
    got
}

fn pair() -> (Endpoint, Endpoint) {
    (
        Endpoint::new(EndpointConfig::default(), 1),
        Endpoint::new(EndpointConfig::default(), 2),
    )
}

#[test]
fn lost_datagrams_are_rebuilt_without_feedback_and_delivered_once() {
    let (mut a, mut b) = pair();
    // Every 9th TPDU on the wire is lost, sources and repairs alike: 11 % loss.
    let got = run(&mut a, &mut b, &route(1.25), 400, |k, _| k % 9 == 4);
    let missing: Vec<usize> = (0..400).filter(|i| !got.contains_key(i)).collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
    assert!(got.values().all(|&c| c == 1), "a message delivered twice");
    assert!(b.stats.datagrams_rebuilt >= 30, "{:?}", b.stats);
    assert_eq!(b.stats.datagram_duplicates, 0);
    // The ratio: a quarter of the sources spread between them, and at the pause a quarter of
    // the last window (about 195 sources at this rate within the 500 ms bound).
    let ratio = a.stats.datagrams_sent as f64 / 400.0;
    assert!((1.3..1.4).contains(&ratio), "wire/data ratio {ratio}");
    assert_eq!(a.stats.datagram_repairs_sent + 400, a.stats.datagrams_sent);
}

#[test]
fn random_loss_at_the_ratio_s_share_leaves_little_behind() {
    let (mut a, mut b) = pair();
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let n = 3000;
    let got = run(&mut a, &mut b, &route(1.5), n, |_, _| rng.gen_bool(0.10));
    let lost = (0..n).filter(|i| !got.contains_key(i)).count();
    // Without repair about 300 would be lost; 1.5x against 10 % loss leaves a handful.
    assert!(
        lost <= 6,
        "{lost} of {n} lost with 1.5x repair at 10 % loss"
    );
    assert!(got.values().all(|&c| c == 1));
}

#[test]
fn a_late_copy_of_a_rebuilt_datagram_is_not_delivered_again() {
    let (mut a, mut b) = pair();
    let r = route(1.5);
    let mut held = None;
    let mut got = HashMap::new();
    let mut buf = Vec::new();
    for i in 0..20 {
        let now = Duration::from_millis(i as u64);
        a.send_datagram_with(now, &r, &message(i)).unwrap();
        while let Some(_t) = a.poll_transmit(now, &mut buf) {
            let h = Header::parse(&buf).unwrap();
            if h.flags == Flags::SOURCE && h.seq == 3 && held.is_none() {
                held = Some(std::mem::take(&mut buf));
                continue;
            }
            b.handle_datagram(now, addr(1), &buf);
            buf.clear();
        }
        delivered(&mut b, &mut got);
    }
    assert_eq!(got.get(&3), Some(&1), "message 3 rebuilt once");
    assert_eq!(b.stats.datagrams_rebuilt, 1);
    b.handle_datagram(Duration::from_millis(30), addr(1), &held.unwrap());
    delivered(&mut b, &mut got);
    assert_eq!(got.get(&3), Some(&1), "the late copy was delivered again");
    assert_eq!(b.stats.datagram_duplicates, 1);
}

#[test]
fn a_route_that_pauses_flushes_its_tail_at_the_deadline_it_reports() {
    let (mut a, mut b) = pair();
    let r = route(1.25);
    let mut got = HashMap::new();
    // Three messages, the last one lost; then nothing more is sent.
    let mut sent = 0;
    for i in 0..3 {
        a.send_datagram_with(Duration::ZERO, &r, &message(i))
            .unwrap();
        for (flags, d) in drain(&mut a, Duration::ZERO) {
            sent += 1;
            if !(flags == Flags::SOURCE && i == 2) {
                b.handle_datagram(Duration::ZERO, addr(1), &d);
            }
        }
    }
    delivered(&mut b, &mut got);
    assert!(!got.contains_key(&2));
    let t = a.poll_timeout().expect("a tail flush is due");
    assert!(
        t > Duration::ZERO && t <= Duration::from_millis(250),
        "tail at {t:?}"
    );
    // Nothing before the deadline.
    a.handle_timeout(t - Duration::from_millis(1));
    assert!(drain(&mut a, t).is_empty());
    a.handle_timeout(t);
    let tail = drain(&mut a, t);
    assert!(!tail.is_empty() && tail.iter().all(|(f, _)| *f == Flags::REPAIR));
    for (_, d) in &tail {
        b.handle_datagram(t, addr(1), d);
    }
    delivered(&mut b, &mut got);
    assert_eq!(got.get(&2), Some(&1), "the lost tail was rebuilt");
    assert!(sent >= 3);
    assert_eq!(a.poll_timeout(), None, "the flush leaves no deadline");
}

#[test]
fn a_sender_that_starts_again_is_a_new_incarnation() {
    let (mut a, mut b) = pair();
    let r = route(1.5);
    let got = run(&mut a, &mut b, &r, 600, |_, _| false);
    assert_eq!(got.len(), 600);
    // The same address and ports, a fresh endpoint: its numbering starts at 0 again.
    let mut a2 = Endpoint::new(EndpointConfig::default(), 99);
    let got = run(&mut a2, &mut b, &r, 200, |k, f| {
        f == Flags::SOURCE && k % 7 == 3
    });
    let missing: Vec<usize> = (0..200).filter(|i| !got.contains_key(i)).collect();
    assert!(missing.is_empty(), "the new incarnation lost {missing:?}");
    assert!(got.values().all(|&c| c == 1));
}

#[test]
fn plain_datagrams_and_unknown_flags_are_handled_apart() {
    let (mut a, mut b) = pair();
    let plain = DatagramRoute::plain(addr(2), 7, 9, 8, 1400);
    a.send_datagram_with(Duration::ZERO, &plain, &message(1))
        .unwrap();
    let out = drain(&mut a, Duration::ZERO);
    assert_eq!(out.len(), 1, "no repair for a plain route");
    assert_eq!(out[0].0, Flags::empty());
    b.handle_datagram(Duration::ZERO, addr(1), &out[0].1);
    // A datagram-mode TPDU with flags that mean nothing there is dropped and counted.
    let mut h = Header::parse(&out[0].1).unwrap();
    h.flags = Flags::ACK;
    let mut odd = Vec::new();
    aerotp_wire::emit_tpdu(h, &message(2), &mut odd).unwrap();
    b.handle_datagram(Duration::ZERO, addr(1), &odd);
    let mut got = HashMap::new();
    delivered(&mut b, &mut got);
    assert_eq!(got.len(), 1);
    assert_eq!(b.stats.datagrams_dropped, 1);
}

#[test]
fn bad_settings_are_refused_with_the_reason() {
    let (mut a, _) = pair();
    let mut r = route(1.25);
    r.erasure.as_mut().unwrap().mode = ErasureMode::Auto;
    let e = a.send_datagram_with(Duration::ZERO, &r, b"x").unwrap_err();
    assert_eq!(e, EndpointError::DatagramAutoRepair);
    assert!(e.to_string().contains("fixed ratio"), "{e}");
    // Repair needs 22 bytes of room: a message that fits a plain route does not fit.
    let r = route(1.25);
    let plain = DatagramRoute::plain(addr(2), 7, 9, 0, 1400);
    let max_plain = a.max_datagram_payload(&plain).unwrap();
    let max = a.max_datagram_payload(&r).unwrap();
    assert_eq!(max_plain - max, 22);
    let e = a
        .send_datagram_with(Duration::ZERO, &r, &vec![0; max + 1])
        .unwrap_err();
    assert!(e.to_string().contains(&format!("at most {max}")), "{e}");
    assert!(
        a.poll_transmit(Duration::ZERO, &mut Vec::new()).is_none(),
        "nothing queued"
    );
    a.send_datagram_with(Duration::ZERO, &r, &vec![0; max])
        .unwrap();
}

#[test]
fn receiving_routes_are_bounded_in_number_and_bytes() {
    let cfg = EndpointConfig {
        max_repair_routes: 4,
        ..EndpointConfig::default()
    };
    let mut b = Endpoint::new(cfg, 2);
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    for port in 0..40u16 {
        let r = DatagramRoute {
            src_port: 100 + port,
            ..route(1.5)
        };
        for i in 0..30 {
            a.send_datagram_with(Duration::ZERO, &r, &message(i))
                .unwrap();
        }
        for (_, d) in drain(&mut a, Duration::ZERO) {
            b.handle_datagram(Duration::ZERO, addr(1), &d);
        }
        while b.take_datagram().is_some() {}
        let (routes, bytes) = b.repair_routes();
        assert!(routes <= 4, "{routes} routes held");
        // Four decoders of 30 sources of at most 1.3 kB each, with slack for bookkeeping.
        assert!(bytes <= 4 * 30 * 1400 + 64 * 1024, "{bytes} bytes held");
    }
}

#[test]
fn repairs_are_sealed_and_rebuild_under_authentication() {
    let key = AuthKey::new(3, [0x11; KEY_LEN]).unwrap();
    let ecfg = |seed: u8| EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: key.clone(),
                previous: None,
            },
            encrypt: true,
            nonce_seed: [seed; 12],
        }),
        ..EndpointConfig::default()
    };
    let mut a = Endpoint::new(ecfg(1), 1);
    let mut b = Endpoint::new(ecfg(2), 2);
    let got = run(&mut a, &mut b, &route(1.25), 200, |k, _| k % 9 == 4);
    assert_eq!(got.len(), 200, "lost under authentication");
    assert!(b.stats.datagrams_rebuilt > 0);
    assert_eq!(b.stats.auth_dropped(), 0);
}

#[test]
fn a_route_whose_parity_changes_starts_afresh_and_never_exceeds_the_mtu() {
    let (mut a, mut b) = pair();
    let mut r = route(1.5);
    let mut got = HashMap::new();
    let mut buf = Vec::new();
    for i in 0..40 {
        // Full-size sources at parity 0, then the route's parity rises: the repairs that
        // follow must not cover the old, longer sources at the new parity.
        r.parity = if i < 20 { 0 } else { 16 };
        let max = a.max_datagram_payload(&r).unwrap();
        let mut m = message(i);
        m.resize(max, 0xEE);
        let now = Duration::from_millis(i as u64);
        a.send_datagram_with(now, &r, &m).unwrap();
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            assert!(t.len <= r.mtu, "{} bytes over the MTU {}", t.len, r.mtu);
            let h = Header::parse(&buf).unwrap();
            if !(h.flags == Flags::SOURCE && h.seq % 5 == 2) {
                b.handle_datagram(now, addr(1), &buf);
            }
            buf.clear();
        }
        while let Some(m) = b.take_datagram() {
            *got.entry(u32::from_be_bytes(m.data[..4].try_into().unwrap()))
                .or_insert(0) += 1;
        }
    }
    assert_eq!(
        got.len(),
        40,
        "lost: {:?}",
        (0..40).filter(|i| !got.contains_key(i)).collect::<Vec<_>>()
    );
    assert!(got.values().all(|&c| c == 1));
}
