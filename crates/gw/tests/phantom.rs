//! Bit errors in the air link's UDP source port (AeroTP sends with the UDP checksum off, so
//! such a datagram still arrives, from a port the egress has never seen) must not make
//! phantom flows: a relay sends some ingress → egress packets from a second socket, as a
//! corrupted source port would. Datagram mode: the destination still sees one flow (one
//! source socket), every datagram and every reply arrives. Stream mode: the datagrams of the
//! phantom connection are counted once, as lost by the real flow, not also as dropped.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

mod common;

use common::{every, relay, udp_egress, udp_ingress, Hop};

const N: u32 = 600;

/// Runs `N` echoed datagrams of `mode` through the relay; returns (indices at the
/// destination, source addresses the destination saw, indices of the replies, gateways).
async fn run(
    mode: &str,
) -> (
    Vec<u32>,
    BTreeSet<SocketAddr>,
    Vec<u32>,
    [Arc<aerotp_gw::Gateway>; 2],
    u64,
) {
    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Sized like a telemetry receiver's: a hole held for repair is released in one burst.
    aerotp_testkit::udp_buffer::grow_udp_rcvbuf(&dest, 4 << 20).unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let seen = Arc::new(Mutex::new((Vec::new(), BTreeSet::new())));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = dest.recv_from(&mut b).await {
            let i = u32::from_be_bytes(b[..4].try_into().unwrap());
            {
                let mut s = seen2.lock().unwrap();
                s.0.push(i);
                s.1.insert(from);
            }
            let _ = dest.send_to(&b[..n], from).await;
        }
    });
    let egress = udp_egress(dest_addr, "20mbit").await;
    let (relay, flipped) = relay(
        // Every 25th packet among 100..450 from another source port. Flips stop well before
        // the last datagram: a lossy mode learns of a lost TPDU from the ones behind it, so a
        // flip among the last few would be neither delivered nor counted lost by the time the
        // test looks.
        egress.ep.local_addr(),
        every(100..450, 25, 0, Hop::Flip),
    )
    .await;
    let (ingress, entry) = udp_ingress(relay, mode, "telemetry", "20mbit").await;
    let client = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    aerotp_testkit::udp_buffer::grow_udp_rcvbuf(&*client, 4 << 20).unwrap();
    client.connect(entry).await.unwrap();
    let replies = Arc::new(Mutex::new(Vec::new()));
    let (c2, r2) = (client.clone(), replies.clone());
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok(n) = c2.recv(&mut b).await {
            // Only whole replies count (the test then finds one missing).
            if n != 200 {
                continue;
            }
            r2.lock()
                .unwrap()
                .push(u32::from_be_bytes(b[..4].try_into().unwrap()));
        }
    });
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..N {
        tick.tick().await;
        let mut d = i.to_be_bytes().to_vec();
        d.resize(200, 0x5A);
        client.send(&d).await.unwrap();
    }
    let settled = || {
        let got = seen.lock().unwrap().0.len() as u64;
        got + egress.reg.udp_lost.load(Ordering::Relaxed) >= u64::from(N)
            && replies.lock().unwrap().len() as u64 >= got
    };
    let t = Instant::now();
    while !settled() && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (got, from) = seen.lock().unwrap().clone();
    let back = replies.lock().unwrap().clone();
    let f = flipped.load(Ordering::Relaxed);
    eprintln!(
        "{mode}: sent {N}, delivered {}, lost {}, dropped {}+{}, replies {}, {f} packets from \
         another port, destination saw {} source(s)",
        got.len(),
        egress.reg.udp_lost.load(Ordering::Relaxed),
        ingress.reg.udp_dropped.load(Ordering::Relaxed),
        egress.reg.udp_dropped.load(Ordering::Relaxed),
        back.len(),
        from.len()
    );
    assert!(f >= 10, "the relay flipped {f} packets");
    (got, from, back, [ingress, egress], f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagram_mode_keys_flows_by_checked_bytes() {
    let (got, from, back, [ingress, egress], _) = run("datagram").await;
    assert_eq!(from.len(), 1, "one flow at the destination: {from:?}");
    assert_eq!(got, (0..N).collect::<Vec<_>>(), "every datagram, in order");
    assert_eq!(
        back.len() as u32,
        N,
        "every reply (they did not follow a flipped port)"
    );
    for g in [&ingress, &egress] {
        assert_eq!(g.reg.udp_dropped.load(Ordering::Relaxed), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_mode_counts_a_phantom_s_datagrams_once() {
    let (got, from, back, [ingress, egress], _) = run("quasi-reliable").await;
    assert_eq!(from.len(), 1, "one flow at the destination: {from:?}");
    let lost = egress.reg.udp_lost.load(Ordering::Relaxed);
    let dropped = ingress.reg.udp_dropped.load(Ordering::Relaxed)
        + egress.reg.udp_dropped.load(Ordering::Relaxed);
    assert_eq!(dropped, 0, "a phantom's datagrams are not drops");
    assert_eq!(
        got.len() as u64 + lost,
        u64::from(N),
        "delivered + lost = sent"
    );
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "in order, at most once"
    );
    assert_eq!(back.len(), got.len(), "every reply");
}
