//! A real Prometheus server (Debian's `prometheus`, scripts/lab-deps.sh) scrapes the ingress
//! gateway's /metrics every second during an 8-second TCP transfer through the gateways,
//! and the test reads, through Prometheus' HTTP API, `rate()` of the flow's sent-bytes
//! counter: it must be above zero and within the configured link rate. A missing
//! `prometheus` fails the test unless `AEROTP_SKIP_PROMTOOL=1` (the switch of the promtool
//! check too, crates/testkit/src/prom.rs). The server is killed at the end.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_gw::{metrics, Role};
use aerotp_testkit::free_tcp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The Prometheus server we started; killed (and reaped) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr` (HTTP/1.0: one plain body, then EOF): the status line and the body.
async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .map_err(|_| std::io::Error::other("timeout"))??;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_gateway_and_reads_a_rate_during_a_transfer() {
    if std::env::var("AEROTP_SKIP_PROMTOOL").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_PROMTOOL=1: the Prometheus server test is skipped");
        return;
    }
    // Destination: a TCP server that reads everything.
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_dest = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = tcp.accept().await.unwrap();
        let mut b = vec![0u8; 65_536];
        while s.read(&mut b).await.is_ok_and(|n| n > 0) {}
    });
    let rate_bps = 20_000_000u64;
    let eg = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        tcp_connect: Some(tcp_dest.to_string()),
        rate: Some(rate_bps.to_string()),
        ..Default::default()
    };
    let egress = aerotp_gw::start(Role::Egress, eg.settings().unwrap())
        .await
        .unwrap();
    let tcp_entry = free_tcp();
    let ing = FileConfig {
        peer: Some(egress.ep.local_addr().to_string()),
        rate: Some(rate_bps.to_string()),
        flows: vec![FlowSpec {
            tcp_listen: Some(tcp_entry.to_string()),
            mode: Some("reliable".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(Role::Ingress, ing.settings().unwrap())
        .await
        .unwrap();
    let m_in = metrics::serve(ingress.ctx(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: aerotp-gw\n    static_configs:\n      - targets: ['{m_in}']\n"
        ),
    )
    .unwrap();
    let web = free_tcp();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let _server = match child {
        Ok(c) => Server(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "prometheus not found: install Debian's `prometheus` package (scripts/lab-deps.sh \
             does), or set AEROTP_SKIP_PROMTOOL=1"
        ),
        Err(e) => panic!("starting prometheus: {e}"),
    };
    let t = Instant::now();
    loop {
        if get(web, "/-/ready")
            .await
            .is_ok_and(|(status, _)| status.contains(" 200"))
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "prometheus not ready in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 8 s of a transfer at whatever the link takes (the source writes as fast as it can).
    let mut source = TcpStream::connect(tcp_entry).await.unwrap();
    let chunk = vec![0x5au8; 64 * 1024];
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        tokio::time::timeout(Duration::from_secs(1), source.write_all(&chunk))
            .await
            .ok();
    }
    let query = "/api/v1/query?query=sum(rate(aerotp_gw_flow_sent_bytes_total%7Brole%3D%22ingress%22%7D%5B5s%5D))";
    let (status, body) = get(web, query).await.unwrap();
    assert!(status.contains(" 200"), "{status}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{v}");
    let rate: f64 = v["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("no sample: {v}"))
        .parse()
        .unwrap();
    let link = rate_bps as f64 / 8.0;
    assert!(
        rate > 0.1 * link && rate <= 1.2 * link,
        "rate() of the sent bytes {rate:.0} B/s, link {link:.0} B/s: {v}"
    );
    eprintln!(
        "Prometheus rate(aerotp_gw_flow_sent_bytes_total[5s]) = {rate:.0} B/s (link {link:.0} B/s)"
    );
    drop(source);
}
