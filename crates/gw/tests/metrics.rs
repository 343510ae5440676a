//! The gateways' /metrics output, fetched over HTTP while a TCP flow is open and after UDP
//! datagrams went both ways: every sample has HELP and TYPE, counters are named `_total`,
//! gauges are not, every value parses, every family is documented in docs/stats.md, and
//! `udp_in`/`udp_out` count what each gateway took from and gave to its local UDP sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_gw::{metrics, Role};
use aerotp_testkit::{free_tcp, free_udp, prom};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_are_typed_documented_and_count_udp_in_and_out() {
    // Destinations: a TCP server that holds its connection open, a UDP echo.
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_dest = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = tcp.accept().await.unwrap();
        let mut b = [0u8; 1024];
        while s.read(&mut b).await.is_ok_and(|n| n > 0) {}
    });
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp_dest = udp.local_addr().unwrap();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65_536];
        while let Ok((n, from)) = udp.recv_from(&mut b).await {
            let _ = udp.send_to(&b[..n], from).await;
        }
    });
    let eg = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        tcp_connect: Some(tcp_dest.to_string()),
        udp_connect: Some(udp_dest.to_string()),
        rate: Some("50mbit".into()),
        ..Default::default()
    };
    let egress = aerotp_gw::start(Role::Egress, eg.settings().unwrap())
        .await
        .unwrap();
    let (tcp_entry, udp_entry) = (free_tcp(), free_udp());
    let ing = FileConfig {
        peer: Some(egress.ep.local_addr().to_string()),
        rate: Some("50mbit".into()),
        flows: vec![
            FlowSpec {
                tcp_listen: Some(tcp_entry.to_string()),
                mode: Some("reliable".into()),
                ..Default::default()
            },
            FlowSpec {
                udp_listen: Some(udp_entry.to_string()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(Role::Ingress, ing.settings().unwrap())
        .await
        .unwrap();
    // A TCP flow that stays open while the metrics are read.
    let mut source = TcpStream::connect(tcp_entry).await.unwrap();
    source.write_all(b"0123456789").await.unwrap();
    // UDP: 20 datagrams of up to 5 000 bytes (fragmented), each echoed.
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(udp_entry).await.unwrap();
    for i in 0..20usize {
        client.send(&vec![i as u8; 100 + i * 250]).await.unwrap();
    }
    let mut b = vec![0u8; 65_536];
    for i in 0..20usize {
        let n = tokio::time::timeout(Duration::from_secs(10), client.recv(&mut b))
            .await
            .expect("every echo within 10 s")
            .unwrap();
        assert_eq!(n, 100 + i * 250);
    }
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let m_in = metrics::serve(ingress.ctx(), any).await.unwrap();
    let m_eg = metrics::serve(egress.ctx(), any).await.unwrap();
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/stats.md"),
    )
    .unwrap();
    let t = Instant::now();
    let (si, se) = loop {
        // Strict parse (HELP/TYPE, counter ⇔ _total, names aerotp_gw_*, labels, values).
        let si = prom::parse(&metrics::fetch(m_in).await.unwrap(), "aerotp_gw_");
        let se = prom::parse(&metrics::fetch(m_eg).await.unwrap(), "aerotp_gw_");
        for s in si.samples.iter().chain(&se.samples) {
            assert!(s.value.is_finite() && s.value >= 0.0, "{s:?}");
        }
        for name in si.types.keys().chain(se.types.keys()) {
            let documented = [format!("`{name}`"), format!("`{name}{{")];
            assert!(
                documented.iter().any(|d| docs.contains(d.as_str())),
                "{name} not in docs/stats.md"
            );
        }
        // Until the flow's 10 bytes are confirmed by the egress.
        let confirmed = si.sum("aerotp_gw_flow_confirmed_bytes_total");
        if confirmed >= 10.0 || t.elapsed().as_secs() > 10 {
            break (si, se);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        si.sum("aerotp_gw_udp_in_total"),
        20.0,
        "ingress took 20 from the client"
    );
    assert_eq!(
        se.sum("aerotp_gw_udp_out_total"),
        20.0,
        "egress gave 20 to the destination"
    );
    assert_eq!(
        se.sum("aerotp_gw_udp_in_total"),
        20.0,
        "egress took 20 replies"
    );
    assert_eq!(
        si.sum("aerotp_gw_udp_out_total"),
        20.0,
        "ingress gave 20 to the client"
    );
    for s in [&si, &se] {
        assert_eq!(s.sum("aerotp_gw_udp_dropped_total"), 0.0);
        assert_eq!(s.sum("aerotp_gw_udp_lost_total"), 0.0);
        assert_eq!(s.sum("aerotp_gw_link_rate_bytes_per_second"), 50e6 / 8.0);
    }
    let dropped: Vec<_> = si
        .samples
        .iter()
        .filter(|s| s.name == "aerotp_gw_udp_dropped_total")
        .map(|s| s.labels["reason"].clone())
        .collect();
    assert!(dropped.len() >= 6 && dropped.contains(&"queue_full".to_string()));
    // The radio's families as the endpoints show them: every kind at 0 without a modem.
    for s in [&si, &se] {
        let kinds = s
            .samples
            .iter()
            .filter(|x| x.name == "aerotp_gw_radio_changes_total")
            .count();
        assert!(
            kinds >= 6,
            "radio change kinds in the gateway's metrics: {kinds}"
        );
        assert_eq!(s.sum("aerotp_gw_radio_changes_total"), 0.0);
    }
    assert_eq!(si.sum("aerotp_gw_flows_opened_total"), 1.0);
    assert_eq!(si.sum("aerotp_gw_flows_active"), 1.0);
    assert_eq!(si.sum("aerotp_gw_flow_confirmed_bytes_total"), 10.0);
    let flow = si
        .samples
        .iter()
        .find(|s| s.name == "aerotp_gw_flow_read_bytes_total")
        .expect("a per-flow sample");
    assert_eq!(flow.labels["role"], "ingress");
    assert_eq!(flow.labels["class"], "bulk");
    assert_eq!(flow.labels["flow"].len(), 16);
    drop(source);
}
