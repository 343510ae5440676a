//! The ingress changes address mid-flow (a handover, a radio back with a new address, a NAT
//! rebinding): a relay on loopback sends the ingress's datagrams to the egress from one socket,
//! then from another, and drops what the egress sends to the first from then on. The flow's
//! AeroTP connection follows the ingress (docs/spec.md §9, "A peer's new address"): every byte
//! arrives both ways, once, in order, with no resume of the flow.

use aerotp_testkit::nat::rebinding_relay;
use aerotp_testkit::{random, sha256};
use std::sync::atomic::Ordering;
use std::time::Duration;

mod common;

async fn handover(mode: &str) {
    let up = random(3_000_000, 21);
    let down = random(1_000_000, 22);
    let (dest, server) = common::sha256_dest(down.clone()).await;
    let egress = common::tcp_egress(dest, "40mbit").await;
    // 3 MB at 40 Mb/s is about 2,200 datagrams: the ingress moves a fifth of the way in.
    let (relay, dropped) = rebinding_relay(egress.ep.local_addr(), 500).await;
    // near-reliable holds custody on disk.
    let store = tempfile::tempdir().unwrap();
    let custody = (mode == "near-reliable").then(|| store.path());
    let (ingress, entry) = common::tcp_ingress(relay, mode, custody, "40mbit").await;
    let client = common::tcp_exchange(entry, &up);
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
