//! Helpers shared by the gateway's integration tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;

// The generic helpers (ports, random data, waits) live once, in aerotp-testkit.
use aerotp_testkit::free_udp;

/// A TCP client of the ingress's `entry`: writes `up`, shuts its write half, and returns all
/// it read until the other end closed (both at once, as an application would).
pub async fn tcp_exchange(entry: SocketAddr, up: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(entry).await.unwrap();
    let (mut r, mut w) = c.split();
    let wr = async {
        w.write_all(up).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let rd = async {
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        got
    };
    tokio::join!(wr, rd).1
}

/// An egress on loopback that connects every TCP flow to `dest`, at `rate`.
pub async fn tcp_egress(dest: SocketAddr, rate: &str) -> std::sync::Arc<aerotp_gw::Gateway> {
    egress(
        aerotp_gw::config::FileConfig {
            tcp_connect: Some(dest.to_string()),
            ..Default::default()
        },
        rate,
    )
    .await
}

/// An egress listening on loopback at `rate`, with `cfg`'s destinations.
pub async fn egress(
    cfg: aerotp_gw::config::FileConfig,
    rate: &str,
) -> std::sync::Arc<aerotp_gw::Gateway> {
    let cfg = aerotp_gw::config::FileConfig {
        listen: Some("127.0.0.1:0".into()),
        rate: Some(rate.into()),
        ..cfg
    };
    aerotp_gw::start(aerotp_gw::Role::Egress, cfg.settings().unwrap())
        .await
        .unwrap()
}

/// A TCP destination on loopback: reads everything, then answers with the SHA-256 of what it
/// read followed by `reply`; the task returns what it read.
pub async fn sha256_dest(reply: Vec<u8>) -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        s.write_all(&aerotp_testkit::sha256(&got)).await.unwrap();
        s.write_all(&reply).await.unwrap();
        s.shutdown().await.unwrap();
        got
    });
    (a, h)
}

/// An ingress on loopback with one TCP flow (`mode`) towards AeroTP `peer`, at `rate`, with
/// its custody store in `store` if given; returns it with the address TCP sources connect to.
pub async fn tcp_ingress(
    peer: SocketAddr,
    mode: &str,
    store: Option<&std::path::Path>,
    rate: &str,
) -> (std::sync::Arc<aerotp_gw::Gateway>, SocketAddr) {
    let entry = aerotp_testkit::free_tcp();
    let flow = aerotp_gw::config::FlowSpec {
        tcp_listen: Some(entry.to_string()),
        mode: Some(mode.into()),
        ..Default::default()
    };
    let cfg = aerotp_gw::config::FileConfig {
        store: store.map(|p| p.to_owned()),
        ..Default::default()
    };
    (ingress(peer, flow, cfg, rate).await, entry)
}

/// An ingress on loopback towards AeroTP `peer` at `rate`, with `flow` and `cfg`'s other keys.
pub async fn ingress(
    peer: SocketAddr,
    flow: aerotp_gw::config::FlowSpec,
    cfg: aerotp_gw::config::FileConfig,
    rate: &str,
) -> std::sync::Arc<aerotp_gw::Gateway> {
    let cfg = aerotp_gw::config::FileConfig {
        peer: Some(peer.to_string()),
        rate: Some(rate.into()),
        flows: vec![flow],
        ..cfg
    };
    aerotp_gw::start(aerotp_gw::Role::Ingress, cfg.settings().unwrap())
        .await
        .unwrap()
}

/// An egress on loopback that sends every UDP flow to `dest`, at `rate`.
pub async fn udp_egress(dest: SocketAddr, rate: &str) -> std::sync::Arc<aerotp_gw::Gateway> {
    egress(
        aerotp_gw::config::FileConfig {
            udp_connect: Some(dest.to_string()),
            ..Default::default()
        },
        rate,
    )
    .await
}

/// An ingress on loopback with one UDP route (`mode`, `class`) towards AeroTP `peer`, at
/// `rate`; returns it with the address UDP clients send to.
pub async fn udp_ingress(
    peer: SocketAddr,
    mode: &str,
    class: &str,
    rate: &str,
) -> (std::sync::Arc<aerotp_gw::Gateway>, SocketAddr) {
    let entry = free_udp();
    let flow = aerotp_gw::config::FlowSpec {
        udp_listen: Some(entry.to_string()),
        mode: Some(mode.into()),
        class: Some(class.into()),
        ..Default::default()
    };
    (ingress(peer, flow, Default::default(), rate).await, entry)
}

/// What the test relay does with the k-th packet (from 1) from the ingress towards the egress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    Pass,
    /// Lost on the air link.
    Drop,
    /// Sent from a second socket (another source port, a NAT rebinding); what the egress
    /// answers there is dropped, as it would go astray on a real link.
    Flip,
}

/// A relay rule: `hop` for every packet `k` in `range` with `k % every == at`, the rest pass.
pub fn every(range: std::ops::Range<u64>, every: u64, at: u64, hop: Hop) -> impl Fn(u64) -> Hop {
    move |k| {
        if range.contains(&k) && k % every == at {
            hop
        } else {
            Hop::Pass
        }
    }
}

/// A UDP relay between an ingress (whoever is not `egress`) and `egress` that applies `rule` to
/// each packet towards the egress; packets back pass. Returns its address and how many
/// packets `rule` did not pass. Its tasks end with the test's runtime.
pub async fn relay(
    egress: SocketAddr,
    rule: impl Fn(u64) -> Hop + Send + 'static,
) -> (SocketAddr, Arc<AtomicU64>) {
    let s = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let alt = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let a = s.local_addr().unwrap();
    let touched = Arc::new(AtomicU64::new(0));
    let t2 = touched.clone();
    let alt2 = alt.clone();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while alt2.recv_from(&mut b).await.is_ok() {}
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        let mut ingress = None;
        let mut k = 0u64;
        while let Ok((n, from)) = s.recv_from(&mut buf).await {
            if from == egress {
                if let Some(i) = ingress {
                    let _ = s.send_to(&buf[..n], i).await;
                }
                continue;
            }
            ingress = Some(from);
            k += 1;
            let out = match rule(k) {
                Hop::Pass => &s,
                Hop::Drop => {
                    t2.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Hop::Flip => {
                    t2.fetch_add(1, Ordering::Relaxed);
                    &alt
                }
            };
            let _ = out.send_to(&buf[..n], egress).await;
        }
    });
    (a, touched)
}

/// The index a test datagram starts with (4 bytes, big endian), after checking the datagram
/// is exactly what `make` builds for that index.
pub fn index_of(d: &[u8], make: fn(u32) -> Vec<u8>) -> u32 {
    let i = u32::from_be_bytes(d[..4].try_into().expect("a datagram of 4 bytes or more"));
    assert_eq!(d, &make(i)[..], "datagram {i} altered");
    i
}

/// A UDP destination on loopback that echoes every datagram and records its index (checked
/// against `make`, see [`index_of`]); returns its address and the indices in arrival order.
pub async fn echo_dest(make: fn(u32) -> Vec<u8>) -> (SocketAddr, Arc<Mutex<Vec<u32>>>) {
    let dest = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Sized for the stream, as a telemetry receiver is: a hole held for erasure repair is
    // released in one burst (docs/gateway.md, "UDP routes and erasure repair").
    aerotp_testkit::udp_buffer::grow_udp_rcvbuf(&dest, 4 << 20).unwrap();
    let addr = dest.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = dest.recv_from(&mut b).await {
            seen2.lock().unwrap().push(index_of(&b[..n], make));
            let _ = dest.send_to(&b[..n], from).await;
        }
    });
    (addr, seen)
}
