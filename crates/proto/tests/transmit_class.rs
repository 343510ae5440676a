//! Every datagram `poll_transmit` offers says the class of what it carries
//! (`Transmit::class`), which a driver marks on the IP header: a connection's datagrams its
//! class (the listener's challenge during set-up included), a datagram route's sources and
//! repairs the route's, the endpoint's answers to no connection and no listener none.

mod harness;

use aerotp_proto::{
    ConnectionConfig, DatagramRoute, Endpoint, EndpointConfig, ErasureMode, ErasureSetting, Mode,
    TrafficClass,
};
use harness::{addr_a, addr_b};
use std::time::Duration;

/// Everything `e` offers at `now`: each datagram and its class.
fn drain(e: &mut Endpoint, now: Duration) -> Vec<(Vec<u8>, Option<TrafficClass>)> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let mut buf = Vec::new();
        match e.poll_transmit(now, &mut buf) {
            Some(t) => out.push((buf[..t.len].to_vec(), t.class)),
            None => return out,
        }
    }
    panic!("an endpoint that never stops sending");
}

fn with_class(class: TrafficClass) -> ConnectionConfig {
    ConnectionConfig {
        class,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    }
}

#[test]
fn a_connection_s_datagrams_carry_its_class_both_ways() {
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    b.listen(7, with_class(TrafficClass::Telemetry)).unwrap();
    let mut now = Duration::ZERO;
    let h = a
        .connect(now, addr_b(), 7, with_class(TrafficClass::Control))
        .unwrap();
    let (mut from_a, mut from_b) = (0, 0);
    let mut wrote = false;
    for _ in 0..200 {
        now += Duration::from_millis(1);
        a.handle_timeout(now);
        b.handle_timeout(now);
        for (d, class) in drain(&mut a, now) {
            assert_eq!(class, Some(TrafficClass::Control));
            from_a += 1;
            b.handle_datagram(now, addr_a(), &d);
        }
        for (d, class) in drain(&mut b, now) {
            assert_eq!(class, Some(TrafficClass::Telemetry));
            from_b += 1;
            a.handle_datagram(now, addr_b(), &d);
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        if !wrote {
            wrote = a.write(h, &[7u8; 20_000]).is_ok();
        }
    }
    assert!(
        from_a > 10 && from_b > 2,
        "{from_a} from A, {from_b} from B"
    );
}

#[test]
fn a_route_s_sources_and_repairs_carry_its_class() {
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let route = DatagramRoute {
        class: TrafficClass::Telemetry,
        erasure: Some(ErasureSetting {
            mode: ErasureMode::Ratio(1.25),
            ..ErasureSetting::OFF
        }),
        ..DatagramRoute::plain(addr_b(), 7, 9, 0, 1400)
    };
    let mut now = Duration::ZERO;
    let mut sent = 0;
    for i in 0..40u8 {
        a.send_datagram_with(now, &route, &[i; 600]).unwrap();
        for (_, class) in drain(&mut a, now) {
            assert_eq!(class, Some(TrafficClass::Telemetry));
            sent += 1;
        }
    }
    // The route pauses: its tail flush is a repair of the same class.
    now += Duration::from_secs(1);
    a.handle_timeout(now);
    for (_, class) in drain(&mut a, now) {
        assert_eq!(class, Some(TrafficClass::Telemetry));
        sent += 1;
    }
    let repairs = a.stats.datagram_repairs_sent;
    assert!(repairs >= 5, "{repairs} repairs");
    assert_eq!(sent as u64, 40 + repairs);
}

#[test]
fn answers_to_no_connection_have_no_class() {
    // A's connect reaches C, which listens on no port: C's refusal belongs to no connection.
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut c = Endpoint::new(EndpointConfig::default(), 3);
    let now = Duration::from_millis(1);
    a.connect(now, addr_b(), 7, with_class(TrafficClass::Control))
        .unwrap();
    let mut answers = 0;
    for (d, _) in drain(&mut a, now) {
        c.handle_datagram(now, addr_a(), &d);
        for (_, class) in drain(&mut c, now) {
            assert_eq!(class, None);
            answers += 1;
        }
    }
    assert!(answers > 0, "C answered nothing");
}
