//! The gateways with a pre-shared key (`key_file`, `encrypt`): UDP datagrams of every size —
//! fragmented into authenticated, encrypted TPDUs that leave room for the envelope — arrive
//! whole and intact; an ingress holding another key gets nothing through.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::keyfile::{self, WriteMode};
use tokio::net::UdpSocket;

const SIZES: [usize; 5] = [4, 1300, 1400, 9000, 30_000];

fn datagram(i: u32) -> Vec<u8> {
    let len = SIZES[i as usize % SIZES.len()];
    let mut v = i.to_be_bytes().to_vec();
    v.extend((4..len).map(|j| (j as u32).wrapping_mul(13).wrapping_add(i) as u8));
    v
}

fn free_udp() -> SocketAddr {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

async fn pair(
    dest: SocketAddr,
    egress_key: &std::path::Path,
    ingress_key: &std::path::Path,
) -> (Arc<aerotp_gw::Gateway>, Arc<aerotp_gw::Gateway>, SocketAddr) {
    let cfg = aerotp_gw::config::FileConfig {
        listen: Some("127.0.0.1:0".into()),
        udp_connect: Some(dest.to_string()),
        rate: Some("50mbit".into()),
        key_file: Some(egress_key.into()),
        encrypt: Some(true),
        ..Default::default()
    };
    let egress = aerotp_gw::start(aerotp_gw::Role::Egress, cfg.settings().unwrap())
        .await
        .unwrap();
    let entry = free_udp();
    let cfg = aerotp_gw::config::FileConfig {
        peer: Some(egress.ep.local_addr().to_string()),
        rate: Some("50mbit".into()),
        key_file: Some(ingress_key.into()),
        encrypt: Some(true),
        flows: vec![aerotp_gw::config::FlowSpec {
            udp_listen: Some(entry.to_string()),
            mode: Some("datagram".into()),
            class: Some("telemetry".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(aerotp_gw::Role::Ingress, cfg.settings().unwrap())
        .await
        .unwrap();
    (egress, ingress, entry)
}

/// Sends `n` datagrams through `entry` and returns the indices that reached `dest` intact
/// within a few seconds.
async fn run(dest: UdpSocket, entry: SocketAddr, n: u32) -> Vec<u32> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let rx = tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((len, _)) = dest.recv_from(&mut b).await {
            let i = u32::from_be_bytes(b[..4].try_into().unwrap());
            assert_eq!(&b[..len], &datagram(i)[..], "datagram {i} altered");
            g2.lock().unwrap().push(i);
        }
    });
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(entry).await.unwrap();
    for i in 0..n {
        client.send(&datagram(i)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let t = Instant::now();
    while (got.lock().unwrap().len() as u32) < n && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rx.abort();
    let v = got.lock().unwrap().clone();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_with_a_key_carry_every_size_and_refuse_another_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("gw.key");
    let other = dir.path().join("other.key");
    keyfile::write(&key, WriteMode::New).unwrap();
    keyfile::write(&other, WriteMode::New).unwrap();

    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let (egress, _ingress, entry) = pair(dest.local_addr().unwrap(), &key, &key).await;
    assert!(egress.ep.authenticated());
    let got = run(dest, entry, 20).await;
    assert_eq!(got.len(), 20, "delivered: {got:?}");
    let s = egress.ep.stats();
    assert!(s.auth_verified > 20, "{s:?}");
    assert_eq!(s.auth_dropped(), 0, "{s:?}");

    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let (egress, _ingress, entry) = pair(dest.local_addr().unwrap(), &key, &other).await;
    let got = run(dest, entry, 5).await;
    assert!(got.is_empty(), "another key got through: {got:?}");
    let s = egress.ep.stats();
    assert!(s.auth_failed > 0, "{s:?}");
    assert_eq!(s.auth_verified, 0, "{s:?}");
}
