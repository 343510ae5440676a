//! Gateways with no rate given discover it (issue 37; docs/gateway.md §Rate): a pair with
//! neither `rate` nor `max_rate` carries a reliable TCP flow through the link relay that
//! `aerotp link` runs (`aerotp_emu`), 2 Mb/s and 10 ms each way, under the default 5 Mb/s
//! cap, at 90 % of the link's ceiling or more (the link's rate × the payload share of a full
//! datagram), without flooding the link's queue the way pacing at the cap would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aerotp_link::LinkConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LINK_BPS: u64 = 2_000_000;
const BYTES: usize = 2_000_000;
const MTU: usize = 1400;

/// A TCP destination: reads until the end and returns how much and when the last byte came.
async fn sink() -> (SocketAddr, tokio::task::JoinHandle<(usize, Instant)>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 64 << 10];
        let (mut n, mut last) = (0, Instant::now());
        loop {
            match s.read(&mut buf).await.unwrap() {
                0 => return (n, last),
                k => {
                    n += k;
                    last = Instant::now();
                }
            }
        }
    });
    (a, h)
}

/// Runs one transfer with the gateways' `rate` key (`None`: not given); returns the goodput
/// (bytes per second, from the client's connect to the destination's last byte) and the
/// relay's counters.
async fn transfer(rate: Option<&str>) -> (f64, aerotp_emu::RelayStats) {
    let (dest, got) = sink().await;
    let egress = aerotp_gw::start(
        aerotp_gw::Role::Egress,
        aerotp_gw::config::FileConfig {
            listen: Some("127.0.0.1:0".into()),
            tcp_connect: Some(dest.to_string()),
            rate: rate.map(String::from),
            ..Default::default()
        }
        .settings()
        .unwrap(),
    )
    .await
    .unwrap();
    let link = LinkConfig {
        rate_bps: LINK_BPS,
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    let mut rc =
        aerotp_emu::RelayConfig::new("127.0.0.1:0".parse().unwrap(), egress.ep.local_addr(), link);
    rc.stats_interval = None;
    let relay = aerotp_emu::Relay::bind(rc).await.unwrap();
    let air = relay.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(relay.run(async {
        stopped.await.ok();
    }));
    let entry = aerotp_testkit::free_tcp();
    let ingress = aerotp_gw::start(
        aerotp_gw::Role::Ingress,
        aerotp_gw::config::FileConfig {
            peer: Some(air.to_string()),
            rate: rate.map(String::from),
            flows: vec![aerotp_gw::config::FlowSpec {
                tcp_listen: Some(entry.to_string()),
                mode: Some("reliable".into()),
                ..Default::default()
            }],
            ..Default::default()
        }
        .settings()
        .unwrap(),
    )
    .await
    .unwrap();
    let data = vec![0x5au8; BYTES];
    let t0 = Instant::now();
    let mut c = tokio::net::TcpStream::connect(entry).await.unwrap();
    c.write_all(&data).await.unwrap();
    c.shutdown().await.unwrap();
    let (n, last) = tokio::time::timeout(Duration::from_secs(60), got)
        .await
        .expect("the transfer took over 60 s")
        .unwrap();
    assert_eq!(n, BYTES, "bytes at the destination");
    stop.send(()).unwrap();
    let stats = relay.await.unwrap().unwrap();
    drop((ingress, egress));
    (n as f64 / last.duration_since(t0).as_secs_f64(), stats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_pair_without_a_rate_fills_the_link_and_not_its_queue() {
    let ceiling = LINK_BPS as f64 / 8.0 * aerotp_proto::max_body(MTU, 0) as f64 / MTU as f64;
    let report = |what: &str, goodput: f64, f: &aerotp_link::LinkStats| {
        eprintln!(
            "{what}: goodput {goodput:.0} B/s = {:.3} of the ceiling {ceiling:.0} B/s; forward: \
             {} B in {} datagrams for {BYTES} B, {} dropped at the queue, queue delay p99 {:?}",
            goodput / ceiling,
            f.offered_bytes,
            f.offered_packets,
            f.dropped_queue_packets,
            f.queue_delay.p99()
        );
    };
    let (goodput, relay) = transfer(None).await;
    let f = &relay.forward;
    report("no rate given", goodput, f);
    assert!(
        goodput >= 0.9 * ceiling,
        "{goodput:.0} B/s against a ceiling of {ceiling:.0}"
    );
    // The link's rate found, not flooded: what went forward is the data and its headers,
    // next to nothing resent, and the link's queue stays short.
    assert!(
        f.offered_bytes as f64 <= 1.05 * BYTES as f64,
        "{} B forward for {BYTES} B",
        f.offered_bytes
    );
    assert!(f.dropped_queue_packets * 100 <= f.offered_packets, "{f:?}");
    assert!(
        f.queue_delay.p99() <= Duration::from_millis(200),
        "{:?}",
        f.queue_delay.p99()
    );
    // The same pair paced at the default cap (5 Mb/s, fixed) over the same link floods it:
    // the bounds above are not met by any rate that does not follow the link.
    let (goodput, relay) = transfer(Some("5mbit")).await;
    let f = &relay.forward;
    report("fixed at the cap", goodput, f);
    assert!(
        f.dropped_queue_packets * 100 > f.offered_packets
            && f.offered_bytes as f64 > 1.05 * BYTES as f64,
        "pacing at the cap did not flood the 2 Mb/s link: the test shows nothing"
    );
}
