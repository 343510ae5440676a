//! UDP flows over quasi-reliable and unreliable AeroTP connections, on loopback through a
//! relay that drops AeroTP packets ingress → egress: every datagram the destination gets is
//! one the client sent, intact, in order, at most once; replies come back the same way; and
//! what is missing is exactly what the gateways report as lost or dropped.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

mod common;

use common::{echo_dest, every, index_of, relay, udp_egress, udp_ingress, Hop};

const N: u32 = 3000;

fn datagram(i: u32) -> Vec<u8> {
    let len = 16 + (i as usize * 7919) % 1100;
    let mut v = i.to_be_bytes().to_vec();
    v.extend((4..len).map(|j| (j as u32).wrapping_mul(31).wrapping_add(i) as u8));
    v
}

/// Returns (delivered, reported lost, dropped).
async fn run(mode: &str) -> (u64, u64, u64) {
    // Destination: echoes every datagram, records them.
    let (dest_addr, at_dest) = echo_dest(datagram).await;
    let egress = udp_egress(dest_addr, "20mbit").await;
    let (relay, relay_dropped) = relay(
        // Every 10th packet among 100..1600.
        egress.ep.local_addr(),
        every(100..1600, 10, 5, Hop::Drop),
    )
    .await;
    let (ingress, entry) = udp_ingress(relay, mode, "telemetry", "20mbit").await;
    let client = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    // The replies of a burst the destination echoes come back as one (common::echo_dest).
    aerotp_testkit::udp_buffer::grow_udp_rcvbuf(&*client, 4 << 20).unwrap();
    let replies = Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));
    let (c2, r2) = (client.clone(), replies.clone());
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok(n) = c2.recv(&mut b).await {
            r2.lock().unwrap().push(index_of(&b[..n], datagram));
        }
    });
    client.connect(entry).await.unwrap();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..N {
        tick.tick().await;
        client.send(&datagram(i)).await.unwrap();
    }
    // Settle: every datagram is at the destination or accounted for as lost/dropped.
    let acct = || {
        let got = at_dest.lock().unwrap().len() as u64;
        let lost = egress.reg.udp_lost.load(Ordering::Relaxed);
        let dropped = ingress.reg.udp_dropped.load(Ordering::Relaxed)
            + egress.reg.udp_dropped.load(Ordering::Relaxed);
        (got, lost, dropped)
    };
    let t = Instant::now();
    while {
        let (g, l, d) = acct();
        g + l + d < u64::from(N) || replies.lock().unwrap().len() < g as usize
    } && t.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (got, lost, dropped) = acct();
    let back = replies.lock().unwrap().clone();
    let seen = at_dest.lock().unwrap().clone();
    eprintln!(
        "{mode}: sent {N}, relay dropped {} AeroTP packets; destination got {got}, gateways \
         report {lost} lost + {dropped} dropped; {} replies back (ingress reports {} lost)",
        relay_dropped.load(Ordering::Relaxed),
        back.len(),
        ingress.reg.udp_lost.load(Ordering::Relaxed)
    );
    assert!(relay_dropped.load(Ordering::Relaxed) > 0);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
    assert!(back.windows(2).all(|w| w[0] < w[1]), "replies in order");
    assert_eq!(
        got + lost + dropped,
        u64::from(N),
        "every datagram delivered or reported lost/dropped, exactly"
    );
    assert!(got > u64::from(N) / 2, "most datagrams delivered");
    // The reverse direction is not impaired: every reply comes back or is reported.
    assert_eq!(
        back.len() as u64 + ingress.reg.udp_lost.load(Ordering::Relaxed),
        got,
        "every reply delivered or reported lost"
    );
    (got, lost, dropped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_over_quasi_reliable() {
    run("quasi-reliable").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_over_unreliable() {
    run("unreliable").await;
}

/// UDP over a reliable connection: what the relay drops is resent, so nothing is lost; a
/// datagram is missing only if the ingress's send buffer was full (counted as dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_over_reliable() {
    let (got, lost, dropped) = run("reliable").await;
    assert_eq!(lost, 0, "reliable loses nothing");
    assert_eq!(got + dropped, u64::from(N));
    assert!(
        got >= u64::from(N) * 99 / 100,
        "{got} delivered, {dropped} dropped"
    );
}

/// One datagram from `client` through the gateways: at the destination `dest` (returns where
/// from) and its echo back at the client, each within 5 s.
async fn exchange(mode: &str, client: &UdpSocket, dest: &UdpSocket, i: u8) -> std::net::SocketAddr {
    let mut buf = vec![0u8; 2048];
    client.send(&[i; 100]).await.unwrap();
    let wait = Duration::from_secs(5);
    let (n, from) = tokio::time::timeout(wait, dest.recv_from(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("{mode}: datagram {i} not at the destination"))
        .unwrap();
    assert_eq!(&buf[..n], &[i; 100], "{mode}");
    dest.send_to(&buf[..n], from).await.unwrap();
    let n = tokio::time::timeout(wait, client.recv(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("{mode}: reply {i} not at the client"))
        .unwrap();
    assert_eq!(&buf[..n], &[i; 100], "{mode}");
    from
}

/// A stream-mode flow outlives its client's silence beyond the gateways' `idle_timeout` (2 s
/// here) up to `udpstream::FLOW_IDLE`: after 5 s without a datagram either way, the next one
/// reaches the destination on the same flow (the same source port at the egress, no new
/// AeroTP connection) and the destination's reply finds the client. Before, the flow's
/// connection timed out with the gateways' idle timeout and the next datagram came from a
/// new flow.
async fn silence(mode: &str) {
    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let egress = common::egress(
        aerotp_gw::config::FileConfig {
            udp_connect: Some(dest.local_addr().unwrap().to_string()),
            idle_timeout: Some("2s".into()),
            ..Default::default()
        },
        "5mbit",
    )
    .await;
    let entry = aerotp_testkit::free_udp();
    let flow = aerotp_gw::config::FlowSpec {
        udp_listen: Some(entry.to_string()),
        mode: Some(mode.into()),
        ..Default::default()
    };
    let cfg = aerotp_gw::config::FileConfig {
        idle_timeout: Some("2s".into()),
        ..Default::default()
    };
    let _ingress = common::ingress(egress.ep.local_addr(), flow, cfg, "5mbit").await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(entry).await.unwrap();
    let before = exchange(mode, &client, &dest, 1).await;
    let proven = egress.ep.stats().proven;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = exchange(mode, &client, &dest, 2).await;
    assert_eq!(
        before, after,
        "{mode}: after 5 s of silence the destination sees another source: a new flow"
    );
    assert_eq!(
        egress.ep.stats().proven,
        proven,
        "{mode}: a new AeroTP connection after 5 s of silence"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_flow_outlives_its_client_s_silence() {
    for mode in ["unreliable", "quasi-reliable"] {
        silence(mode).await;
    }
}
