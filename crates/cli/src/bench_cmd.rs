//! `aerotp bench loopback`: AeroTP reliable mode vs QUIC (quinn) over loopback UDP, same size,
//! same process, both on one tokio thread (so "one core" carries sender and receiver).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aerotp_net::{Endpoint, EndpointConfig, Mode};
use anyhow::Context;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::common::*;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Reliable AeroTP and QUIC (quinn) transfers of the same size over 127.0.0.1.
    Loopback(LoopArgs),
    /// Lab (root): TCP cubic/reno/bbr, QUIC, UDP and AeroTP modes against the bit-error rate.
    Lossy(crate::lab_bench_cmd::LossyArgs),
    /// Lab (root): connection set-up to first data byte, kernel TCP vs AeroTP, against loss.
    Setup(crate::lab_bench_cmd::SetupArgs),
    /// Lab (root): a transfer across a long outage, kernel TCP vs the reliable AeroTP modes.
    Outage(crate::lab_bench_cmd::OutageArgs),
    /// Lab (root): kernel MPTCP (a subflow per path) against single-path TCP over N paths.
    Multipath(crate::lab_bench_cmd::MultipathArgs),
}

#[derive(Debug, clap::Args)]
struct LoopArgs {
    /// Bytes to send: 1GB, 100MB, 64MiB.
    #[arg(long, default_value = "1GB", value_parser = size_arg)]
    size: u64,
    /// AeroTP sending rate (pacer): set far above what loopback carries, or `auto` to
    /// discover it as `send` does by default (capped at 10 Gb/s), so the two can be
    /// compared run for run.
    #[arg(long, default_value = "20gbit", value_parser = crate::rate_flags::rate_or_auto_arg)]
    rate: crate::rate_flags::RateArg,
    /// AeroTP datagram size.
    #[arg(long, default_value_t = 1500, value_parser = mtu_arg)]
    mtu: usize,
    /// Skip the QUIC run.
    #[arg(long)]
    no_quic: bool,
    /// AeroTP's TPDU authentication (docs/security.md), with a key made for the run: off,
    /// auth (every TPDU authenticated), encrypt (authenticated and encrypted, as QUIC always
    /// is), or all three one after the other.
    #[arg(long, value_enum, default_value = "off")]
    auth: AuthRuns,
    /// Write every AeroTP datagram the sending endpoint sends and receives to FILE (pcapng;
    /// interfaces "sent" and "received"; tools/wireshark/aerotp.lua decodes it): the cost of
    /// a capture is the throughput with it over the throughput without (docs/capture.md).
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer thread; beyond it
    /// records are dropped and counted, never the data (e.g. 8MiB, 64MB).
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = size_arg)]
    pcap_queue: u64,
    /// How the sending application hands its bytes over, for both protocols alike: `copy`
    /// (`write_all(&[u8])`: the connection copies them into its queue) or `shared`
    /// (`write_chunk(Bytes)`: the queue keeps the application's buffer and cuts datagrams
    /// from it; quinn's `write_chunk` does the same).
    #[arg(long, value_enum, default_value = "copy")]
    writes: Writes,
    /// Print the results as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Writes {
    Copy,
    Shared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AuthRuns {
    Off,
    Auth,
    Encrypt,
    All,
}

impl AuthRuns {
    /// The AeroTP runs asked for: `None` without authentication, `Some(encrypt)` with.
    fn runs(self) -> Vec<Option<bool>> {
        match self {
            AuthRuns::Off => vec![None],
            AuthRuns::Auth => vec![Some(false)],
            AuthRuns::Encrypt => vec![Some(true)],
            AuthRuns::All => vec![None, Some(false), Some(true)],
        }
    }
}

/// Both endpoints' settings for one run: the same fresh key on each, its own nonce seed.
fn endpoint_config(
    auth: Option<bool>,
    key: &aerotp_net::AuthKey,
) -> anyhow::Result<EndpointConfig> {
    let Some(encrypt) = auth else {
        return Ok(EndpointConfig::default());
    };
    let keys = aerotp_net::KeySet {
        current: key.clone(),
        previous: None,
    };
    Ok(EndpointConfig {
        auth: Some(aerotp_net::keyfile::auth_config(keys, encrypt)?),
        ..EndpointConfig::default()
    })
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if r != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Debug, Clone)]
struct Run {
    name: &'static str,
    bytes: u64,
    wall: Duration,
    cpu: Duration,
    ok: bool,
    note: String,
}

impl Run {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall.as_secs_f64().max(1e-9) / 1e9
    }
    fn cpu_per_gb(&self) -> f64 {
        self.cpu.as_secs_f64() / (self.bytes as f64 / 1e9)
    }
    fn json(&self) -> serde_json::Value {
        json!({"protocol": self.name, "bytes": self.bytes, "seconds": self.wall.as_secs_f64(),
               "gbit_per_s": self.gbps(), "cpu_seconds": self.cpu.as_secs_f64(),
               "cpu_seconds_per_gb": self.cpu_per_gb(), "complete": self.ok, "note": self.note})
    }
}

const CHUNK: usize = 1 << 20;

async fn aerotp_run(
    writes: Writes,
    size: u64,
    rate: crate::rate_flags::RateArg,
    mtu: usize,
    auth: Option<bool>,
    capture: Option<&Arc<aerotp_capture::LiveCapture>>,
) -> anyhow::Result<Run> {
    let lo: SocketAddr = "127.0.0.1:0".parse()?;
    let key = aerotp_net::keyfile::new_key(1)?;
    let server = Endpoint::bind(lo, endpoint_config(auth, &key)?)?;
    let mut lcfg =
        crate::listener_config::listener_config(100_000_000_000, None, Duration::from_secs(60))?;
    lcfg.mtu = mtu;
    server.listen(1, lcfg)?;
    let server_addr = server.local_addr();
    let client = Endpoint::bind(lo, endpoint_config(auth, &key)?)?;
    if let Some(c) = capture {
        client.set_tap(c.clone());
    }
    let cfg = sender_config(rate, mtu)?;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let rx = tokio::spawn(async move {
        let conn = server.accept().await.context("no connection")?;
        let mut got = 0u64;
        while let Some(c) = conn.read_chunk().await? {
            got += c.data.len() as u64;
        }
        let end = Instant::now();
        let rep = conn.finish().await;
        anyhow::Ok((got, end, rep.guarantee_met))
    });
    let mut conn = client.connect(server_addr, 1, cfg)?;
    let buf = bytes_chunk();
    let mut left = size;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        match writes {
            Writes::Copy => conn.write_all(&buf[..n]).await?,
            Writes::Shared => conn.write_chunk(buf.slice(..n)).await?,
        }
        left -= n as u64;
    }
    let sender = conn.finish().await;
    let (got, end, rx_ok) = rx.await??;
    let wall = end - t0;
    let cpu = cpu_time() - cpu0;
    let s = &sender.stats;
    let mut note = format!(
        "{} TPDUs, {} retransmitted, {} timeouts",
        s.sender.tpdus_sent, s.sender.tpdus_retransmitted, s.sender.timeouts
    );
    // The capture is closed (its queue written out) after the clock stopped: what it costs
    // the transfer is the copy on the datapath, not the writer's flush at the end.
    let mut ok = got == size && sender.guarantee_met && rx_ok;
    if let Some(c) = capture {
        let io = client.remove_tap();
        let sum = close_capture(c, "aerotp bench")?;
        // Every datagram the socket counted is either written or counted as dropped.
        ok &= sum.written + sum.dropped == io.datagrams_sent + io.datagrams_received;
        note.push_str(&format!(
            "; capture: {} packets written, {} dropped",
            sum.written, sum.dropped
        ));
    }
    Ok(Run {
        name: match auth {
            None => "aerotp-reliable",
            Some(false) => "aerotp-auth",
            Some(true) => "aerotp-auth+enc",
        },
        bytes: got,
        wall,
        cpu,
        ok,
        note,
    })
}

async fn quic_run(writes: Writes, size: u64) -> anyhow::Result<Run> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
    let cert_der = rustls::pki_types::CertificateDer::from(cert.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        cert.key_pair.serialize_der(),
    ));
    let server_cfg = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key)?;
    let server = quinn::Endpoint::server(server_cfg, "127.0.0.1:0".parse()?)?;
    let addr = server.local_addr()?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der)?;
    let client_cfg = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    client.set_default_client_config(client_cfg);
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let rx = tokio::spawn(async move {
        let conn = server.accept().await.context("no QUIC connection")?.await?;
        let mut stream = conn.accept_uni().await?;
        let mut got = 0u64;
        while let Some(c) = stream.read_chunk(usize::MAX, true).await? {
            got += c.bytes.len() as u64;
        }
        let end = Instant::now();
        conn.close(0u32.into(), b"done");
        server.wait_idle().await;
        anyhow::Ok((got, end))
    });
    let conn = client.connect(addr, "localhost")?.await?;
    let mut s = conn.open_uni().await?;
    let buf = bytes_chunk();
    let mut left = size;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        match writes {
            Writes::Copy => s.write_all(&buf[..n]).await?,
            Writes::Shared => s.write_chunk(buf.slice(..n)).await?,
        }
        left -= n as u64;
    }
    s.finish()?;
    let (got, end) = rx.await??;
    let wall = end - t0;
    let cpu = cpu_time() - cpu0;
    conn.close(0u32.into(), b"done");
    client.wait_idle().await;
    let st = conn.stats();
    Ok(Run {
        name: "quic-quinn",
        bytes: got,
        wall,
        cpu,
        ok: got == size,
        note: format!(
            "{} datagrams sent, {} lost",
            st.udp_tx.datagrams, st.path.lost_packets
        ),
    })
}

/// The sending application's buffer, written again and again.
fn bytes_chunk() -> bytes::Bytes {
    bytes::Bytes::from(vec![0x5Au8; CHUNK])
}

pub fn run(args: Args) -> i32 {
    let a = match args.what {
        What::Loopback(a) => a,
        What::Lossy(a) => return crate::lab_bench_cmd::lossy(a),
        What::Setup(a) => return crate::lab_bench_cmd::setup(a),
        What::Outage(a) => return crate::lab_bench_cmd::outage(a),
        What::Multipath(a) => return crate::lab_bench_cmd::multipath(a),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("aerotp bench: {e}");
            return EXIT_LOCAL;
        }
    };
    let (aero, quic) = match rt.block_on(loopback_runs(&a)) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("aerotp bench: {e:#}");
            return EXIT_LOCAL;
        }
    };
    let runs: Vec<Run> = aero.into_iter().chain(quic).collect();
    print_runs(&a, &runs);
    if runs.iter().all(|r| r.ok) {
        EXIT_OK
    } else {
        EXIT_BROKEN
    }
}

/// The loopback runs: AeroTP with each `--auth` asked for, then QUIC unless `--no-quic`.
async fn loopback_runs(a: &LoopArgs) -> anyhow::Result<(Vec<Run>, Option<Run>)> {
    if a.pcap.is_some() && a.auth.runs().len() > 1 {
        anyhow::bail!(
            "--pcap captures one AeroTP run: give --auth off, auth or encrypt with it, not all"
        );
    }
    // Created before any endpoint: a path that cannot be written costs no run.
    let capture = match &a.pcap {
        Some(p) => Some(
            open_capture(p, &aerotp_net::ENDPOINT_INTERFACES, a.pcap_queue)
                .with_context(|| format!("--pcap {}", p.display()))?,
        ),
        None => None,
    };
    let mut aero = Vec::new();
    for auth in a.auth.runs() {
        aero.push(aerotp_run(a.writes, a.size, a.rate, a.mtu, auth, capture.as_ref()).await?);
    }
    let quic = if a.no_quic {
        None
    } else {
        Some(quic_run(a.writes, a.size).await?)
    };
    Ok((aero, quic))
}

/// The sending connection's configuration: reliable, at `--rate` or discovering under
/// `send`'s cap.
fn sender_config(
    rate: crate::rate_flags::RateArg,
    mtu: usize,
) -> anyhow::Result<aerotp_proto::ConnectionConfig> {
    // `--rate` is always given here (it has a default), so the default below is never used.
    let (control, bps) = crate::rate_flags::resolve_rate(
        Mode::Reliable,
        "--rate",
        Some(rate),
        None,
        crate::rate_flags::RateDefault::Discover { otherwise: 0 },
    )?;
    let mut cfg = crate::send_cmd::connection_config(Mode::Reliable, bps, None, None, mtu, None)?;
    cfg.rate_control = control;
    Ok(cfg)
}

/// `--rate` for the JSON: the rate in b/s, or `"auto"`.
fn rate_json(rate: crate::rate_flags::RateArg) -> serde_json::Value {
    match rate {
        crate::rate_flags::RateArg::Auto => "auto".into(),
        crate::rate_flags::RateArg::Fixed(r) => r.into(),
    }
}

/// The runs as JSON (`--json`) or a table on stdout.
fn print_runs(a: &LoopArgs, runs: &[Run]) {
    if a.json {
        println!(
            "{}",
            json!({"size": a.size, "rate_bps": rate_json(a.rate), "mtu": a.mtu, "writes": format!("{:?}", a.writes).to_lowercase(), "runtime": "tokio current_thread (one core for sender + receiver)", "runs": runs.iter().map(Run::json).collect::<Vec<_>>()})
        );
    } else {
        println!(
            "loopback, {} bytes, one tokio thread for sender and receiver",
            a.size
        );
        println!(
            "{:<18} {:>10} {:>12} {:>10} {:>14}  {:<8} note",
            "protocol", "seconds", "throughput", "CPU s", "CPU s per GB", "complete"
        );
        for r in runs {
            println!(
                "{:<18} {:>10.3} {:>12} {:>10.3} {:>14.3}  {:<8} {}",
                r.name,
                r.wall.as_secs_f64(),
                human_rate(r.gbps() * 1e9),
                r.cpu.as_secs_f64(),
                r.cpu_per_gb(),
                r.ok,
                r.note
            );
        }
    }
}
