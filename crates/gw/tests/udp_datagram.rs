//! UDP in datagram mode (passthrough) on loopback: a route is held to its class's share of
//! the gateway rate at the ingress. Under the share every datagram passes intact; over it
//! the excess is dropped there and counted (`udp_policed`), and what passes stays within the
//! rate plus one bucket.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

mod common;

use common::{udp_egress, udp_ingress};

const RATE_BPS: f64 = 2_000_000.0;
const LEN: usize = 1000;

fn datagram(i: u32) -> Vec<u8> {
    let mut v = i.to_be_bytes().to_vec();
    v.extend((4..LEN).map(|j| (j as u32).wrapping_mul(17).wrapping_add(i) as u8));
    v
}

/// Sends `n` datagrams, one every `gap`, and returns how long that took.
async fn send(client: &UdpSocket, from: u32, n: u32, gap: Duration) -> Duration {
    let t = Instant::now();
    let mut tick = tokio::time::interval(gap);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in from..from + n {
        tick.tick().await;
        client.send(&datagram(i)).await.unwrap();
    }
    t.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagram_routes_are_held_to_their_share() {
    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::<u32>::new()));
    let got2 = got.clone();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, _)) = dest.recv_from(&mut b).await {
            let i = u32::from_be_bytes(b[..4].try_into().unwrap());
            assert_eq!(&b[..n], &datagram(i)[..], "datagram {i} altered");
            got2.lock().unwrap().push(i);
        }
    });
    let egress = udp_egress(dest_addr, "2mbit").await;
    let (ingress, entry) = udp_ingress(egress.ep.local_addr(), "datagram", "bulk", "2mbit").await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(entry).await.unwrap();
    let policed = || ingress.reg.udp_policed.load(Ordering::Relaxed);
    let settle = |want: u64| {
        let got = got.clone();
        let ingress = ingress.clone();
        async move {
            let t = Instant::now();
            while got.lock().unwrap().len() as u64 + ingress.reg.udp_policed.load(Ordering::Relaxed)
                < want
                && t.elapsed() < Duration::from_secs(10)
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };

    // 1. Under the share: 150 datagrams at 1.0 Mb/s (one per 8 ms) all pass.
    send(&client, 0, 150, Duration::from_millis(8)).await;
    settle(150).await;
    assert_eq!(policed(), 0, "nothing policed under the share");
    assert_eq!(got.lock().unwrap().len(), 150, "every datagram delivered");

    // 2. Over it: 1000 datagrams at about 8 Mb/s (one per ms).
    let took = send(&client, 150, 1000, Duration::from_millis(1)).await;
    settle(1150).await;
    let delivered = got.lock().unwrap().len() as u64 - 150;
    // Payload: the destination-length byte, the datagram.
    let wire = ingress.datagram_link_len(LEN + 1) as f64;
    // The bucket was full after phase 1 (at most 100 ms of the rate, at least 64 KiB); the
    // last datagrams reach the policer a little after the sender's clock stopped (50 ms of
    // slack). At least the rate itself must pass, less 10 %.
    let bound = (RATE_BPS / 8.0 * (took.as_secs_f64() + 0.05) + 65_536.0) / wire + 2.0;
    let floor = RATE_BPS / 8.0 * took.as_secs_f64() / wire * 0.9;
    eprintln!(
        "over the share: sent 1000 in {took:?}, delivered {delivered}, policed {}, bound {bound:.0}",
        policed()
    );
    assert_eq!(
        delivered + policed(),
        1000,
        "each datagram delivered or counted"
    );
    assert!(policed() > 0, "the excess is policed");
    assert!(
        delivered as f64 <= bound,
        "{delivered} delivered, more than the rate allows ({bound:.0})"
    );
    assert!(
        delivered as f64 >= floor,
        "{delivered} delivered, less than the rate ({floor:.0})"
    );
    let seen = got.lock().unwrap().clone();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
}
