//! `aerotp recv`: accepts AeroTP connections and stores each transfer as a file.
//!
//! A transfer is written to a temporary name in the destination directory
//! (`.NAME.ID.aerotp-tmp`), fsynced, and renamed to `NAME` only when the mode's guarantee
//! was met, every announced byte arrived and the sender's SHA-256 (the stream's trailer)
//! matches what was written; otherwise it is renamed to `NAME.partial`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aerotp_net::{Connection, ConnectionConfig, Endpoint, EndpointConfig, Report};
use indicatif::{MultiProgress, ProgressBar};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::common::*;
pub use crate::recv_output::Sink;
use crate::recv_output::{commit, keep_partial, open_output, write_bytes, Output};
use crate::transfer_end::store_or_tell;

/// Receive files sent with `aerotp send`. Exit status (with --once, or -o FILE / -o -):
/// 0 the mode's guarantee was met and the file is complete, 1 local error, 2 bad usage,
/// 4 the connection broke first, 5 a lossy mode finished with bytes missing (kept as
/// NAME.partial).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// UDP address to listen on: 0.0.0.0:9000, [::]:9000, 127.0.0.1:9000.
    #[arg(long)]
    listen: SocketAddr,
    /// AeroTP port to accept on (not a UDP port).
    #[arg(long, default_value_t = aerotp_net::DEFAULT_PORT, value_parser = port_arg)]
    port: u16,
    /// Destination: a directory (each transfer gets its own file, named by the sender), a
    /// file (one transfer; implies --once) or - for standard output (implies --once).
    #[arg(short = 'o', long = "output", default_value = ".")]
    output: String,
    /// Print each transfer's final statistics as one JSON object (one line) on stdout.
    #[arg(long)]
    json: bool,
    /// Exit after the first transfer, with its status.
    #[arg(long)]
    once: bool,
    /// Rate of what the receiver sends (acknowledgements; set it to the return link's rate).
    #[arg(long, default_value = "1gbit", value_parser = rate_arg)]
    rate: u64,
    /// ACKs aggregated per MACK (1-365).
    #[arg(long, value_parser = mack_arg)]
    mack: Option<u16>,
    /// Largest datagram taken from a sender, and sent back, in bytes, 128-65000. Give at
    /// least the senders' --mtu (theirs is 1472 over IPv4 by default): a larger datagram
    /// is dropped as no sender at this MTU makes it (counted as tpdus_oversized), and
    /// nothing it carried arrives.
    #[arg(long, default_value_t = 1500, value_parser = mtu_arg)]
    mtu: usize,
    /// Drop a transfer when nothing is heard from the sender for this long (outages!); what
    /// arrived is kept as NAME.partial, exit 4 (the receiver's silence bound).
    #[arg(long, default_value = "40min", value_parser = silence_arg)]
    idle_timeout: Duration,
    /// Class of this end's answers (acknowledgements, the receiver's verdict): control,
    /// telemetry or bulk; they carry its DSCP (--dscp). Give the senders' --class so that
    /// both directions of a transfer are queued alike.
    #[arg(long, default_value = "bulk", value_parser = crate::mark_flags::class_arg)]
    class: aerotp_proto::TrafficClass,
    #[command(flatten)]
    marks: crate::mark_flags::DscpFlags,
    #[command(flatten)]
    observe: ObserveFlags,
    #[command(flatten)]
    key: crate::key_flags::KeyFlags,
    #[command(flatten)]
    dlep: crate::dlep_flags::DlepArgs,
    #[command(flatten)]
    admission: crate::admission_flags::AdmissionFlags,
}

/// A finished (or failed) receive.
#[derive(Debug)]
pub struct RecvOutcome {
    pub name: String,
    pub bytes: u64,
    pub expected: Option<u64>,
    pub report: Report,
    /// From accept to the end of the stream.
    pub elapsed: Duration,
    pub sha256: Option<String>,
    pub saved_as: Option<PathBuf>,
    /// Memory sink: the bytes, and (end offset, arrival time) per chunk.
    #[cfg_attr(not(feature = "dev"), allow(dead_code))]
    pub data: Vec<u8>,
    #[cfg_attr(not(feature = "dev"), allow(dead_code))]
    pub arrivals: Vec<(usize, Instant)>,
    /// The stream ended with an error (connection broke) rather than EOF.
    pub read_error: Option<String>,
    pub exit_code: i32,
    /// The end-to-end check's result (what the sender was told).
    pub verdict: Verdict,
    /// The SHA-256 the sender's trailer carried, if one arrived.
    pub sender_sha256: Option<String>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A connection whose peer never proved its address (docs/security.md, "Half-open
/// connections"): nothing of it was written anywhere.
#[derive(Debug, thiserror::Error)]
#[error(
    "dropped the connection from {remote}: {why}; nothing was written (a spoofed ASYN, or a \
     sender cut off at set-up)"
)]
pub struct Unproven {
    pub remote: SocketAddr,
    pub why: String,
}

/// Says that unproven connections were dropped without flooding the terminal: the first in
/// full, then at most one line per `UnprovenLog::EVERY` with how many more there were.
#[derive(Default)]
struct UnprovenLog {
    /// Dropped since the last line, and when that line was printed.
    state: std::sync::Mutex<(u64, Option<std::time::Instant>)>,
}

impl UnprovenLog {
    const EVERY: Duration = Duration::from_secs(10);

    fn report(&self, e: &anyhow::Error) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        match st.1 {
            None => {
                eprintln!("aerotp recv: {e:#}");
                *st = (0, Some(now));
            }
            Some(t) if now.duration_since(t) >= Self::EVERY => {
                eprintln!(
                    "aerotp recv: {} more connection(s) dropped unproven in the last {:.0} s \
                     (spoofed ASYNs, or senders cut off at set-up); nothing written; latest: \
                     {e:#}",
                    st.0 + 1,
                    now.duration_since(t).as_secs_f64()
                );
                *st = (0, Some(now));
            }
            Some(_) => st.0 += 1,
        }
    }
}

/// Waits until the peer has proven its address: no file for a spoofed ASYN. The engine holds
/// what arrives meanwhile (within the receive window) and the sender cannot finish before.
async fn await_proof(conn: &Connection) -> anyhow::Result<()> {
    conn.proven().await.map_err(|o| {
        anyhow::Error::new(Unproven {
            remote: conn.remote_address(),
            why: aerotp_net::outcome_error(&o).to_string(),
        })
    })
}

/// Reads one transfer from `conn` into `sink`, checks it end to end, answers the sender with
/// the [`Verdict`] and finishes the connection. The file gets its final name only when the
/// mode's guarantee was met, every announced byte arrived and the sender's SHA-256 matches.
pub async fn receive(
    conn: Connection,
    sink: &Sink,
    pb: &ProgressBar,
) -> anyhow::Result<RecvOutcome> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let start = Instant::now();
    let fallback_name =
        format!("received-{}-{id}.bin", conn.remote_address().ip()).replace(':', "_");
    let mut rx = Incoming::new(sink, id, fallback_name);
    let mut last_tick = Instant::now();
    loop {
        let chunk = match conn.read_chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                rx.read_error = Some(e.to_string());
                break;
            }
        };
        match rx.take(&conn, chunk.data.to_vec(), pb).await? {
            Step::HeaderIncomplete => continue,
            Step::Taken => {}
            Step::WriteFailed => break,
        }
        if last_tick.elapsed() > Duration::from_millis(200) {
            last_tick = Instant::now();
            pb.set_position(rx.bytes);
            pb.set_message(progress_message(&conn.stats()));
        }
    }
    let elapsed = start.elapsed();
    let end = rx.end_of_stream(&conn).await?;
    pb.set_position(rx.bytes);
    rx.conclude(&conn, end, elapsed).await
}

/// What a chunk did to the transfer.
enum Step {
    /// Still inside what may be the header: nothing written yet.
    HeaderIncomplete,
    Taken,
    /// Writing failed: the transfer stops (the error is kept).
    WriteFailed,
}

/// The header the stream started with: the name, the announced size and the version (0: no
/// readable header).
type Header = (String, Option<u64>, u8);

/// One transfer as it is read: the header (until parsed), the output, the bytes written and
/// their digest, the bytes held back as a possible trailer, and what went wrong.
struct Incoming<'s> {
    sink: &'s Sink,
    id: u64,
    /// The name when the header gives none.
    fallback_name: String,
    head: Vec<u8>,
    parsed: Option<Header>,
    tail: TailHold,
    out: Option<Output>,
    sha: Sha256,
    bytes: u64,
    data: Vec<u8>,
    arrivals: Vec<(usize, Instant)>,
    read_error: Option<String>,
    write_error: Option<anyhow::Error>,
}

/// The stream read to its end: its header (or the fallback), the trailer it ended with,
/// and the output.
struct Ended {
    header: Header,
    trailer: Option<Trailer>,
    out: Output,
}

impl<'s> Incoming<'s> {
    fn new(sink: &'s Sink, id: u64, fallback_name: String) -> Self {
        Incoming {
            sink,
            id,
            fallback_name,
            head: Vec::new(),
            parsed: None,
            tail: TailHold::default(),
            out: None,
            sha: Sha256::new(),
            bytes: 0,
            data: Vec::new(),
            arrivals: Vec::new(),
            read_error: None,
            write_error: None,
        }
    }

    /// Takes a chunk of the stream: the header first (the output is opened once it is
    /// parsed and the peer proven), then file data, the last `TRAILER_LEN` bytes held back.
    async fn take(
        &mut self,
        conn: &Connection,
        mut body: Vec<u8>,
        pb: &ProgressBar,
    ) -> anyhow::Result<Step> {
        if self.parsed.is_none() {
            let Some(rest) = self.parse_header(body) else {
                return Ok(Step::HeaderIncomplete);
            };
            body = rest;
            let (name, size, _) = self.parsed.clone().expect("just set");
            if let Some(s) = size {
                pb.set_length(s);
            }
            pb.set_prefix(format!("recv {name}"));
            self.open(conn, &name).await?;
        }
        // Version 2, and a stream without a readable header (a lossy mode lost its TPDU, but
        // the trailer may have come): the last TRAILER_LEN bytes may be the trailer, so they
        // are held back. A version-1 stream has none: everything is data.
        let holds_tail = self.parsed.as_ref().is_some_and(|p| p.2 != 1);
        let file_bytes = if holds_tail {
            self.tail.push(&body)
        } else {
            body
        };
        if !file_bytes.is_empty() {
            if let Err(e) = self.write(&file_bytes).await {
                self.write_error = Some(e);
                return Ok(Step::WriteFailed);
            }
            self.bytes += file_bytes.len() as u64;
            if matches!(self.sink, Sink::Memory) {
                self.arrivals.push((self.data.len(), Instant::now()));
            }
        }
        Ok(Step::Taken)
    }

    /// Adds `body` to what may be the header; once it is parsed (or cannot be one), the
    /// bytes after it.
    fn parse_header(&mut self, body: Vec<u8>) -> Option<Vec<u8>> {
        // (The first TPDU may be an empty ASYN, so the header's TPDU number is not fixed; a
        // lossy mode that lost the header's TPDU delivers bytes without the magic.)
        self.head.extend_from_slice(&body);
        // Bounded: a header is at most 15 + MAX_NAME bytes, so `More` stops growing it.
        match decode_header(&self.head) {
            HeaderParse::More => return None,
            HeaderParse::Invalid => {
                self.parsed = Some((self.fallback_name.clone(), None, 0));
            }
            HeaderParse::Done(h, hl) => {
                let name = sanitize_name(&h.name).unwrap_or_else(|| self.fallback_name.clone());
                self.parsed = Some((name, h.size, h.version));
                self.head.drain(..hl);
            }
        }
        Some(std::mem::take(&mut self.head))
    }

    /// Opens the output once the peer has proven its address (the sender is told if it
    /// cannot be).
    async fn open(&mut self, conn: &Connection, name: &str) -> anyhow::Result<()> {
        await_proof(conn).await?;
        self.out = Some(store_or_tell(conn, open_output(self.sink, name, self.id).await).await?);
        Ok(())
    }

    async fn write(&mut self, b: &[u8]) -> anyhow::Result<()> {
        write_bytes(
            self.out.as_mut(),
            b,
            &mut self.sha,
            self.sink,
            &mut self.data,
        )
        .await
    }

    /// The stream has ended: what could still have been a header is data, the output is
    /// opened if it was not, and the held-back bytes are the trailer or file data.
    async fn end_of_stream(&mut self, conn: &Connection) -> anyhow::Result<Ended> {
        // The stream ended inside what could still have been a header: those bytes are data.
        let unparsed = if self.parsed.is_none() {
            std::mem::take(&mut self.head)
        } else {
            Vec::new()
        };
        let header = self
            .parsed
            .take()
            .unwrap_or((self.fallback_name.clone(), None, 0));
        if self.out.is_none() {
            self.open(conn, &header.0).await?;
        }
        if !unparsed.is_empty() && self.write_error.is_none() {
            if let Err(e) = self.write(&unparsed).await {
                self.write_error = Some(e);
            }
            self.bytes += unparsed.len() as u64;
        }
        // What the stream ended with: the trailer, or (no trailer) the last bytes are file
        // data.
        let trailer = if header.2 != 1 && self.write_error.is_none() {
            match std::mem::take(&mut self.tail).finish() {
                Ok(t) => Some(t),
                Err(rest) => {
                    if let Err(e) = self.write(&rest).await {
                        self.write_error = Some(e);
                    }
                    self.bytes += rest.len() as u64;
                    None
                }
            }
        } else {
            None
        };
        let out = self.out.take().expect("opened");
        Ok(Ended {
            header,
            trailer,
            out,
        })
    }

    /// Checks the transfer end to end, gives the file its name (or `.partial`), answers the
    /// sender with the verdict and finishes the connection.
    async fn conclude(
        mut self,
        conn: &Connection,
        end: Ended,
        elapsed: Duration,
    ) -> anyhow::Result<RecvOutcome> {
        let Ended {
            header: (name, expected, version),
            trailer,
            mut out,
        } = end;
        if self.write_error.is_none() {
            if let Err(e) = out.flush().await {
                self.write_error = Some(e);
            }
        }
        if let Some(e) = self.write_error {
            // The sender learns at once (RST with the reason) instead of sending into the void.
            abort_and_flush(conn, &crate::transfer_end::store_failed_reason(&e)).await;
            let _ = keep_partial(&mut out).await;
            return Err(e);
        }
        let digest: [u8; 32] = self.sha.finalize().into();
        let broken = self.read_error.is_some();
        let verdict = check_end(
            version,
            expected,
            self.bytes,
            &digest,
            trailer.as_ref(),
            broken,
        );
        let exit_code = exit_status(broken, verdict);
        // The file has its final name before the sender hears the verdict: `send &&
        // use-the-file` never races the rename.
        let saved = if exit_code == EXIT_OK {
            commit(&mut out).await
        } else {
            keep_partial(&mut out).await
        };
        let saved_as = store_or_tell(conn, saved).await?;
        let report = if broken {
            conn.finish().await
        } else {
            // Our half carries the verdict (a version-1 sender reads nothing; it costs it
            // nothing).
            let mut w = conn.clone();
            if version >= 2 {
                let _ = w.write_all(&verdict.encode()).await;
            }
            conn.close();
            crate::transfer_end::verdict_acknowledged(conn).await
        };
        Ok(RecvOutcome {
            name,
            bytes: self.bytes,
            expected,
            report,
            elapsed,
            sha256: Some(hex(&digest)),
            saved_as,
            data: self.data,
            arrivals: self.arrivals,
            read_error: self.read_error,
            exit_code,
            verdict,
            sender_sha256: trailer.map(|t| hex(&t.sha256)),
        })
    }
}

/// The exit status of a stream read to its end (or `broken`) with `verdict`: what the file
/// is does not depend on the close.
fn exit_status(broken: bool, verdict: Verdict) -> i32 {
    match (broken, verdict) {
        (true, _) => EXIT_BROKEN,
        (false, Verdict::Verified) => EXIT_OK,
        (false, Verdict::Incomplete) => EXIT_INCOMPLETE,
        (false, Verdict::Mismatch | Verdict::NoDigest) => EXIT_CORRUPT,
        (false, Verdict::WriteFailed) => EXIT_LOCAL,
    }
}

/// The end-to-end check (pure): what the stream's header version (0: no readable header),
/// the announced size, the bytes written, their digest and the sender's trailer say about the
/// transfer.
pub fn check_end(
    version: u8,
    expected: Option<u64>,
    bytes: u64,
    digest: &[u8; 32],
    trailer: Option<&Trailer>,
    broken: bool,
) -> Verdict {
    let short = |n: u64| bytes < n;
    match trailer {
        // No trailer: the stream was cut (broken, or fewer bytes than announced), or it never
        // had one (version 1, a raw stream): nothing vouches for it.
        None if broken || expected.is_some_and(short) => Verdict::Incomplete,
        None => Verdict::NoDigest,
        // A version-1 stream has no trailer: bytes that look like one are the file's.
        Some(_) if version == 1 => Verdict::NoDigest,
        Some(t) if short(t.bytes) => Verdict::Incomplete,
        Some(t) if t.bytes != bytes || expected.is_some_and(|e| e != bytes) => Verdict::Mismatch,
        Some(t) if &t.sha256 != digest => Verdict::Mismatch,
        Some(_) => Verdict::Verified,
    }
}

/// Reports a transfer: with `json`, returns its JSON object for the caller to print (with
/// `--once` after the capture closed, so that it can carry the capture's figures); otherwise
/// prints the text line and returns `None`.
fn report_line(o: &RecvOutcome, json: bool, auth: bool) -> Option<serde_json::Value> {
    // On stderr whatever the format: a refused file must never pass unnoticed.
    if o.verdict != Verdict::Verified {
        eprintln!(
            "aerotp recv: {}: end-to-end check failed: {} (SHA-256 written {}, sender's {}); not given its name",
            o.name,
            o.verdict.describe(),
            o.sha256.as_deref().unwrap_or("-"),
            o.sender_sha256.as_deref().unwrap_or("none"),
        );
    }
    if json {
        let mut v = stats_json("recv", &o.name, o.bytes, o.elapsed, &o.report);
        v["expected_bytes"] = o.expected.into();
        v["sha256"] = o.sha256.clone().into();
        v["saved_as"] = o.saved_as.as_ref().map(|p| p.display().to_string()).into();
        v["read_error"] = o.read_error.clone().into();
        v["verdict"] = crate::transfer_end::verdict_json(o.verdict, auth).into();
        v["authenticated"] = auth.into();
        v["sender_sha256"] = o.sender_sha256.clone().into();
        v["exit_code"] = o.exit_code.into();
        Some(v)
    } else {
        let s = &o.report.stats.receiver;
        eprintln!(
            "received {} ({} of {} bytes) in {:.2} s, {} mode, {}: {} TPDUs, {} corrected, {} lost; goodput {}{}{}{}",
            o.name,
            o.bytes,
            o.expected.map_or_else(|| "?".into(), |e| e.to_string()),
            o.elapsed.as_secs_f64(),
            o.report.mode,
            outcome_name(&o.report),
            s.tpdus_received,
            s.tpdus_corrected,
            s.tpdus_lost,
            human_rate(o.bytes as f64 * 8.0 / o.elapsed.as_secs_f64().max(1e-9)),
            o.saved_as.as_ref().map_or_else(String::new, |p| format!("; saved as {}", p.display())),
            if o.verdict == Verdict::Verified {
                format!("; {}", crate::transfer_end::verdict_text(o.verdict, auth))
            } else {
                String::new()
            },
            o.read_error.as_ref().map_or_else(String::new, |e| format!("; error: {e}")),
        );
        None
    }
}

pub async fn run(args: Args) -> i32 {
    match run_inner(args).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aerotp recv: {e:#}");
            EXIT_LOCAL
        }
    }
}

async fn run_inner(args: Args) -> anyhow::Result<i32> {
    args.key.require("recv")?;
    if args.output.trim().is_empty() {
        anyhow::bail!("-o: empty; give a directory, a file name or - for standard output");
    }
    let (sink, once) = if args.output == "-" {
        (Sink::Stdout, true)
    } else {
        let p = PathBuf::from(&args.output);
        if p.is_dir() || args.output.ends_with('/') {
            if !p.is_dir() {
                anyhow::bail!("-o {}: no such directory", args.output);
            }
            (Sink::Dir(p), args.once)
        } else {
            let parent = p
                .parent()
                .filter(|x| !x.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !parent.is_dir() {
                anyhow::bail!(
                    "-o {}: directory {} does not exist",
                    args.output,
                    parent.display()
                );
            }
            (Sink::File(p), true)
        }
    };
    // Before any socket: a directory we cannot write would only fail once a sender has
    // started, and that sender would then wait for its silence bound.
    match &sink {
        Sink::Dir(d) => check_writable_dir(d, &args.output)?,
        Sink::File(f) => {
            let parent = f
                .parent()
                .filter(|x| !x.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            check_writable_dir(parent, &args.output)?;
        }
        Sink::Stdout | Sink::Memory => {}
    }
    let cfg = ConnectionConfig {
        class: args.class,
        mtu: args.mtu,
        ..crate::listener_config::listener_config(args.rate, args.mack, args.idle_timeout)?
    };
    // The capture file first: a path that cannot be written stops us before any traffic.
    let mut obs = args.observe.open_capture()?;
    let ecfg = args.admission.apply(EndpointConfig::default())?;
    let ep = Endpoint::bind(args.listen, args.key.apply(ecfg)?)?;
    args.key.watch(&ep);
    args.marks.apply(&ep);
    ep.listen(args.port, cfg)?;
    // The radio's session runs as long as the receiver does.
    let _dlep = args.dlep.start(&ep)?;
    obs.attach(&args.observe, &ep).await?;
    tracing::info!(addr = %ep.local_addr(), port = args.port, "listening");
    let r = serve(&args, &ep, sink, once).await;
    // Closed on every way out (the process exits without running destructors).
    let capture = obs.close(&ep, "aerotp recv")?;
    let (code, json) = r?;
    if let Some(mut v) = json {
        if let Some((io, s)) = &capture {
            v["capture"] = capture_json(io, s);
        }
        println!("{v}");
    }
    Ok(code)
}

/// Creates and removes a probe file in `dir`: the only check that holds for permissions,
/// read-only mounts and ACLs alike.
fn check_writable_dir(dir: &Path, flag_value: &str) -> anyhow::Result<()> {
    let probe = dir.join(format!(".aerotp-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(f) => {
            drop(f);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => anyhow::bail!(
            "-o {flag_value}: cannot write in {} ({e}); give a directory this user can write, a file in one, or - for standard output",
            dir.display()
        ),
    }
}

/// Accepts and receives transfers until Ctrl-C, or the first one with `once`: its exit
/// status and, with `--json` and `once`, its JSON object (not yet printed).
async fn serve(
    args: &Args,
    ep: &Endpoint,
    sink: Sink,
    once: bool,
) -> anyhow::Result<(i32, Option<serde_json::Value>)> {
    let multi = MultiProgress::new();
    let sink = Arc::new(sink);
    let mut tasks = tokio::task::JoinSet::new();
    let print = |(code, json): (i32, Option<serde_json::Value>)| {
        if let Some(v) = json {
            println!("{v}");
        }
        code
    };
    // With `once`, the first connection to prove its address is the transfer; spoofed ones
    // (never proven) cannot hold it up, and later ones are turned away.
    let claimed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let unproven = Arc::new(UnprovenLog::default());
    loop {
        let conn = tokio::select! {
            c = ep.accept() => match c { Some(c) => c, None => anyhow::bail!("the endpoint stopped") },
            _ = tokio::signal::ctrl_c() => break,
            Some(r) = tasks.join_next(), if !tasks.is_empty() => {
                match r {
                    // Its JSON is printed by the caller.
                    Ok(Some(r)) if once => return Ok(r),
                    Ok(Some(r)) => { print(r); }
                    Ok(None) => {}
                    Err(_) if once => return Ok((EXIT_LOCAL, None)),
                    Err(_) => {}
                }
                continue;
            }
        };
        let sink = sink.clone();
        let (json, auth) = (args.json, ep.authenticated());
        let claimed = claimed.clone();
        let (multi, unproven) = (multi.clone(), unproven.clone());
        tasks.spawn(async move {
            if let Err(e) = await_proof(&conn).await {
                unproven.report(&e);
                return None;
            }
            // A progress bar only for a proven peer: a flood of spoofed ASYNs draws none.
            let pb = multi.add(progress_bar(None, "recv"));
            if once && claimed.swap(true, Ordering::SeqCst) {
                pb.finish_and_clear();
                abort_and_flush(&conn, "the receiver takes one transfer (--once) and has it").await;
                return None;
            }
            let r = receive(conn, &sink, &pb).await;
            pb.finish_and_clear();
            match r {
                Ok(o) => Some((o.exit_code, report_line(&o, json, auth))),
                Err(e) => {
                    eprintln!("aerotp recv: {e:#}");
                    Some((EXIT_LOCAL, None))
                }
            }
        });
    }
    Ok((EXIT_OK, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_matching_digest_and_count_is_verified() {
        let d = [1u8; 32];
        let t = |bytes, sha256| Trailer { bytes, sha256 };
        let ok = t(100, d);
        assert_eq!(
            check_end(2, Some(100), 100, &d, Some(&ok), false),
            Verdict::Verified
        );
        assert_eq!(
            check_end(2, None, 100, &d, Some(&ok), false),
            Verdict::Verified
        );
        // One byte changed anywhere: the digest differs.
        assert_eq!(
            check_end(2, Some(100), 100, &[2; 32], Some(&ok), false),
            Verdict::Mismatch
        );
        // The sender read fewer bytes than it announced, or the receiver got more than it read.
        assert_eq!(
            check_end(2, Some(200), 100, &d, Some(&ok), false),
            Verdict::Mismatch
        );
        assert_eq!(
            check_end(2, None, 101, &d, Some(&ok), false),
            Verdict::Mismatch
        );
        assert_eq!(
            check_end(2, Some(100), 99, &d, Some(&ok), false),
            Verdict::Incomplete
        );
        // No trailer: cut short, or never vouched for.
        assert_eq!(
            check_end(2, Some(100), 100, &d, None, true),
            Verdict::Incomplete
        );
        assert_eq!(
            check_end(2, Some(100), 50, &d, None, false),
            Verdict::Incomplete
        );
        assert_eq!(
            check_end(2, Some(100), 100, &d, None, false),
            Verdict::NoDigest
        );
        assert_eq!(
            check_end(1, Some(100), 100, &d, None, false),
            Verdict::NoDigest
        );
        assert_eq!(check_end(0, None, 100, &d, None, false), Verdict::NoDigest);
        // No readable header (a lossy mode lost it) but the trailer came: bytes are missing.
        assert_eq!(
            check_end(0, None, 60, &d, Some(&ok), false),
            Verdict::Incomplete
        );
        assert_eq!(
            check_end(1, None, 100, &d, Some(&ok), false),
            Verdict::NoDigest
        );
    }
}
