//! The ingress changes address mid-flow (a handover, a radio back with a new address, a NAT
//! rebinding): a relay on loopback sends the ingress's datagrams to the egress from one socket,
//! then from another, and drops what the egress sends to the first from then on. The flow's
//! AeroTP connection follows the ingress (docs/spec.md §9, "A peer's new address"): every byte
//! arrives both ways, once, in order, with no resume of the flow.

use aerotp_testkit::{free_tcp, random, sha256};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aerotp_gw::FileConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Ingress → egress through two relay sockets: the first `switch_after` datagrams leave from
/// the first, the rest from the second; the egress's datagrams to the first socket after the
/// switch are dropped (counted). Returns the relay's address for the ingress.
async fn rebinding_relay(egress: SocketAddr, switch_after: u64) -> (SocketAddr, Arc<AtomicU64>) {
    let inside = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let outs = [
        Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()),
        Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()),
    ];
    let addr = inside.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicU64::new(0));
    let ingress = Arc::new(Mutex::new(None::<SocketAddr>));
    for (i, out) in outs.iter().enumerate() {
        let (out, inside, ingress, sent, dropped) = (
            out.clone(),
            inside.clone(),
            ingress.clone(),
            sent.clone(),
            dropped.clone(),
        );
        tokio::spawn(async move {
            let mut b = vec![0u8; 65_536];
            while let Ok((n, _)) = out.recv_from(&mut b).await {
                if i == 0 && sent.load(Ordering::Relaxed) >= switch_after {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let to = *ingress.lock().unwrap();
                if let Some(to) = to {
                    let _ = inside.send_to(&b[..n], to).await;
                }
            }
        });
    }
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = inside.recv_from(&mut b).await {
            *ingress.lock().unwrap() = Some(from);
            let k = sent.fetch_add(1, Ordering::Relaxed);
            let _ = outs[usize::from(k >= switch_after)]
                .send_to(&b[..n], egress)
                .await;
        }
    });
    (addr, dropped)
}

async fn handover(mode: &str) {
    let up = random(3_000_000, 21);
    let down = random(1_000_000, 22);
    // Destination: reads everything, answers with its SHA-256 and `down`.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dest = l.local_addr().unwrap();
    let reply = down.clone();
    let server = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        s.write_all(&sha256(&got)).await.unwrap();
        s.write_all(&reply).await.unwrap();
        s.shutdown().await.unwrap();
        got
    });
    let eg = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        tcp_connect: Some(dest.to_string()),
        rate: Some("40mbit".into()),
        ..Default::default()
    };
    let egress = aerotp_gw::start(aerotp_gw::Role::Egress, eg.settings().unwrap())
        .await
        .unwrap();
    // 3 MB at 40 Mb/s is about 2,200 datagrams: the ingress moves a fifth of the way in.
    let (relay, dropped) = rebinding_relay(egress.ep.local_addr(), 500).await;
    let entry = free_tcp();
    // near-reliable holds custody on disk.
    let store = tempfile::tempdir().unwrap();
    let ing = FileConfig {
        peer: Some(relay.to_string()),
        rate: Some("40mbit".into()),
        store: (mode == "near-reliable").then(|| store.path().to_owned()),
        flows: vec![aerotp_gw::config::FlowSpec {
            tcp_listen: Some(entry.to_string()),
            mode: Some(mode.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(aerotp_gw::Role::Ingress, ing.settings().unwrap())
        .await
        .unwrap();
    let client = async {
        let mut c = TcpStream::connect(entry).await.unwrap();
        let (mut r, mut w) = c.split();
        let wr = async {
            w.write_all(&up).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let rd = async {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            got
        };
        tokio::join!(wr, rd).1
    };
    let got = tokio::time::timeout(Duration::from_secs(60), client)
        .await
        .expect("the flow ends within 60 s");
    let stats = egress.ep.stats();
    eprintln!(
        "{mode}: egress followed the ingress {} time(s) after {} challenge(s); relay dropped {} \
         datagrams sent to the old address; ingress resumes {}",
        stats.migrations,
        stats.path_challenges,
        dropped.load(Ordering::Relaxed),
        ingress.reg.resumes.load(Ordering::Relaxed)
    );
    assert_eq!(&got[..32], &sha256(&up)[..], "{mode}: upstream bytes");
    assert_eq!(&got[32..], &down[..], "{mode}: downstream bytes");
    assert_eq!(
        server.await.unwrap(),
        up,
        "{mode}: destination got every byte once"
    );
    assert!(stats.migrations >= 1, "{mode}: the egress never followed");
    assert_eq!(
        ingress.reg.resumes.load(Ordering::Relaxed),
        0,
        "{mode}: the flow had to resume: the connection did not survive the move"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_reliable_flow_survives_the_ingress_moving() {
    handover("near-reliable").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reliable_flow_survives_the_ingress_moving() {
    handover("reliable").await;
}
