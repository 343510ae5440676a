//! A gateway pair over two paths (docs/gateway.md, "Several paths"): two relays on loopback
//! stand for two radios; the ingress is given the egress's address through each (`peer` and
//! `peer_paths`), and one TCP flow's connection spreads over both, every byte arriving once,
//! in order, both ways. Each path leaves from its own local address (`peer_from`, a
//! `peer_paths` entry `LOCAL=ADDR`), as the relays see.

use aerotp_testkit::nat::watched_path_relay;
use aerotp_testkit::{random, sha256};
use std::sync::atomic::Ordering;
use std::time::Duration;

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_flow_spreads_over_two_paths() {
    let up = random(3_000_000, 31);
    let down = random(1_000_000, 32);
    let (dest, server) = common::sha256_dest(down.clone()).await;
    let egress = common::tcp_egress(dest, "40mbit").await;
    let (p0, carried0, from0) = watched_path_relay(egress.ep.local_addr()).await;
    let (p1, carried1, from1) = watched_path_relay(egress.ep.local_addr()).await;
    let entry = aerotp_testkit::free_tcp();
    let flow = aerotp_gw::config::FlowSpec {
        tcp_listen: Some(entry.to_string()),
        mode: Some("reliable".into()),
        ..Default::default()
    };
    // Loopback: every 127/8 address is this host's.
    let cfg = aerotp_gw::config::FileConfig {
        peer_paths: vec![format!("127.0.0.3={p1}")],
        peer_from: Some("127.0.0.2".into()),
        ..Default::default()
    };
    let _ingress = common::ingress(p0, flow, cfg, "40mbit").await;
    let client = common::tcp_exchange(entry, &up);
    let got = tokio::time::timeout(Duration::from_secs(60), client)
        .await
        .expect("the flow ends within 60 s");
    assert_eq!(&got[..32], &sha256(&up)[..], "upstream bytes");
    assert_eq!(&got[32..], &down[..], "downstream bytes");
    assert_eq!(server.await.unwrap(), up, "destination got every byte once");
    let (c0, c1) = (
        carried0.load(Ordering::Relaxed),
        carried1.load(Ordering::Relaxed),
    );
    eprintln!(
        "path 0 carried {c0} datagrams, path 1 {c1}; egress added {} path(s)",
        egress.ep.stats().paths_added
    );
    assert!(
        c0 * 10 >= (c0 + c1) * 3 && c1 * 10 >= (c0 + c1) * 3,
        "each path carries at least 30 %: {c0} and {c1}"
    );
    assert!(egress.ep.stats().paths_added >= 1);
    let ip = |m: &aerotp_testkit::nat::LastSource| m.lock().unwrap().map(|a| a.ip().to_string());
    assert_eq!(ip(&from0).as_deref(), Some("127.0.0.2"));
    assert_eq!(ip(&from1).as_deref(), Some("127.0.0.3"));
}
