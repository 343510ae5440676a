//! `aerotp send`: sends one file (or standard input) over an AeroTP connection.

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_net::{
    CloseOutcome, Connection, ConnectionConfig, Endpoint, EndpointConfig, FecSetting, Mode, Report,
};
use anyhow::Context;
use indicatif::ProgressBar;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::common::*;
use crate::rate_flags::{rate_or_auto_arg, resolve_rate, RateArg, RateDefault};
use crate::send_args::{
    check_name, check_path_count, checked_paths, local_any, open_input, resolve, source_address,
    PathArg,
};

/// Send a file to `aerotp recv` over AeroTP; exits as soon as the receiver's verdict is in.
/// Exit status: 0 the mode's guarantee was met and the receiver has the file under its name,
/// 1 local error, 2 bad usage, 3 peer unreachable, 4 connection broke before the guarantee,
/// 6 the receiver's end-to-end check failed, 7 the receiver could not store the file (its
/// reason is printed).
#[derive(Debug, clap::Args)]
#[command(after_help = crate::transfer_end::SEND_EXIT_HELP)]
pub struct Args {
    /// File to send, or - for standard input.
    file: String,
    /// Receiver's UDP address (host:port), e.g. 127.0.0.1:9000 or [::1]:9000.
    #[arg(long)]
    to: String,
    /// This host's address to send the --to path from (one radio of several), e.g. 10.1.0.2.
    /// Without it the host's routing picks it.
    #[arg(long, value_name = "LOCAL")]
    from: Option<String>,
    /// Another path to the receiver: [LOCAL=]ADDR, its address on that path (host:port) and
    /// optionally this host's address to send it from (e.g. 10.2.0.2=10.2.0.1:47000).
    /// Repeat once per path; the connection opens on --to and spreads its data over every
    /// path that answers (docs/spec.md §9), --rate being the total. The local address picks
    /// the source of the path's datagrams; the outgoing interface is still routing's choice
    /// by destination, so give each radio or channel its own subnet (or a rule `ip rule add
    /// from LOCAL table N`). A path is both of its addresses: two radios may reach one ADDR
    /// (the receiver's one address) if each has its own LOCAL (e.g. --from 10.1.0.2 --to
    /// 10.9.0.1:47000 --path 10.2.0.2=10.9.0.1:47000).
    #[arg(long = "path", value_name = "[LOCAL=]ADDR")]
    paths: Vec<String>,
    /// Receiver's AeroTP port (not a UDP port).
    #[arg(long, default_value_t = aerotp_net::DEFAULT_PORT, value_parser = port_arg)]
    port: u16,
    /// Transfer mode: reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack,
    /// unreliable.
    #[arg(long, value_parser = mode_arg)]
    mode: Mode,
    /// What the file is: control, telemetry or bulk. Its datagrams carry the class's DSCP
    /// (--dscp), so routers and radios that honour DiffServ queue them by it; the receiver's
    /// answers carry the mark of `recv --class`.
    #[arg(long, default_value = "bulk", value_parser = crate::mark_flags::class_arg)]
    class: aerotp_proto::TrafficClass,
    #[command(flatten)]
    marks: crate::mark_flags::DscpFlags,
    /// Sending rate. `auto` (the default in reliable and hybrid-nack-mack): AeroTP discovers
    /// the link's rate from the acknowledgements, blind to corruption and random loss, and
    /// follows it as it changes (docs/rate.md). Or a fixed rate, e.g. 5mbit, 10Mbps, 1gbit
    /// (the papers' open loop, for a dedicated allocation: set it a few per cent under the
    /// link's rate). The modes without selective acknowledgements cannot discover: they send
    /// at --rate R, at --max-rate R with --rate auto, and at 5mbit when neither is given.
    #[arg(long, value_parser = rate_or_auto_arg)]
    rate: Option<RateArg>,
    /// Discover the rate (as --rate auto), never above this: 5mbit, 1gbit.
    #[arg(long, value_parser = rate_arg)]
    max_rate: Option<u64>,
    /// FEC: off, auto, N (papers' 32-bit words per TPDU, 0-256) or pN (parity bytes per
    /// codeword). Default: auto in every mode but unreliable and datagram (off there).
    #[arg(long, value_parser = fec_arg)]
    fec: Option<FecSetting>,
    /// ACKs per MACK for our own receiving half (the receiver's MACKs follow `recv --mack`).
    #[arg(long, value_parser = mack_arg)]
    mack: Option<u16>,
    /// Largest datagram in bytes (TPDU with parity, the UDP payload), 128-65000. Default:
    /// the largest that crosses a 1500-byte link in one IP packet, 1472 to an IPv4 receiver
    /// and 1452 if any path is IPv6 (1500 less the IP and UDP headers). Give the air link's
    /// own figure when it is smaller (a radio's MTU, or a tunnel's).
    #[arg(long, value_parser = mtu_arg)]
    mtu: Option<usize>,
    /// Bit-error rate `--fec auto` assumes until the receiver reports one, in [0, 0.5).
    #[arg(long, value_parser = ber_arg)]
    initial_ber: Option<f64>,
    /// Give up if nothing is heard from the receiver for this long after connecting.
    #[arg(long, default_value = "10s", value_parser = duration_arg)]
    connect_timeout: Duration,
    /// Give up, exit 4, when nothing at all is heard from the receiver for this long once
    /// connected (receiver killed, path gone). Outages up to this long are ridden out (PROBEs
    /// every 2 s at most), so the default covers the 30-minute outages the engine is built for;
    /// shorten it where outages are shorter. 10s to 24h.
    #[arg(long, default_value = "40min", value_parser = silence_arg)]
    silence_timeout: Duration,
    /// Name announced to the receiver (default: the file's name; "stdin" for -).
    #[arg(long)]
    name: Option<String>,
    /// Print the final statistics as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    observe: ObserveFlags,
    #[command(flatten)]
    erasure: crate::erasure_flags::ErasureArgs,
    #[command(flatten)]
    key: crate::key_flags::KeyFlags,
    #[command(flatten)]
    dlep: crate::dlep_flags::DlepArgs,
}

/// Lingering after the peer's AFIN (late retransmissions); short, for a prompt exit.
pub const LINGER: Duration = Duration::from_millis(500);

/// A finished send.
#[derive(Debug)]
pub struct SendOutcome {
    pub report: Report,
    pub bytes: u64,
    /// From the start to the receiver's verdict (the close handshake after it not counted).
    pub elapsed: Duration,
    /// SHA-256 of the bytes read from the input (sent in the trailer).
    pub sha256: [u8; 32],
    /// The receiver's answer to the trailer; `None` if none arrived (a lossy mode lost it, or
    /// a receiver older than header version 2).
    pub verdict: Option<Verdict>,
}

/// Why a send did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no answer from {0} within {1:?}: is `aerotp recv` running there, and is the address right?")]
    Unreachable(SocketAddr, Duration),
    #[error("connection failed: {0}")]
    Broken(String),
    #[error("nothing heard from the receiver for {0:?} (--silence-timeout): it stopped, or the path is down longer than the bound; the transfer is not complete")]
    Silent(Duration),
    /// The input does not hold the bytes the header announced; the connection was reset so
    /// that the receiver keeps what it got as `.partial`.
    #[error("{0}")]
    Input(String),
    #[error("the receiver could not store the file: {0}")]
    Store(String),
    #[error(transparent)]
    Local(#[from] anyhow::Error),
}

impl SendError {
    pub fn exit_code(&self) -> i32 {
        match self {
            SendError::Unreachable(..) => EXIT_UNREACHABLE,
            SendError::Broken(_) | SendError::Silent(_) => EXIT_BROKEN,
            SendError::Input(_) | SendError::Local(_) => EXIT_LOCAL,
            SendError::Store(_) => crate::transfer_end::EXIT_RECEIVER_STORE,
        }
    }
}

/// Reads the input in pieces of at most `buf.len()` bytes and checks it against the size the
/// header announced: the read stops at the announced size, and one more read must then find
/// EOF (the input grew) while an EOF before it means the input shrank. Pure over any reader, so
/// a test can feed it a short or long input without a connection.
pub struct CheckedInput<R> {
    reader: R,
    announced: Option<u64>,
    read: u64,
    sha: Sha256,
}

impl<R: AsyncRead + Unpin> CheckedInput<R> {
    pub fn new(reader: R, announced: Option<u64>) -> Self {
        CheckedInput {
            reader,
            announced,
            read: 0,
            sha: Sha256::new(),
        }
    }

    /// The next piece of input (`Ok(0)`: the input ended where it should).
    pub async fn next(&mut self, buf: &mut [u8]) -> Result<usize, SendError> {
        let want = match self.announced {
            Some(a) => usize::try_from(a - self.read).map_or(buf.len(), |r| r.min(buf.len())),
            None => buf.len(),
        };
        if want == 0 {
            let mut one = [0u8; 1];
            let n = self
                .reader
                .read(&mut one)
                .await
                .context("reading the input")?;
            if n > 0 {
                return Err(SendError::Input(format!(
                    "the input grew during the send: {} bytes were announced and more followed \
                     (nothing beyond them was sent); the transfer was reset, the receiver keeps \
                     a .partial file",
                    self.read
                )));
            }
            return Ok(0);
        }
        let n = self
            .reader
            .read(&mut buf[..want])
            .await
            .context("reading the input")?;
        if n == 0 {
            if let Some(a) = self.announced.filter(|&a| a != self.read) {
                return Err(SendError::Input(format!(
                    "the input shrank during the send: {a} bytes were announced but only {} \
                     could be read; the transfer was reset, the receiver keeps a .partial file",
                    self.read
                )));
            }
            return Ok(0);
        }
        self.sha.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }

    /// Bytes read and their SHA-256.
    pub fn trailer(self) -> Trailer {
        Trailer {
            bytes: self.read,
            sha256: self.sha.finalize().into(),
        }
    }
}

/// Opens a connection, sends `header`, everything `reader` yields (exactly the size the header
/// announces, if it announces one) and the trailer with its SHA-256, closes, reads the
/// receiver's verdict and waits for the end. Fails with `Unreachable` if the peer stays silent
/// for `connect_timeout`, with `Silent` if it goes silent for the connection's idle timeout
/// later.
#[allow(clippy::too_many_arguments)]
pub async fn send_stream<R: AsyncRead + Unpin>(
    ep: &Endpoint,
    target: SocketAddr,
    paths: &[PathArg],
    port: u16,
    cfg: ConnectionConfig,
    header: &[u8],
    reader: R,
    connect_timeout: Duration,
    pb: &ProgressBar,
) -> Result<SendOutcome, SendError> {
    let start = Instant::now();
    let silence = cfg.idle_timeout;
    let conn = connect(ep, target, paths, port, cfg)?;
    let hlen = header.len() as u64;
    let r = tokio::select! {
        r = transfer(&conn, header, reader, silence, start) => r,
        e = watch_setup(&conn, target, connect_timeout, silence) => Err(e),
        () = show_progress(&conn, pb, hlen) => unreachable!("the ticker never ends"),
    };
    match r {
        Ok(sent) => {
            if matches!(sent.report.outcome, CloseOutcome::IdleTimeout) {
                return Err(SendError::Silent(silence));
            }
            pb.set_position(sent.report.stats.peer_delivered.saturating_sub(hlen));
            Ok(SendOutcome {
                report: sent.report,
                bytes: sent.trailer.bytes,
                elapsed: sent.done_at,
                sha256: sent.trailer.sha256,
                verdict: sent.verdict,
            })
        }
        Err(e) => {
            let reason = match &e {
                SendError::Input(_) => "sender's input changed during the send",
                _ => "sender gave up",
            };
            abort_and_flush(&conn, reason).await;
            Err(e)
        }
    }
}

/// A connection to `target`'s `port`, with the other `paths` added.
fn connect(
    ep: &Endpoint,
    target: SocketAddr,
    paths: &[PathArg],
    port: u16,
    cfg: ConnectionConfig,
) -> Result<Connection, SendError> {
    let conn = ep
        .connect(target, port, cfg)
        .map_err(|e| SendError::Local(e.into()))?;
    for p in paths {
        let added = match p.local {
            Some(local) => conn.add_path_from(local, p.remote),
            None => conn.add_path(p.remote),
        };
        added.map_err(|e| SendError::Local(anyhow::anyhow!("--path {}: {e}", p.arg)))?;
    }
    Ok(conn)
}

/// A transfer sent to its end: the trailer sent, the receiver's verdict, the connection's
/// report and when the verdict came.
struct Sent {
    trailer: Trailer,
    verdict: Option<Verdict>,
    report: Report,
    done_at: Duration,
}

/// Sends `header`, the input and the trailer, closes, and waits for the receiver's verdict
/// and the end of the connection.
async fn transfer<R: AsyncRead + Unpin>(
    conn: &Connection,
    header: &[u8],
    reader: R,
    silence: Duration,
    start: Instant,
) -> Result<Sent, SendError> {
    let announced = match decode_header(header) {
        HeaderParse::Done(h, _) => h.size,
        _ => None,
    };
    let mut w = conn.clone();
    let fail = |e| broken(conn, e, silence);
    w.write_all(header).await.map_err(fail)?;
    let mut input = CheckedInput::new(reader, announced);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = input.next(&mut buf).await?;
        if n == 0 {
            break;
        }
        w.write_all(&buf[..n]).await.map_err(fail)?;
    }
    let trailer = input.trailer();
    w.write_all(&trailer.encode()).await.map_err(fail)?;
    conn.close();
    // Bounded even against a receiver that keeps the connection alive and never ends its
    // half: it gets the silence bound to answer, counted from the last byte it
    // acknowledged (the whole input may sit in the send buffer long before it is
    // delivered: 2 MB over 2.4 kb/s channels take an hour).
    let verdict = bounded_by_progress(conn, silence, read_verdict(conn))
        .await
        .ok_or_else(|| {
            SendError::Broken(format!(
                "the receiver did not end its half of the connection within {silence:?} \
                 (--silence-timeout) after the last byte it acknowledged"
            ))
        })?
        .map_err(fail)?;
    // The transfer ends with the receiver's verdict; what follows is our AFINACK for its
    // close (the linger after it is the endpoint's business, not the user's wait).
    let done_at = start.elapsed();
    let report = conn.settled(verdict.is_some()).await;
    Ok(Sent {
        trailer,
        verdict,
        report,
        done_at,
    })
}

/// The set-up's failure: no answer within `connect_timeout`, or a connection that ended
/// before it was up; pending for ever once it is up.
async fn watch_setup(
    conn: &Connection,
    target: SocketAddr,
    connect_timeout: Duration,
    silence: Duration,
) -> SendError {
    match tokio::time::timeout(connect_timeout, conn.connected()).await {
        Err(_) => SendError::Unreachable(target, connect_timeout),
        Ok(Err(o)) => ended(o, silence)
            .unwrap_or_else(|o| SendError::Broken(aerotp_net::outcome_error(&o).to_string())),
        Ok(Ok(())) => std::future::pending().await,
    }
}

/// Shows what the receiver has (past the `hlen` header bytes) every 200 ms; never ends.
async fn show_progress(conn: &Connection, pb: &ProgressBar, hlen: u64) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let s = conn.stats();
        pb.set_position(s.peer_delivered.saturating_sub(hlen));
        pb.set_message(progress_message(&s));
    }
}

/// `fut`'s output, or `None` once the peer has acknowledged nothing new for `silence`
/// (looked at every second, so the bound holds to a second).
async fn bounded_by_progress<T>(
    conn: &Connection,
    silence: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::pin!(fut);
    let mut last = conn.stats().peer_delivered;
    let mut since = Instant::now();
    loop {
        let left = silence.saturating_sub(since.elapsed());
        tokio::select! {
            v = &mut fut => return Some(v),
            () = tokio::time::sleep(left.min(Duration::from_secs(1))) => {
                let now = conn.stats().peer_delivered;
                if now != last {
                    (last, since) = (now, Instant::now());
                } else if since.elapsed() >= silence {
                    return None;
                }
            }
        }
    }
}

/// Reads what the receiver sends on its half (a version-2 receiver sends one [`Verdict`]) up
/// to its EOF, keeping at most `VERDICT_LEN + 1` bytes: anything longer is not a verdict.
async fn read_verdict(conn: &Connection) -> std::io::Result<Option<Verdict>> {
    let mut got = Vec::with_capacity(VERDICT_LEN + 1);
    while let Some(c) = conn.read_chunk().await? {
        let room = (VERDICT_LEN + 1).saturating_sub(got.len());
        got.extend_from_slice(&c.data[..c.data.len().min(room)]);
    }
    Ok(Verdict::decode(&got))
}

/// The exit status a finished send earns, and why when it is not 0: the mode's guarantee, then
/// the receiver's verdict on the digest.
pub fn send_status(out: &SendOutcome) -> (i32, Option<String>) {
    let r = &out.report;
    if !r.guarantee_met {
        return (
            EXIT_BROKEN,
            Some(format!(
                "the {} mode's guarantee was NOT met ({})",
                r.mode,
                outcome_name(r)
            )),
        );
    }
    let reliable = aerotp_proto::ErrorControl::for_mode(r.mode).delivers_everything();
    match out.verdict {
        Some(Verdict::Verified) => (EXIT_OK, None),
        Some(v @ (Verdict::Mismatch | Verdict::NoDigest)) => (
            EXIT_CORRUPT,
            Some(format!("end-to-end check failed: {}", v.describe())),
        ),
        Some(v @ Verdict::WriteFailed) => (EXIT_BROKEN, Some(v.describe().into())),
        Some(v @ Verdict::Incomplete) if reliable => (
            EXIT_BROKEN,
            Some(format!("end-to-end check failed: {}", v.describe())),
        ),
        None if reliable => (
            EXIT_BROKEN,
            Some(
                "the receiver did not confirm the digest (an aerotp recv that predates \
                 header version 2?)"
                    .into(),
            ),
        ),
        // A lossy mode promises no completeness: missing bytes, or a verdict lost on the way
        // back, leave its guarantee met (the receiver's own status says what arrived).
        Some(Verdict::Incomplete) | None => (EXIT_OK, None),
    }
}

fn broken(conn: &Connection, e: std::io::Error, silence: Duration) -> SendError {
    conn.outcome()
        .map_or(Err(()), |o| ended(o, silence).map_err(drop))
        .unwrap_or_else(|()| SendError::Broken(e.to_string()))
}

/// What an unclean end means for the user, if it says more than its I/O error: a receiver that
/// cannot store the data (its reason), another reset, the silence bound.
fn ended(o: CloseOutcome, silence: Duration) -> Result<SendError, CloseOutcome> {
    match o {
        CloseOutcome::Reset(r) => Ok(match crate::transfer_end::store_failure(&r) {
            Some(why) => SendError::Store(why.to_owned()),
            None => SendError::Broken(format!("reset by the receiver: {r}")),
        }),
        CloseOutcome::IdleTimeout => Ok(SendError::Silent(silence)),
        o => Err(o),
    }
}

pub fn connection_config(
    mode: Mode,
    rate: u64,
    fec: Option<FecSetting>,
    mack: Option<u16>,
    mtu: usize,
    initial_ber: Option<f64>,
) -> anyhow::Result<ConnectionConfig> {
    let mut cfg = ConnectionConfig::with_mode(mode);
    cfg.rate_bps = rate;
    if let Some(f) = fec {
        cfg.fec = f;
    }
    if let Some(m) = mack {
        cfg.mack_count = m;
    }
    cfg.mtu = mtu;
    if let Some(b) = initial_ber {
        cfg.fec_initial_ber = b;
    }
    cfg.linger = LINGER;
    cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(cfg)
}

/// `--mtu` when not given: the UDP payload of one 1500-byte IPv4 packet (20 bytes of IP
/// header, 8 of UDP). The old default, 1500, went as two fragments on such a link (the lab:
/// 21,048 packets for 16.3 MB), and a lost fragment lost the datagram.
const UNFRAGMENTED_MTU_V4: usize = 1500 - 20 - 8;
/// The same over IPv6 (a 40-byte header).
const UNFRAGMENTED_MTU_V6: usize = 1500 - 40 - 8;

/// The default `--mtu` for these paths: one MTU serves every path of the connection, so an
/// IPv6 path anywhere takes the IPv6 figure.
fn unfragmented_mtu(target: SocketAddr, paths: &[PathArg]) -> usize {
    if target.is_ipv6() || paths.iter().any(|p| p.remote.is_ipv6()) {
        UNFRAGMENTED_MTU_V6
    } else {
        UNFRAGMENTED_MTU_V4
    }
}

/// `--rate` when not given, in the modes that cannot discover the rate: the papers' 5 Mb/s
/// link. The others discover it (docs/rate.md).
const DEFAULT_SEND_RATE: u64 = 5_000_000;

pub async fn run(args: Args) -> i32 {
    match run_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            // `{e:#}`: the whole chain (`--pcap PATH: cannot create …: why`).
            eprintln!("aerotp send: {e:#}");
            e.exit_code()
        }
    }
}

async fn run_inner(args: Args) -> Result<i32, SendError> {
    args.key.require("send")?;
    let mut cfg = send_config(&args)?;
    let input = open_input(&args.file).await?;
    check_name(args.name.as_deref())?;
    let name = args.name.clone().unwrap_or(input.default_name);
    let target = resolve("--to", &args.to).await?;
    let paths = checked_paths(&args.paths, target).await?;
    if args.mtu.is_none() {
        cfg.mtu = unfragmented_mtu(target, &paths);
    }
    let from = source_address(args.from.as_deref(), target, &paths)?;
    check_path_count(&paths)?;
    // The capture file first: a path that cannot be written stops us before any traffic.
    let mut obs = args.observe.open_capture()?;
    let ep = Endpoint::bind(
        local_any(target),
        args.key.apply(EndpointConfig::default())?,
    )
    .map_err(|e| SendError::Local(e.into()))?;
    args.marks.apply(&ep);
    if let Some(ip) = from {
        ep.pin_source(target, ip)
            .map_err(|e| SendError::Local(anyhow::anyhow!("--from {ip}: {e}")))?;
    }
    obs.attach(&args.observe, &ep).await?;
    let dlep = args.dlep.start(&ep).map_err(SendError::Local)?;
    let header = encode_header(&name, input.size);
    let pb = progress_bar(input.size, &format!("send {name}"));
    let out = send_stream(
        &ep,
        target,
        &paths,
        args.port,
        cfg,
        &header,
        input.reader,
        args.connect_timeout,
        &pb,
    )
    .await;
    pb.finish_and_clear();
    if let Some(t) = dlep {
        t.abort();
    }
    // Closed whatever the outcome: the process exits without running destructors.
    let capture = obs.close(&ep, "aerotp send")?;
    let out = out?;
    let (code, why) = send_status(&out);
    let told = Told {
        name: &name,
        out: &out,
        header_len: header.len(),
        authenticated: ep.authenticated(),
        code,
    };
    if args.json {
        println!("{}", told.json(&args, capture.as_ref()));
    } else {
        eprintln!("{}", told.line(&args));
    }
    if let Some(why) = why {
        eprintln!("aerotp send: {why}");
    }
    Ok(code)
}

/// The connection's configuration from the flags: mode, rate (fixed or discovered), FEC,
/// MACK, MTU, erasure, silence bound and class.
fn send_config(args: &Args) -> Result<ConnectionConfig, SendError> {
    let (rate_control, rate) = resolve_rate(
        args.mode,
        "--rate",
        args.rate,
        args.max_rate,
        RateDefault::Discover {
            otherwise: DEFAULT_SEND_RATE,
        },
    )?;
    let mut cfg = connection_config(
        args.mode,
        rate,
        args.fec,
        args.mack,
        args.mtu.unwrap_or(UNFRAGMENTED_MTU_V4),
        args.initial_ber,
    )?;
    cfg.rate_control = rate_control;
    cfg.erasure = args
        .erasure
        .choice()
        .resolve(aerotp_proto::ErrorControl::for_mode(args.mode).erasure)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    cfg.idle_timeout = args.silence_timeout;
    cfg.class = args.class;
    Ok(cfg)
}

/// A finished send as the user is told it.
struct Told<'a> {
    name: &'a str,
    out: &'a SendOutcome,
    /// Bytes of the header before the file's in the stream.
    header_len: usize,
    authenticated: bool,
    code: i32,
}

impl Told<'_> {
    /// What the receiver confirmed it has: goodput counts it over the time the user waited.
    fn delivered(&self) -> u64 {
        let out = self.out;
        match out.verdict {
            Some(Verdict::Verified) => out.bytes,
            _ => (out
                .report
                .stats
                .peer_delivered
                .saturating_sub(self.header_len as u64))
            .min(out.bytes),
        }
    }

    /// The `--json` object.
    fn json(
        &self,
        args: &Args,
        capture: Option<&(aerotp_net::IoCounters, aerotp_capture::LiveSummary)>,
    ) -> serde_json::Value {
        let out = self.out;
        let mut v = stats_json("send", self.name, out.bytes, out.elapsed, &out.report);
        v["goodput_bps"] = crate::transfer_end::goodput_bps(self.delivered(), out.elapsed).into();
        v["sha256"] = hex(&out.sha256).into();
        v["authenticated"] = self.authenticated.into();
        v["verdict"] = out
            .verdict
            .map(|v| crate::transfer_end::verdict_json(v, self.authenticated))
            .into();
        v["exit_code"] = self.code.into();
        v["class"] = args.class.name().into();
        v["dscp"] = args.marks.dscp.dscp(args.class).to_string().into();
        if let Some((io, s)) = capture {
            v["capture"] = capture_json(io, s);
        }
        v
    }

    /// The line on stderr without `--json`.
    fn line(&self, args: &Args) -> String {
        let out = self.out;
        format!(
            "sent {} ({} bytes, SHA-256 {}) in {:.2} s, {} mode, {} class (DSCP {}), {}, receiver: {}: {} TPDUs, {} retransmitted; {}",
            self.name,
            out.bytes,
            hex(&out.sha256),
            out.elapsed.as_secs_f64(),
            out.report.mode,
            args.class.name(),
            args.marks.dscp.dscp(args.class),
            outcome_name(&out.report),
            out.verdict.map_or("no verdict", |v| crate::transfer_end::verdict_text(
                v,
                self.authenticated
            )),
            out.report.stats.sender.tpdus_sent,
            out.report.stats.sender.tpdus_retransmitted,
            crate::transfer_end::goodput_text(self.delivered(), out.elapsed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn drain(input: &[u8], announced: Option<u64>, piece: usize) -> Result<Trailer, String> {
        let mut c = CheckedInput::new(input, announced);
        let mut buf = vec![0u8; piece];
        loop {
            match c.next(&mut buf).await {
                Ok(0) => return Ok(c.trailer()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    #[tokio::test]
    async fn the_input_must_hold_exactly_the_announced_bytes() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let want: [u8; 32] = Sha256::digest(&data).into();
        for piece in [1, 7, 4096, 20_000] {
            let t = drain(&data, Some(10_000), piece).await.unwrap();
            assert_eq!((t.bytes, t.sha256), (10_000, want), "piece {piece}");
            let t = drain(&data, None, piece).await.unwrap();
            assert_eq!(
                (t.bytes, t.sha256),
                (10_000, want),
                "unknown size, piece {piece}"
            );
            let e = drain(&data, Some(10_001), piece).await.unwrap_err();
            assert!(
                e.contains("shrank") && e.contains("10001") && e.contains("10000"),
                "{e}"
            );
            let e = drain(&data, Some(9_999), piece).await.unwrap_err();
            assert!(e.contains("grew") && e.contains("9999"), "{e}");
        }
        assert_eq!(drain(&[], Some(0), 10).await.unwrap().bytes, 0);
        assert!(drain(&[1], Some(0), 10).await.unwrap_err().contains("grew"));
    }

    #[test]
    fn the_default_datagram_fits_a_1500_byte_link_in_one_packet() {
        let v4: SocketAddr = "192.0.2.1:47000".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:47000".parse().unwrap();
        let path = |remote: SocketAddr| PathArg {
            local: None,
            remote,
            arg: remote.to_string(),
        };
        // IPv4: 20 bytes of IP header and 8 of UDP around the datagram.
        assert_eq!(unfragmented_mtu(v4, &[]) + 20 + 8, 1500);
        assert_eq!(unfragmented_mtu(v6, &[]) + 40 + 8, 1500);
        // One MTU for the connection: an IPv6 path anywhere takes the smaller figure.
        assert_eq!(unfragmented_mtu(v4, &[path(v6)]), 1452);
        assert_eq!(unfragmented_mtu(v4, &[path(v4)]), 1472);
    }
}
