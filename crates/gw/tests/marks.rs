//! DSCP marks between the gateways (`dscp` key, `--dscp`): a flow's datagrams towards the
//! egress carry its class's mark, a TCP flow's connection and a datagram-mode UDP route's
//! alike. The ingress's peer here is a socket that reads each datagram's TOS byte, not an
//! egress: the first datagrams a flow sends are enough.
#![cfg(target_os = "linux")]

use std::time::Duration;

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_testkit::tos::{read_marked, tos_reader};

mod common;

const WAIT: Duration = Duration::from_secs(5);

/// The DSCP of the first datagram an ingress with `dscp` sends for a flow of `class`, the flow
/// opened by TCP (`tcp`) or by one UDP datagram in datagram mode.
async fn first_dscp(class: &str, tcp: bool, dscp: Option<&str>) -> u8 {
    let peer = tos_reader("127.0.0.1:0");
    let entry = if tcp {
        aerotp_testkit::free_tcp()
    } else {
        aerotp_testkit::free_udp()
    };
    let listen = Some(entry.to_string());
    let flow = FlowSpec {
        tcp_listen: listen.clone().filter(|_| tcp),
        udp_listen: listen.filter(|_| !tcp),
        mode: Some(if tcp { "reliable" } else { "datagram" }.into()),
        class: Some(class.into()),
        ..Default::default()
    };
    let cfg = FileConfig {
        dscp: dscp.map(Into::into),
        ..Default::default()
    };
    let gw = common::ingress(peer.local_addr().unwrap(), flow, cfg, "10mbit").await;
    // Held until the datagram is read: the flow lives while its TCP client does.
    let _client = if tcp {
        let mut s = tokio::net::TcpStream::connect(entry).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut s, b"hello")
            .await
            .unwrap();
        Some(s)
    } else {
        let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        s.send_to(b"telemetry frame", entry).await.unwrap();
        None
    };
    let m = read_marked(&peer, WAIT).await;
    drop(gw);
    m.dscp().expect("the kernel reports the TOS byte")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_carry_their_class_s_mark() {
    assert_eq!(
        first_dscp("control", true, None).await,
        46,
        "control TCP flow: EF"
    );
    assert_eq!(first_dscp("bulk", true, None).await, 0, "bulk TCP flow: DF");
    assert_eq!(
        first_dscp("telemetry", false, None).await,
        34,
        "telemetry datagram route: AF41"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dscp_key_sets_the_plan() {
    let cs5 = Some("control=cs5");
    assert_eq!(first_dscp("control", true, cs5).await, 40);
    assert_eq!(first_dscp("telemetry", false, Some("off")).await, 0);
}
