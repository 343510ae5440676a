//! The gateways' /metrics output, fetched over HTTP while a TCP flow is open and after UDP
//! datagrams went both ways: every sample has HELP and TYPE, counters are named `_total`,
//! gauges are not, every value parses, every family is documented in docs/stats.md, and
//! `udp_in`/`udp_out` count what each gateway took from and gave to its local UDP sockets.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_gw::{metrics, Role};
use common::{free_tcp, free_udp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// One sample: family name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the Prometheus text format strictly enough to catch what a scraper would reject;
/// returns the samples and, per family, its type. Panics naming the bad line.
fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
    let mut help = BTreeSet::new();
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(r) = line.strip_prefix("# HELP ") {
            let (name, text) = r.split_once(' ').expect(line);
            assert!(!text.trim().is_empty(), "empty help: {line}");
            assert!(help.insert(name.to_string()), "HELP twice: {line}");
            continue;
        }
        if let Some(r) = line.strip_prefix("# TYPE ") {
            let (name, t) = r.split_once(' ').expect(line);
            assert!(matches!(t, "counter" | "gauge"), "type: {line}");
            assert!(help.contains(name), "TYPE before HELP: {line}");
            assert!(
                types.insert(name.to_string(), t.to_string()).is_none(),
                "{line}"
            );
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line: {line:?}"
        );
        let (head, value) = line.rsplit_once(' ').expect(line);
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
        assert!(value.is_finite() && value >= 0.0, "{line}");
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, parse_labels(l.strip_suffix('}').expect(line), line)),
            None => (head, BTreeMap::new()),
        };
        assert!(types.contains_key(name), "sample without HELP/TYPE: {line}");
        samples.push((name.to_string(), labels, value));
    }
    (samples, types)
}

fn parse_labels(mut s: &str, line: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    while !s.is_empty() {
        let (k, rest) = s.split_once("=\"").expect(line);
        let mut v = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect(line) {
                (_, '\\') => v.push(chars.next().expect(line).1),
                (i, '"') => break i,
                (_, c) => v.push(c),
            }
        };
        assert!(m.insert(k.to_string(), v).is_none(), "{line}");
        s = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
    m
}

fn value(samples: &[Sample], name: &str) -> f64 {
    samples.iter().filter(|s| s.0 == name).map(|s| s.2).sum()
}

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
        let (si, ti) = parse(&metrics::fetch(m_in).await.unwrap());
        let (se, te) = parse(&metrics::fetch(m_eg).await.unwrap());
        for (name, t) in ti.iter().chain(te.iter()) {
            assert!(name.starts_with("aerotp_gw_"), "{name}");
            assert_eq!(t == "counter", name.ends_with("_total"), "{name} is a {t}");
            let documented = [format!("`{name}`"), format!("`{name}{{")];
            assert!(
                documented.iter().any(|d| docs.contains(d.as_str())),
                "{name} not in docs/stats.md"
            );
        }
        // Until the flow's 10 bytes are confirmed by the egress.
        let confirmed = value(&si, "aerotp_gw_flow_confirmed_bytes_total");
        if confirmed >= 10.0 || t.elapsed().as_secs() > 10 {
            break (si, se);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        value(&si, "aerotp_gw_udp_in_total"),
        20.0,
        "ingress took 20 from the client"
    );
    assert_eq!(
        value(&se, "aerotp_gw_udp_out_total"),
        20.0,
        "egress gave 20 to the destination"
    );
    assert_eq!(
        value(&se, "aerotp_gw_udp_in_total"),
        20.0,
        "egress took 20 replies"
    );
    assert_eq!(
        value(&si, "aerotp_gw_udp_out_total"),
        20.0,
        "ingress gave 20 to the client"
    );
    for s in [&si, &se] {
        assert_eq!(value(s, "aerotp_gw_udp_dropped_total"), 0.0);
        assert_eq!(value(s, "aerotp_gw_udp_lost_total"), 0.0);
        assert_eq!(value(s, "aerotp_gw_link_rate_bits_per_second"), 50e6);
    }
    let dropped: Vec<_> = si
        .iter()
        .filter(|s| s.0 == "aerotp_gw_udp_dropped_total")
        .map(|s| s.1["reason"].clone())
        .collect();
    assert!(dropped.len() >= 6 && dropped.contains(&"queue_full".to_string()));
    assert_eq!(value(&si, "aerotp_gw_flows_opened_total"), 1.0);
    assert_eq!(value(&si, "aerotp_gw_flows_active"), 1.0);
    assert_eq!(value(&si, "aerotp_gw_flow_confirmed_bytes_total"), 10.0);
    let flow = si
        .iter()
        .find(|s| s.0 == "aerotp_gw_flow_read_bytes_total")
        .expect("a per-flow sample");
    assert_eq!(flow.1["role"], "ingress");
    assert_eq!(flow.1["class"], "bulk");
    assert_eq!(flow.1["flow"].len(), 16);
    drop(source);
}
