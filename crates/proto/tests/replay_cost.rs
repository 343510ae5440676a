//! What proving freshness before delivery costs (docs/security.md, "Replays"), in virtual time
//! on the papers' set-up-delay link (10 Mb/s, 5 ms one way, 100 kB, reliable) at 0 and 20 %
//! loss: a sender endpoint's first connection to a keyed receiver (one CHALLENGE → ECHO round
//! trip before delivery), its second (0-RTT delivery, as every keyed connection had before),
//! and a keyless receiver (which always validates). Medians over 41 seeds; printed with
//! `cargo test -p aerotp-proto --test replay_cost -- --nocapture` and recorded in
//! `docs/results/security.md` ("Replays").

mod harness;

use aerotp_proto::{
    AuthConfig, AuthKey, ConnectionConfig, Endpoint, EndpointConfig, Event, KeySet, Mode, KEY_LEN,
};
use harness::{addr_b, Impair, Net};
use std::time::Duration;

const SIZE: usize = 100_000;
const SEEDS: u64 = 41;

fn keyed(seed: u64) -> Endpoint {
    let cfg = EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: AuthKey::new(1, [0x42; KEY_LEN]).unwrap(),
                previous: None,
            },
            encrypt: false,
            nonce_seed: [seed as u8; 12],
        }),
        ..EndpointConfig::default()
    };
    Endpoint::new(cfg, seed)
}

fn ccfg() -> ConnectionConfig {
    ConnectionConfig {
        mode: Mode::Reliable,
        rate_bps: 10_000_000,
        ..ConnectionConfig::default()
    }
}

/// Times of one connection from its `connect`: accepted by the receiver (the papers' set-up
/// delay), first byte read (reads wait for the proof, as the runtime's do), last byte read.
#[derive(Debug, Clone, Copy)]
struct Times {
    accepted: Duration,
    first_byte: Duration,
    last_byte: Duration,
}

/// One transfer A→B on `net` from its current time; both ends close. `None` if it did not
/// complete within a minute of virtual time.
fn one(net: &mut Net) -> Option<Times> {
    let data = vec![0x5a; SIZE];
    let start = net.now;
    let tx = net.a.connect(start, addr_b(), 7, ccfg()).unwrap();
    let (mut written, mut got) = (0, 0);
    let mut rx = None;
    let (mut accepted, mut first_byte) = (None, None);
    let mut buf = vec![0u8; 65536];
    for _ in 0..2_000_000 {
        if written < SIZE {
            written += net.a.write(tx, &data[written..]).unwrap_or(0);
            if written == SIZE {
                net.a.close(tx).unwrap();
            }
        }
        while net.a.poll_event().is_some() {}
        while let Some(e) = net.b.poll_event() {
            if let Event::Accepted(h) = e {
                rx.get_or_insert(h);
                accepted.get_or_insert(net.now - start);
            }
        }
        if let Some(h) = rx.filter(|h| net.b.is_proven(*h)) {
            while let Ok(n @ 1..) = net.b.read(h, &mut buf) {
                got += n;
                first_byte.get_or_insert(net.now - start);
            }
            if got == SIZE {
                let last_byte = net.now - start;
                let _ = net.b.close(h);
                // Let both ends finish and release the connection before the next one.
                let end = net.now + Duration::from_secs(10);
                while net.now < end && net.step() {
                    while net.a.poll_event().is_some() {}
                    while net.b.poll_event().is_some() {}
                }
                return Some(Times {
                    accepted: accepted?,
                    first_byte: first_byte?,
                    last_byte,
                });
            }
        }
        if net.now - start > Duration::from_secs(60) || !net.step() {
            return None;
        }
    }
    None
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Medians of (accepted, first byte, last byte) in ms for the first and second connection of
/// one sender endpoint, keyed or not.
fn measure(loss: f64, key: bool) -> [[f64; 3]; 2] {
    let mut runs: [Vec<Times>; 2] = [Vec::new(), Vec::new()];
    for seed in 0..SEEDS {
        let imp = Impair {
            delay: Duration::from_millis(5),
            loss,
            ..Impair::default()
        };
        let mut net = Net::new(seed + 1, imp);
        if key {
            net.a = keyed(2 * seed + 1);
            net.b = keyed(2 * seed + 2);
        }
        net.b.listen(7, ccfg()).unwrap();
        for run in &mut runs {
            run.push(one(&mut net).expect("the transfer completes within a minute"));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    runs.map(|r| {
        [
            ms(median(r.iter().map(|t| t.accepted).collect())),
            ms(median(r.iter().map(|t| t.first_byte).collect())),
            ms(median(r.iter().map(|t| t.last_byte).collect())),
        ]
    })
}

#[test]
fn freshness_costs_the_first_connection_one_round_trip_and_later_ones_nothing() {
    println!(
        "loss  receiver  connection  accepted_ms  first_byte_ms  last_byte_ms (medians of {SEEDS})"
    );
    for loss in [0.0, 0.2] {
        let keyed = measure(loss, true);
        let keyless = measure(loss, false);
        for (name, m) in [("keyed", keyed), ("keyless", keyless)] {
            for (i, [a, f, l]) in m.iter().enumerate() {
                println!(
                    "{:>4.0}%  {name:<8}  {:<10}  {a:>11.3}  {f:>13.3}  {l:>12.3}",
                    loss * 100.0,
                    ["first", "second"][i]
                );
            }
        }
        let [first, second] = keyed;
        // The set-up delay (the receiver's accept) is not held up by the proof.
        assert!(
            (first[0] - second[0]).abs() < 0.5,
            "accept: first {first:?} second {second:?}"
        );
        // 0-RTT delivery for the second connection; the first waits for the ECHO: one round
        // trip (10 ms), or a CHALLENGE sent again (250 ms later) when it or the ECHO is lost.
        assert!(second[1] < 6.0, "second {second:?}");
        assert!(
            (first[1] - second[1] - 10.0).abs() < 0.5 || first[1] > 250.0,
            "first {first:?} second {second:?}"
        );
        // The transfer as a whole is held up by at most that.
        assert!(
            first[2] <= second[2] + 10.0 + 250.0 * f64::from(loss > 0.0) + 1.0,
            "first {first:?} second {second:?}"
        );
    }
}
