//! UDP flows over lossy AeroTP connections, `quasi-reliable` (FEC, in order, may lose) or
//! `unreliable` (docs/gateway.md §UDP): one AeroTP connection per (UDP client, route), each
//! datagram framed inside the byte stream with a sequence number and a CRC, so that the
//! receiving gateway finds the datagrams again after lost TPDUs and counts what was lost.
//!
//! Frame: `0xA7 | kind u8 | len u16 | seq u32 | header check u16 | CRC-32C(payload) u32 |
//! payload`. Kinds: 0 datagram (seq numbered from 0 per direction), 1 hello (payload: the
//! class byte, then the destination; repeated by the ingress until acknowledged, since its
//! TPDU may be lost), 2 hello-ack. The header check is the low 16 bits of the CRC-32C of the first 8 bytes: a
//! receiver scanning for the next frame after a loss rejects false starts at once.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::Connection;
use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::UdpSocket;

use crate::config::Route;
use crate::flow::SessionLoad;
use crate::frame::Class;
use crate::gateway::{conn_config, Gateway};
use crate::sched::Registration;

/// AeroTP port of UDP flows carried in quasi-reliable / unreliable connections.
pub const UDP_STREAM_PORT: u16 = 3;
/// Most stream-mode UDP flows (connections) per gateway; the least recently used is closed.
pub const MAX_FLOWS: usize = 256;
const MAGIC: u8 = 0xA7;
const HEADER: usize = 14;
/// Largest UDP payload carried.
pub const MAX_DATAGRAM: usize = 65_507;
const K_DATA: u8 = 0;
const K_HELLO: u8 = 1;
const K_HELLO_ACK: u8 = 2;
const HELLO_REPEAT: Duration = Duration::from_millis(200);
/// A flow with no datagram either way for this long is closed.
const FLOW_IDLE: Duration = Duration::from_secs(120);

fn header_check(h: &[u8]) -> u16 {
    aerotp_wire::crc32c(&h[..8]) as u16
}

/// Appends one frame to `out`.
pub fn encode(kind: u8, seq: u32, payload: &[u8], out: &mut Vec<u8>) {
    let len = payload.len().min(MAX_DATAGRAM) as u16;
    let start = out.len();
    out.push(MAGIC);
    out.push(kind);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    let hc = header_check(&out[start..]);
    out.extend_from_slice(&hc.to_be_bytes());
    out.extend_from_slice(&aerotp_wire::crc32c(&payload[..usize::from(len)]).to_be_bytes());
    out.extend_from_slice(&payload[..usize::from(len)]);
}

/// Finds frames in a lossy byte stream; counts the datagrams missing by sequence number.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: VecDeque<u8>,
    next_seq: Option<u32>,
    /// Datagrams missing (sequence gaps).
    pub lost: u64,
    /// Bytes skipped while looking for a frame (the rest of a frame cut by a loss).
    pub skipped: u64,
}

impl Deframer {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend(data);
    }

    /// The next whole frame: (kind, payload).
    pub fn next_frame(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            match self.buf.iter().position(|&b| b == MAGIC) {
                Some(p) => {
                    self.skipped += p as u64;
                    self.buf.drain(..p);
                }
                None => {
                    self.skipped += self.buf.len() as u64;
                    self.buf.clear();
                    return None;
                }
            }
            if self.buf.len() < HEADER {
                return None;
            }
            let h: Vec<u8> = self.buf.range(..HEADER).copied().collect();
            let hc = u16::from_be_bytes([h[8], h[9]]);
            if header_check(&h) != hc || h[1] > K_HELLO_ACK {
                self.skipped += 1;
                self.buf.pop_front();
                continue;
            }
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if self.buf.len() < HEADER + len {
                return None;
            }
            let payload: Vec<u8> = self.buf.range(HEADER..HEADER + len).copied().collect();
            let crc = u32::from_be_bytes([h[10], h[11], h[12], h[13]]);
            if aerotp_wire::crc32c(&payload) != crc {
                self.skipped += 1;
                self.buf.pop_front();
                continue;
            }
            self.buf.drain(..HEADER + len);
            let kind = h[1];
            if kind == K_DATA {
                let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
                if let Some(n) = self.next_seq {
                    let gap = seq.wrapping_sub(n);
                    if gap < 1 << 31 {
                        self.lost += u64::from(gap);
                    }
                }
                self.next_seq = Some(seq.wrapping_add(1));
            }
            return Some((kind, payload));
        }
    }
}

/// Per-flow datagram counters (both roles), for the log and the metrics.
#[derive(Debug, Default)]
pub struct StreamStats {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    pub lost: AtomicU64,
    pub dropped: AtomicU64,
}

/// The sending side of one stream-mode UDP flow.
struct Sender {
    conn: Connection,
    seq: AtomicU32,
    send_buffer: usize,
    load: Arc<SessionLoad>,
}

impl Sender {
    /// Frames and writes a datagram (and `pre`, e.g. a hello); drops it if the connection's
    /// send buffer has no room (UDP semantics: a full queue drops, it does not block).
    async fn send(&self, pre: Option<&[u8]>, payload: &[u8], stats: &StreamStats) -> bool {
        let mut b = Vec::with_capacity(2 * HEADER + payload.len() + 64);
        if let Some(h) = pre {
            encode(K_HELLO, 0, h, &mut b);
        }
        let seq = self.seq.load(Ordering::Relaxed);
        encode(K_DATA, seq, payload, &mut b);
        if self.conn.writable() < b.len() {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        let mut c = self.conn.clone();
        let ok = tokio::time::timeout(Duration::from_secs(1), c.write_all(&b))
            .await
            .is_ok_and(|r| r.is_ok());
        if ok {
            stats.sent.fetch_add(1, Ordering::Relaxed);
        }
        self.update_load();
        ok
    }

    fn update_load(&self) {
        let queued = self.send_buffer.saturating_sub(self.conn.writable());
        self.load.backlog.store(queued as u64, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------- ingress

struct IngressFlow {
    sender: Sender,
    hello: Vec<u8>,
    acked: AtomicBool,
    last_hello: Mutex<Option<Instant>>,
    dead: AtomicBool,
    stats: Arc<StreamStats>,
    _reg: Registration,
}

#[derive(Default)]
struct Table {
    flows: HashMap<SocketAddr, Arc<IngressFlow>>,
    order: VecDeque<SocketAddr>,
}

/// Ingress side of a stream-mode UDP route.
pub async fn start_ingress(gw: Arc<Gateway>, route: Route, peer: SocketAddr) -> Result<()> {
    let sock = Arc::new(
        UdpSocket::bind(route.local)
            .await
            .with_context(|| format!("cannot bind UDP {}", route.local))?,
    );
    tracing::info!(listen = %route.local, mode = %route.mode, class = route.class.name(), "UDP flow over an AeroTP connection");
    let table = Arc::new(Mutex::new(Table::default()));
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        loop {
            let (n, from) = crate::udp::recv_datagram(&sock, &mut buf).await;
            let f = {
                let mut t = table.lock().unwrap_or_else(|e| e.into_inner());
                match t
                    .flows
                    .get(&from)
                    .filter(|f| !f.dead.load(Ordering::Relaxed))
                {
                    Some(f) => f.clone(),
                    None => match open_flow(&gw, &route, peer, from, sock.clone()) {
                        Ok(f) => {
                            t.flows.insert(from, f.clone());
                            t.order.retain(|a| *a != from);
                            t.order.push_back(from);
                            while t.order.len() > MAX_FLOWS {
                                if let Some(old) = t.order.pop_front() {
                                    if let Some(o) = t.flows.remove(&old) {
                                        o.dead.store(true, Ordering::Relaxed);
                                        o.sender.conn.close();
                                    }
                                }
                            }
                            f
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, client = %from, "cannot open a UDP flow");
                            gw.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    },
                }
            };
            let pre = {
                let mut last = f.last_hello.lock().unwrap_or_else(|e| e.into_inner());
                let due = !f.acked.load(Ordering::Relaxed)
                    && last.is_none_or(|t| t.elapsed() >= HELLO_REPEAT);
                if due {
                    *last = Some(Instant::now());
                }
                due
            };
            let before = f.stats.dropped.load(Ordering::Relaxed);
            let ok = f
                .sender
                .send(pre.then_some(&f.hello[..]), &buf[..n], &f.stats)
                .await;
            if f.stats.dropped.load(Ordering::Relaxed) > before {
                gw.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
            } else if ok {
                gw.reg.udp_in.fetch_add(1, Ordering::Relaxed);
            } else {
                gw.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                f.dead.store(true, Ordering::Relaxed);
            }
        }
    });
    Ok(())
}

fn open_flow(
    gw: &Arc<Gateway>,
    route: &Route,
    peer: SocketAddr,
    client: SocketAddr,
    sock: Arc<UdpSocket>,
) -> Result<Arc<IngressFlow>> {
    let rate = gw.sched.initial_rate(route.class);
    let cfg = conn_config(&gw.settings, route.mode, route.fec, rate);
    let send_buffer = cfg.send_buffer;
    let conn = gw.ep.connect(peer, UDP_STREAM_PORT, cfg)?;
    let load = Arc::new(SessionLoad::default());
    let reg = gw
        .sched
        .register(conn.clone(), route.class, load.clone(), None);
    let mut hello = vec![route.class as u8];
    hello.extend_from_slice(&route.dest.as_bytes()[..route.dest.len().min(1024)]);
    let f = Arc::new(IngressFlow {
        sender: Sender {
            conn: conn.clone(),
            seq: AtomicU32::new(0),
            send_buffer,
            load,
        },
        hello,
        acked: AtomicBool::new(false),
        last_hello: Mutex::new(None),
        dead: AtomicBool::new(false),
        stats: Arc::default(),
        _reg: reg,
    });
    tracing::info!(%client, dest = %route.dest, mode = %route.mode, "new UDP flow");
    let (g, f2) = (gw.clone(), f.clone());
    tokio::spawn(async move {
        let mut d = Deframer::default();
        let end = receive(&f2.sender, &mut d, &f2.stats, &g, |kind, p| {
            let sock = sock.clone();
            let f3 = f2.clone();
            async move {
                match kind {
                    K_HELLO_ACK => f3.acked.store(true, Ordering::Relaxed),
                    K_DATA => return sock.send_to(&p, client).await.is_ok(),
                    _ => {}
                }
                false
            }
        })
        .await;
        f2.dead.store(true, Ordering::Relaxed);
        f2.sender.conn.close();
        log_end(&f2.stats, &d, &client.to_string(), &end);
    });
    Ok(f)
}

fn log_end(s: &StreamStats, d: &Deframer, who: &str, end: &str) {
    tracing::info!(peer = %who, sent = s.sent.load(Ordering::Relaxed),
        received = s.received.load(Ordering::Relaxed), lost = d.lost,
        dropped_full_queue = s.dropped.load(Ordering::Relaxed), skipped_bytes = d.skipped,
        reason = %end, "UDP flow closed");
}

/// Reads frames until the connection ends or the flow is idle for [`FLOW_IDLE`]; hands each
/// to `on` (which returns whether a datagram was passed on); counts losses into the gateway.
async fn receive<F, Fut>(
    s: &Sender,
    d: &mut Deframer,
    stats: &StreamStats,
    gw: &Gateway,
    mut on: F,
) -> String
where
    F: FnMut(u8, Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let mut last = Instant::now();
    let mut last_sent = 0;
    loop {
        tokio::select! {
            r = s.conn.read_chunk() => match r {
                Ok(Some(c)) => {
                    d.push(&c.data);
                    last = Instant::now();
                    while let Some((kind, p)) = d.next_frame() {
                        let lost = d.lost - stats.lost.load(Ordering::Relaxed);
                        if lost > 0 {
                            stats.lost.fetch_add(lost, Ordering::Relaxed);
                            gw.reg.udp_lost.fetch_add(lost, Ordering::Relaxed);
                        }
                        if kind == K_DATA {
                            stats.received.fetch_add(1, Ordering::Relaxed);
                        }
                        if on(kind, p).await {
                            gw.reg.udp_out.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Ok(None) => return "closed by the peer".into(),
                Err(e) => return format!("AeroTP connection: {e}"),
            },
            _ = tick.tick() => {
                s.update_load();
                let sent = stats.sent.load(Ordering::Relaxed);
                if sent != last_sent {
                    last_sent = sent;
                    last = Instant::now();
                }
                if last.elapsed() > FLOW_IDLE {
                    return "idle".into();
                }
            }
        }
    }
}

// ---------------------------------------------------------------- egress

/// Egress side of one stream-mode UDP flow (an accepted quasi-reliable/unreliable connection).
pub async fn egress_flow(gw: Arc<Gateway>, conn: Connection) {
    let remote = conn.remote_address();
    let load = Arc::new(SessionLoad::default());
    let sender = Arc::new(Sender {
        conn: conn.clone(),
        seq: AtomicU32::new(0),
        send_buffer: conn_config(
            &gw.settings,
            conn.mode(),
            aerotp_net::FecSetting::Off,
            gw.settings.rate,
        )
        .send_buffer,
        load: load.clone(),
    });
    let stats = Arc::new(StreamStats::default());
    let dest_sock: Arc<Mutex<Option<Arc<UdpSocket>>>> = Arc::default();
    let mut reg: Option<Registration> = None;
    let mut d = Deframer::default();
    let end = {
        let (ds, snd, st, g) = (dest_sock.clone(), sender.clone(), stats.clone(), gw.clone());
        let reg_ref = &mut reg;
        let conn2 = conn.clone();
        let load2 = load.clone();
        receive(&sender, &mut d, &stats, &gw, move |kind, p| {
            let (ds, snd, st, g) = (ds.clone(), snd.clone(), st.clone(), g.clone());
            // The hello sets the flow up (once); later hellos are answered again.
            let setup = if kind == K_HELLO && reg_ref.is_none() {
                let class = p
                    .first()
                    .and_then(|&c| Class::from_u8(c))
                    .unwrap_or(Class::Bulk);
                *reg_ref = Some(g.sched.register(conn2.clone(), class, load2.clone(), None));
                Some(String::from_utf8_lossy(p.get(1..).unwrap_or_default()).into_owned())
            } else {
                None
            };
            async move {
                match kind {
                    K_HELLO => {
                        if let Some(dest) = setup {
                            match connect_dest(&g, &dest).await {
                                Ok(s) => {
                                    tracing::info!(ingress = %remote, %dest, "new UDP flow");
                                    *ds.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.clone());
                                    tokio::spawn(replies(s, snd.clone(), st.clone(), g.clone()));
                                }
                                Err(e) => {
                                    tracing::warn!(ingress = %remote, %dest, error = %e,
                                        "UDP flow refused");
                                    snd.conn.abort(&e);
                                    return false;
                                }
                            }
                        }
                        let mut b = Vec::new();
                        encode(K_HELLO_ACK, 0, &[], &mut b);
                        if snd.conn.writable() >= b.len() {
                            let mut c = snd.conn.clone();
                            let _ = c.write_all(&b).await;
                        }
                        false
                    }
                    K_DATA => {
                        let s = ds.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        match s {
                            Some(s) => s.send(&p).await.is_ok(),
                            None => {
                                // Before the hello (its TPDU lost): no destination yet.
                                g.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                                false
                            }
                        }
                    }
                    _ => false,
                }
            }
        })
        .await
    };
    drop(reg);
    conn.close();
    dest_sock.lock().unwrap_or_else(|e| e.into_inner()).take();
    log_end(&stats, &d, &remote.to_string(), &end);
}

async fn connect_dest(gw: &Gateway, dest: &str) -> Result<Arc<UdpSocket>, String> {
    let s = &gw.settings;
    let dest = if dest.is_empty() {
        s.udp_connect
            .clone()
            .ok_or("no destination and no default --udp-connect at the egress")?
    } else if s.allow_any
        || s.allow.iter().any(|a| a == dest)
        || s.udp_connect.as_deref() == Some(dest)
    {
        dest.to_owned()
    } else {
        return Err(format!(
            "destination {dest} not allowed at the egress (add it to --allow)"
        ));
    };
    let bind = if dest.starts_with('[') {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    let sock = UdpSocket::bind(bind)
        .await
        .map_err(|e| format!("UDP bind: {e}"))?;
    sock.connect(&dest)
        .await
        .map_err(|e| format!("{dest}: {e}"))?;
    Ok(Arc::new(sock))
}

/// Destination → ingress: each reply datagram framed into the connection.
async fn replies(sock: Arc<UdpSocket>, s: Arc<Sender>, st: Arc<StreamStats>, gw: Arc<Gateway>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = match tokio::time::timeout(FLOW_IDLE, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => continue,
            Err(_) => return,
        };
        if s.conn.outcome().is_some() {
            return;
        }
        let before = st.dropped.load(Ordering::Relaxed);
        if !s.send(None, &buf[..n], &st).await {
            return;
        }
        if st.dropped.load(Ordering::Relaxed) > before {
            gw.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            gw.reg.udp_in.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deframer_finds_frames_after_cuts_and_counts_losses() {
        let mut s = Vec::new();
        let dgrams: Vec<Vec<u8>> = (0..50u32)
            .map(|i| {
                (0..(i * 37 % 700 + 1))
                    .map(|j| (i + j) as u8 ^ 0xA7)
                    .collect()
            })
            .collect();
        encode(K_HELLO, 0, b"\x01dest", &mut s);
        let mut bounds = Vec::new();
        for (i, d) in dgrams.iter().enumerate() {
            let a = s.len();
            encode(K_DATA, i as u32, d, &mut s);
            bounds.push((a, s.len()));
        }
        // Cut out the middle of datagram 10 through the start of 12 (as a lost TPDU would),
        // and the whole of 30.
        let mut cut = Vec::new();
        cut.extend_from_slice(&s[..bounds[10].0 + 5]);
        cut.extend_from_slice(&s[bounds[12].0 + 3..bounds[30].0]);
        cut.extend_from_slice(&s[bounds[31].0..]);
        let mut d = Deframer::default();
        let mut got = Vec::new();
        for c in cut.chunks(97) {
            d.push(c);
            while let Some(f) = d.next_frame() {
                got.push(f);
            }
        }
        assert_eq!(got[0], (K_HELLO, b"\x01dest".to_vec()));
        let data: Vec<_> = got[1..].iter().map(|(_, p)| p.clone()).collect();
        let want: Vec<_> = dgrams
            .iter()
            .enumerate()
            .filter(|(i, _)| ![10, 11, 12, 30].contains(i))
            .map(|(_, d)| d.clone())
            .collect();
        assert_eq!(data, want);
        assert_eq!(d.lost, 4);
        assert!(d.skipped > 0);
    }

    #[test]
    fn garbage_yields_no_frames_and_a_frame_after_it_is_found() {
        // Pseudo-random bytes (xorshift), with the magic byte and a valid header check
        // planted often, so the slow paths (header passes, length or CRC does not) run.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut junk = Vec::new();
        for i in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 97 == 0 {
                // A header that checks, claiming up to 64 KiB of payload whose CRC is wrong.
                let mut f = Vec::new();
                encode(K_DATA, x as u32, &x.to_be_bytes(), &mut f);
                f[2..4].copy_from_slice(&(x as u16).to_be_bytes());
                let hc = header_check(&f[..8]);
                f[8..10].copy_from_slice(&hc.to_be_bytes());
                junk.extend_from_slice(&f);
            } else {
                junk.push(if x % 5 == 0 { MAGIC } else { x as u8 });
            }
        }
        let mut d = Deframer::default();
        let mut frames = 0;
        for c in junk.chunks(1400) {
            d.push(c);
            while d.next_frame().is_some() {
                frames += 1;
            }
        }
        assert_eq!(frames, 0, "a frame out of garbage");
        // The tail of the junk may still be waiting for a long claimed payload; a real frame
        // after enough further bytes is found all the same.
        let mut tail = vec![0u8; 70_000];
        encode(K_DATA, 7, b"telemetry", &mut tail);
        d.push(&tail);
        let mut got = Vec::new();
        while let Some(f) = d.next_frame() {
            got.push(f);
        }
        assert_eq!(got, vec![(K_DATA, b"telemetry".to_vec())]);
    }
}
