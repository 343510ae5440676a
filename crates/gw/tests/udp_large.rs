//! Datagram mode with UDP datagrams larger than one AeroTP datagram (up to 65 507 bytes),
//! through a relay that drops AeroTP packets ingress → egress: the gateways fragment and
//! reassemble, so each datagram arrives whole and intact or is counted lost by the link —
//! none is dropped for its size (issue: 87 of 750 Chapter 10 datagrams arrived before).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

mod common;

use common::{echo_dest, every, index_of, relay, udp_egress, udp_ingress, Hop};

const SIZES: [usize; 7] = [1, 1300, 1400, 2800, 9000, 30_000, 65_507];
const N: u32 = 140;

fn datagram(i: u32) -> Vec<u8> {
    let len = SIZES[i as usize % SIZES.len()].max(4);
    let mut v = i.to_be_bytes().to_vec();
    v.extend((4..len).map(|j| (j as u32).wrapping_mul(7).wrapping_add(i) as u8));
    v.truncate(len);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_datagrams_arrive_whole_or_are_counted_lost() {
    let (dest_addr, at_dest) = echo_dest(datagram).await;
    let egress = udp_egress(dest_addr, "200mbit").await;
    let (relay, relay_dropped) = relay(
        // Every 41st packet among 50..1200: the last datagrams pass, so every earlier loss is
        // followed by a completed one.
        egress.ep.local_addr(),
        every(50..1200, 41, 0, Hop::Drop),
    )
    .await;
    let (ingress, entry) = udp_ingress(relay, "datagram", "telemetry", "200mbit").await;
    let client = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    client.connect(entry).await.unwrap();
    let replies = Arc::new(Mutex::new(Vec::<u32>::new()));
    let (c2, r2) = (client.clone(), replies.clone());
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok(n) = c2.recv(&mut b).await {
            r2.lock().unwrap().push(index_of(&b[..n], datagram));
        }
    });
    for i in 0..N {
        let d = datagram(i);
        client.send(&d).await.unwrap();
        // About 20 Mb/s: well inside the route's share, so nothing is policed.
        tokio::time::sleep(Duration::from_micros(d.len() as u64 * 8 / 20 + 200)).await;
    }
    let lost = || egress.reg.udp_lost.load(Ordering::Relaxed);
    let t = Instant::now();
    while at_dest.lock().unwrap().len() as u64 + lost() < u64::from(N)
        && t.elapsed() < Duration::from_secs(15)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = at_dest.lock().unwrap().clone();
    let dropped = ingress.reg.udp_dropped.load(Ordering::Relaxed)
        + egress.reg.udp_dropped.load(Ordering::Relaxed);
    let policed = ingress.reg.udp_policed.load(Ordering::Relaxed);
    eprintln!(
        "sent {N}, delivered {}, counted lost {}, dropped {dropped}, policed {policed}, \
         AeroTP packets dropped by the relay {}",
        got.len(),
        lost(),
        relay_dropped.load(Ordering::Relaxed)
    );
    assert_eq!(
        (dropped, policed),
        (0, 0),
        "nothing dropped at the gateways"
    );
    assert!(
        relay_dropped.load(Ordering::Relaxed) > 10,
        "the relay dropped packets"
    );
    assert_eq!(
        got.len() as u64 + lost(),
        u64::from(N),
        "delivered + lost = sent"
    );
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "in order, at most once"
    );
    assert!(
        got.iter().any(|&i| datagram(i).len() == 65_507),
        "a largest datagram arrived"
    );
    assert!(got.len() as u32 > N / 2, "most arrived: {}", got.len());
    // Replies (fragmented by the egress the same way; nothing dropped on the way back).
    let t = Instant::now();
    while replies.lock().unwrap().len() < got.len() && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut back = replies.lock().unwrap().clone();
    back.sort_unstable();
    assert_eq!(back, got, "every delivered datagram's echo came back whole");
    assert_eq!(ingress.reg.udp_in.load(Ordering::Relaxed), u64::from(N));
    assert_eq!(egress.reg.udp_out.load(Ordering::Relaxed), got.len() as u64);
}
