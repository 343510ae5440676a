//! Shared pieces of `aerotp send`, `recv`, `demo` and `bench`: flag parsers, the file header,
//! exit codes, statistics as JSON, progress bars.

use std::io::IsTerminal;
use std::time::Duration;

use aerotp_net::{ConnectionStats, FecSetting, Mode, Report};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};

/// Exit status: the mode's guarantee was met.
pub const EXIT_OK: i32 = 0;
/// Exit status: a local error (file, socket, address in use, …).
pub const EXIT_LOCAL: i32 = 1;
/// Exit status: bad command line (clap's own code).
#[allow(dead_code)]
pub const EXIT_USAGE: i32 = 2;
/// Exit status: nothing heard from the peer within `--connect-timeout`.
pub const EXIT_UNREACHABLE: i32 = 3;
/// Exit status: the connection ended before the mode's guarantee was met (reset, idle or
/// close timeout, unconfirmed delivery in a fully reliable mode).
pub const EXIT_BROKEN: i32 = 4;
/// Exit status (recv): a lossy mode closed cleanly but bytes are missing; kept as `.partial`.
pub const EXIT_INCOMPLETE: i32 = 5;
/// Exit status: the end-to-end check failed: the SHA-256 or byte count the sender read differs
/// from what the receiver wrote, or the stream carries no digest (kept as `.partial`).
pub const EXIT_CORRUPT: i32 = 6;

pub fn rate_arg(s: &str) -> Result<u64, String> {
    let r = aerotp_link::parse_rate(s).map_err(|e| e.to_string())?;
    let min = aerotp_proto::MIN_RATE_BPS;
    if r < min {
        return Err(format!(
            "{r} b/s is too low: give at least {min} b/s (e.g. 5mbit)"
        ));
    }
    Ok(r)
}

/// Longest duration any timeout flag takes: beyond it a timer is a typo (and deadline
/// arithmetic on `Instant`s must never overflow).
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

pub fn duration_arg(s: &str) -> Result<Duration, String> {
    bounded_duration(
        s,
        Duration::from_nanos(1),
        MAX_DURATION,
        "a duration above 0 and at most 720h (30 days)",
    )
}

/// `send --silence-timeout`, `recv --idle-timeout`: at least 10 s, at most a day. The engine
/// is silent on purpose for up to its close linger (2 × 2 s + RTO: 4.05 s reliable, 5.5 s
/// near-reliable at 10 ms in crates/cli/tests/silence_bound.rs) and up to its 2 s probe spacing
/// after an outage; a shorter bound would end finished transfers in their linger.
pub fn silence_arg(s: &str) -> Result<Duration, String> {
    bounded_duration(
        s,
        Duration::from_secs(10),
        Duration::from_secs(24 * 3600),
        "10s to 24h",
    )
}

fn bounded_duration(
    s: &str,
    lo: Duration,
    hi: Duration,
    accepted: &str,
) -> Result<Duration, String> {
    let d = aerotp_link::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!(
            "must be greater than zero (e.g. 10s); give {accepted}"
        ));
    }
    if d < lo || d > hi {
        return Err(format!("'{s}' is out of range; give {accepted}"));
    }
    Ok(d)
}

/// An AeroTP port (`--port`): 1 to 65535; 0 names no port a peer could address.
pub fn port_arg(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("'{s}' is not an AeroTP port; give 1 to 65535")),
        Ok(p) => Ok(p),
    }
}

/// A file-transfer mode (not datagram: it carries messages); a refusal names only these.
pub fn mode_arg(s: &str) -> Result<Mode, String> {
    const FILE_MODES: &str =
        "reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack, unreliable";
    match s.parse::<Mode>() {
        Ok(Mode::Datagram) => Err(format!(
            "datagram mode carries messages, not files; choose one of: {FILE_MODES}"
        )),
        Ok(m) => Ok(m),
        Err(_) => Err(format!(
            "unknown transfer mode '{s}'; expected one of: {FILE_MODES}"
        )),
    }
}

pub fn fec_arg(s: &str) -> Result<FecSetting, String> {
    FecSetting::parse(s).map_err(|e| e.to_string())
}

pub fn ber_arg(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number; give a bit error rate such as 1e-5"))?;
    if !(p.is_finite() && (0.0..1.0).contains(&p)) {
        return Err(format!(
            "{p} is outside [0, 1); give a bit error rate such as 1e-5"
        ));
    }
    if p >= 0.5 {
        return Err(format!(
            "{p}: a channel with BER >= 0.5 carries no information; give a value below 0.5"
        ));
    }
    Ok(p)
}

pub fn mack_arg(s: &str) -> Result<u16, String> {
    let n: u16 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number; give 1 to 365 ACKs per MACK"))?;
    if !(1..=365).contains(&n) {
        return Err(format!("{n} is out of range; give 1 to 365 ACKs per MACK"));
    }
    Ok(n)
}

pub fn mtu_arg(s: &str) -> Result<usize, String> {
    let (min, max) = (aerotp_proto::MIN_MTU, aerotp_proto::MAX_MTU);
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number; give {min} to {max} bytes"))?;
    if !(min..=max).contains(&n) {
        return Err(format!(
            "MTU {n} is out of range; give {min} to {max} bytes"
        ));
    }
    Ok(n)
}

/// Parses a size by the workspace's one rule ([`aerotp_link::parse_size`]): `1GB`, `100mb`,
/// `64KiB`, `4096` (bytes; decimal units, `KiB`… binary, whole bytes of at least 1).
pub fn size_arg(s: &str) -> Result<u64, String> {
    aerotp_link::parse_size(s).map_err(|e| e.to_string())
}

/// The file header a sender puts before the file's bytes (docs/runtime.md §File header):
/// magic `ATPF`, version (2 today; 1 from senders without the end-to-end digest), name length
/// (u16 BE), UTF-8 name, size (u64 BE, `u64::MAX` if unknown).
pub const HEADER_MAGIC: &[u8; 4] = b"ATPF";
/// Version 2: the file's bytes are followed by a [`Trailer`] and the receiver answers with a
/// [`Verdict`]. Version 1 streams carry neither.
pub const HEADER_VERSION: u8 = 2;
pub const UNKNOWN_SIZE: u64 = u64::MAX;
pub const MAX_NAME: usize = 255;

pub fn encode_header(name: &str, size: Option<u64>) -> Vec<u8> {
    let mut name = name.as_bytes();
    if name.len() > MAX_NAME {
        name = &name[..MAX_NAME];
    }
    let mut h = Vec::with_capacity(15 + name.len());
    h.extend_from_slice(HEADER_MAGIC);
    h.push(HEADER_VERSION);
    h.extend_from_slice(&(name.len() as u16).to_be_bytes());
    h.extend_from_slice(name);
    h.extend_from_slice(&size.unwrap_or(UNKNOWN_SIZE).to_be_bytes());
    h
}

/// A decoded file header.
#[derive(Debug, Clone, PartialEq)]
pub struct FileHeader {
    pub name: String,
    pub size: Option<u64>,
    pub version: u8,
}

/// What the header parser says about the first bytes of a transfer.
#[derive(Debug, PartialEq)]
pub enum HeaderParse {
    /// Need more bytes.
    More,
    /// Not an AeroTP file header.
    Invalid,
    /// The header and its length in bytes.
    Done(FileHeader, usize),
}

pub fn decode_header(b: &[u8]) -> HeaderParse {
    if b.len() < 7 {
        return if HEADER_MAGIC.starts_with(&b[..b.len().min(4)]) {
            HeaderParse::More
        } else {
            HeaderParse::Invalid
        };
    }
    let version = b[4];
    if &b[..4] != HEADER_MAGIC || !(1..=HEADER_VERSION).contains(&version) {
        return HeaderParse::Invalid;
    }
    let n = usize::from(u16::from_be_bytes([b[5], b[6]]));
    if n > MAX_NAME {
        return HeaderParse::Invalid;
    }
    if b.len() < 7 + n + 8 {
        return HeaderParse::More;
    }
    let Ok(name) = std::str::from_utf8(&b[7..7 + n]) else {
        return HeaderParse::Invalid;
    };
    let mut sz = [0u8; 8];
    sz.copy_from_slice(&b[7 + n..15 + n]);
    let size = u64::from_be_bytes(sz);
    HeaderParse::Done(
        FileHeader {
            name: name.to_owned(),
            size: (size != UNKNOWN_SIZE).then_some(size),
            version,
        },
        15 + n,
    )
}

/// The end of a version-2 stream, right after the file's bytes: magic `ATPE`, the number of
/// bytes the sender read (u64 BE) and the SHA-256 of those bytes (32). The receiver holds back
/// the last `TRAILER_LEN` bytes of the stream until EOF, so the trailer needs no length field
/// and works for inputs of unknown size (stdin).
pub const TRAILER_MAGIC: &[u8; 4] = b"ATPE";
pub const TRAILER_LEN: usize = 4 + 8 + 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    pub bytes: u64,
    pub sha256: [u8; 32],
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut t = [0u8; TRAILER_LEN];
        t[..4].copy_from_slice(TRAILER_MAGIC);
        t[4..12].copy_from_slice(&self.bytes.to_be_bytes());
        t[12..].copy_from_slice(&self.sha256);
        t
    }

    /// `None` unless `b` is exactly one trailer (any other length or magic).
    pub fn decode(b: &[u8]) -> Option<Trailer> {
        if b.len() != TRAILER_LEN || &b[..4] != TRAILER_MAGIC {
            return None;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[4..12]);
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&b[12..]);
        Some(Trailer {
            bytes: u64::from_be_bytes(n),
            sha256,
        })
    }
}

/// What a receiver of a version-2 stream answers on its own half of the connection before it
/// closes: magic `ATPV` and one code byte. The sender's exit status follows it, so a transfer
/// the receiver refused is never reported as a success by the sender either.
pub const VERDICT_MAGIC: &[u8; 4] = b"ATPV";
pub const VERDICT_LEN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte arrived and the digest matches: the file got its name.
    Verified = 0,
    /// All the announced bytes arrived but the digest or the byte count differs.
    Mismatch = 1,
    /// Bytes are missing (a lossy mode, or the stream ended early).
    Incomplete = 2,
    /// The stream ended without a readable trailer.
    NoDigest = 3,
    /// The receiver could not store the data (disk full, I/O error).
    WriteFailed = 4,
}

impl Verdict {
    pub fn encode(self) -> [u8; VERDICT_LEN] {
        let mut v = [0u8; VERDICT_LEN];
        v[..4].copy_from_slice(VERDICT_MAGIC);
        v[4] = self as u8;
        v
    }

    /// `None` unless `b` is exactly one verdict with a known code.
    pub fn decode(b: &[u8]) -> Option<Verdict> {
        if b.len() != VERDICT_LEN || &b[..4] != VERDICT_MAGIC {
            return None;
        }
        Some(match b[4] {
            0 => Verdict::Verified,
            1 => Verdict::Mismatch,
            2 => Verdict::Incomplete,
            3 => Verdict::NoDigest,
            4 => Verdict::WriteFailed,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Verdict::Verified => "byte count and SHA-256 match",
            Verdict::Mismatch => "the receiver's SHA-256 or byte count differs from the sender's",
            Verdict::Incomplete => "bytes are missing at the receiver",
            Verdict::NoDigest => "the stream ended without the sender's digest",
            Verdict::WriteFailed => "the receiver could not store the data",
        }
    }
}

/// Keeps the last [`TRAILER_LEN`] bytes of a stream back from the output until EOF, when they
/// are the trailer (bounded: never more than `TRAILER_LEN` bytes held).
#[derive(Debug, Default)]
pub struct TailHold {
    held: Vec<u8>,
}

impl TailHold {
    /// Takes `chunk`; returns the bytes that are now certainly file data (all but the last
    /// `TRAILER_LEN` seen so far).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let keep = self.held.len().min(TRAILER_LEN);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_vec();
        self.held.drain(..cut);
        out
    }

    /// At EOF: the trailer if the held bytes are one, else the held bytes (file data; the
    /// trailer is missing).
    pub fn finish(self) -> Result<Trailer, Vec<u8>> {
        Trailer::decode(&self.held).ok_or(self.held)
    }
}

/// Resets `conn` with `reason` and waits (at most 250 ms) until its RST has left: the driver
/// task sends it, and the process often exits right after us, which would swallow it and leave
/// the peer waiting for its silence bound instead of learning why at once.
pub async fn abort_and_flush(conn: &aerotp_net::Connection, reason: &str) {
    if conn.outcome().is_some() {
        // Already ended (silence bound, reset by the peer): there is no RST to send.
        return;
    }
    let before = conn.stats().bytes_sent_wire;
    conn.abort(reason);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        // A change (or 0: the connection is already released) means the RST went out.
        if conn.stats().bytes_sent_wire != before {
            break;
        }
    }
}

/// A safe local file name from what the sender announced: its last path component, without
/// control characters; `None` if nothing usable is left.
pub fn sanitize_name(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim().to_owned();
    if clean.is_empty()
        || clean == "."
        || clean == ".."
        || clean.starts_with('.') && clean.ends_with(".aerotp-tmp")
    {
        None
    } else {
        Some(clean)
    }
}

/// A progress bar on stderr if it is a terminal, hidden otherwise.
pub fn progress_bar(total: Option<u64>, prefix: &str) -> ProgressBar {
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::no_length(),
    };
    if !std::io::stderr().is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix(prefix.to_owned());
    pb
}

pub fn progress_message(s: &ConnectionStats) -> String {
    let mut m = format!(
        "retx {} corrected {} lost {} rtt {:.1}ms",
        s.sender.tpdus_retransmitted,
        s.receiver.tpdus_corrected,
        s.receiver.tpdus_lost,
        s.srtt.as_secs_f64() * 1e3
    );
    m.push_str(&crate::paths_report::progress(s));
    m
}

pub fn outcome_name(r: &Report) -> String {
    match &r.outcome {
        aerotp_net::CloseOutcome::Finished { confirmed } => {
            format!("finished (confirmed: {confirmed})")
        }
        aerotp_net::CloseOutcome::CloseTimeout => "close timeout".into(),
        aerotp_net::CloseOutcome::IdleTimeout => "idle timeout".into(),
        aerotp_net::CloseOutcome::SetupTimeout => {
            "set-up timeout (peer never proved its address)".into()
        }
        aerotp_net::CloseOutcome::Reset(r) => format!("reset by peer: {r}"),
        aerotp_net::CloseOutcome::Aborted => "aborted".into(),
    }
}

/// Final statistics as one JSON object (docs/runtime.md lists the fields).
pub fn stats_json(role: &str, name: &str, bytes: u64, elapsed: Duration, report: &Report) -> Value {
    let s = &report.stats;
    let secs = elapsed.as_secs_f64().max(1e-9);
    json!({
        "role": role,
        "mode": report.mode.name(),
        "file": name,
        "bytes": bytes,
        "tpdus_sent": s.sender.tpdus_sent,
        "tpdus_retransmitted": s.sender.tpdus_retransmitted,
        "tpdus_received": s.receiver.tpdus_received,
        "tpdus_corrected": s.receiver.tpdus_corrected,
        "tpdus_corrupted": s.receiver.tpdus_corrupted,
        "tpdus_lost": s.receiver.tpdus_lost,
        "wire_lost": s.receiver.wire_lost,
        "tpdus_rebuilt": s.receiver.tpdus_rebuilt,
        "repairs_sent": s.erasure_tx.repairs_sent,
        "repairs_received": s.erasure_rx.repairs_received,
        "nacks_received": s.sender.nacks_received,
        "timeouts": s.sender.timeouts,
        "outages": s.outages,
        "measured_ber": s.measured_ber,
        "peer_reported_ber": s.peer_reported_ber,
        "fec_parity": s.fec_parity,
        "rate_bps": s.rate_bps,
        "rate_reason": s.rate_reason.name(),
        "rtt_ms": s.rtt.as_secs_f64() * 1e3,
        "srtt_ms": s.srtt.as_secs_f64() * 1e3,
        "wire_bytes_sent": s.bytes_sent_wire,
        "wire_bytes_received": s.bytes_received_wire,
        "goodput_bps": bytes as f64 * 8.0 / secs,
        "elapsed_s": secs,
        "paths": crate::paths_report::json(s),
        "outcome": outcome_name(report),
        "delivered_confirmed": report.delivered_confirmed,
        "guarantee_met": report.guarantee_met,
    })
}

/// Lower-case hexadecimal, as `sha256sum` prints digests.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn human_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mb/s", bps / 1e6)
    } else {
        format!("{:.1} kb/s", bps / 1e3)
    }
}

/// `--pcap FILE`: creates the capture before any traffic (a file that cannot be created is
/// an error naming it) with a writer thread behind a queue of at most `queue_bytes`.
pub fn open_capture(
    path: &std::path::Path,
    interfaces: &[&str],
    queue_bytes: u64,
) -> anyhow::Result<std::sync::Arc<aerotp_capture::LiveCapture>> {
    use anyhow::Context;
    let q = usize::try_from(queue_bytes).unwrap_or(usize::MAX);
    let cap = aerotp_capture::LiveCapture::create(path, interfaces, q)
        .with_context(|| format!("--pcap {}", path.display()))?;
    Ok(std::sync::Arc::new(cap))
}

/// Closes a capture and says on stderr what it holds, and how many records were dropped
/// (queue full: the datagrams themselves went on). Returns the summary for `--json`.
pub fn close_capture(
    cap: &aerotp_capture::LiveCapture,
    who: &str,
) -> anyhow::Result<aerotp_capture::LiveSummary> {
    let s = cap.finish()?;
    eprintln!(
        "{who}: capture {}: {} packets written, {} records dropped{}",
        cap.path().display(),
        s.written,
        s.dropped,
        if s.dropped > 0 {
            " (the capture queue was full; raise --pcap-queue)"
        } else {
            ""
        }
    );
    Ok(s)
}

/// `--metrics ADDR`: serves the endpoint's Prometheus text, plus the capture's counters when
/// there is one. Binding fails before any traffic.
pub async fn start_metrics(
    addr: std::net::SocketAddr,
    ep: &aerotp_net::Endpoint,
    cap: Option<std::sync::Arc<aerotp_capture::LiveCapture>>,
) -> anyhow::Result<aerotp_net::metrics::MetricsServer> {
    let extra: Option<aerotp_net::metrics::Extra> = cap.map(|c| {
        let f: aerotp_net::metrics::Extra = std::sync::Arc::new(move |out: &mut String| {
            aerotp_net::metrics::counter(
                out,
                "capture_records",
                "Datagrams queued for the --pcap capture file.",
                c.queued(),
            );
            aerotp_net::metrics::counter(
                out,
                "capture_records_dropped",
                "Capture records dropped because the capture queue was full (the datagrams went on).",
                c.dropped(),
            );
        });
        f
    });
    let server = aerotp_net::metrics::serve(addr, ep.metrics_source(), extra).await?;
    eprintln!(
        "metrics: http://{}/metrics (Prometheus text)",
        server.local_addr()
    );
    Ok(server)
}

/// The `--pcap`, `--pcap-queue`, `--qlog` and `--metrics` flags of `send` and `recv`.
#[derive(Debug, Clone, clap::Args)]
pub struct ObserveFlags {
    /// Write every AeroTP datagram this endpoint sends and receives to FILE (pcapng;
    /// interfaces "sent" and "received"; open it with tools/wireshark/aerotp.lua).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<std::path::PathBuf>,
    /// Most bytes of capture records waiting for the capture's writer thread; beyond it
    /// records are dropped and counted, never the data (e.g. 8MiB, 64MB).
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = size_arg)]
    pub pcap_queue: u64,
    /// Write an event trace to DIR/<send|recv>-<pid>.sqlog (qlog-style JSON-SEQ: every TPDU
    /// sent and received with its fields, the engine's RTT, losses, FEC and state as they
    /// change; docs/qlog.md). `aerotp trace FILE` draws it.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics on this TCP address (GET /metrics), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// What `--pcap` and `--metrics` keep running during a command.
#[derive(Debug, Default)]
pub struct Observers {
    pub capture: Option<std::sync::Arc<aerotp_capture::LiveCapture>>,
    pub qlog: Option<std::sync::Arc<crate::qlog_tap::LiveQlog>>,
    pub metrics: Option<aerotp_net::metrics::MetricsServer>,
}

impl ObserveFlags {
    /// Opens the capture file (before the endpoint exists, so a bad path costs no traffic).
    pub fn open_capture(&self) -> anyhow::Result<Observers> {
        let capture = match &self.pcap {
            Some(p) => Some(open_capture(
                p,
                &aerotp_net::ENDPOINT_INTERFACES,
                self.pcap_queue,
            )?),
            None => None,
        };
        let qlog = match &self.qlog {
            Some(dir) => Some(std::sync::Arc::new(crate::qlog_tap::LiveQlog::for_command(
                dir,
            )?)),
            None => None,
        };
        Ok(Observers {
            capture,
            qlog,
            metrics: None,
        })
    }
}

impl Observers {
    /// Attaches the capture to `ep` and starts the metrics server.
    pub async fn attach(
        &mut self,
        flags: &ObserveFlags,
        ep: &aerotp_net::Endpoint,
    ) -> anyhow::Result<()> {
        crate::qlog_tap::attach_taps(
            ep,
            self.capture
                .clone()
                .map(|c| c as std::sync::Arc<dyn aerotp_net::Tap>),
            self.qlog.as_ref(),
        );
        if let Some(addr) = flags.metrics {
            self.metrics = Some(start_metrics(addr, ep, self.capture.clone()).await?);
        }
        Ok(())
    }

    /// Detaches and closes the capture: (socket counters when the capture stopped, summary).
    pub fn close(
        &mut self,
        ep: &aerotp_net::Endpoint,
        who: &str,
    ) -> anyhow::Result<Option<(aerotp_net::IoCounters, aerotp_capture::LiveSummary)>> {
        let io = ep.remove_tap();
        if let Some(q) = self.qlog.take() {
            ep.remove_engine_tap();
            let (st, dropped) = q.finish()?;
            eprintln!(
                "{who}: qlog {}: {} events{}",
                q.path.display(),
                st.events,
                if dropped + st.dropped > 0 {
                    format!(
                        ", {} records not written (queue or byte bound)",
                        dropped + st.dropped
                    )
                } else {
                    String::new()
                }
            );
        }
        let Some(c) = self.capture.take() else {
            return Ok(None);
        };
        let s = close_capture(&c, who)?;
        Ok(Some((io, s)))
    }
}

/// Capture figures for `--json`: packets written, records dropped, and the socket's
/// datagram counters at the moment the capture stopped (written + dropped = sent + received).
pub fn capture_json(io: &aerotp_net::IoCounters, s: &aerotp_capture::LiveSummary) -> Value {
    json!({
        "packets": s.written,
        "dropped": s.dropped,
        "udp_datagrams_sent": io.datagrams_sent,
        "udp_datagrams_received": io.datagrams_received,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_partial() {
        let h = encode_header("flight-42.pcm", Some(1_000_000));
        for cut in 0..h.len() {
            assert_eq!(decode_header(&h[..cut]), HeaderParse::More, "{cut}");
        }
        assert_eq!(
            decode_header(&h),
            HeaderParse::Done(
                FileHeader {
                    name: "flight-42.pcm".into(),
                    size: Some(1_000_000),
                    version: 2
                },
                h.len()
            )
        );
        assert!(matches!(
            decode_header(&encode_header("x", None)),
            HeaderParse::Done(
                FileHeader {
                    size: None,
                    version: 2,
                    ..
                },
                16
            )
        ));
        assert_eq!(decode_header(b"GARBAGE!"), HeaderParse::Invalid);
        // A version-1 header (no digest) still parses, so the receiver can say why it cannot
        // verify; an unknown version does not.
        let mut v1 = encode_header("x", Some(3));
        v1[4] = 1;
        assert!(matches!(
            decode_header(&v1),
            HeaderParse::Done(FileHeader { version: 1, .. }, 16)
        ));
        v1[4] = 3;
        assert_eq!(decode_header(&v1), HeaderParse::Invalid);
    }

    #[test]
    fn trailer_and_verdict_round_trip_and_refuse_garbage() {
        let t = Trailer {
            bytes: 123_456_789,
            sha256: [7; 32],
        };
        let e = t.encode();
        assert_eq!(Trailer::decode(&e), Some(t));
        assert_eq!(Trailer::decode(&e[..TRAILER_LEN - 1]), None);
        let mut bad = e;
        bad[0] = b'X';
        assert_eq!(Trailer::decode(&bad), None);
        for v in [
            Verdict::Verified,
            Verdict::Mismatch,
            Verdict::Incomplete,
            Verdict::NoDigest,
            Verdict::WriteFailed,
        ] {
            assert_eq!(Verdict::decode(&v.encode()), Some(v));
        }
        assert_eq!(Verdict::decode(b"ATPV\x09"), None);
        assert_eq!(Verdict::decode(b"ATPV"), None);
        assert_eq!(Verdict::decode(b"ATPV\x00\x00"), None);
    }

    #[test]
    fn tail_hold_keeps_exactly_the_trailer_back_whatever_the_chunking() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let t = Trailer {
            bytes: 1000,
            sha256: [9; 32],
        };
        let mut stream = data.clone();
        stream.extend_from_slice(&t.encode());
        for chunk in [1, 3, 43, 44, 45, 100, 2000] {
            let mut h = TailHold::default();
            let mut out = Vec::new();
            for c in stream.chunks(chunk) {
                out.extend(h.push(c));
                assert!(h.held.len() <= TRAILER_LEN);
            }
            assert_eq!(out, data, "chunk {chunk}");
            assert_eq!(h.finish(), Ok(t), "chunk {chunk}");
        }
        // Without a trailer the held bytes come back as data.
        let mut h = TailHold::default();
        let mut out = h.push(&data[..100]);
        match h.finish() {
            Err(rest) => out.extend(rest),
            Ok(_) => panic!("no trailer was sent"),
        }
        assert_eq!(out, &data[..100]);
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_name("../../etc/passwd").as_deref(), Some("passwd"));
        assert_eq!(sanitize_name("a\nb").as_deref(), Some("ab"));
        assert_eq!(sanitize_name(".."), None);
        assert_eq!(sanitize_name("dir/"), None);
    }

    #[test]
    fn flags_validate() {
        assert_eq!(size_arg("1GB"), Ok(1_000_000_000));
        assert_eq!(size_arg("64KiB"), Ok(65536));
        assert_eq!(size_arg("1mb"), Ok(1_000_000));
        let e = size_arg("1XB").unwrap_err();
        assert!(e.contains("\"1XB\"") && e.contains("KiB"), "{e}");
        assert!(size_arg("0").is_err());
        assert!(ber_arg("1").is_err() && ber_arg("-1e-5").is_err() && ber_arg("1e-4").is_ok());
        assert!(mode_arg("datagram").is_err() && mode_arg("nope").is_err());
        assert!(mack_arg("0").is_err() && mack_arg("366").is_err());
        assert!(rate_arg("10").is_err() && rate_arg("5mbit") == Ok(5_000_000));
    }
}
