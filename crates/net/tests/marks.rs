//! DSCP marks on the wire (crates/net/src/marks.rs): a plain UDP socket that asks for each
//! datagram's TOS / traffic-class byte (`IP_RECVTOS`, `IPV6_RECVTCLASS`) reads what an
//! endpoint sends, over loopback: a connection's datagrams carry its class's mark, a datagram
//! route's carry the route's, trains of several classes are split by mark, and the plan can
//! be changed or turned off.
#![cfg(target_os = "linux")]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use aerotp_net::{ConnectionConfig, Dscp, DscpPlan, Endpoint, EndpointConfig, Mode};
use aerotp_proto::{DatagramRoute, TrafficClass};
use aerotp_testkit::tos::tos_reader;
use tokio::net::UdpSocket;

/// One datagram, its TOS byte and its sender, within two seconds.
async fn read_marked(s: &UdpSocket) -> (Vec<u8>, Option<u8>, SocketAddr) {
    let m = aerotp_testkit::tos::read_marked(s, Duration::from_secs(2)).await;
    (m.data, m.tos, m.from)
}

fn class_cfg(class: TrafficClass) -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(Mode::Reliable);
    c.class = class;
    c
}

fn bind(addr: &str) -> Endpoint {
    Endpoint::bind(addr.parse().unwrap(), EndpointConfig::default()).unwrap()
}

/// The TOS byte of the first datagram a connection of `class` from `ep` sends to a reader on
/// `reader`, addressed by its IPv4-mapped IPv6 address if `mapped`.
async fn first_mark(ep: &Endpoint, reader: &str, mapped: bool, class: TrafficClass) -> u8 {
    let r = tos_reader(reader);
    let mut dest = r.local_addr().unwrap();
    if let (true, IpAddr::V4(v4)) = (mapped, dest.ip()) {
        dest.set_ip(IpAddr::V6(v4.to_ipv6_mapped()));
    }
    let _conn = ep.connect(dest, 1, class_cfg(class)).unwrap();
    let (_, tos, _) = read_marked(&r).await;
    tos.expect("the kernel reports the TOS byte")
}

#[tokio::test]
async fn each_class_carries_its_mark_and_the_plan_can_change() {
    let ep = bind("127.0.0.1:0");
    assert_eq!(ep.dscp_plan(), DscpPlan::STANDARD);
    let mark = |c| first_mark(&ep, "127.0.0.1:0", false, c);
    assert_eq!(mark(TrafficClass::Control).await, 46 << 2, "control: EF");
    assert_eq!(
        mark(TrafficClass::Telemetry).await,
        34 << 2,
        "telemetry: AF41"
    );
    assert_eq!(mark(TrafficClass::Bulk).await, 0, "bulk: DF");
    let cs5 = Dscp::new(40).unwrap();
    ep.set_dscp_plan(DscpPlan::STANDARD.with(TrafficClass::Control, cs5));
    assert_eq!(mark(TrafficClass::Control).await, 40 << 2);
    ep.set_dscp_plan(DscpPlan::OFF);
    assert_eq!(mark(TrafficClass::Control).await, 0);
}

#[tokio::test]
async fn ipv6_and_ipv4_mapped_peers_are_marked() {
    let v6 = bind("[::1]:0");
    assert_eq!(
        first_mark(&v6, "[::1]:0", false, TrafficClass::Control).await,
        46 << 2,
        "IPV6_TCLASS"
    );
    // A dual-stack socket reaching an IPv4 peer by its mapped address: IP_TOS.
    let dual = bind("[::]:0");
    assert_eq!(
        first_mark(&dual, "127.0.0.1:0", true, TrafficClass::Telemetry).await,
        34 << 2
    );
}

#[tokio::test]
async fn a_pinned_source_and_a_mark_go_together() {
    // Bound to the unspecified address with the path's source pinned: the datagram carries
    // a packet-info and a TOS control message.
    let ep = bind("0.0.0.0:0");
    let r = tos_reader("127.0.0.1:0");
    let dest = r.local_addr().unwrap();
    ep.pin_source(dest, "127.0.0.3".parse().unwrap()).unwrap();
    let _conn = ep
        .connect(dest, 1, class_cfg(TrafficClass::Control))
        .unwrap();
    let (_, tos, from) = read_marked(&r).await;
    assert_eq!(from.ip().to_string(), "127.0.0.3");
    assert_eq!(tos, Some(46 << 2));
}

#[tokio::test]
async fn datagram_routes_are_marked_by_their_class_and_trains_split_by_mark() {
    let ep = bind("127.0.0.1:0");
    let r = tos_reader("127.0.0.1:0");
    let to = r.local_addr().unwrap();
    let route = |class| DatagramRoute {
        class,
        ..DatagramRoute::plain(to, 7, 7, 0, 1400)
    };
    let (telemetry, bulk) = (route(TrafficClass::Telemetry), route(TrafficClass::Bulk));
    // Equal sizes to one destination: without the mark in a train's key these would leave
    // as a few GSO trains of mixed classes.
    const N: usize = 40;
    for i in 0..N {
        let tag = |c: char| format!("{c}{i:03}{}", "x".repeat(500));
        ep.send_datagram_on(&telemetry, tag('T').as_bytes())
            .unwrap();
        ep.send_datagram_on(&bulk, tag('B').as_bytes()).unwrap();
    }
    let (mut t, mut b) = (0, 0);
    for _ in 0..2 * N {
        let (data, tos, _) = read_marked(&r).await;
        let has = |m: &[u8]| data.windows(m.len()).any(|w| w == m);
        let xs = "x".repeat(100);
        assert!(has(xs.as_bytes()), "a datagram of ours");
        let is_t = (0..N).any(|i| has(format!("T{i:03}x").as_bytes()));
        let is_b = (0..N).any(|i| has(format!("B{i:03}x").as_bytes()));
        assert!(is_t != is_b, "one message per datagram");
        if is_t {
            assert_eq!(tos, Some(34 << 2), "telemetry datagram");
            t += 1;
        } else {
            assert_eq!(tos, Some(0), "bulk datagram");
            b += 1;
        }
    }
    assert_eq!((t, b), (N, N));
}
