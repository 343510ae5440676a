//! One transfer: the receiver thread in the ground namespace, the sender thread in the air
//! namespace, each on its own single-threaded tokio runtime, and the outcome joined from both.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_lab::{Lab, Side};
use anyhow::{anyhow, bail, Result};

use super::aero::{recv_aero, send_aero};
use super::io::Ready;
use super::quic::{recv_quic, send_quic};
use super::spec::{AeroStats, Outcome, Proto, Spec};
use super::tcp::{recv_tcp, send_tcp, Stack};
use super::udp::{recv_udp, send_udp};
use crate::payload::{Clock, Plan, Sink, Source};

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
    let ends = Ends::of(lab, &spec);
    let (listen, g, a, extra) = (ends.listen, ends.ground, ends.air, ends.extra);
    let cap = spec.cap;
    let rate = spec.rate_bps;
    let timeline = spec.timeline;
    let receiver = lab.spawn_in(Side::Ground, move || {
        runtime().block_on(receive(
            proto, listen, plan, clock, cap, rate, timeline, ready_tx,
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
        runtime().block_on(send(proto, a, g, &extra, plan, clock, cap, rate, cert))
    })?;
    let s = sender
        .join()
        .map_err(|_| anyhow!("sender thread panicked"))?;
    let r = receiver
        .join()
        .map_err(|_| anyhow!("receiver thread panicked"))?;
    Ok(outcome(proto, &spec, s, r))
}

/// Where a transfer's ends are: the receiver's listening address, the ground address the
/// sender sends to, the sender's own, and the ground's other addresses (extra paths).
struct Ends {
    listen: SocketAddr,
    ground: SocketAddr,
    air: SocketAddr,
    extra: Vec<SocketAddr>,
}

impl Ends {
    fn of(lab: &Lab, spec: &Spec) -> Ends {
        let ground = ground(lab, spec.port);
        // Several paths: both ends on the wildcard address (module `aero`), the sender given
        // the ground's other addresses.
        let multi = !spec.extra_paths.is_empty();
        let any = |port| SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), port);
        Ends {
            listen: if multi { any(spec.port) } else { ground },
            ground,
            air: if multi { any(0) } else { air_any(lab) },
            extra: spec
                .extra_paths
                .iter()
                .map(|&ip| SocketAddr::new(ip, spec.port))
                .collect(),
        }
    }
}

/// The transfer's outcome from what each end saw: complete when every byte arrived, and for
/// a reliable stream (not UDP) only when the digests match too.
fn outcome(proto: Proto, spec: &Spec, s: SendResult, r: RecvResult) -> Outcome {
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
    Outcome {
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
    }
}

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
        Proto::Tcp(_) => recv_tcp(addr, Stack::Tcp, &mut sink, clock, cap, ready).await,
        Proto::Mptcp(_) => recv_tcp(addr, Stack::Mptcp, &mut sink, clock, cap, ready).await,
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
    extra: &[SocketAddr],
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
        Proto::Tcp(cc) => send_tcp(remote, Stack::Tcp, cc, &mut src, clock, deadline).await,
        Proto::Mptcp(cc) => send_tcp(remote, Stack::Mptcp, cc, &mut src, clock, deadline).await,
        Proto::Quic => send_quic(local, remote, cert, &mut src, clock, deadline).await,
        Proto::Udp => send_udp(local, remote, rate_bps, &mut src, clock, deadline).await,
        Proto::Aero(mode, fec) => {
            send_aero(
                local, remote, extra, mode, fec, rate_bps, &mut src, clock, deadline, &mut aero,
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
