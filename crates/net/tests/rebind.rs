//! A NAT that rebinds mid-transfer, over real UDP sockets on loopback: the client's datagrams
//! reach the server from one relay port, then from another, and what the server sends to the
//! first port is lost from then on. The connection follows the client to its new address
//! (docs/spec.md §9, "A peer's new address"): every byte arrives, no reset, one migration.

use aerotp_net::{CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Mode};
use aerotp_testkit::nat::rebinding_relay;
use aerotp_testkit::{random, sha256};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nat_rebinding_mid_transfer_loses_nothing() {
    let data = random(4 << 20, 5);
    let mut cfg = ConnectionConfig::with_mode(Mode::Reliable);
    cfg.rate_bps = 100_000_000;
    cfg.linger = Duration::from_millis(300);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    server.listen(7, cfg.clone()).unwrap();
    let (entry, dropped) = rebinding_relay(server.local_addr(), 1000).await;
    let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let recv = tokio::spawn(async move {
        let mut conn = server.accept().await.unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.unwrap();
        let rep = conn.finish().await;
        (got, rep, server)
    });
    let run = async {
        let mut conn = client.connect(entry, 7, cfg).unwrap();
        conn.write_all(&data).await.unwrap();
        let sender = conn.finish().await;
        let (got, receiver, server) = recv.await.unwrap();
        (sender, got, receiver, server)
    };
    let (sender, got, receiver, server) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the transfer ends within 30 s");
    let stats = server.stats();
    eprintln!(
        "server: {} migration(s), {} path challenge(s); NAT dropped {} replies to the old port",
        stats.migrations,
        stats.path_challenges,
        dropped.load(Ordering::Relaxed)
    );
    assert_eq!(sha256(&got), sha256(&data), "bytes lost or altered");
    assert_eq!(receiver.outcome, CloseOutcome::Finished { confirmed: true });
    assert!(sender.delivered_confirmed, "{:?}", sender.outcome);
    assert_eq!(stats.migrations, 1, "the server followed the client once");
    assert!(stats.path_challenges >= 1);
}
