//! `setup`: connection set-up to the first data byte at the receiver, kernel TCP against AeroTP,
//! against packet loss (seeds 000/002 §IV-A, Fig. 12, on real kernels).
//!
//! Per loss value, one lab for TCP and one for AeroTP, with the same seed. In each, one sender
//! thread (air) runs the trials one after the other: it stamps a 500 B block with the time
//! just before it opens the connection (before `connect` for TCP; before `Endpoint::connect`
//! for AeroTP, whose first TPDU carries the data), writes it, and waits until the receiver
//! (ground) reports the block. The receiver computes arrival of the first data − stamp. A trial
//! not reported within the cap counts as failed.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use aerotp_lab::{Lab, Side};
use aerotp_net::{ConnectionConfig, EndpointConfig, Mode};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::time::timeout;

use crate::payload::{decode, encode, Clock};

const BLOCK: usize = 500;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub rate_bps: u64,
    pub delay: Duration,
    /// Packet loss probabilities (both directions).
    pub losses: Vec<f64>,
    pub trials: u32,
    /// Longest one trial may take.
    pub cap: Duration,
    pub seed: u64,
    /// AeroTP mode used.
    pub mode: Mode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rate_bps: 10_000_000,
            delay: Duration::from_millis(5),
            losses: vec![0.0, 0.05, 0.10, 0.15, 0.20],
            trials: 50,
            cap: Duration::from_secs(30),
            seed: 7,
            mode: Mode::Reliable,
        }
    }
}

/// One protocol at one loss value.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub protocol: String,
    pub loss: f64,
    pub trials: u32,
    pub ok: u32,
    pub mean_s: f64,
    pub median_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
    pub delays_s: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub points: Vec<Point>,
    pub wall_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Tcp,
    Aero(Mode),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Tcp => "tcp-cubic".into(),
            Kind::Aero(m) => format!("aerotp-{m}"),
        }
    }
}

pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Report> {
    let t0 = Instant::now();
    let mut points = Vec::new();
    for (li, &loss) in cfg.losses.iter().enumerate() {
        let seed = cfg.seed.wrapping_add(li as u64);
        for kind in [Kind::Tcp, Kind::Aero(cfg.mode)] {
            let mut link = crate::link(cfg.rate_bps, cfg.delay);
            link.loss = loss;
            let lab = crate::lab(&link, seed)?;
            let delays = trials(&lab, kind, cfg)
                .with_context(|| format!("{} at loss {loss}", kind.name()))?;
            lab.stop().context("lab teardown")?;
            let ok: Vec<f64> = delays.iter().flatten().copied().collect();
            let (mean, median, p95) = crate::summary(&ok);
            let p = Point {
                protocol: kind.name(),
                loss,
                trials: cfg.trials,
                ok: ok.len() as u32,
                mean_s: mean,
                median_s: median,
                p95_s: p95,
                max_s: ok.iter().copied().fold(f64::NAN, f64::max),
                delays_s: ok,
            };
            progress(&format!(
                "loss {:>4.1} % {:<18} {}/{} ok  mean {:>8.1} ms  median {:>8.1} ms  p95 {:>8.1} ms",
                loss * 100.0,
                p.protocol,
                p.ok,
                p.trials,
                p.mean_s * 1e3,
                p.median_s * 1e3,
                p.p95_s * 1e3
            ));
            points.push(p);
        }
    }
    Ok(Report {
        points,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Delay of each trial (None = not done within the cap).
fn trials(lab: &Lab, kind: Kind, cfg: &Config) -> Result<Vec<Option<f64>>> {
    let clock = Clock::new();
    let ground = SocketAddr::new(lab.ground_addr(), 5002);
    let air = SocketAddr::new(lab.air_addr(), 0);
    let (report_tx, report_rx) = mpsc::unbounded_channel::<(u32, f64)>();
    let (stop_tx, stop_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
    let rate = cfg.rate_bps;
    let receiver = lab.spawn_in(Side::Ground, move || {
        rt().block_on(receiver(
            kind, ground, rate, clock, report_tx, stop_rx, ready_tx,
        ))
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => bail!("receiver: {e}"),
        Err(_) => bail!("receiver not ready within 10 s"),
    }
    let (n, cap) = (cfg.trials, cfg.cap);
    let sender = lab.spawn_in(Side::Air, move || {
        rt().block_on(sender(kind, air, ground, rate, clock, n, cap, report_rx))
    })?;
    let out = sender.join().map_err(|_| anyhow!("sender panicked"));
    let _ = stop_tx.send(true);
    receiver
        .join()
        .map_err(|_| anyhow!("receiver panicked"))?
        .map_err(|e| anyhow!("receiver: {e}"))?;
    out?
}

async fn receiver(
    kind: Kind,
    addr: SocketAddr,
    rate: u64,
    clock: Clock,
    report: mpsc::UnboundedSender<(u32, f64)>,
    stop: watch::Receiver<bool>,
    ready: std::sync::mpsc::SyncSender<Result<(), String>>,
) -> Result<(), String> {
    let rx = Receiving { clock, report };
    match kind {
        Kind::Tcp => {
            let l = tokio::net::TcpListener::bind(addr).await;
            tcp_receiver(bound(l, &ready)?, rx, stop).await
        }
        Kind::Aero(mode) => {
            let ep = aerotp_net::Endpoint::bind(addr, EndpointConfig::default()).and_then(|ep| {
                ep.listen(aerotp_net::DEFAULT_PORT, aero_cfg(mode, rate))?;
                Ok(ep)
            });
            aero_receiver(bound(ep, &ready)?, rx, stop).await
        }
    }
}

/// The receiver's socket or endpoint, once bound; the set-up waiting on `ready` hears either
/// way.
fn bound<T, E: ToString>(
    r: Result<T, E>,
    ready: &std::sync::mpsc::SyncSender<Result<(), String>>,
) -> Result<T, String> {
    match r {
        Ok(v) => {
            let _ = ready.send(Ok(()));
            Ok(v)
        }
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            Err(e.to_string())
        }
    }
}

/// What a receiver does with each connection's first block.
#[derive(Clone)]
struct Receiving {
    clock: Clock,
    /// `(index, delay)` of each connection's first whole block.
    report: mpsc::UnboundedSender<(u32, f64)>,
}

impl Receiving {
    /// Reports a connection's first block (`buf`, whose first bytes came at `first_at`): its
    /// index and how long after it was sent it began to arrive.
    fn first_block(&self, buf: &[u8], first_at: Option<Instant>) {
        let first = |first_at: Instant| -> Option<(u32, f64)> {
            let (i, sent_ns) = decode(buf.get(..BLOCK)?)?;
            let sent = self.clock.epoch + Duration::from_nanos(sent_ns);
            Some((i, first_at.saturating_duration_since(sent).as_secs_f64()))
        };
        if let Some(r) = first_at.and_then(first) {
            let _ = self.report.send(r);
        }
    }
}

/// Accepts TCP connections until told to `stop`, each read on its own task until its first
/// block is in.
async fn tcp_receiver(
    l: tokio::net::TcpListener,
    rx: Receiving,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    loop {
        let (mut s, _) = tokio::select! {
            a = l.accept() => a.map_err(|e| e.to_string())?,
            _ = stop.changed() => return Ok(()),
        };
        let rx = rx.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut first_at = None;
            let mut b = [0u8; 2048];
            while buf.len() < BLOCK {
                match timeout(Duration::from_secs(60), s.read(&mut b)).await {
                    Ok(Ok(n)) if n > 0 => {
                        first_at.get_or_insert_with(Instant::now);
                        buf.extend_from_slice(&b[..n]);
                    }
                    _ => return,
                }
            }
            rx.first_block(&buf, first_at);
        });
    }
}

/// Accepts AeroTP connections until told to `stop`, each read on its own task until its
/// first block is in, then closed.
async fn aero_receiver(
    ep: aerotp_net::Endpoint,
    rx: Receiving,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    loop {
        let c = tokio::select! {
            c = ep.accept() => c.ok_or("AeroTP endpoint stopped")?,
            _ = stop.changed() => return Ok(()),
        };
        let rx = rx.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut first_at = None;
            while buf.len() < BLOCK {
                match timeout(Duration::from_secs(60), c.read_chunk()).await {
                    Ok(Ok(Some(d))) => {
                        first_at.get_or_insert_with(Instant::now);
                        buf.extend_from_slice(&d.data);
                    }
                    _ => return,
                }
            }
            rx.first_block(&buf, first_at);
            c.abort("trial done");
        });
    }
}

fn aero_cfg(mode: Mode, rate: u64) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: rate,
        ..ConnectionConfig::with_mode(mode)
    }
}

#[allow(clippy::too_many_arguments)]
async fn sender(
    kind: Kind,
    air: SocketAddr,
    ground: SocketAddr,
    rate: u64,
    clock: Clock,
    n: u32,
    cap: Duration,
    mut reports: mpsc::UnboundedReceiver<(u32, f64)>,
) -> Result<Vec<Option<f64>>> {
    let ep = match kind {
        Kind::Aero(_) => Some(aerotp_net::Endpoint::bind(air, EndpointConfig::default())?),
        Kind::Tcp => None,
    };
    let mut out = Vec::with_capacity(n as usize);
    for k in 0..n {
        let mut block = vec![0u8; BLOCK];
        // Stamped just before the connection is opened.
        encode(k, clock.ns(), &mut block);
        let wait_report = async {
            loop {
                match reports.recv().await {
                    Some((i, d)) if i == k => return Some(d),
                    Some(_) => continue,
                    None => return None,
                }
            }
        };
        let got = match kind {
            Kind::Tcp => {
                let attempt = async {
                    let sock = tokio::net::TcpSocket::new_v4()?;
                    socket2::SockRef::from(&sock).set_tcp_congestion(b"cubic")?;
                    let mut s = sock.connect(ground).await?;
                    s.write_all(&block).await?;
                    anyhow::Ok(s)
                };
                // The stream must stay open until the receiver has the block.
                timeout(cap, async {
                    let s = attempt.await.ok()?;
                    let d = wait_report.await;
                    drop(s);
                    d
                })
                .await
                .ok()
                .flatten()
            }
            Kind::Aero(mode) => {
                let ep = ep.as_ref().expect("endpoint");
                let mut c = ep.connect(ground, aerotp_net::DEFAULT_PORT, aero_cfg(mode, rate))?;
                c.write_all(&block).await?;
                let d = timeout(cap, wait_report).await.ok().flatten();
                c.abort("trial done");
                d
            }
        };
        out.push(got);
        // Let the previous connection's last packets clear the link.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(out)
}

pub fn markdown(cfg: &Config, r: &Report, command: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Command: `{command}`  ");
    let _ = writeln!(
        s,
        "Link {} Mb/s, {} ms one-way, loss in both directions; {} trials per point, cap {} s per trial; wall time {:.0} s.\n",
        cfg.rate_bps as f64 / 1e6,
        cfg.delay.as_millis(),
        cfg.trials,
        cfg.cap.as_secs_f64(),
        r.wall_s
    );
    s.push_str("| protocol | loss | ok/trials | mean ms | median ms | p95 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for p in &r.points {
        let _ = writeln!(
            s,
            "| {} | {:.0} % | {}/{} | {:.1} | {:.1} | {:.1} | {:.1} |",
            p.protocol,
            p.loss * 100.0,
            p.ok,
            p.trials,
            p.mean_s * 1e3,
            p.median_s * 1e3,
            p.p95_s * 1e3,
            p.max_s * 1e3
        );
    }
    s
}

/// Writes `setup.csv` (per trial), `setup_summary.csv`, `setup.md`, `setup.png`.
pub fn write(cfg: &Config, r: &Report, dir: &Path, command: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut per = String::from("protocol,loss,trial_ok_index,delay_s\n");
    let mut sum = String::from("protocol,loss,trials,ok,mean_s,median_s,p95_s,max_s\n");
    for p in &r.points {
        for (i, d) in p.delays_s.iter().enumerate() {
            let _ = writeln!(per, "{},{},{},{:.6}", p.protocol, p.loss, i, d);
        }
        let _ = writeln!(
            sum,
            "{},{},{},{},{:.6},{:.6},{:.6},{:.6}",
            p.protocol, p.loss, p.trials, p.ok, p.mean_s, p.median_s, p.p95_s, p.max_s
        );
    }
    std::fs::write(dir.join("setup.csv"), per)?;
    std::fs::write(dir.join("setup_summary.csv"), sum)?;
    std::fs::write(dir.join("setup.md"), markdown(cfg, r, command))?;
    let labels: Vec<String> = cfg
        .losses
        .iter()
        .map(|l| format!("{:.0} %", l * 100.0))
        .collect();
    let mut series = Vec::new();
    for name in ["tcp-cubic".to_string(), format!("aerotp-{}", cfg.mode)] {
        for (stat, f) in [
            ("mean", (|p: &Point| p.mean_s) as fn(&Point) -> f64),
            ("p95", |p: &Point| p.p95_s),
        ] {
            let ys = cfg
                .losses
                .iter()
                .map(|&l| {
                    r.points
                        .iter()
                        .find(|p| p.protocol == name && p.loss == l)
                        .map_or(f64::NAN, |p| f(p) * 1e3)
                })
                .collect();
            series.push((format!("{name} {stat}"), ys));
        }
    }
    aerotp_plot::lines(
        &dir.join("setup.png"),
        "Set-up to first data byte at the receiver",
        "packet loss (both directions)",
        "ms",
        &labels,
        &series,
    )
}
