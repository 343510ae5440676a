//! A datagram-mode UDP route with erasure repair (`erasure = "1.5"` on the flow), on loopback
//! through a relay that drops every 10th AeroTP packet from the ingress among packets
//! 100..1600: the same stream without repair loses about a tenth of those datagrams; with it
//! the destination gets every datagram, intact and once, and the gateways' counters say what
//! was rebuilt (docs/gateway.md, "UDP routes and erasure repair").

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

mod common;

use aerotp_testkit::free_udp;
use common::{echo_dest, every, relay, udp_egress, Hop};

const N: u32 = 2000;

fn datagram(i: u32) -> Vec<u8> {
    let len = 16 + (i as usize * 7919) % 1100;
    let mut v = i.to_be_bytes().to_vec();
    v.extend((4..len).map(|j| (j as u32).wrapping_mul(29).wrapping_add(i) as u8));
    v
}

/// Returns (delivered, relay dropped, datagrams the egress rebuilt).
async fn run(erasure: Option<&str>) -> (usize, u64, u64) {
    let (dest_addr, at_dest) = echo_dest(datagram).await;
    let egress = udp_egress(dest_addr, "20mbit").await;
    let (relay, relay_dropped) =
        relay(egress.ep.local_addr(), every(100..1600, 10, 5, Hop::Drop)).await;
    let entry = free_udp();
    let flow = aerotp_gw::config::FlowSpec {
        udp_listen: Some(entry.to_string()),
        mode: Some("datagram".into()),
        class: Some("telemetry".into()),
        erasure: erasure.map(Into::into),
        ..Default::default()
    };
    let ingress = common::ingress(relay, flow, Default::default(), "20mbit").await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(entry).await.unwrap();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..N {
        tick.tick().await;
        client.send(&datagram(i)).await.unwrap();
    }
    // Settle: the tail flush goes out within half the delay bound (250 ms).
    let t = Instant::now();
    let mut last = (0, Instant::now());
    while t.elapsed() < Duration::from_secs(10) {
        let n = at_dest.lock().unwrap().len();
        if n == N as usize {
            break;
        }
        if n != last.0 {
            last = (n, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = at_dest.lock().unwrap().clone();
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "a datagram delivered twice");
    let stats = egress.ep.stats();
    let rebuilt = stats.datagrams_rebuilt;
    eprintln!(
        "erasure {erasure:?}: sent {N}, relay dropped {}; destination got {}; egress rebuilt \
         {rebuilt} from {} repairs ({} used); ingress sent {} repairs",
        relay_dropped.load(Ordering::Relaxed),
        seen.len(),
        stats.datagram_repairs_received,
        stats.datagram_repairs_used,
        ingress.ep.stats().datagram_repairs_sent,
    );
    (seen.len(), relay_dropped.load(Ordering::Relaxed), rebuilt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repairing_datagram_route_delivers_what_the_link_lost() {
    let (plain, dropped_plain, rebuilt_plain) = run(None).await;
    assert!(dropped_plain >= 140, "the relay dropped {dropped_plain}");
    assert_eq!(rebuilt_plain, 0);
    assert!(
        plain <= (N - 100) as usize,
        "without repair {plain} of {N} delivered: the drops should show"
    );
    let (repaired, dropped, rebuilt) = run(Some("1.5")).await;
    assert!(dropped >= 140, "the relay dropped {dropped}");
    assert_eq!(repaired, N as usize, "with repair every datagram arrives");
    assert!(rebuilt >= 90, "{rebuilt} rebuilt");
}

#[test]
fn auto_repair_on_a_datagram_flow_is_refused_with_the_reason() {
    let cfg = aerotp_gw::config::FileConfig {
        peer: Some("127.0.0.1:9".into()),
        flows: vec![aerotp_gw::config::FlowSpec {
            udp_listen: Some("127.0.0.1:0".into()),
            mode: Some("datagram".into()),
            erasure: Some("auto".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = format!("{:#}", cfg.settings().unwrap_err());
    assert!(e.contains("fixed ratio"), "{e}");
}
