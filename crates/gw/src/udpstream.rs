//! UDP flows over lossy AeroTP connections, `quasi-reliable` (FEC, in order, may lose) or
//! `unreliable` (docs/gateway.md §UDP): one AeroTP connection per (UDP client, route), each
//! datagram framed inside the byte stream with a sequence number and a CRC, so that the
//! receiving gateway finds the datagrams again after lost TPDUs and counts what was lost.
//!
//! Frame: `0xA7 | kind u8 | len u16 | seq u32 | header check u16 | CRC-32C(payload) u32 |
//! payload`. Kinds: 0 datagram (seq numbered from 0 per direction), 1 hello (payload: class
//! u8 | flow id u64 | destination; repeated by the ingress until acknowledged, since its TPDU
//! may be lost), 2 hello-ack. The header check is the low 16 bits of the CRC-32C of the first
//! 8 bytes: a receiver scanning for the next frame after a loss rejects false starts at once.
//!
//! Phantom flows: AeroTP sends with the UDP checksum off, so a bit error in the air link's
//! UDP source port delivers a TPDU from an address the engine has never seen, and it accepts
//! a new connection for it. The egress identifies a flow only by its hello (CRC-checked,
//! carrying a flow id): a connection without a hello, or whose hello names a flow that is live
//! on another connection, is no flow — nothing is set up, logged as a new flow or counted as
//! dropped (the real flow counts the datagrams it missed as lost).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::Connection;
use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::UdpSocket;

use crate::config::Route;
use crate::ctx::{fid, new_flow_id, Ctx, DropReason, MAX_UDP, UDP_STREAM_PORT};
use crate::frame::Class;
/// Most stream-mode UDP flows (connections) per gateway; the least recently used is closed.
pub const MAX_FLOWS: usize = 256;
const MAGIC: u8 = 0xA7;
const HEADER: usize = 14;
/// Largest UDP payload carried.
pub const MAX_DATAGRAM: usize = MAX_UDP;
const K_DATA: u8 = 0;
const K_HELLO: u8 = 1;
const K_HELLO_ACK: u8 = 2;
const HELLO_REPEAT: Duration = Duration::from_millis(200);
/// A flow with no datagram either way for this long is closed. Two minutes, as a NAT must
/// keep a UDP mapping (RFC 4787, REQ-5) and Linux conntrack keeps a UDP stream: applications
/// that poll every minute expect their datagrams to keep one source port at the destination
/// and a late reply to find its way back, and a flow closed sooner breaks both (the next
/// datagram opens a new flow, from a new port at the egress). The flow's connection must
/// outlive it ([`conn_idle_timeout`]).
pub const FLOW_IDLE: Duration = Duration::from_secs(120);

/// The idle timeout of a stream-mode flow's AeroTP connection, at both gateways, for a
/// gateway `idle_timeout` of `gateway_idle`: [`FLOW_IDLE`] and then `gateway_idle` more.
/// Quasi-reliable and unreliable receivers answer no keep-alive, so with the gateway's own
/// timeout (30 s by default) a client's silence ended the connection first, and the log
/// blamed the other gateway ("nothing heard from the peer"). This way the flow's own idle
/// check closes it, saying the client and the destination were silent; the connection's
/// timeout still ends a flow whose other gateway is gone while datagrams keep coming.
pub fn conn_idle_timeout(gateway_idle: Duration) -> Duration {
    FLOW_IDLE + gateway_idle
}

/// Why an idle flow closed, for its log line.
fn idle_reason() -> String {
    format!(
        "idle: no datagram from the client or from the destination for {} s",
        FLOW_IDLE.as_secs()
    )
}

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

/// What became of a datagram handed to [`Sender::send`].
#[derive(Debug, PartialEq)]
enum Sent {
    Carried,
    /// The connection's send buffer had no room: dropped.
    QueueFull,
    /// The connection failed: the flow is over.
    Failed,
}

/// The sending side of one stream-mode UDP flow.
struct Sender {
    conn: Connection,
    seq: AtomicU32,
}

impl Sender {
    fn new(conn: Connection) -> Sender {
        Sender {
            conn,
            seq: AtomicU32::new(0),
        }
    }

    /// Frames and writes a datagram (and `pre`, e.g. a hello); drops it if the connection's
    /// send buffer has no room (UDP semantics: a full queue drops, it does not block).
    async fn send(&self, pre: Option<&[u8]>, payload: &[u8], stats: &StreamStats) -> Sent {
        let mut b = Vec::with_capacity(2 * HEADER + payload.len() + 64);
        if let Some(h) = pre {
            encode(K_HELLO, 0, h, &mut b);
        }
        let seq = self.seq.load(Ordering::Relaxed);
        encode(K_DATA, seq, payload, &mut b);
        if self.conn.writable() < b.len() {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            return Sent::QueueFull;
        }
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        let mut c = self.conn.clone();
        let ok = tokio::time::timeout(Duration::from_secs(1), c.write_all(&b))
            .await
            .is_ok_and(|r| r.is_ok());
        if ok {
            stats.sent.fetch_add(1, Ordering::Relaxed);
            Sent::Carried
        } else {
            Sent::Failed
        }
    }
}

/// Counts a datagram handed to a sender as carried or dropped (`Failed` too is a drop).
fn count_sent(ctx: &Ctx, sent: &Sent, who: &dyn std::fmt::Display) {
    match sent {
        Sent::Carried => {}
        Sent::QueueFull => {
            let d = format!("{who}: the AeroTP connection's send buffer is full");
            ctx.reg.drop_udp(DropReason::QueueFull, &d);
        }
        Sent::Failed => {
            let d = format!("{who}: the AeroTP connection failed");
            ctx.reg.drop_udp(DropReason::NoConnection, &d);
        }
    }
}

/// Where the frames a flow receives go.
trait FrameSink {
    /// Takes one whole frame (kind, payload).
    fn on_frame(&mut self, kind: u8, payload: Vec<u8>) -> impl Future<Output = ()> + Send;

    /// Whether the connection carries a real flow (its losses are counted).
    fn is_flow(&self) -> bool {
        true
    }
}

/// Reads frames until the connection ends or the flow is idle for [`FLOW_IDLE`]; hands each
/// to `sink`; counts losses into the gateway.
async fn receive(
    s: &Sender,
    d: &mut Deframer,
    stats: &StreamStats,
    ctx: &Ctx,
    sink: &mut impl FrameSink,
) -> String {
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
                        if kind == K_DATA {
                            stats.received.fetch_add(1, Ordering::Relaxed);
                        }
                        sink.on_frame(kind, p).await;
                        // Losses count for the gateway once the connection is known to be a
                        // flow (a phantom's gaps are the real flow's losses, counted there).
                        let lost = d.lost - stats.lost.load(Ordering::Relaxed);
                        if lost > 0 && sink.is_flow() {
                            stats.lost.fetch_add(lost, Ordering::Relaxed);
                            ctx.reg.udp_lost.fetch_add(lost, Ordering::Relaxed);
                        }
                    }
                }
                Ok(None) => return "closed by the other gateway".into(),
                Err(e) => return format!("AeroTP connection to the other gateway: {e}"),
            },
            _ = tick.tick() => {
                let sent = stats.sent.load(Ordering::Relaxed);
                if sent != last_sent {
                    last_sent = sent;
                    last = Instant::now();
                }
                if last.elapsed() > FLOW_IDLE {
                    return idle_reason();
                }
            }
        }
    }
}

/// The closing line of a flow; `who` names the flow's far end as this gateway sees it (the
/// client at the ingress, the ingress gateway at the egress).
fn log_end(s: &StreamStats, d: &Deframer, who: &str, end: &str) {
    tracing::info!(flow_of = %who, sent = s.sent.load(Ordering::Relaxed),
        received = s.received.load(Ordering::Relaxed), lost = d.lost,
        dropped_full_queue = s.dropped.load(Ordering::Relaxed), skipped_bytes = d.skipped,
        reason = %end, "UDP flow closed");
}

/// Passes a datagram to a local UDP socket, counting it out or as dropped.
async fn pass_on(ctx: &Ctx, sock: &UdpSocket, to: Option<SocketAddr>, p: &[u8]) {
    let r = match to {
        Some(a) => sock.send_to(p, a).await,
        None => sock.send(p).await,
    };
    match r {
        Ok(_) => {
            ctx.reg.udp_out.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            let who = to.map_or_else(|| "destination".to_string(), |a| a.to_string());
            ctx.reg
                .drop_udp(DropReason::SocketError, &format!("to {who}: {e}"));
        }
    }
}

// ---------------------------------------------------------------- ingress

struct IngressFlow {
    sender: Sender,
    hello: Vec<u8>,
    acked: AtomicBool,
    last_hello: Mutex<Option<Instant>>,
    dead: AtomicBool,
    stats: StreamStats,
}

impl IngressFlow {
    /// Whether the hello rides with the next datagram (not yet acknowledged, and not sent in
    /// the last [`HELLO_REPEAT`]).
    fn hello_due(&self) -> bool {
        let mut last = self.last_hello.lock().unwrap_or_else(|e| e.into_inner());
        let due =
            !self.acked.load(Ordering::Relaxed) && last.is_none_or(|t| t.elapsed() >= HELLO_REPEAT);
        if due {
            *last = Some(Instant::now());
        }
        due
    }
}

/// The flows of one route, by client (least recently opened first out).
#[derive(Default)]
struct Table {
    flows: HashMap<SocketAddr, Arc<IngressFlow>>,
    order: VecDeque<SocketAddr>,
}

impl Table {
    fn live(&self, client: &SocketAddr) -> Option<Arc<IngressFlow>> {
        self.flows
            .get(client)
            .filter(|f| !f.dead.load(Ordering::Relaxed))
            .cloned()
    }

    fn insert(&mut self, client: SocketAddr, f: Arc<IngressFlow>) {
        self.flows.insert(client, f);
        self.order.retain(|a| *a != client);
        self.order.push_back(client);
        while self.order.len() > MAX_FLOWS {
            if let Some(old) = self.order.pop_front() {
                if let Some(o) = self.flows.remove(&old) {
                    o.dead.store(true, Ordering::Relaxed);
                    o.sender.conn.close();
                }
            }
        }
    }
}

/// A stream-mode UDP route of the ingress.
struct IngressRoute {
    ctx: Arc<Ctx>,
    route: Route,
    peer: SocketAddr,
    sock: Arc<UdpSocket>,
    table: Mutex<Table>,
}

/// Ingress side of a stream-mode UDP route.
pub async fn start_ingress(ctx: Arc<Ctx>, route: Route, peer: SocketAddr) -> Result<()> {
    let sock = Arc::new(
        crate::appsock::bind(route.local)
            .await
            .with_context(|| format!("cannot bind UDP {}", route.local))?,
    );
    tracing::info!(listen = %route.local, mode = %route.mode, class = route.class.name(), "UDP flow over an AeroTP connection");
    let r = Arc::new(IngressRoute {
        ctx,
        route,
        peer,
        sock,
        table: Mutex::default(),
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        loop {
            let (n, from) = crate::udp::recv_datagram(&r.sock, &mut buf).await;
            r.ctx.reg.udp_in.fetch_add(1, Ordering::Relaxed);
            r.carry(from, &buf[..n]).await;
        }
    });
    Ok(())
}

impl IngressRoute {
    /// One client datagram into its flow's connection (opened on the client's first).
    async fn carry(self: &Arc<Self>, from: SocketAddr, payload: &[u8]) {
        let f = {
            let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
            match t.live(&from) {
                Some(f) => f,
                None => match self.open_flow(from) {
                    Ok(f) => {
                        t.insert(from, f.clone());
                        f
                    }
                    Err(e) => {
                        let d = format!("client {from}: cannot open a UDP flow: {e:#}");
                        self.ctx.reg.drop_udp(DropReason::NoConnection, &d);
                        return;
                    }
                },
            }
        };
        let pre = f.hello_due().then_some(&f.hello[..]);
        let sent = f.sender.send(pre, payload, &f.stats).await;
        count_sent(&self.ctx, &sent, &format_args!("client {from}"));
        if sent == Sent::Failed {
            f.dead.store(true, Ordering::Relaxed);
        }
    }

    fn open_flow(self: &Arc<Self>, client: SocketAddr) -> Result<Arc<IngressFlow>> {
        let (ctx, route) = (&self.ctx, &self.route);
        let mut cfg = ctx.conn_config(route.mode, route.fec, route.erasure, route.class);
        cfg.idle_timeout = conn_idle_timeout(ctx.settings.timeouts.idle);
        let conn = ctx.ep.connect(self.peer, UDP_STREAM_PORT, cfg)?;
        for &p in &ctx.settings.paths.peer_paths {
            crate::ctx::add_path(&conn, p)?;
        }
        let sender = Sender::new(conn);
        let id = new_flow_id();
        let mut hello = vec![route.class as u8];
        hello.extend_from_slice(&id.to_be_bytes());
        hello.extend_from_slice(&route.dest.as_bytes()[..route.dest.len().min(1024)]);
        let f = Arc::new(IngressFlow {
            sender,
            hello,
            acked: AtomicBool::new(false),
            last_hello: Mutex::new(None),
            dead: AtomicBool::new(false),
            stats: StreamStats::default(),
        });
        tracing::info!(%client, flow = %fid(id), dest = %route.dest, mode = %route.mode, "new UDP flow");
        let mut sink = IngressSink {
            ctx: ctx.clone(),
            flow: f.clone(),
            sock: self.sock.clone(),
            client,
        };
        tokio::spawn(async move {
            let mut d = Deframer::default();
            let f = sink.flow.clone();
            let end = receive(&f.sender, &mut d, &f.stats, &sink.ctx.clone(), &mut sink).await;
            f.dead.store(true, Ordering::Relaxed);
            f.sender.conn.close();
            log_end(&f.stats, &d, &format!("client {client}"), &end);
        });
        Ok(f)
    }
}

/// Ingress: frames from the egress (hello-ack, replies to the client).
struct IngressSink {
    ctx: Arc<Ctx>,
    flow: Arc<IngressFlow>,
    sock: Arc<UdpSocket>,
    client: SocketAddr,
}

impl FrameSink for IngressSink {
    async fn on_frame(&mut self, kind: u8, payload: Vec<u8>) {
        match kind {
            K_HELLO_ACK => self.flow.acked.store(true, Ordering::Relaxed),
            K_DATA => pass_on(&self.ctx, &self.sock, Some(self.client), &payload).await,
            _ => {}
        }
    }
}

// ---------------------------------------------------------------- egress

/// Egress: where a stream-mode connection stands.
enum Stage {
    /// No hello yet: datagrams before it are counted here, and become drops only if a hello
    /// proves the connection a real flow.
    AwaitHello { early: u64 },
    /// A real flow: its id and the socket towards the destination.
    Flow { id: u64, dest: Arc<UdpSocket> },
    /// A hello for a flow live on another connection: a phantom, ignored.
    Phantom,
}

/// Egress side of one stream-mode connection.
struct EgressSink {
    ctx: Arc<Ctx>,
    sender: Arc<Sender>,
    stats: Arc<StreamStats>,
    remote: SocketAddr,
    stage: Stage,
}

/// Egress side of one stream-mode UDP flow (an accepted quasi-reliable/unreliable connection).
pub async fn egress_flow(ctx: Arc<Ctx>, conn: Connection) {
    let remote = conn.remote_address();
    let sender = Arc::new(Sender::new(conn.clone()));
    let stats = Arc::new(StreamStats::default());
    let mut sink = EgressSink {
        ctx: ctx.clone(),
        sender: sender.clone(),
        stats: stats.clone(),
        remote,
        stage: Stage::AwaitHello { early: 0 },
    };
    let mut d = Deframer::default();
    let end = receive(&sender, &mut d, &stats, &ctx, &mut sink).await;
    conn.close();
    match sink.stage {
        Stage::Flow { id, .. } => {
            ctx.reg
                .udp_stream_ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            log_end(&stats, &d, &format!("ingress gateway {remote}"), &end);
        }
        Stage::AwaitHello { early } => {
            tracing::info!(%remote, datagrams = early, reason = %end,
                "an AeroTP connection without a UDP flow hello closed: its datagrams are \
                 counted lost by their real flow (a bit error in the link's UDP source port \
                 makes such a connection)");
        }
        Stage::Phantom => {}
    }
}

impl FrameSink for EgressSink {
    fn is_flow(&self) -> bool {
        matches!(self.stage, Stage::Flow { .. })
    }

    async fn on_frame(&mut self, kind: u8, payload: Vec<u8>) {
        match kind {
            K_HELLO => self.hello(&payload).await,
            K_DATA => match &mut self.stage {
                Stage::Flow { dest, .. } => pass_on(&self.ctx, dest, None, &payload).await,
                Stage::AwaitHello { early } => *early += 1,
                Stage::Phantom => {}
            },
            _ => {}
        }
    }
}

impl EgressSink {
    /// The flow's hello: sets the flow up (the first time), answers with a hello-ack.
    async fn hello(&mut self, p: &[u8]) {
        if let Stage::AwaitHello { early } = self.stage {
            let Some(stage) = self.set_up(p).await else {
                return;
            };
            if early > 0 {
                let d = format!("{} datagrams of a flow from {}", early, self.remote);
                for _ in 0..early {
                    self.ctx.reg.drop_udp(DropReason::BeforeHello, &d);
                }
            }
            self.stage = stage;
        }
        if !matches!(self.stage, Stage::Flow { .. }) {
            return;
        }
        let mut b = Vec::new();
        encode(K_HELLO_ACK, 0, &[], &mut b);
        if self.sender.conn.writable() >= b.len() {
            let mut c = self.sender.conn.clone();
            let _ = c.write_all(&b).await;
        }
    }

    /// The stage a first hello leads to; `None` if the flow is refused (connection aborted).
    async fn set_up(&mut self, p: &[u8]) -> Option<Stage> {
        let class = p
            .first()
            .and_then(|&c| Class::from_u8(c))
            .unwrap_or(Class::Bulk);
        let id = p
            .get(1..9)
            .map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
        let dest = String::from_utf8_lossy(p.get(9..).unwrap_or_default()).into_owned();
        let fresh = self
            .ctx
            .reg
            .udp_stream_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
        if !fresh {
            tracing::info!(remote = %self.remote, flow = %fid(id),
                "a second AeroTP connection claims a live UDP flow (a bit error in the link's \
                 UDP source port): ignored");
            self.sender.conn.abort("duplicate UDP flow");
            return Some(Stage::Phantom);
        }
        match connect_dest(&self.ctx, &dest).await {
            Ok(s) => {
                tracing::info!(ingress = %self.remote, flow = %fid(id), %dest, "new UDP flow");
                // The connection was accepted as bulk: the hello names its class.
                self.sender.conn.set_class(class);
                let r = Replies {
                    ctx: self.ctx.clone(),
                    sock: s.clone(),
                    sender: self.sender.clone(),
                    stats: self.stats.clone(),
                };
                tokio::spawn(r.run());
                Some(Stage::Flow { id, dest: s })
            }
            Err(e) => {
                tracing::warn!(ingress = %self.remote, %dest, error = %e, "UDP flow refused");
                self.ctx
                    .reg
                    .udp_stream_ids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                self.sender.conn.abort(&e);
                None
            }
        }
    }
}

async fn connect_dest(ctx: &Ctx, dest: &str) -> Result<Arc<UdpSocket>, String> {
    let s = &ctx.settings;
    let dest = if dest.is_empty() {
        s.egress
            .udp_connect
            .clone()
            .ok_or("no destination and no default --udp-connect at the egress")?
    } else if s.egress.allow_any
        || s.egress.allow.iter().any(|a| a == dest)
        || s.egress.udp_connect.as_deref() == Some(dest)
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
    let sock = crate::appsock::bind(bind)
        .await
        .map_err(|e| format!("UDP bind: {e}"))?;
    sock.connect(&dest)
        .await
        .map_err(|e| format!("{dest}: {e}"))?;
    Ok(Arc::new(sock))
}

/// Egress: destination → ingress, each reply datagram framed into the connection.
struct Replies {
    ctx: Arc<Ctx>,
    sock: Arc<UdpSocket>,
    sender: Arc<Sender>,
    stats: Arc<StreamStats>,
}

impl Replies {
    async fn run(self) {
        let mut buf = vec![0u8; 65_536];
        loop {
            let n = match tokio::time::timeout(FLOW_IDLE, self.sock.recv(&mut buf)).await {
                Ok(Ok(n)) => n,
                Ok(Err(_)) => continue,
                Err(_) => return,
            };
            if self.sender.conn.outcome().is_some() {
                return;
            }
            self.ctx.reg.udp_in.fetch_add(1, Ordering::Relaxed);
            let sent = self.sender.send(None, &buf[..n], &self.stats).await;
            count_sent(&self.ctx, &sent, &"a reply");
            if sent == Sent::Failed {
                return;
            }
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
                junk.push(if x.is_multiple_of(5) { MAGIC } else { x as u8 });
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
