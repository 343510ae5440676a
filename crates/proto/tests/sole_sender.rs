//! An endpoint's only connection is asked again at once after each datagram it sends (no
//! timer-table recomputation, no fair-queue sort: `Endpoint::send_again_alone`). That must
//! not outlive being alone: once a second connection has data, the two share the link
//! datagram by datagram, as the fair queue always served them. (In debug builds every direct
//! ask also checks that the connection's deadline had come.)

mod harness;

use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Mode, State};
use aerotp_wire::Header;
use harness::by_hand::{connect, drain};
use harness::{addr_a, addr_b, pattern};
use std::time::Duration;

const PORT: u16 = 7;

#[test]
fn a_second_connection_ends_the_first_ones_direct_asks() {
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    let cfg = ConnectionConfig {
        rate_bps: 10_000_000_000,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    };
    let mut now = Duration::ZERO;
    let (first, _) = connect(
        &mut a,
        &mut b,
        PORT,
        (cfg.clone(), cfg.clone()),
        1,
        &mut now,
    );
    let data = pattern(400_000, 5);
    a.write(first[0], &data).unwrap();
    // Alone: a run of its datagrams, all asked directly after the first.
    let alone = drain(&mut a, now);
    assert!(
        alone.len() > 50,
        "only {} datagrams from the lone sender",
        alone.len()
    );
    for d in &alone {
        b.handle_datagram(now, addr_a(), d);
    }
    for d in drain(&mut b, now) {
        a.handle_datagram(now, addr_b(), &d);
    }

    // A second connection opens and gets data of its own.
    let second = a.connect(now, addr_b(), PORT, cfg).unwrap();
    let mut opened = false;
    for _ in 0..1000 {
        now += Duration::from_millis(1);
        a.handle_timeout(now);
        b.handle_timeout(now);
        for d in drain(&mut a, now) {
            b.handle_datagram(now, addr_a(), &d);
        }
        for d in drain(&mut b, now) {
            a.handle_datagram(now, addr_b(), &d);
        }
        if a.state(second) == Some(State::Established) {
            opened = true;
            break;
        }
    }
    assert!(opened, "the second connection never opened");
    a.write(first[0], &data).unwrap();
    a.write(second, &data).unwrap();
    now += Duration::from_millis(1);
    a.handle_timeout(now);

    // Both have a full window of data: the link alternates between them.
    let ports: Vec<u16> = drain(&mut a, now)
        .iter()
        .map(|d| Header::parse(d).expect("a datagram A sent").src_port)
        .take(200)
        .collect();
    assert!(
        ports.len() >= 100,
        "only {} datagrams with two senders",
        ports.len()
    );
    let mut longest_run = 1;
    let mut run = 1;
    for w in ports.windows(2) {
        run = if w[0] == w[1] { run + 1 } else { 1 };
        longest_run = longest_run.max(run);
    }
    let distinct = {
        let mut p = ports.clone();
        p.sort_unstable();
        p.dedup();
        p.len()
    };
    assert_eq!(distinct, 2, "one connection took the link: {ports:?}");
    assert!(
        longest_run <= 2,
        "a connection sent {longest_run} datagrams in a row beside another with data: {ports:?}"
    );
}
