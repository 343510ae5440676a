//! UDP flows in AeroTP datagram mode: no connection, no retransmission; each UDP datagram is
//! one message of one or more AeroTP datagrams ([`crate::dgram`]), so datagrams of any size
//! up to 65 507 bytes pass (docs/gateway.md §UDP).
//!
//! Flow identification uses only checked bytes: the AeroTP ports (in the header, under its
//! CRC-16) and the sender's IP address (under the IPv4 header checksum, which the kernel
//! verifies) — never the UDP source port of the air link's datagrams, which AeroTP sends with
//! the UDP checksum off (`SO_NO_CHECK`, so that corrupted datagrams reach FEC) and which a bit
//! error can therefore change: keyed by it, each corrupted port made a phantom flow.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::net::UdpSocket;

use crate::config::Route;
use crate::ctx::{Ctx, DropReason, UDP_PORT};
use crate::dgram::{self, Reassembler};
use crate::frame::Class;
use crate::policer::Policer;

/// Most UDP peers remembered per gateway (the oldest is forgotten first).
const MAX_PEERS: usize = 4096;
const FIRST_PORT: u16 = 1024;
/// The route index of transparently intercepted clients (no socket of `socks`).
const TRANSPARENT: usize = usize::MAX;
/// Most reply sockets of transparent clients' original destinations held open.
const MAX_REPLY_SOCKETS: usize = 256;
/// An egress socket towards a destination with no reply for this long stops listening.
const REPLY_IDLE: Duration = Duration::from_secs(60);

/// Receives the next datagram on a gateway's UDP socket. An ICMP error (port unreachable
/// after we sent to a client that went away) is reported by the kernel to the next receive,
/// once: it is skipped. Any other error is logged and retried after a pause, so a socket that
/// keeps failing cannot spin a core.
pub(crate) async fn recv_datagram(sock: &UdpSocket, buf: &mut [u8]) -> (usize, SocketAddr) {
    loop {
        match sock.recv_from(buf).await {
            Ok(x) => return x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                tracing::debug!(error = %e, "UDP recv: ICMP error from an earlier send");
            }
            Err(e) => {
                tracing::warn!(error = %e, "UDP recv failed; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// How a datagram-mode route's messages leave: the FEC parity of each AeroTP datagram, the
/// payload bytes per fragment, and the route's repair across datagrams (a fixed ratio, or
/// none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framing {
    pub parity: u8,
    pub chunk: usize,
    pub erasure: Option<aerotp_proto::ErasureSetting>,
}

/// The framing of datagram-mode messages sent with `fec` and `erasure` towards a
/// destination of `dest_len` bytes (an error names the sizes if a largest UDP datagram cannot
/// be carried, or why the repair setting cannot be used).
pub(crate) fn framing(
    ctx: &Ctx,
    fec: aerotp_net::FecSetting,
    erasure: &aerotp_proto::ErasureChoice,
    dest_len: usize,
) -> Result<Framing> {
    let mtu = ctx.settings.link.mtu;
    // The engine's rule for a datagram: no feedback, so `auto` is the strength for the
    // engine's initial BER assumption and target loss.
    let cfg = aerotp_net::ConnectionConfig::with_mode(aerotp_net::Mode::Datagram);
    let parity = aerotp_net::datagram_parity(fec, mtu, &cfg);
    let erasure = crate::config::datagram_erasure(erasure)?;
    // A route that repairs leaves room in each datagram for the repair that covers it.
    let room = erasure.map_or(0, |_| aerotp_proto::REPAIR_OVERHEAD);
    let body = aerotp_proto::max_body(ctx.sealed_mtu(), parity).saturating_sub(room);
    let chunk = dgram::chunk_size(body, dest_len).map_err(|e| {
        anyhow::anyhow!("mtu {mtu} with FEC parity {parity} and {room} bytes for repair: {e}")
    })?;
    Ok(Framing {
        parity,
        chunk,
        erasure,
    })
}

/// Sends the fragments of one message; `Err` names why the endpoint refused one (the rest of
/// the message is not sent: the receiver could not complete it).
fn send_message(
    ctx: &Ctx,
    to: SocketAddr,
    ports: (u16, u16),
    frags: &[Vec<u8>],
    framing: Framing,
    class: Class,
) -> Result<(), String> {
    let route = aerotp_proto::DatagramRoute {
        erasure: framing.erasure,
        class,
        ..aerotp_proto::DatagramRoute::plain(
            to,
            ports.0,
            ports.1,
            framing.parity,
            ctx.settings.link.mtu,
        )
    };
    for f in frags {
        ctx.ep
            .send_datagram_on(&route, f)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Ingress: a client by its route, its address and (transparent) its original destination.
type ClientKey = (usize, SocketAddr, Option<SocketAddr>);

/// Ingress: one UDP client of a route, known to the egress by its AeroTP source port.
#[derive(Debug)]
struct Client {
    route: usize,
    addr: SocketAddr,
    /// A transparently intercepted client's original destination: its replies leave from it.
    origin: Option<SocketAddr>,
    /// Next message number of this client's datagrams.
    next_msg: u32,
}

/// Ingress: client address ↔ AeroTP source port.
#[derive(Debug, Default)]
struct Clients {
    by_addr: HashMap<ClientKey, u16>,
    by_port: HashMap<u16, Client>,
    order: VecDeque<u16>,
    next: u16,
}

impl Clients {
    /// The client's port and the number of its next message.
    fn next_message(&mut self, key: ClientKey) -> (u16, u32) {
        let port = match self.by_addr.get(&key) {
            Some(p) => *p,
            None => self.add(key),
        };
        let c = self
            .by_port
            .get_mut(&port)
            .expect("by_addr and by_port agree");
        let msg = c.next_msg;
        c.next_msg = msg.wrapping_add(1);
        (port, msg)
    }

    fn add(&mut self, key: ClientKey) -> u16 {
        let p = if self.order.len() >= MAX_PEERS {
            let old = self.order.pop_front().expect("full");
            if let Some(c) = self.by_port.remove(&old) {
                self.by_addr.remove(&(c.route, c.addr, c.origin));
            }
            old
        } else {
            let p = FIRST_PORT + self.next;
            self.next += 1;
            p
        };
        self.by_addr.insert(key, p);
        let (route, addr, origin) = key;
        self.by_port.insert(
            p,
            Client {
                route,
                addr,
                origin,
                next_msg: 0,
            },
        );
        self.order.push_back(p);
        p
    }
}

/// Ingress: every datagram-mode route of a gateway, their clients and the replies.
#[derive(Debug)]
pub struct IngressDatagrams {
    ctx: Arc<Ctx>,
    peer: SocketAddr,
    clients: Mutex<Clients>,
    socks: Mutex<Vec<Arc<UdpSocket>>>,
    /// Transparent clients' reply sockets, by original destination (at most
    /// [`MAX_REPLY_SOCKETS`]; when full, emptied and reopened as replies come).
    reply_socks: Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>,
}

impl IngressDatagrams {
    /// The datagram routes' shared state; starts the task that relays replies to clients.
    pub fn start(ctx: Arc<Ctx>, peer: SocketAddr) -> Arc<IngressDatagrams> {
        let d = Arc::new(IngressDatagrams {
            ctx,
            peer,
            clients: Mutex::default(),
            socks: Mutex::default(),
            reply_socks: Mutex::default(),
        });
        tokio::spawn(d.clone().replies());
        d
    }

    /// Listens on `route`'s UDP address and carries what arrives.
    pub async fn add_route(self: &Arc<Self>, route: Route) -> Result<()> {
        let dest = route.dest.as_bytes()[..route.dest.len().min(255)].to_vec();
        let framing = framing(&self.ctx, route.fec, &route.erasure, dest.len())
            .with_context(|| format!("UDP route {}", route.local))?;
        let sock = Arc::new(
            crate::appsock::bind(route.local)
                .await
                .with_context(|| format!("cannot bind UDP {}", route.local))?,
        );
        tracing::info!(listen = %route.local, mode = %route.mode, fec_parity = framing.parity,
            payload_per_fragment = framing.chunk, repair = ?framing.erasure.map(|e| e.mode),
            "UDP flow");
        let idx = {
            let mut v = self.socks.lock().unwrap_or_else(|e| e.into_inner());
            v.push(sock.clone());
            v.len() - 1
        };
        let me = self.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            let mut policer = Policer::new(Instant::now());
            loop {
                let (n, from) = recv_datagram(&sock, &mut buf).await;
                me.ctx.reg.udp_in.fetch_add(1, Ordering::Relaxed);
                let r = (&route, idx, from, framing);
                me.carry(r, &dest, &buf[..n], &mut policer);
            }
        });
        Ok(())
    }

    /// A datagram intercepted transparently (docs/gateway.md §Transparent interception): to
    /// the egress with its original destination `orig`; replies leave from `orig`.
    pub(crate) fn carry_transparent(
        &self,
        (route, from, orig, framing): (&Route, SocketAddr, SocketAddr, Framing),
        payload: &[u8],
        policer: &mut Policer,
    ) {
        let dest = orig.to_string();
        let r = (route, (TRANSPARENT, from, Some(orig)), framing);
        self.carry_key(r, dest.as_bytes(), payload, policer);
    }

    /// One client datagram to the egress: policed, fragmented, sent.
    fn carry(
        &self,
        (route, idx, from, framing): (&Route, usize, SocketAddr, Framing),
        dest: &[u8],
        payload: &[u8],
        policer: &mut Policer,
    ) {
        self.carry_key((route, (idx, from, None), framing), dest, payload, policer);
    }

    fn carry_key(
        &self,
        (route, key, framing): (&Route, ClientKey, Framing),
        dest: &[u8],
        payload: &[u8],
        policer: &mut Policer,
    ) {
        let from = key.1;
        let (port, msg) = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_message(key);
        let frags = dgram::fragment(msg, dest, payload, framing.chunk);
        let ctx = &self.ctx;
        let wire: usize = frags.iter().map(|f| ctx.datagram_link_len(f.len())).sum();
        if !policer.admit(wire, ctx.datagram_rate(route.class), Instant::now()) {
            // Counted, not logged: policing is the configured share at work (docs/gateway.md).
            self.ctx.reg.udp_policed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Err(e) = send_message(
            &self.ctx,
            self.peer,
            (port, UDP_PORT),
            &frags,
            framing,
            route.class,
        ) {
            let detail = format!("client {from}, route {}: {e}", route.local);
            self.ctx.reg.drop_udp(DropReason::QueueFull, &detail);
        }
    }

    /// The socket a transparent client's replies leave from: bound (`IP_TRANSPARENT`) to the
    /// original destination `orig`, so the client sees them come from where it sent.
    fn reply_socket(&self, orig: SocketAddr) -> Option<Arc<UdpSocket>> {
        let mut m = self.reply_socks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get(&orig) {
            return Some(s.clone());
        }
        if m.len() >= MAX_REPLY_SOCKETS {
            m.clear();
        }
        match crate::transparent::origdst::reply_socket(orig) {
            Ok(s) => Some(m.entry(orig).or_insert(Arc::new(s)).clone()),
            Err(e) => {
                tracing::debug!(%orig, error = %e, "no reply socket");
                None
            }
        }
    }

    /// Replies from the egress back to the UDP clients.
    async fn replies(self: Arc<Self>) {
        let mut reasm: Reassembler<u16> = Reassembler::new(MAX_PEERS);
        while let Some(d) = self.ctx.ep.recv_datagram().await {
            let Some(f) = dgram::parse(&d.data) else {
                let detail = format!(
                    "a datagram-mode message from {} of another format",
                    d.remote
                );
                self.ctx.reg.drop_udp(DropReason::Malformed, &detail);
                continue;
            };
            let lost = reasm.lost;
            let msg = reasm.push(d.dst_port, &f, Instant::now());
            self.ctx
                .reg
                .udp_lost
                .fetch_add(reasm.lost.saturating_sub(lost), Ordering::Relaxed);
            let Some(msg) = msg else { continue };
            let target = {
                let c = self.clients.lock().unwrap_or_else(|e| e.into_inner());
                c.by_port
                    .get(&d.dst_port)
                    .map(|c| (c.route, c.addr, c.origin))
            };
            let Some((idx, client, origin)) = target else {
                let detail = format!("a reply for AeroTP port {}, no client", d.dst_port);
                self.ctx.reg.drop_udp(DropReason::NoDestination, &detail);
                continue;
            };
            let sock = match origin {
                Some(o) => self.reply_socket(o),
                None => self
                    .socks
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(idx)
                    .cloned(),
            };
            let sent = match sock {
                Some(s) => s.send_to(&msg.payload, client).await.map(|_| ()),
                None => Err(std::io::Error::other("no socket")),
            };
            match sent {
                Ok(()) => self.ctx.reg.udp_out.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    let detail = format!("reply to {client}: {e}");
                    self.ctx.reg.drop_udp(DropReason::SocketError, &detail);
                    continue;
                }
            };
        }
    }
}

/// Egress: a (sender, destination) pair's socket towards the destination.
#[derive(Debug)]
struct Peer {
    sock: Arc<UdpSocket>,
    /// Where replies go: the ingress's address, changed only when a new one is seen twice in
    /// a row (one corrupted UDP source port does not divert the replies).
    reply_to: Arc<Mutex<SocketAddr>>,
    candidate: Option<SocketAddr>,
}

/// Egress key: the ingress's IP address (IPv4-checksummed), its AeroTP port (CRC-checked),
/// the destination (CRC-checked).
type PeerKey = (IpAddr, u16, String);

/// Egress: forwards datagram-mode messages to their destinations and carries replies back.
pub fn start_egress(ctx: Arc<Ctx>) {
    tokio::spawn(async move {
        let mut peers: HashMap<PeerKey, Peer> = HashMap::new();
        let mut order: VecDeque<PeerKey> = VecDeque::new();
        let mut reasm: Reassembler<(IpAddr, u16)> = Reassembler::new(MAX_PEERS);
        while let Some(d) = ctx.ep.recv_datagram().await {
            let Some(f) = dgram::parse(&d.data) else {
                let detail = format!(
                    "a datagram-mode message from {} of another format",
                    d.remote
                );
                ctx.reg.drop_udp(DropReason::Malformed, &detail);
                continue;
            };
            let lost = reasm.lost;
            let msg = reasm.push((d.remote.ip(), d.src_port), &f, Instant::now());
            ctx.reg
                .udp_lost
                .fetch_add(reasm.lost.saturating_sub(lost), Ordering::Relaxed);
            let Some(msg) = msg else { continue };
            let Some(dest) = egress_dest(&ctx, &msg.dest) else {
                continue;
            };
            let key = (d.remote.ip(), d.src_port, dest);
            if !peers.contains_key(&key) {
                let Some(p) = open_peer(&ctx, &key, d.remote).await else {
                    continue;
                };
                if order.len() >= MAX_PEERS {
                    if let Some(old) = order.pop_front() {
                        peers.remove(&old);
                    }
                }
                peers.insert(key.clone(), p);
                order.push_back(key.clone());
            }
            let p = peers.get_mut(&key).expect("inserted above");
            p.note_sender(d.remote);
            match p.sock.send(&msg.payload).await {
                Ok(_) => ctx.reg.udp_out.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    let detail = format!("to {}: {e}", key.2);
                    ctx.reg.drop_udp(DropReason::SocketError, &detail);
                    continue;
                }
            };
        }
    });
}

impl Peer {
    fn note_sender(&mut self, from: SocketAddr) {
        let mut r = self.reply_to.lock().unwrap_or_else(|e| e.into_inner());
        if *r == from {
            self.candidate = None;
        } else if self.candidate == Some(from) {
            tracing::info!(old = %*r, new = %from, "datagram-mode replies now go to a new ingress address");
            *r = from;
            self.candidate = None;
        } else {
            self.candidate = Some(from);
        }
    }
}

/// The destination a message asks for, if allowed (else the drop is counted and logged).
fn egress_dest(ctx: &Ctx, asked: &[u8]) -> Option<String> {
    let s = &ctx.settings;
    let dest = String::from_utf8_lossy(asked).into_owned();
    if dest.is_empty() {
        if s.egress.udp_connect.is_none() {
            let detail = "no destination asked and no --udp-connect at the egress";
            ctx.reg.drop_udp(DropReason::NoDestination, &detail);
        }
        return s.egress.udp_connect.clone();
    }
    if s.egress.allow_any
        || s.egress.allow.contains(&dest)
        || s.egress.udp_connect.as_deref() == Some(&dest)
    {
        return Some(dest);
    }
    let detail = format!("destination {dest} not allowed at the egress (add it to --allow)");
    ctx.reg.drop_udp(DropReason::NotAllowed, &detail);
    None
}

/// A socket towards `key`'s destination and the task carrying its replies back.
async fn open_peer(ctx: &Arc<Ctx>, key: &PeerKey, from: SocketAddr) -> Option<Peer> {
    let dest = &key.2;
    let bind = if dest.starts_with('[') {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    let sock = match crate::appsock::bind(bind).await {
        Ok(s) => s,
        Err(e) => {
            ctx.reg
                .drop_udp(DropReason::SocketError, &format!("UDP bind {bind}: {e}"));
            return None;
        }
    };
    if let Err(e) = sock.connect(dest.as_str()).await {
        ctx.reg
            .drop_udp(DropReason::SocketError, &format!("{dest}: {e}"));
        return None;
    }
    let framing = match framing(
        ctx,
        ctx.settings.coding.fec,
        &ctx.settings.coding.erasure,
        0,
    ) {
        Ok(x) => x,
        Err(e) => {
            ctx.reg.drop_udp(DropReason::SocketError, &format!("{e:#}"));
            return None;
        }
    };
    let sock = Arc::new(sock);
    let reply_to = Arc::new(Mutex::new(from));
    let task = ReplyTask {
        ctx: ctx.clone(),
        sock: Arc::downgrade(&sock),
        reply_to: reply_to.clone(),
        port: key.1,
        framing,
    };
    tokio::spawn(task.run());
    Some(Peer {
        sock,
        reply_to,
        candidate: None,
    })
}

/// Egress: replies of one destination socket, carried back to the ingress.
struct ReplyTask {
    ctx: Arc<Ctx>,
    sock: std::sync::Weak<UdpSocket>,
    reply_to: Arc<Mutex<SocketAddr>>,
    /// The client's AeroTP port at the ingress.
    port: u16,
    framing: Framing,
}

impl ReplyTask {
    async fn run(self) {
        let mut buf = vec![0u8; 65_536];
        let next_msg = AtomicU32::new(0);
        loop {
            let Some(s) = self.sock.upgrade() else { return };
            let r = tokio::time::timeout(REPLY_IDLE, s.recv(&mut buf)).await;
            drop(s);
            let n = match r {
                Ok(Ok(n)) => n,
                Ok(Err(_)) | Err(_) => continue,
            };
            self.ctx.reg.udp_in.fetch_add(1, Ordering::Relaxed);
            let msg = next_msg.fetch_add(1, Ordering::Relaxed);
            let frags = dgram::fragment(msg, &[], &buf[..n], self.framing.chunk);
            let to = *self.reply_to.lock().unwrap_or_else(|e| e.into_inner());
            // Replies go as bulk: a route's class is the ingress's setting and is not sent
            // over (docs/gateway.md, "Traffic classes").
            let ports = (UDP_PORT, self.port);
            if let Err(e) = send_message(&self.ctx, to, ports, &frags, self.framing, Class::Bulk) {
                let detail = format!("reply to {to}: {e}");
                self.ctx.reg.drop_udp(DropReason::QueueFull, &detail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use aerotp_net::{datagram_parity, ConnectionConfig, FecSetting, Mode};

    /// What `fec = auto` (the default) costs a datagram-mode route at the default MTU, the
    /// figure docs/modes.md quotes: the share of each AeroTP datagram that is parity.
    #[test]
    fn auto_parity_of_a_datagram_costs_a_few_percent_at_the_default_mtu() {
        let cfg = ConnectionConfig::with_mode(Mode::Datagram);
        let p = datagram_parity(FecSetting::Auto, 1400, &cfg);
        let body = aerotp_proto::max_body(1400, p);
        let plain = aerotp_proto::max_body(1400, 0);
        let cost = 1.0 - body as f64 / plain as f64;
        eprintln!(
            "auto parity {p}: {body} of {plain} payload bytes, {:.1} %",
            cost * 100.0
        );
        assert!(p > 0 && cost < 0.10, "parity {p}, cost {cost}");
    }
}
