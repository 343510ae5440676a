//! One transfer across a running lab: receiver thread in the ground namespace, sender thread in
//! the air namespace, each with its own single-threaded tokio runtime.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_lab::{Lab, Side};
use aerotp_net::{ConnectionConfig, EndpointConfig, FecSetting, Mode};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::timeout_at;

use crate::payload::{Clock, Plan, Sink, Source};

/// Blocks per application write (small, so a block's stamp is close to its write time).
const BLOCKS_PER_WRITE: u32 = 4;
/// Stream block size (divides 1 MB).
pub const STREAM_BLOCK: usize = 500;
/// UDP datagram payload: a 1500-byte IP packet.
pub const UDP_BLOCK: usize = 1472;
/// Plain UDP: the receiver stops after this long without a datagram.
const UDP_IDLE: Duration = Duration::from_secs(1);
/// After the end of the data, how long a receiver keeps its endpoint for the close handshake.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Kernel TCP congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    Cubic,
    Reno,
    Bbr,
}

impl Cc {
    pub fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Reno => "reno",
            Cc::Bbr => "bbr",
        }
    }
}

/// A protocol under test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Proto {
    Tcp(Cc),
    Quic,
    Udp,
    Aero(Mode, FecSetting),
}

impl Proto {
    pub fn name(&self) -> String {
        match self {
            Proto::Tcp(cc) => format!("tcp-{}", cc.name()),
            Proto::Quic => "quic".into(),
            Proto::Udp => "udp".into(),
            Proto::Aero(m, _) => format!("aerotp-{m}"),
        }
    }

    /// Parses `tcp-cubic`, `tcp-reno`, `tcp-bbr`, `quic`, `udp`, `aerotp-<mode>` (with the
    /// mode's default FEC, `auto` for the FEC modes).
    pub fn parse(s: &str) -> Result<Proto> {
        Ok(match s {
            "tcp-cubic" => Proto::Tcp(Cc::Cubic),
            "tcp-reno" => Proto::Tcp(Cc::Reno),
            "tcp-bbr" => Proto::Tcp(Cc::Bbr),
            "quic" => Proto::Quic,
            "udp" => Proto::Udp,
            other => {
                let Some(m) = other.strip_prefix("aerotp-") else {
                    bail!("unknown protocol {other:?} (tcp-cubic, tcp-reno, tcp-bbr, quic, udp, aerotp-<mode>)")
                };
                let mode: Mode = m.parse().map_err(|e: String| anyhow!(e))?;
                if mode == Mode::Datagram {
                    bail!("aerotp-datagram carries messages, not a stream");
                }
                Proto::Aero(mode, ConnectionConfig::with_mode(mode).fec)
            }
        })
    }

    /// Whether every byte must arrive (the receiver checks SHA-256 of the stream).
    pub fn is_stream_reliable(&self) -> bool {
        match self {
            Proto::Tcp(_) | Proto::Quic => true,
            Proto::Udp => false,
            Proto::Aero(m, _) => matches!(
                m,
                Mode::Reliable | Mode::NearReliable | Mode::HybridNackMack
            ),
        }
    }

    fn block(&self) -> usize {
        match self {
            Proto::Udp => UDP_BLOCK,
            _ => STREAM_BLOCK,
        }
    }
}

/// What to transfer and how.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub size: u64,
    /// Link rate (AeroTP and UDP pace at it).
    pub rate_bps: u64,
    /// Longest a transfer may take (from the sender's start).
    pub cap: Duration,
    /// UDP port of the receiver (ground).
    pub port: u16,
    /// Keep per-block arrival times (rate timelines).
    pub timeline: bool,
}

/// Engine counters of an AeroTP transfer, for diagnosis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AeroStats {
    pub outcome: String,
    pub guarantee_met: bool,
    pub tpdus_sent: u64,
    pub tpdus_retransmitted: u64,
    pub timeouts: u64,
    pub probes: u64,
    pub nacks_received: u64,
    pub fec_parity: u8,
    pub measured_ber: f64,
    pub rx_corrected: u64,
    pub rx_corrupted: u64,
    pub srtt_ms: f64,
    pub outages: u64,
}

/// One transfer's measurements.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub protocol: String,
    pub size: u64,
    /// Distinct intact payload bytes at the receiver.
    pub delivered: u64,
    pub complete: bool,
    /// SHA-256 of the received stream equals the sender's (stream protocols).
    pub sha_ok: bool,
    /// Sender start (before connecting).
    pub start: Instant,
    pub first_arrival: Option<Instant>,
    /// Arrival of the last new intact block.
    pub last_new: Option<Instant>,
    /// When the receiver saw the end (EOF, idle, error or the cap).
    pub end: Instant,
    pub mean_delay_s: Option<f64>,
    pub error: Option<String>,
    pub aero: Option<AeroStats>,
    pub arrivals: Vec<(Instant, u32)>,
}

impl Outcome {
    /// delivered × 8 / (last byte − sender start).
    pub fn goodput_bps(&self) -> f64 {
        match self.last_new {
            Some(t) if self.delivered > 0 => {
                let d = t.saturating_duration_since(self.start).as_secs_f64();
                if d > 0.0 {
                    self.delivered as f64 * 8.0 / d
                } else {
                    0.0
                }
            }
            _ => 0.0,
        }
    }
    pub fn elapsed_s(&self) -> f64 {
        self.end.saturating_duration_since(self.start).as_secs_f64()
    }
}

struct RecvResult {
    sink: Sink,
    end: Instant,
    error: Option<String>,
    rx_stats: Option<aerotp_net::ConnectionStats>,
}

struct SendResult {
    start: Instant,
    digest: Option<[u8; 32]>,
    error: Option<String>,
    aero: Option<AeroStats>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn ground(lab: &Lab, port: u16) -> SocketAddr {
    SocketAddr::new(lab.ground_addr(), port)
}

fn air_any(lab: &Lab) -> SocketAddr {
    SocketAddr::new(lab.air_addr(), 0)
}

/// Runs one transfer of `proto` across `lab` (receiver in ground, sender in air).
pub fn run(lab: &Lab, proto: Proto, spec: Spec) -> Result<Outcome> {
    let clock = Clock::new();
    let plan = Plan::new(spec.size, proto.block());
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<Option<Arc<Vec<u8>>>>>(1);
    let g = ground(lab, spec.port);
    let a = air_any(lab);
    let cap = spec.cap;
    let rate = spec.rate_bps;
    let timeline = spec.timeline;
    let receiver = lab.spawn_in(Side::Ground, move || {
        runtime().block_on(receive(
            proto, g, plan, clock, cap, rate, timeline, ready_tx,
        ))
    })?;
    let cert = match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let _ = receiver.join();
            return Err(e.context("receiver setup"));
        }
        Err(_) => bail!("receiver did not get ready within 10 s"),
    };
    let sender = lab.spawn_in(Side::Air, move || {
        runtime().block_on(send(proto, a, g, plan, clock, cap, rate, cert))
    })?;
    let s = sender
        .join()
        .map_err(|_| anyhow!("sender thread panicked"))?;
    let r = receiver
        .join()
        .map_err(|_| anyhow!("receiver thread panicked"))?;
    let sha_ok = match s.digest {
        Some(d) => r.sink.complete() && r.sink.digest() == d,
        None => false,
    };
    let complete =
        r.sink.complete() && (sha_ok || !proto.is_stream_reliable() || proto == Proto::Udp);
    let mut aero = s.aero;
    if let (Some(a), Some(rx)) = (aero.as_mut(), r.rx_stats.as_ref()) {
        a.rx_corrected = rx.receiver.tpdus_corrected;
        a.rx_corrupted = rx.receiver.tpdus_corrupted;
        a.measured_ber = rx.measured_ber;
    }
    let error = match (s.error, r.error) {
        (None, None) => None,
        (a, b) => Some(
            [
                a.map(|e| format!("sender: {e}")),
                b.map(|e| format!("receiver: {e}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
        ),
    };
    Ok(Outcome {
        protocol: proto.name(),
        size: spec.size,
        delivered: r.sink.delivered,
        complete,
        sha_ok,
        start: s.start,
        first_arrival: r.sink.first_arrival,
        last_new: r.sink.last_new,
        end: r.end,
        mean_delay_s: r.sink.mean_delay_s(),
        error,
        aero,
        arrivals: r.sink.arrivals,
    })
}

fn aero_config(mode: Mode, fec: FecSetting, rate_bps: u64) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps,
        fec,
        ..ConnectionConfig::with_mode(mode)
    }
}

type Ready = mpsc::SyncSender<Result<Option<Arc<Vec<u8>>>>>;

#[allow(clippy::too_many_arguments)]
async fn receive(
    proto: Proto,
    addr: SocketAddr,
    plan: Plan,
    clock: Clock,
    cap: Duration,
    rate_bps: u64,
    timeline: bool,
    ready: Ready,
) -> RecvResult {
    let started = Instant::now();
    let mut sink = Sink::new(plan);
    sink.keep_arrivals = timeline;
    let mut rx_stats = None;
    let r = match proto {
        Proto::Tcp(_) => recv_tcp(addr, &mut sink, clock, cap, ready).await,
        Proto::Quic => recv_quic(addr, &mut sink, clock, cap, ready).await,
        Proto::Udp => recv_udp(addr, &mut sink, clock, cap, ready).await,
        Proto::Aero(mode, fec) => {
            recv_aero(
                addr,
                mode,
                fec,
                rate_bps,
                &mut sink,
                clock,
                cap,
                ready,
                &mut rx_stats,
            )
            .await
        }
    };
    // An error found after a grace period (QUIC's `wait_idle`) does not count past the cap.
    let end = match r {
        Ok(end) => end,
        Err(_) => Instant::now(),
    }
    .min(started + cap);
    RecvResult {
        sink,
        end,
        error: r.err().map(|e| format!("{e:#}")),
        rx_stats,
    }
}

#[allow(clippy::too_many_arguments)]
async fn send(
    proto: Proto,
    local: SocketAddr,
    remote: SocketAddr,
    plan: Plan,
    clock: Clock,
    cap: Duration,
    rate_bps: u64,
    cert: Option<Arc<Vec<u8>>>,
) -> SendResult {
    let start = Instant::now();
    let deadline = tokio::time::Instant::from_std(start + cap);
    let mut src = Source::new(plan);
    let mut aero = None;
    let r = match proto {
        Proto::Tcp(cc) => send_tcp(remote, cc, &mut src, clock, deadline).await,
        Proto::Quic => send_quic(local, remote, cert, &mut src, clock, deadline).await,
        Proto::Udp => send_udp(local, remote, rate_bps, &mut src, clock, deadline).await,
        Proto::Aero(mode, fec) => {
            send_aero(
                local, remote, mode, fec, rate_bps, &mut src, clock, deadline, &mut aero,
            )
            .await
        }
    };
    let done = src.done();
    SendResult {
        start,
        digest: done.then(|| src.digest()),
        error: r.err().map(|e| format!("{e:#}")),
        aero,
    }
}

/// Writes every block (stamped at write time) unless the deadline comes first.
async fn write_blocks<W: AsyncWrite + Unpin>(
    w: &mut W,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let mut buf = Vec::new();
    while !src.done() {
        buf.clear();
        src.take(&clock, BLOCKS_PER_WRITE, &mut buf);
        timeout_at(deadline, w.write_all(&buf))
            .await
            .map_err(|_| anyhow!("time cap reached while writing"))?
            .context("write")?;
    }
    Ok(())
}

fn deadline_of(cap: Duration) -> tokio::time::Instant {
    tokio::time::Instant::now() + cap
}

// ---------------------------------------------------------------- kernel TCP

async fn recv_tcp(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => {
            let _ = ready.send(Ok(None));
            l
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow!("bind {addr}: {e}")));
            bail!("bind {addr}: {e}");
        }
    };
    let deadline = deadline_of(cap);
    let (mut s, _) = timeout_at(deadline, listener.accept())
        .await
        .map_err(|_| anyhow!("no connection within the time cap"))??;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => bail!("time cap reached"),
            Ok(Err(e)) => return Err(e.into()),
            Ok(Ok(0)) => return Ok(Instant::now()),
            Ok(Ok(n)) => sink.stream(&clock, Instant::now(), &buf[..n]),
        }
    }
}

async fn send_tcp(
    remote: SocketAddr,
    cc: Cc,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let sock = tokio::net::TcpSocket::new_v4()?;
    {
        let r = socket2::SockRef::from(&sock);
        r.set_tcp_congestion(cc.name().as_bytes())
            .with_context(|| format!("TCP_CONGESTION {}", cc.name()))?;
        let got = r.tcp_congestion()?;
        let got = String::from_utf8_lossy(&got);
        if got.trim_end_matches('\0') != cc.name() {
            bail!(
                "asked for TCP congestion control {} but the socket runs {got}",
                cc.name()
            );
        }
    }
    let mut s = timeout_at(deadline, sock.connect(remote))
        .await
        .map_err(|_| anyhow!("time cap reached while connecting"))?
        .context("connect")?;
    write_blocks(&mut s, src, clock, deadline).await?;
    timeout_at(deadline, s.shutdown())
        .await
        .map_err(|_| anyhow!("time cap reached at shutdown"))??;
    // Keep the socket until the receiver has read everything and closed.
    let mut b = [0u8; 64];
    let _ = timeout_at(deadline, s.read(&mut b)).await;
    Ok(())
}

// ---------------------------------------------------------------- QUIC (quinn)

fn quic_server(addr: SocketAddr) -> Result<(quinn::Endpoint, Vec<u8>)> {
    let cert = rcgen::generate_simple_self_signed(vec!["aerotp-lab".into()])?;
    let der = cert.cert.der().to_vec();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(der.clone())],
            key,
        )?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let ep = quinn::Endpoint::server(cfg, addr)?;
    Ok((ep, der))
}

async fn recv_quic(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let ep = match quic_server(addr) {
        Ok((ep, der)) => {
            let _ = ready.send(Ok(Some(Arc::new(der))));
            ep
        }
        Err(e) => {
            let msg = format!("{e:#}");
            let _ = ready.send(Err(e));
            bail!("QUIC server: {msg}");
        }
    };
    let deadline = deadline_of(cap);
    let result = async {
        let incoming = timeout_at(deadline, ep.accept())
            .await
            .map_err(|_| anyhow!("no connection within the time cap"))?
            .ok_or_else(|| anyhow!("endpoint closed"))?;
        let conn = timeout_at(deadline, incoming)
            .await
            .map_err(|_| anyhow!("handshake not done within the time cap"))??;
        let mut rs = timeout_at(deadline, conn.accept_uni())
            .await
            .map_err(|_| anyhow!("no stream within the time cap"))??;
        loop {
            match timeout_at(deadline, rs.read_chunk(64 << 10, true)).await {
                Err(_) => bail!("time cap reached"),
                Ok(Err(e)) => return Err(anyhow::Error::from(e)),
                Ok(Ok(None)) => {
                    let end = Instant::now();
                    conn.close(0u32.into(), b"done");
                    return Ok(end);
                }
                Ok(Ok(Some(c))) => sink.stream(&clock, Instant::now(), &c.bytes),
            }
        }
    }
    .await;
    let _ = tokio::time::timeout(CLOSE_GRACE, ep.wait_idle()).await;
    result
}

async fn send_quic(
    local: SocketAddr,
    remote: SocketAddr,
    cert: Option<Arc<Vec<u8>>>,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let der = cert.ok_or_else(|| anyhow!("no server certificate"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from(der.to_vec()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut ep = quinn::Endpoint::client(local)?;
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = timeout_at(deadline, ep.connect(remote, "aerotp-lab")?)
        .await
        .map_err(|_| anyhow!("time cap reached during the handshake"))??;
    let mut s = conn.open_uni().await?;
    write_blocks(&mut s, src, clock, deadline).await?;
    s.finish()?;
    // The receiver closes the connection once it has read the end of the stream.
    let _ = timeout_at(deadline, conn.closed()).await;
    ep.close(0u32.into(), b"");
    Ok(())
}

// ---------------------------------------------------------------- plain UDP

async fn recv_udp(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let sock = match aerotp_net::udp_socket(addr) {
        Ok(s) => {
            let _ = ready.send(Ok(None));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow!("bind {addr}: {e}")));
            bail!("bind {addr}: {e}");
        }
    };
    let deadline = deadline_of(cap);
    let mut buf = vec![0u8; 65536];
    loop {
        let wait = match sink.first_arrival {
            None => deadline,
            Some(_) => deadline.min(tokio::time::Instant::now() + UDP_IDLE),
        };
        match timeout_at(wait, sock.recv_from(&mut buf)).await {
            Err(_) => {
                return Ok(sink.last_new.unwrap_or_else(Instant::now));
            }
            Ok(Err(e)) => return Err(e.into()),
            Ok(Ok((n, _))) => {
                sink.datagram(&clock, Instant::now(), &buf[..n]);
                if sink.complete() {
                    return Ok(Instant::now());
                }
            }
        }
    }
}

async fn send_udp(
    local: SocketAddr,
    remote: SocketAddr,
    rate_bps: u64,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let sock = aerotp_net::udp_socket(local)?;
    // One IP packet (20 IP + 8 UDP + payload) per block, paced at the link rate.
    let interval = Duration::from_secs_f64((UDP_BLOCK + 28) as f64 * 8.0 / rate_bps as f64);
    let mut next = tokio::time::Instant::now();
    let mut buf = Vec::with_capacity(UDP_BLOCK);
    while !src.done() {
        if next >= deadline {
            bail!("time cap reached while sending");
        }
        tokio::time::sleep_until(next).await;
        buf.clear();
        src.take(&clock, 1, &mut buf);
        sock.send_to(&buf, remote).await?;
        next += interval;
    }
    Ok(())
}

// ---------------------------------------------------------------- AeroTP

#[allow(clippy::too_many_arguments)]
async fn recv_aero(
    addr: SocketAddr,
    mode: Mode,
    fec: FecSetting,
    rate_bps: u64,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
    rx_stats: &mut Option<aerotp_net::ConnectionStats>,
) -> Result<Instant> {
    let ep = match aerotp_net::Endpoint::bind(addr, EndpointConfig::default()).and_then(|ep| {
        ep.listen(aerotp_net::DEFAULT_PORT, aero_config(mode, fec, rate_bps))?;
        Ok(ep)
    }) {
        Ok(ep) => {
            let _ = ready.send(Ok(None));
            ep
        }
        Err(e) => {
            let msg = e.to_string();
            let _ = ready.send(Err(anyhow!("AeroTP endpoint on {addr}: {msg}")));
            bail!("AeroTP endpoint on {addr}: {msg}");
        }
    };
    let deadline = deadline_of(cap);
    let conn = timeout_at(deadline, ep.accept())
        .await
        .map_err(|_| anyhow!("no connection within the time cap"))?
        .ok_or_else(|| anyhow!("endpoint stopped"))?;
    let result = loop {
        match timeout_at(deadline, conn.read_chunk()).await {
            Err(_) => break Err(anyhow!("time cap reached")),
            Ok(Err(e)) => break Err(anyhow::Error::from(e)),
            Ok(Ok(None)) => break Ok(Instant::now()),
            Ok(Ok(Some(d))) => sink.stream(&clock, Instant::now(), &d.data),
        }
    };
    if result.is_ok() {
        // Close our (empty) half and let the close handshake finish, outside the measured
        // time: the sender's `finish` completes when both halves are closed.
        let _ = tokio::time::timeout(CLOSE_GRACE, conn.finish()).await;
    }
    *rx_stats = Some(conn.stats());
    result
}

#[allow(clippy::too_many_arguments)]
async fn send_aero(
    local: SocketAddr,
    remote: SocketAddr,
    mode: Mode,
    fec: FecSetting,
    rate_bps: u64,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
    aero: &mut Option<AeroStats>,
) -> Result<()> {
    let ep = aerotp_net::Endpoint::bind(local, EndpointConfig::default())?;
    let mut conn = ep.connect(
        remote,
        aerotp_net::DEFAULT_PORT,
        aero_config(mode, fec, rate_bps),
    )?;
    let w = write_blocks(&mut conn, src, clock, deadline).await;
    let report = match w {
        Ok(()) => timeout_at(deadline, conn.finish()).await.ok(),
        Err(_) => None,
    };
    let st = conn.stats();
    *aero = Some(AeroStats {
        outcome: report
            .as_ref()
            .map_or_else(|| "time cap".to_owned(), |r| format!("{:?}", r.outcome)),
        guarantee_met: report.as_ref().is_some_and(|r| r.guarantee_met),
        tpdus_sent: st.sender.tpdus_sent,
        tpdus_retransmitted: st.sender.tpdus_retransmitted,
        timeouts: st.sender.timeouts,
        probes: st.sender.probes,
        nacks_received: st.sender.nacks_received,
        fec_parity: st.fec_parity,
        measured_ber: 0.0,
        rx_corrected: 0,
        rx_corrupted: 0,
        srtt_ms: st.srtt.as_secs_f64() * 1e3,
        outages: st.outages,
    });
    if report.is_none() {
        conn.abort("time cap");
    }
    w
}
