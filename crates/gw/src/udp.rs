//! UDP flows in AeroTP datagram mode: no state beyond the address maps; each UDP datagram is
//! one AeroTP datagram `[dest len u8][dest][payload]` (docs/gateway.md §UDP).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use std::time::Instant;

use anyhow::{Context, Result};
use tokio::net::UdpSocket;

use crate::config::Route;
use crate::gateway::{Gateway, UDP_PORT};
use crate::policer::Policer;

/// Most UDP peers remembered per gateway (the oldest is forgotten first).
const MAX_PEERS: usize = 4096;
const FIRST_PORT: u16 = 1024;

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
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Ingress: client address ↔ AeroTP source port.
#[derive(Default)]
struct Clients {
    by_addr: HashMap<(usize, SocketAddr), u16>,
    by_port: HashMap<u16, (usize, SocketAddr)>,
    order: VecDeque<u16>,
    next: u16,
}

impl Clients {
    fn port(&mut self, key: (usize, SocketAddr)) -> u16 {
        if let Some(p) = self.by_addr.get(&key) {
            return *p;
        }
        let p = if self.order.len() >= MAX_PEERS {
            let old = self.order.pop_front().expect("full");
            if let Some(k) = self.by_port.remove(&old) {
                self.by_addr.remove(&k);
            }
            old
        } else {
            let p = FIRST_PORT + self.next;
            self.next += 1;
            p
        };
        self.by_addr.insert(key, p);
        self.by_port.insert(p, key);
        self.order.push_back(p);
        p
    }
}

pub async fn start_ingress(gw: Arc<Gateway>, route: Route, peer: SocketAddr) -> Result<()> {
    static STATE: std::sync::OnceLock<Mutex<Option<Arc<IngressUdp>>>> = std::sync::OnceLock::new();
    let sock = Arc::new(
        UdpSocket::bind(route.local)
            .await
            .with_context(|| format!("cannot bind UDP {}", route.local))?,
    );
    tracing::info!(listen = %route.local, mode = %route.mode, "UDP flow");
    // One shared client table and one datagram receiver per gateway.
    let cell = STATE.get_or_init(|| Mutex::new(None));
    let shared = {
        let mut c = cell.lock().unwrap_or_else(|e| e.into_inner());
        match c.as_ref().filter(|s| Arc::ptr_eq(&s.gw, &gw)) {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(IngressUdp {
                    gw: gw.clone(),
                    clients: Mutex::new(Clients::default()),
                    socks: Mutex::new(Vec::new()),
                });
                *c = Some(s.clone());
                let s2 = s.clone();
                tokio::spawn(async move { s2.replies().await });
                s
            }
        }
    };
    let idx = {
        let mut v = shared.socks.lock().unwrap_or_else(|e| e.into_inner());
        v.push(sock.clone());
        v.len() - 1
    };
    let dest = route.dest.as_bytes()[..route.dest.len().min(255)].to_vec();
    let mtu = gw.settings.mtu;
    // The engine's rule for a datagram: no feedback, so `auto` is the strength for the
    // engine's initial BER assumption and target loss, `words` the parity for that many
    // codewords per MTU.
    let par = aerotp_net::datagram_parity(
        route.fec,
        mtu,
        &aerotp_net::ConnectionConfig::with_mode(aerotp_net::Mode::Datagram),
    );
    let class = route.class;
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        let mut policer = Policer::new(Instant::now());
        loop {
            let (n, from) = recv_datagram(&sock, &mut buf).await;
            let wire = shared.gw.sched.datagram_link_len(1 + dest.len() + n);
            let cap = shared.gw.sched.datagram_rate(class);
            if !policer.admit(wire, cap, Instant::now()) {
                shared.gw.reg.udp_policed.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let port = shared
                .clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .port((idx, from));
            let mut msg = Vec::with_capacity(1 + dest.len() + n);
            msg.push(dest.len() as u8);
            msg.extend_from_slice(&dest);
            msg.extend_from_slice(&buf[..n]);
            match shared
                .gw
                .ep
                .send_datagram(peer, port, UDP_PORT, &msg, par, mtu)
            {
                Ok(()) => {
                    shared.gw.sched.count_unpaced(msg.len());
                    shared.gw.reg.udp_in.fetch_add(1, Ordering::Relaxed)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "datagram too large or refused");
                    shared.gw.reg.udp_dropped.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    });
    Ok(())
}

struct IngressUdp {
    gw: Arc<Gateway>,
    clients: Mutex<Clients>,
    socks: Mutex<Vec<Arc<UdpSocket>>>,
}

impl IngressUdp {
    /// Replies from the egress back to the UDP clients.
    async fn replies(self: Arc<Self>) {
        while let Some(d) = self.gw.ep.recv_datagram().await {
            let Some(&(idx, client)) = self
                .clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .by_port
                .get(&d.dst_port)
            else {
                continue;
            };
            let sock = self
                .socks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(idx)
                .cloned();
            if let (Some(sock), Some((&0, payload))) = (sock, d.data.split_first()) {
                if sock.send_to(payload, client).await.is_ok() {
                    self.gw.reg.udp_out.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Egress: forwards datagrams to their destination and replies back.
pub async fn start_egress(gw: Arc<Gateway>) -> Result<()> {
    let g = gw.clone();
    tokio::spawn(async move {
        // (ingress address, its port, destination) → socket towards the destination.
        let mut socks: HashMap<(SocketAddr, u16, String), Arc<UdpSocket>> = HashMap::new();
        let mut order: VecDeque<(SocketAddr, u16, String)> = VecDeque::new();
        while let Some(d) = g.ep.recv_datagram().await {
            let Some((&dl, rest)) = d.data.split_first() else {
                continue;
            };
            if rest.len() < usize::from(dl) {
                continue;
            }
            let (dest, payload) = rest.split_at(usize::from(dl));
            let dest = String::from_utf8_lossy(dest).into_owned();
            let s = &g.settings;
            let dest = if dest.is_empty() {
                match &s.udp_connect {
                    Some(d) => d.clone(),
                    None => {
                        g.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
            } else if s.allow_any
                || s.allow.contains(&dest)
                || s.udp_connect.as_deref() == Some(&dest)
            {
                dest
            } else {
                g.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let key = (d.remote, d.src_port, dest.clone());
            let sock = match socks.get(&key) {
                Some(s) => s.clone(),
                None => {
                    let bind: SocketAddr = if dest.starts_with('[') {
                        "[::]:0".parse().expect("addr")
                    } else {
                        "0.0.0.0:0".parse().expect("addr")
                    };
                    let sock = match UdpSocket::bind(bind).await {
                        Ok(x) => x,
                        Err(_) => continue,
                    };
                    if sock.connect(&dest).await.is_err() {
                        g.reg.udp_dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let sock = Arc::new(sock);
                    if order.len() >= MAX_PEERS {
                        if let Some(old) = order.pop_front() {
                            socks.remove(&old);
                        }
                    }
                    socks.insert(key.clone(), sock.clone());
                    order.push_back(key.clone());
                    let g2 = g.clone();
                    let s2 = Arc::downgrade(&sock);
                    let (remote, port) = (d.remote, d.src_port);
                    let mtu = g.settings.mtu;
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 65_536];
                        loop {
                            let Some(s) = s2.upgrade() else { return };
                            let r = tokio::time::timeout(
                                std::time::Duration::from_secs(60),
                                s.recv(&mut buf[1..]),
                            )
                            .await;
                            drop(s);
                            match r {
                                Ok(Ok(n)) => {
                                    buf[0] = 0;
                                    if g2
                                        .ep
                                        .send_datagram(
                                            remote,
                                            UDP_PORT,
                                            port,
                                            &buf[..n + 1],
                                            0,
                                            mtu,
                                        )
                                        .is_ok()
                                    {
                                        g2.sched.count_unpaced(n + 1);
                                        g2.reg.udp_out.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                                Ok(Err(_)) => {}
                                Err(_) => continue,
                            }
                        }
                    });
                    sock
                }
            };
            match sock.send(payload).await {
                Ok(_) => g.reg.udp_in.fetch_add(1, Ordering::Relaxed),
                Err(_) => g.reg.udp_dropped.fetch_add(1, Ordering::Relaxed),
            };
        }
    });
    Ok(())
}
