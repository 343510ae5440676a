//! `--qlog DIR`: the adapters that write a trace (crates/qlog) from the simulator's hook and
//! from the runtime's datagram tap.

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aerotp_qlog::schema::RADIO_UPDATED;
use aerotp_qlog::writer::{WriteStats, DEFAULT_MAX_BYTES};
use aerotp_qlog::{radio_event, Observer, QlogWriter, TpduLog, Vantage};
use anyhow::{Context, Result};

type Writer = QlogWriter<BufWriter<File>>;

/// Creates `dir` if it does not exist yet and checks that it is a writable directory before
/// anything runs: a bad `--qlog`
/// stops the command at once and nothing is written (a mistyped path does not become a new
/// directory).
pub fn prepare_dir(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() {
        anyhow::bail!("--qlog: an empty path (give a directory for the trace files)");
    }
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "--qlog {}: cannot create the directory for the trace files",
            dir.display()
        )
    })?;
    let probe = dir.join(format!(".aerotp-qlog-probe-{}", std::process::id()));
    File::create(&probe)
        .with_context(|| format!("--qlog {}: the directory is not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// A trace file whose event times count from `reference` since the Unix epoch (zero: the
/// simulator's virtual time).
fn create(path: &Path, title: &str, vantage: Vantage, reference: Duration) -> Result<Writer> {
    let f = File::create(path).with_context(|| format!("--qlog: creating {}", path.display()))?;
    QlogWriter::with_reference(
        BufWriter::new(f),
        title,
        vantage,
        DEFAULT_MAX_BYTES,
        reference,
    )
    .with_context(|| format!("--qlog: writing {}", path.display()))
}

/// A simulator run's trace: both endpoints, virtual time (`aerotp sim`: feature `dev`).
#[cfg(feature = "dev")]
pub struct SimQlog {
    w: Writer,
    tpdus: TpduLog,
    obs: Observer,
    sender: SocketAddr,
    error: Option<std::io::Error>,
    pub path: PathBuf,
}

#[cfg(feature = "dev")]
impl SimQlog {
    pub fn create(path: PathBuf, title: &str) -> Result<SimQlog> {
        Ok(SimQlog {
            w: create(&path, title, Vantage::Network, Duration::ZERO)?,
            tpdus: TpduLog::new(),
            obs: Observer::new(),
            sender: aerotp_sim::addr_sender(),
            error: None,
            path,
        })
    }

    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    /// Flushes; the first write error, if any, names the file.
    pub fn finish(self) -> Result<WriteStats> {
        let path = self.path.display().to_string();
        if let Some(e) = self.error {
            return Err(e).with_context(|| format!("--qlog: writing {path}"));
        }
        Ok(self
            .w
            .finish()
            .with_context(|| format!("--qlog: writing {path}"))?
            .0)
    }
}

#[cfg(feature = "dev")]
impl aerotp_sim::Tap for SimQlog {
    fn datagram(
        &mut self,
        point: aerotp_sim::TapPoint,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) {
        let sent = point == aerotp_sim::TapPoint::Sent;
        let who = if sent { src } else { dst };
        let side = if who == self.sender {
            "sender"
        } else {
            "receiver"
        };
        let r = self
            .tpdus
            .write(&mut self.w, at, sent, side, src, dst, bytes);
        self.keep(r);
    }

    fn engine(
        &mut self,
        at: Duration,
        side: &str,
        conn: u64,
        stats: &aerotp_proto::ConnectionStats,
        state: aerotp_proto::State,
    ) {
        let r = self.obs.observe(&mut self.w, at, side, conn, stats, state);
        self.keep(r);
    }

    fn radio(&mut self, side: &str, change: &aerotp_proto::RadioChange) {
        let r = self
            .w
            .event(change.at, RADIO_UPDATED, radio_event(side, change));
        self.keep(r);
    }
}

/// Bytes of datagram copies and snapshots a runtime trace may have queued for its writer
/// thread; beyond, records are dropped and counted (the datapath never waits for the disk).
pub const LIVE_QUEUE_BYTES: usize = 64 << 20;

enum Msg {
    Datagram {
        sent: bool,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: Vec<u8>,
    },
    Engine {
        at: Duration,
        conn: u64,
        stats: Box<aerotp_proto::ConnectionStats>,
        state: aerotp_proto::State,
    },
    Radio {
        at: Duration,
        change: aerotp_proto::RadioChange,
    },
}

impl Msg {
    fn cost(&self) -> usize {
        match self {
            Msg::Datagram { bytes, .. } => bytes.len() + 64,
            Msg::Engine { .. } => std::mem::size_of::<aerotp_proto::ConnectionStats>() + 64,
            Msg::Radio { .. } => std::mem::size_of::<aerotp_proto::RadioChange>() + 64,
        }
    }
}

/// A runtime endpoint's trace (`send`/`recv --qlog`): the datapath queues copies (bounded in
/// bytes) and a writer thread decodes and writes them, so tracing costs the transfer a copy
/// per datagram, not a JSON encoding or a disk write.
pub struct LiveQlog {
    tx: std::sync::Mutex<Option<std::sync::mpsc::Sender<Msg>>>,
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    dropped: std::sync::atomic::AtomicU64,
    epoch: Duration,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<Result<WriteStats>>>>,
    pub path: PathBuf,
}

impl LiveQlog {
    /// Creates DIR/<name>.sqlog and starts its writer thread.
    pub fn create(dir: &Path, name: &str, title: &str, vantage: Vantage) -> Result<LiveQlog> {
        use std::sync::atomic::Ordering;
        let path = dir.join(format!("{name}.sqlog"));
        // Event times count from here; the header says when that was on the wall clock.
        let epoch = aerotp_net::tap::wall_clock();
        let mut w = create(&path, title, vantage, epoch)?;
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let q2 = queued.clone();
        let shown = path.display().to_string();
        let thread = std::thread::Builder::new()
            .name("qlog-writer".into())
            .spawn(move || -> Result<WriteStats> {
                let mut tpdus = TpduLog::new();
                let mut obs = Observer::new();
                for m in rx {
                    q2.fetch_sub(m.cost(), Ordering::Relaxed);
                    let r = match m {
                        Msg::Datagram {
                            sent,
                            at,
                            src,
                            dst,
                            bytes,
                        } => tpdus.write(&mut w, at, sent, "local", src, dst, &bytes),
                        Msg::Engine {
                            at,
                            conn,
                            stats,
                            state,
                        } => obs.observe(&mut w, at, "local", conn, &stats, state),
                        Msg::Radio { at, change } => {
                            w.event(at, RADIO_UPDATED, radio_event("local", &change))
                        }
                    };
                    r.with_context(|| format!("--qlog: writing {shown}"))?;
                }
                Ok(w.finish()
                    .with_context(|| format!("--qlog: writing {shown}"))?
                    .0)
            })
            .context("--qlog: starting the writer thread")?;
        Ok(LiveQlog {
            tx: std::sync::Mutex::new(Some(tx)),
            queued,
            dropped: std::sync::atomic::AtomicU64::new(0),
            epoch,
            thread: std::sync::Mutex::new(Some(thread)),
            path,
        })
    }

    /// The trace of this `send` or `recv`: DIR/<send|recv>-<pid>.sqlog, titled with the
    /// command line, after checking DIR ([`prepare_dir`]).
    pub fn for_command(dir: &Path) -> Result<LiveQlog> {
        prepare_dir(dir)?;
        let args: Vec<String> = std::env::args().collect();
        let role = args.get(1).map_or("aerotp", String::as_str);
        let vantage = if role == "recv" {
            Vantage::Server
        } else {
            Vantage::Client
        };
        LiveQlog::named(dir, role, vantage)
    }

    /// DIR/<what>-<pid>.sqlog, titled with the command line, after checking DIR.
    pub fn named(dir: &Path, what: &str, vantage: Vantage) -> Result<LiveQlog> {
        prepare_dir(dir)?;
        let title = std::env::args().collect::<Vec<_>>().join(" ");
        LiveQlog::create(
            dir,
            &format!("{what}-{}", std::process::id()),
            &title,
            vantage,
        )
    }

    fn send(&self, m: Msg) {
        use std::sync::atomic::Ordering;
        let cost = m.cost();
        if self.queued.load(Ordering::Relaxed) + cost > LIVE_QUEUE_BYTES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let g = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(tx) if tx.send(m).is_ok() => {
                self.queued.fetch_add(cost, Ordering::Relaxed);
            }
            _ => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Ends the trace: the queue drains, the file is flushed. Returns (counts, records
    /// dropped at the queue bound).
    pub fn finish(&self) -> Result<(WriteStats, u64)> {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let stats = match t {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("--qlog: the writer thread panicked"))??,
            None => anyhow::bail!("--qlog: the trace was already finished"),
        };
        Ok((
            stats,
            self.dropped.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }
}

impl aerotp_net::Tap for LiveQlog {
    fn datagram(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, bytes: &[u8]) {
        self.send(Msg::Datagram {
            sent: iface == aerotp_net::TAP_SENT,
            at: at.saturating_sub(self.epoch),
            src,
            dst,
            bytes: bytes.to_vec(),
        });
    }
}

impl aerotp_net::EngineTap for LiveQlog {
    fn connection(
        &self,
        at: Duration,
        conn: u64,
        stats: &aerotp_proto::ConnectionStats,
        state: aerotp_proto::State,
    ) {
        self.send(Msg::Engine {
            at: at.saturating_sub(self.epoch),
            conn,
            stats: Box::new(stats.clone()),
            state,
        });
    }

    fn radio(&self, at: Duration, change: &aerotp_proto::RadioChange) {
        self.send(Msg::Radio {
            at: at.saturating_sub(self.epoch),
            change: *change,
        });
    }
}

impl std::fmt::Debug for LiveQlog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveQlog")
            .field("path", &self.path)
            .finish()
    }
}

/// Hands each datagram to several taps (`--pcap` and `--qlog` at once).
pub struct Tee(pub Vec<std::sync::Arc<dyn aerotp_net::Tap>>);

impl aerotp_net::Tap for Tee {
    fn datagram(&self, iface: u32, at: Duration, src: SocketAddr, dst: SocketAddr, bytes: &[u8]) {
        for t in &self.0 {
            t.datagram(iface, at, src, dst, bytes);
        }
    }

    fn marked_datagram(
        &self,
        iface: u32,
        at: Duration,
        addrs: (SocketAddr, SocketAddr, u8),
        bytes: &[u8],
    ) {
        for t in &self.0 {
            t.marked_datagram(iface, at, addrs, bytes);
        }
    }
}

/// Hands `ep`'s datagrams to the capture and the trace (both, either or neither) and its
/// engine's connections to the trace.
pub fn attach_taps(
    ep: &aerotp_net::Endpoint,
    capture: Option<std::sync::Arc<dyn aerotp_net::Tap>>,
    qlog: Option<&std::sync::Arc<LiveQlog>>,
) {
    use std::sync::Arc;
    let q: Option<Arc<dyn aerotp_net::Tap>> = qlog.map(|q| q.clone() as Arc<dyn aerotp_net::Tap>);
    match (capture, q) {
        (Some(c), Some(q)) => ep.set_tap(Arc::new(Tee(vec![c, q]))),
        (Some(t), None) | (None, Some(t)) => ep.set_tap(t),
        (None, None) => {}
    }
    if let Some(q) = qlog {
        ep.set_engine_tap(q.clone());
    }
}
