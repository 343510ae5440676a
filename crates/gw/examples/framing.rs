//! What the gateways put on the air for a flow, against a bare AeroTP connection measured in
//! the same run (issue 17 §2, docs/results/gw.md "Flow framing"). On loopback, no loss, so
//! every datagram counted is protocol, not repair:
//!
//! * **upload**: one TCP flow carries `--bytes` to the destination, which answers 32 bytes;
//!   the datagrams and bytes each gateway sent, per 10 MB of user data;
//! * **storm**: `--flows` TCP flows, `--concurrent` at a time, each a 100-byte request, a
//!   100-byte answer and a close both ways; the datagrams per flow each way;
//! * **reference**: the same upload and the same storm over bare AeroTP connections (one
//!   per flow, same mode and rate, same endpoints' defaults): what one connection's set-up,
//!   data and close cost without any gateway framing.
//!
//! ```sh
//! cargo run --release -p aerotp-gw --example framing -- --mode reliable
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_gw::frame::Class;
use aerotp_gw::{FileConfig, Gateway};
use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, IoCounters, Mode};
use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

#[derive(Parser, Debug)]
#[command(about = "Air bytes and datagrams per flow: gateways against bare AeroTP connections")]
struct Args {
    /// Transfer mode of the flows: reliable or near-reliable.
    #[arg(long, default_value = "reliable")]
    mode: String,
    /// Bytes of the upload (a size: 10MB, 500kB, 1000000).
    #[arg(long, default_value = "10MB")]
    bytes: String,
    /// Flows of the storm.
    #[arg(long, default_value_t = 1000)]
    flows: usize,
    /// Storm flows open at once (below the gateways' max_half_open of 128, so no RETRY).
    #[arg(long, default_value_t = 50)]
    concurrent: usize,
    /// Link rate both gateways and the reference pace at.
    #[arg(long, default_value = "100mbit")]
    rate: String,
}

/// Sent datagrams and bytes of two endpoints between two snapshots: (a, b).
#[derive(Debug, Clone, Copy, Default)]
struct Traffic {
    a_dgrams: u64,
    a_bytes: u64,
    b_dgrams: u64,
    b_bytes: u64,
}

fn diff(a0: &IoCounters, a1: &IoCounters, b0: &IoCounters, b1: &IoCounters) -> Traffic {
    Traffic {
        a_dgrams: a1.datagrams_sent - a0.datagrams_sent,
        a_bytes: a1.bytes_sent - a0.bytes_sent,
        b_dgrams: b1.datagrams_sent - b0.datagrams_sent,
        b_bytes: b1.bytes_sent - b0.bytes_sent,
    }
}

/// Destination: per connection, reads to EOF and answers `answer` bytes, then closes.
async fn destination(answer: usize) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let a = l.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut sink = vec![0u8; 64 * 1024];
                while let Ok(1..) = s.read(&mut sink).await {}
                let _ = s.write_all(&vec![7u8; answer]).await;
                let _ = s.shutdown().await;
            });
        }
    });
    a
}

async fn gateways(
    mode: &str,
    rate: &str,
    dest: SocketAddr,
) -> (Arc<Gateway>, Arc<Gateway>, SocketAddr) {
    let eg = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        tcp_connect: Some(dest.to_string()),
        rate: Some(rate.into()),
        ..Default::default()
    };
    let egress = aerotp_gw::start(
        aerotp_gw::Role::Egress,
        eg.settings().expect("egress config"),
    )
    .await
    .expect("egress");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    let entry = probe.local_addr().expect("addr");
    drop(probe);
    let store = std::env::temp_dir().join(format!("aerotp-framing-{}", std::process::id()));
    let ing = FileConfig {
        peer: Some(egress.ep.local_addr().to_string()),
        rate: Some(rate.into()),
        store: (mode == "near-reliable").then(|| store.clone()),
        flows: vec![aerotp_gw::config::FlowSpec {
            tcp_listen: Some(entry.to_string()),
            mode: Some(mode.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let ingress = aerotp_gw::start(
        aerotp_gw::Role::Ingress,
        ing.settings().expect("ingress config"),
    )
    .await
    .expect("ingress");
    (ingress, egress, entry)
}

/// One flow through the gateways: `send` bytes, shut down, read the answer to EOF.
async fn tcp_flow(entry: SocketAddr, send: usize, expect: usize) {
    let mut s = TcpStream::connect(entry)
        .await
        .expect("connect to the ingress");
    s.write_all(&vec![1u8; send]).await.expect("write");
    s.shutdown().await.expect("shutdown");
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.expect("read");
    assert_eq!(got.len(), expect, "answer length");
}

/// Waits until both gateways have no connection left (every close finished).
async fn settle(a: &Endpoint, b: &Endpoint) {
    let until = Instant::now() + Duration::from_secs(60);
    while (a.connection_count() > 0 || b.connection_count() > 0) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The final acknowledgements of the last closes.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The upload and the storm through a gateway pair; also the connection configuration the
/// ingress gives a flow of `mode`, for the reference.
async fn through_gateways(
    args: &Args,
    bytes: usize,
    mode: Mode,
) -> (Traffic, Traffic, ConnectionConfig) {
    let upload_dest = destination(32).await;
    let (ingress, egress, entry) = gateways(&args.mode, &args.rate, upload_dest).await;
    let ctx = ingress.ctx();
    let cfg = ctx.conn_config(
        mode,
        ctx.settings.coding.fec,
        ctx.settings.coding.erasure,
        Class::Bulk,
    );
    let (i, e) = (&ingress.ctx().ep, &egress.ctx().ep);
    let (i0, e0) = (i.io_counters(), e.io_counters());
    tcp_flow(entry, bytes, 32).await;
    settle(i, e).await;
    let upload = diff(&i0, &i.io_counters(), &e0, &e.io_counters());

    let storm_dest = destination(100).await;
    let (ingress, egress, entry) = gateways(&args.mode, &args.rate, storm_dest).await;
    let (i, e) = (&ingress.ctx().ep, &egress.ctx().ep);
    let (i0, e0) = (i.io_counters(), e.io_counters());
    storm(args, |_| tcp_flow(entry, 100, 100)).await;
    settle(i, e).await;
    let storm = diff(&i0, &i.io_counters(), &e0, &e.io_counters());
    (upload, storm, cfg)
}

async fn storm<F, Fut>(args: &Args, flow: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let gate = Arc::new(Semaphore::new(args.concurrent));
    let mut tasks = Vec::new();
    for k in 0..args.flows {
        let permit = gate.clone().acquire_owned().await.expect("semaphore");
        let f = flow(k);
        tasks.push(tokio::spawn(async move {
            f.await;
            drop(permit);
        }));
    }
    for t in tasks {
        t.await.expect("flow task");
    }
}

/// The same exchanges over bare AeroTP connections configured as the ingress configures a
/// flow's connection.
async fn reference(args: &Args, bytes: usize, cfg: ConnectionConfig) -> (Traffic, Traffic) {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let a = Endpoint::bind(any, EndpointConfig::default()).expect("bind");
    let b = Endpoint::bind(any, EndpointConfig::default()).expect("bind");
    b.listen(1, cfg.clone()).expect("listen");
    let server = b.clone();
    tokio::spawn(async move {
        while let Some(mut c) = server.accept().await {
            tokio::spawn(async move {
                let mut sink = vec![0u8; 64 * 1024];
                let mut n = 0;
                while let Ok(k @ 1..) = c.read(&mut sink).await {
                    n += k;
                }
                let answer = if n == 100 { 100 } else { 32 };
                let _ = c.write_all(&vec![7u8; answer]).await;
                let _ = c.finish().await;
            });
        }
    });
    let peer = b.local_addr();
    let one = |send: usize, expect: usize| {
        let (a, cfg) = (a.clone(), cfg.clone());
        async move {
            let mut c = a.connect(peer, 1, cfg).expect("connect");
            c.write_all(&vec![1u8; send]).await.expect("write");
            c.close();
            let mut got = Vec::new();
            c.read_to_end(&mut got).await.expect("read");
            assert_eq!(got.len(), expect);
            c.closed().await;
        }
    };
    let (a0, b0) = (a.io_counters(), b.io_counters());
    one(bytes, 32).await;
    settle(&a, &b).await;
    let upload = diff(&a0, &a.io_counters(), &b0, &b.io_counters());
    let (a0, b0) = (a.io_counters(), b.io_counters());
    storm(args, |_| one(100, 100)).await;
    settle(&a, &b).await;
    let storm = diff(&a0, &a.io_counters(), &b0, &b.io_counters());
    (upload, storm)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mode: Mode = args
        .mode
        .parse()
        .map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
    anyhow::ensure!(
        matches!(mode, Mode::Reliable | Mode::NearReliable),
        "--mode: the gateways' TCP flows are reliable or near-reliable, not {mode}"
    );
    aerotp_link::parse_rate(&args.rate).map_err(|e| anyhow::anyhow!("--rate: {e}"))?;
    let bytes =
        aerotp_link::parse_size(&args.bytes).map_err(|e| anyhow::anyhow!("--bytes: {e}"))?;
    anyhow::ensure!(bytes > 0, "--bytes must be above 0");
    anyhow::ensure!(
        args.flows > 0 && args.concurrent > 0,
        "--flows and --concurrent must be above 0"
    );
    let bytes = usize::try_from(bytes)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let (gu, gs, cfg) = through_gateways(&args, bytes, mode).await;
        let (ru, rs) = reference(&args, bytes, cfg).await;
        let per10 = 10_000_000.0 / bytes as f64;
        let air = |d: u64, b: u64| (b + 28 * d) as f64;
        println!(
            "mode {}, rate {}, upload {} B, storm {} flows ({} at once)",
            args.mode, args.rate, bytes, args.flows, args.concurrent
        );
        println!("| run | datagrams →dest | datagrams ←dest | air bytes →dest | air bytes ←dest |");
        println!("|---|---|---|---|---|");
        for (name, t) in [("gateways, per 10 MB", gu), ("bare AeroTP, per 10 MB", ru)] {
            println!(
                "| {name} | {:.0} | {:.0} | {:.0} | {:.0} |",
                t.a_dgrams as f64 * per10,
                t.b_dgrams as f64 * per10,
                air(t.a_dgrams, t.a_bytes) * per10,
                air(t.b_dgrams, t.b_bytes) * per10
            );
        }
        let n = args.flows as f64;
        for (name, t) in [
            ("gateways, per storm flow", gs),
            ("bare AeroTP, per storm flow", rs),
        ] {
            println!(
                "| {name} | {:.2} | {:.2} | {:.0} | {:.0} |",
                t.a_dgrams as f64 / n,
                t.b_dgrams as f64 / n,
                air(t.a_dgrams, t.a_bytes) / n,
                air(t.b_dgrams, t.b_bytes) / n
            );
        }
        let extra = air(gu.a_dgrams, gu.a_bytes) + air(gu.b_dgrams, gu.b_bytes)
            - air(ru.a_dgrams, ru.a_bytes)
            - air(ru.b_dgrams, ru.b_bytes);
        println!(
            "gateway framing over bare AeroTP: {:.0} air bytes per 10 MB ({:.3} % of the data); \
             storm: {:.2} more datagrams per flow",
            extra * per10,
            extra * per10 / 1e5,
            (gs.a_dgrams + gs.b_dgrams) as f64 / n - (rs.a_dgrams + rs.b_dgrams) as f64 / n
        );
    });
    Ok(())
}
