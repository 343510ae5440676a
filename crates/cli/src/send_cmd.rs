//! `aerotp send`: sends one file (or standard input) over an AeroTP connection.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use aerotp_net::{
    CloseOutcome, Connection, ConnectionConfig, Endpoint, EndpointConfig, FecSetting, Mode, Report,
};
use anyhow::Context;
use indicatif::ProgressBar;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::common::*;

/// Send a file to `aerotp recv` over AeroTP. Exit status: 0 the mode's guarantee was met,
/// 1 local error, 2 bad usage, 3 peer unreachable, 4 connection broke before the guarantee.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// File to send, or - for standard input.
    file: String,
    /// Receiver's UDP address (host:port), e.g. 127.0.0.1:9000 or [::1]:9000.
    #[arg(long)]
    to: String,
    /// Receiver's AeroTP port (not a UDP port).
    #[arg(long, default_value_t = aerotp_net::DEFAULT_PORT)]
    port: u16,
    /// Transfer mode: reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack,
    /// unreliable.
    #[arg(long, value_parser = mode_arg)]
    mode: Mode,
    /// Sending rate (set it to the link rate): 5mbit, 10Mbps, 1gbit.
    #[arg(long, default_value = "5mbit", value_parser = rate_arg)]
    rate: u64,
    /// FEC: off, auto, N (papers' 32-bit words per TPDU, 0-256) or pN (parity bytes per
    /// codeword). Default: auto in every mode but unreliable and datagram (off there).
    #[arg(long, value_parser = fec_arg)]
    fec: Option<FecSetting>,
    /// ACKs per MACK for our own receiving half (the receiver's MACKs follow `recv --mack`).
    #[arg(long, value_parser = mack_arg)]
    mack: Option<u16>,
    /// Largest datagram in bytes (TPDU with parity), 128-65000.
    #[arg(long, default_value_t = 1500, value_parser = mtu_arg)]
    mtu: usize,
    /// Bit-error rate `--fec auto` assumes until the receiver reports one, in [0, 0.5).
    #[arg(long, value_parser = ber_arg)]
    initial_ber: Option<f64>,
    /// Give up if nothing is heard from the receiver for this long after connecting.
    #[arg(long, default_value = "10s", value_parser = duration_arg)]
    connect_timeout: Duration,
    /// Name announced to the receiver (default: the file's name; "stdin" for -).
    #[arg(long)]
    name: Option<String>,
    /// Print the final statistics as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    observe: ObserveFlags,
    #[command(flatten)]
    key: crate::key_flags::KeyFlags,
}

/// Lingering after the peer's AFIN (late retransmissions); short, for a prompt exit.
pub const LINGER: Duration = Duration::from_millis(500);

/// A finished send.
#[derive(Debug)]
pub struct SendOutcome {
    pub report: Report,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// Why a send did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no answer from {0} within {1:?}: is `aerotp recv` running there, and is the address right?")]
    Unreachable(SocketAddr, Duration),
    #[error("connection failed: {0}")]
    Broken(String),
    #[error(transparent)]
    Local(#[from] anyhow::Error),
}

impl SendError {
    pub fn exit_code(&self) -> i32 {
        match self {
            SendError::Unreachable(..) => EXIT_UNREACHABLE,
            SendError::Broken(_) => EXIT_BROKEN,
            SendError::Local(_) => EXIT_LOCAL,
        }
    }
}

/// Opens a connection, sends `header` then everything `reader` yields, closes and waits for
/// the end. Fails with `Unreachable` if the peer stays silent for `connect_timeout`.
#[allow(clippy::too_many_arguments)]
pub async fn send_stream<R: AsyncRead + Unpin>(
    ep: &Endpoint,
    target: SocketAddr,
    port: u16,
    cfg: ConnectionConfig,
    header: &[u8],
    mut reader: R,
    connect_timeout: Duration,
    pb: &ProgressBar,
) -> Result<SendOutcome, SendError> {
    let start = Instant::now();
    let conn = ep
        .connect(target, port, cfg)
        .map_err(|e| SendError::Local(e.into()))?;
    let hlen = header.len() as u64;
    let work = async {
        let mut w = conn.clone();
        w.write_all(header).await.map_err(|e| broken(&conn, e))?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = reader
                .read(&mut buf)
                .await
                .context("reading the input")
                .map_err(SendError::Local)?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).await.map_err(|e| broken(&conn, e))?;
            total += n as u64;
        }
        let report = conn.finish().await;
        Ok::<_, SendError>((total, report))
    };
    let watch = async {
        match tokio::time::timeout(connect_timeout, conn.connected()).await {
            Err(_) => SendError::Unreachable(target, connect_timeout),
            Ok(Err(o)) => SendError::Broken(aerotp_net::outcome_error(&o).to_string()),
            Ok(Ok(())) => std::future::pending().await,
        }
    };
    let tick = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let s = conn.stats();
            pb.set_position(s.peer_delivered.saturating_sub(hlen));
            pb.set_message(progress_message(&s));
        }
    };
    let r = tokio::select! {
        r = work => r,
        e = watch => Err(e),
        () = tick => unreachable!("the ticker never ends"),
    };
    match r {
        Ok((bytes, report)) => {
            pb.set_position(report.stats.peer_delivered.saturating_sub(hlen));
            Ok(SendOutcome {
                report,
                bytes,
                elapsed: start.elapsed(),
            })
        }
        Err(e) => {
            conn.abort("sender gave up");
            Err(e)
        }
    }
}

fn broken(conn: &Connection, e: std::io::Error) -> SendError {
    match conn.outcome() {
        Some(CloseOutcome::Reset(r)) => SendError::Broken(format!("reset by the receiver: {r}")),
        _ => SendError::Broken(e.to_string()),
    }
}

/// Resolves `host:port` to one address.
pub async fn resolve(to: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = to.parse() {
        return Ok(a);
    }
    let mut it = tokio::net::lookup_host(to).await.with_context(|| {
        format!("--to {to}: not an address (host:port, e.g. 127.0.0.1:9000 or [::1]:9000)")
    })?;
    it.next()
        .with_context(|| format!("--to {to}: the name has no address"))
}

/// An unspecified local address of the family of `remote`, any port.
pub fn local_any(remote: SocketAddr) -> SocketAddr {
    if remote.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
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

pub async fn run(args: Args) -> i32 {
    match run_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("aerotp send: {e}");
            e.exit_code()
        }
    }
}

async fn run_inner(args: Args) -> Result<i32, SendError> {
    let cfg = connection_config(
        args.mode,
        args.rate,
        args.fec,
        args.mack,
        args.mtu,
        args.initial_ber,
    )?;
    let (reader, size, default_name): (Box<dyn AsyncRead + Unpin + Send>, Option<u64>, String) =
        if args.file == "-" {
            (Box::new(tokio::io::stdin()), None, "stdin".into())
        } else {
            let path = Path::new(&args.file);
            let f = tokio::fs::File::open(path)
                .await
                .with_context(|| format!("cannot open {}", args.file))?;
            let meta = f
                .metadata()
                .await
                .with_context(|| format!("cannot stat {}", args.file))?;
            if !meta.is_file() {
                return Err(anyhow::anyhow!("{} is not a regular file", args.file).into());
            }
            let name = path
                .file_name()
                .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
            (Box::new(f), Some(meta.len()), name)
        };
    let name = args.name.clone().unwrap_or(default_name);
    let target = resolve(&args.to).await?;
    // The capture file first: a path that cannot be written stops us before any traffic.
    let mut obs = args.observe.open_capture()?;
    let ep = Endpoint::bind(
        local_any(target),
        args.key.apply(EndpointConfig::default())?,
    )
    .map_err(|e| SendError::Local(e.into()))?;
    obs.attach(&args.observe, &ep).await?;
    let header = encode_header(&name, size);
    let pb = progress_bar(size, &format!("send {name}"));
    let out = send_stream(
        &ep,
        target,
        args.port,
        cfg,
        &header,
        reader,
        args.connect_timeout,
        &pb,
    )
    .await;
    pb.finish_and_clear();
    // Closed whatever the outcome: the process exits without running destructors.
    let capture = obs.close(&ep, "aerotp send")?;
    let out = out?;
    let code = if out.report.guarantee_met {
        EXIT_OK
    } else {
        EXIT_BROKEN
    };
    if args.json {
        let mut v = stats_json("send", &name, out.bytes, out.elapsed, &out.report);
        v["exit_code"] = code.into();
        if let Some((io, s)) = &capture {
            v["capture"] = capture_json(io, s);
        }
        println!("{v}");
    } else {
        eprintln!(
            "sent {} ({} bytes) in {:.2} s, {} mode, {}: {} TPDUs, {} retransmitted; goodput {}",
            name,
            out.bytes,
            out.elapsed.as_secs_f64(),
            out.report.mode,
            outcome_name(&out.report),
            out.report.stats.sender.tpdus_sent,
            out.report.stats.sender.tpdus_retransmitted,
            human_rate(out.bytes as f64 * 8.0 / out.elapsed.as_secs_f64().max(1e-9)),
        );
        if !out.report.guarantee_met {
            eprintln!(
                "aerotp send: the {} mode's guarantee was NOT met ({})",
                out.report.mode,
                outcome_name(&out.report)
            );
        }
    }
    Ok(code)
}
