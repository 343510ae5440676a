//! Gateway pair on loopback: real TCP sockets at both ends, every byte compared.

use aerotp_testkit::{free_tcp, random, sha256};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aerotp_gw::{FileConfig, Gateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;

use common::sha256_dest as dest_server;

/// An egress (to `dest`) and an ingress (one TCP flow in `mode`) at `rate`; returns them and
/// the ingress's TCP entry.
async fn pair(
    mode: &str,
    dest: SocketAddr,
    store: Option<&std::path::Path>,
    rate: &str,
) -> (Arc<Gateway>, Arc<Gateway>, SocketAddr) {
    let egress = common::tcp_egress(dest, rate).await;
    let (ingress, entry) = common::tcp_ingress(egress.ep.local_addr(), mode, store, rate).await;
    (ingress, egress, entry)
}

async fn transfer(entry: SocketAddr, up: &[u8], down_len: usize) -> Vec<u8> {
    let got = common::tcp_exchange(entry, up).await;
    assert_eq!(got.len(), 32 + down_len);
    got
}

async fn round_trip(mode: &str, store: Option<&std::path::Path>) {
    let up = random(3_000_000, 1);
    let down = random(1_500_000, 2);
    let (dest, server) = dest_server(down.clone()).await;
    let (ingress, _egress, entry) = pair(mode, dest, store, "200mbit").await;
    let got = tokio::time::timeout(Duration::from_secs(60), transfer(entry, &up, down.len()))
        .await
        .expect("transfer within 60 s");
    assert_eq!(&got[..32], &sha256(&up)[..], "upload intact");
    assert_eq!(&got[32..], &down[..], "download intact");
    assert_eq!(server.await.unwrap(), up);
    // The flow completes and its custody is released.
    for _ in 0..100 {
        if ingress.reg.flows.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ingress.reg.flows.lock().unwrap().is_empty());
    assert_eq!(
        ingress
            .budget
            .held
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    if let Some(s) = store {
        assert_eq!(std::fs::read_dir(s).unwrap().count(), 0, "store emptied");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_reliable_round_trip_through_store() {
    let dir = tempfile::tempdir().unwrap();
    round_trip("near-reliable", Some(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reliable_round_trip() {
    round_trip("reliable", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_destination_resets_the_source() {
    // Bound but not listening: connections to it are refused; held for the whole test.
    let hold = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    hold.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    let dead = hold.local_addr().unwrap().as_socket().unwrap();
    let (_i, _e, entry) = pair("reliable", dead, None, "200mbit").await;
    let is_reset = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        )
    };
    // On loopback the RST may arrive before connect() returns or before this write (EPIPE /
    // ECONNRESET); else it ends the read.
    let mut c = match TcpStream::connect(entry).await {
        Ok(c) => c,
        Err(e) => {
            assert!(is_reset(&e), "{e}");
            return;
        }
    };
    if let Err(e) = c.write_all(b"hello").await {
        assert!(is_reset(&e), "{e}");
        return;
    }
    let mut b = [0u8; 16];
    let r = tokio::time::timeout(Duration::from_secs(20), c.read(&mut b))
        .await
        .expect("answer within 20 s");
    match r {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        Ok(n) => panic!("expected a reset, read {n} bytes"),
    }
}

/// The AeroTP connection breaks mid-transfer (aborted): the ingress resumes the flow on a new
/// connection from what the egress wrote; the destination gets every byte once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_connection_resumes_without_loss_or_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let up = random(6_000_000, 3);
    let (dest, server) = dest_server(Vec::new()).await;
    // near-reliable (the default TCP mode) with a custody store.
    let (ingress, _egress, entry) = pair("near-reliable", dest, Some(dir.path()), "40mbit").await;
    let client = tokio::spawn({
        let up = up.clone();
        async move { transfer(entry, &up, 0).await }
    });
    // Break the connection twice while data flows (40 Mb/s: 6 MB take about 1.2 s).
    let mut broke = 0;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for f in ingress.reg.snapshot() {
            let (base, end) = {
                let st = f.lock();
                (st.base(), st.end())
            };
            if base > 0 && base < end {
                if let Some(c) = f.connection() {
                    c.abort("test: cut");
                    broke += 1;
                }
            }
        }
        if broke >= 2 {
            break;
        }
    }
    assert!(broke >= 1, "the test broke no connection");
    let got = tokio::time::timeout(Duration::from_secs(60), client)
        .await
        .expect("transfer within 60 s")
        .unwrap();
    assert_eq!(&got[..32], &sha256(&up)[..]);
    assert_eq!(
        server.await.unwrap(),
        up,
        "destination got every byte once, in order"
    );
    assert!(
        ingress
            .reg
            .resumes
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
}

/// Records the (src_port, dst_port, flags) of every TPDU an endpoint sends.
struct Ports(std::sync::Mutex<Vec<(u16, u16, u8)>>);

impl aerotp_net::Tap for Ports {
    fn datagram(&self, iface: u32, _: Duration, _: SocketAddr, _: SocketAddr, b: &[u8]) {
        if iface == aerotp_net::TAP_SENT && b.len() >= 20 {
            let port = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
            self.0.lock().unwrap().push((port(2), port(4), b[1]));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_s_ports_ride_in_the_aerotp_header_and_its_bytes_unframed() {
    let (dest, server) = dest_server(b"pong".to_vec()).await;
    let eg = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        allow_any: Some(true),
        ..Default::default()
    };
    let egress = aerotp_gw::start(aerotp_gw::Role::Egress, eg.settings().unwrap())
        .await
        .unwrap();
    let entry = free_tcp();
    let ing = FileConfig {
        peer: Some(egress.ep.local_addr().to_string()),
        flows: vec![aerotp_gw::config::FlowSpec {
            tcp_listen: Some(entry.to_string()),
            dest: Some(dest.to_string()),
            mode: Some("reliable".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(aerotp_gw::Role::Ingress, ing.settings().unwrap())
        .await
        .unwrap();
    let tap = Arc::new(Ports(std::sync::Mutex::new(Vec::new())));
    ingress.ep.set_tap(tap.clone());
    // The source binds a port of its own choosing, so we know what to look for.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let src_port = sock.local_addr().unwrap().port();
    let mut c = sock.connect(entry).await.unwrap();
    c.write_all(b"ping").await.unwrap();
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), c.read_to_end(&mut got))
        .await
        .expect("answer within 20 s")
        .unwrap();
    assert_eq!(&got[32..], b"pong");
    // The destination saw exactly the source's bytes: no framing reached it.
    assert_eq!(server.await.unwrap(), b"ping");
    let seen = tap.0.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for (sp, dp, flags) in &seen {
        assert_eq!(
            (*sp, *dp),
            (src_port, dest.port()),
            "a TPDU (flags {flags:#04x}) with other ports: {seen:?}"
        );
    }
}
