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
