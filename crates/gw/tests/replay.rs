//! A keyed gateway flow recorded between the gateways and replayed to a fresh egress — a
//! restarted one: same key, nothing remembered — opens no destination connection and forwards
//! no datagram (docs/security.md, "Replays"): its connections verify, but their sender never
//! answers the new egress's challenge, so none is proven. (The fresh egress listens on
//! another port than the first: the first one's tasks keep its socket in this process; the
//! attacker sends wherever the egress listens.)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_net::keyfile::{self, WriteMode};
use aerotp_testkit::relay::Relay;
use aerotp_testkit::{free_tcp, free_udp, random};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What reached the destinations: TCP connections accepted and bytes, UDP datagrams.
#[derive(Default)]
struct Seen {
    tcp_connections: AtomicUsize,
    tcp_bytes: AtomicUsize,
    udp_datagrams: AtomicUsize,
}

async fn destinations(seen: Arc<Seen>) -> (SocketAddr, SocketAddr) {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addrs = (tcp.local_addr().unwrap(), udp.local_addr().unwrap());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = tcp.accept().await {
            s.tcp_connections.fetch_add(1, Ordering::Relaxed);
            let s = s.clone();
            tokio::spawn(async move {
                let mut b = vec![0u8; 65536];
                while let Ok(n @ 1..) = c.read(&mut b).await {
                    s.tcp_bytes.fetch_add(n, Ordering::Relaxed);
                }
            });
        }
    });
    tokio::spawn(async move {
        let mut b = vec![0u8; 65536];
        while udp.recv_from(&mut b).await.is_ok() {
            seen.udp_datagrams.fetch_add(1, Ordering::Relaxed);
        }
    });
    addrs
}

fn egress_config(key: &std::path::Path, tcp: SocketAddr, udp: SocketAddr) -> FileConfig {
    FileConfig {
        listen: Some(free_udp().to_string()),
        tcp_connect: Some(tcp.to_string()),
        udp_connect: Some(udp.to_string()),
        rate: Some("40mbit".into()),
        key_file: Some(key.into()),
        setup_timeout: Some("1s".into()),
        ..Default::default()
    }
}

async fn wait_for(what: &str, secs: u64, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_keyed_flow_replayed_to_a_fresh_egress_reaches_no_destination() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k.key");
    keyfile::write(&key, WriteMode::New).unwrap();
    let seen = Arc::new(Seen::default());
    let (tcp_dest, udp_dest) = destinations(seen.clone()).await;

    let eg_cfg = egress_config(&key, tcp_dest, udp_dest);
    let egress = aerotp_gw::start(aerotp_gw::Role::Egress, eg_cfg.settings().unwrap())
        .await
        .unwrap();
    // The attacker on the path between the gateways, recording what the ingress sends.
    let rec = Relay::start(egress.ep.local_addr(), true, None);
    let (tcp_entry, udp_entry) = (free_tcp(), free_udp());
    let in_cfg = FileConfig {
        peer: Some(rec.front().to_string()),
        rate: Some("40mbit".into()),
        key_file: Some(key.clone()),
        flows: vec![
            FlowSpec {
                tcp_listen: Some(tcp_entry.to_string()),
                // Reliable end to end: no custody store to set up here.
                mode: Some("reliable".into()),
                ..Default::default()
            },
            FlowSpec {
                udp_listen: Some(udp_entry.to_string()),
                mode: Some("quasi-reliable".into()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let _ingress = aerotp_gw::start(aerotp_gw::Role::Ingress, in_cfg.settings().unwrap())
        .await
        .unwrap();

    // The real traffic: a 200 kB upload and 40 telemetry datagrams.
    let up = random(200_000, 5);
    let mut c = tokio::net::TcpStream::connect(tcp_entry).await.unwrap();
    c.write_all(&up).await.unwrap();
    c.shutdown().await.unwrap();
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..40u8 {
        client.send_to(&[i; 200], udp_entry).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wait_for("the upload arrived", 20, || {
        seen.tcp_bytes.load(Ordering::Relaxed) == up.len()
    })
    .await;
    wait_for("the datagrams arrived", 20, || {
        seen.udp_datagrams.load(Ordering::Relaxed) >= 35
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (recording, upstream) = rec.stop();
    let (tcp_before, udp_before) = (
        seen.tcp_connections.load(Ordering::Relaxed),
        seen.udp_datagrams.load(Ordering::Relaxed),
    );
    assert_eq!(tcp_before, 1);
    assert!(
        recording.len() > 100,
        "{} datagrams recorded",
        recording.len()
    );

    // A fresh egress with the same key and destinations hears the whole recording again,
    // from the address it would know the ingress by.
    let fresh = aerotp_gw::start(
        aerotp_gw::Role::Egress,
        egress_config(&key, tcp_dest, udp_dest).settings().unwrap(),
    )
    .await
    .unwrap();
    let to = fresh.ep.local_addr();
    let replay = tokio::task::spawn_blocking(move || {
        for d in &recording {
            upstream.send_to(d, to).unwrap();
            std::thread::sleep(Duration::from_micros(300));
        }
    });
    replay.await.unwrap();
    // Past the bound of every replayed connection's slot (four 1 s set-up timeouts: a slot
    // that took more than its opening TPDU is kept that long).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        seen.tcp_connections.load(Ordering::Relaxed),
        tcp_before,
        "a replayed flow opened a destination connection"
    );
    assert_eq!(
        seen.udp_datagrams.load(Ordering::Relaxed),
        udp_before,
        "a replayed stream forwarded datagrams"
    );
    assert_eq!(seen.tcp_bytes.load(Ordering::Relaxed), up.len());
}
