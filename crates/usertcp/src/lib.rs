//! Reliable interception's user-space TCP on a TUN device, for the AeroGW ingress
//! (`aerotp-gw`; docs/gateway.md §TCP reliable: end-to-end semantics): intercepted TCP is
//! routed into a TUN device; each connection is terminated here, its bytes handed to the
//! gateway's flow at once, and acknowledged to the source only as far as the flow says the
//! egress confirmed them written to the destination.
//!
//! What it is not: a general TCP stack. It serves only the ingress's side of one hop (no
//! congestion control, no RTT measurement, no fast retransmit on our direction), opens no
//! connection of its own, and knows nothing of AeroTP: the gateway's flow is behind
//! [`Carrier`] (what a connection needs of the flow it feeds) and each connection is handed
//! to the gateway behind [`UserSink`] (what the flow needs of the connection).
//!
//! Modules, each importing only those listed before it: `packet` (IPv4/IPv6 + TCP parsing
//! and building), `reasm` (a connection's out-of-order bytes), `stamps` (the timestamps a
//! connection echoes), `dsack` (the duplicates it reports), `flow` (what a connection and the
//! gateway's flow need of each other: [`Carrier`], [`UserSink`]), `tcb` (one connection). The
//! device is `aerotp_tun::AsyncTun` (`IFF_TUN | IFF_NO_PI`, shared with the lab), which this
//! crate runs:
//! it demultiplexes segments to connections, answers SYNs (a refused destination with RST)
//! and segments of unknown connections (RST), and hands each new connection to the ingress
//! through [`Accept`] as its SYN arrives: the SYN is answered once the flow's AeroTP
//! connection is up ([`UserSink::up`]: one air round trip), at most `SYN_HOLD` (3 s) later, or
//! with RST if the flow failed first.

pub(crate) mod dsack;
pub(crate) mod flow;
pub(crate) mod packet;
pub(crate) mod reasm;
pub(crate) mod stamps;
pub(crate) mod tcb;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aerotp_tun::AsyncTun;
pub use flow::{Carrier, UserSink};
use packet::{Out, Segment, ACK, RST, SYN};
use tcb::{Conn, Event, Table, Tuple, Wire};

/// Makes the flow of a new connection from `src` to `dst` (its SYN held) whose source side
/// is `sink`, and starts carrying it; `None` refuses it (the source is reset). The flow calls
/// [`UserSink::up`] once its AeroTP connection is up.
pub type Accept = Arc<
    dyn Fn(SocketAddr, SocketAddr, Arc<dyn UserSink>) -> Option<Arc<dyn Carrier>> + Send + Sync,
>;

/// Whether a new connection to a destination is carried (the allow/deny lists).
pub type Permit = Arc<dyn Fn(SocketAddr) -> bool + Send + Sync>;

/// The settings of the user-space TCP.
#[derive(Clone)]
pub struct Settings {
    /// The TUN device's name.
    pub device: String,
    /// Each flow's window: most bytes taken from a source and not yet confirmed.
    pub window: u64,
    /// Most connections at once (a SYN beyond is reset).
    pub max_conns: usize,
    pub permit: Permit,
    pub accept: Accept,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("device", &self.device)
            .field("window", &self.window)
            .field("max_conns", &self.max_conns)
            .finish_non_exhaustive()
    }
}

/// Counters of the user-space TCP (also in the ingress's log).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub segments: AtomicU64,
    /// Packets that were not TCP, malformed, or failed their checksum.
    pub skipped: AtomicU64,
    pub refused: AtomicU64,
    pub accepted: AtomicU64,
}

/// A running user-space TCP: its connections, their counters and the out-of-order bytes
/// they hold (at most `reasm::POOL_BYTES`) are its serving task's.
#[derive(Debug)]
pub struct UserTcp {
    /// The TUN device's name (the kernel's, when the settings' name has a pattern).
    pub device: String,
}

/// The device's MTU (the kernel's default for a new TUN device).
const MTU: usize = 1500;

/// Longest a source's SYN waits for the flow's AeroTP connection to be up before it is
/// answered anyway (the flow goes on opening): Linux resends a SYN after 1 s, then 2 s
/// later, and a source whose SYN went three times starts with a window of one segment.
pub(crate) const SYN_HOLD: std::time::Duration = std::time::Duration::from_secs(3);

/// The device's transmit queue for flows of window `window`: two windows of full segments
/// (a source sends at most its window at once when a confirmation jump opens it), within
/// 1,000–20,000 packets; the kernel holds them only while the ingress is behind.
fn queue_len(window: u64) -> u32 {
    (window.saturating_mul(2) / 1400).clamp(1000, 20_000) as u32
}

impl UserTcp {
    /// Creates the TUN device (errors say what is missing: root, the tun module) and starts
    /// serving it.
    pub fn start(s: Settings) -> std::io::Result<UserTcp> {
        let tun = AsyncTun::create(&s.device)?;
        let queue = queue_len(s.window);
        if let Err(e) = tun.set_queue_len(queue) {
            // Not fatal: the default queue works, bursts from the sources may overflow it.
            tracing::warn!(device = %tun.name(), queue, error = %e, "cannot lengthen the TUN device's queue");
        }
        let tun = Arc::new(tun);
        let table: Arc<Table> = Arc::default();
        let counters: Arc<Counters> = Arc::default();
        let pool = reasm::Pool::new(reasm::POOL_BYTES);
        let me = UserTcp {
            device: tun.name().to_owned(),
        };
        tokio::spawn(serve(tun, s, table, counters, pool));
        Ok(me)
    }
}

/// A RST for a segment no connection takes (RFC 9293 §3.10.7.1).
fn rst_for(s: &Segment<'_>) -> Vec<u8> {
    let (seq, ack, flags) = if s.has(ACK) {
        (s.ack, 0, RST)
    } else {
        (0, s.seq.wrapping_add(s.seq_len()), RST | ACK)
    };
    packet::build(&Out {
        src: s.dst,
        dst: s.src,
        seq,
        ack,
        flags,
        window: 0,
        syn_opts: None,
        ts: None,
        sack: Vec::new(),
        payload: &[],
    })
}

/// An initial sequence number nobody can guess from the connection.
fn iss(t: &Tuple) -> u32 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    t.hash(&mut h);
    std::time::SystemTime::now().hash(&mut h);
    h.finish() as u32
}

async fn serve(
    tun: Arc<AsyncTun>,
    s: Settings,
    table: Arc<Table>,
    counters: Arc<Counters>,
    pool: Arc<reasm::Pool>,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = match tun.recv(&mut buf).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(device = %tun.name(), error = %e, "TUN read failed; retrying in 100 ms");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let seg = match packet::parse(&buf[..n]) {
            Ok(seg) => seg,
            Err(why) => {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(?why, "TUN packet skipped");
                continue;
            }
        };
        counters.segments.fetch_add(1, Ordering::Relaxed);
        let t = Tuple {
            src: seg.src,
            dst: seg.dst,
        };
        let conn = table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&t)
            .cloned();
        match conn {
            Some(c) => {
                if c.on_segment(&seg) == Event::Established {
                    // The flow was made at the SYN; the segment may carry data.
                    c.on_segment(&seg);
                }
                c.wake.notify_one();
            }
            None if seg.has(SYN) && !seg.has(ACK) && !seg.has(RST) => {
                let full = table.lock().unwrap_or_else(|e| e.into_inner()).len() >= s.max_conns;
                if full || !(s.permit)(seg.dst) {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(from = %seg.src, dest = %seg.dst, full,
                        "intercepted TCP connection refused (reset)");
                    Wire::send(&*tun, &rst_for(&seg));
                    continue;
                }
                let c = Arc::new(Conn::hold(
                    &seg,
                    iss(&t),
                    s.window,
                    tun.clone(),
                    (MTU, pool.clone()),
                    SYN_HOLD,
                ));
                table
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(t, c.clone());
                new_flow(&c, &s, &counters);
                tokio::spawn(tcb::drive(c, table.clone()));
            }
            None if !seg.has(RST) => Wire::send(&*tun, &rst_for(&seg)),
            None => {}
        }
    }
}

/// The SYN of `c` arrived: its flow, or a RST if the ingress refuses it.
fn new_flow(c: &Arc<Conn>, s: &Settings, counters: &Counters) {
    let t = c.tuple();
    let sink: Arc<dyn UserSink> = c.clone();
    match (s.accept)(t.src, t.dst, sink) {
        Some(flow) => {
            counters.accepted.fetch_add(1, Ordering::Relaxed);
            c.set_flow(flow);
        }
        None => {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            c.refuse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_queue_holds_two_windows_within_its_bounds() {
        assert_eq!(queue_len(1_250_000), 1785, "the default window at 5 Mb/s");
        assert_eq!(queue_len(256 << 10), 1000, "never under 1,000 packets");
        assert_eq!(queue_len(16 << 20), 20_000, "nor over 20,000");
        assert_eq!(queue_len(u64::MAX), 20_000);
    }
}
