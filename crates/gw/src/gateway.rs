//! The ingress and egress gateways (docs/gateway.md).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerotp_net::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
use anyhow::{Context, Result};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::config::{FlowKind, Route, Settings};
use crate::flow::{run_session, Budget, Flow, SessionEnd, SessionLoad};
use crate::frame::{Class, Frame, Hello};
use crate::progress::{self, Completed, EgressMeta, ProgressLog};
use crate::sched::Scheduler;
use crate::store::{self, Custody, DiskLog, FlowMeta};

/// AeroTP port of TCP flows.
pub const TCP_PORT: u16 = 1;
/// AeroTP port of UDP flows (datagram mode) and first port of stream-mode UDP flows.
pub const UDP_PORT: u16 = 2;
/// AeroTP send buffer of every flow connection (bytes the engine queues or has in flight).
pub const SEND_BUFFER: usize = 1 << 20;
/// Egress: per-flow window of the egress → ingress direction held in memory.
pub const REVERSE_WINDOW: u64 = 4 << 20;
/// Egress: completed flows remembered (a resume after a lost final confirmation).
const COMPLETED_KEPT: usize = 4096;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Counters and live flows of a gateway, for the metrics endpoint.
#[derive(Debug, Default)]
pub struct Registry {
    pub role: &'static str,
    pub flows: Mutex<HashMap<u64, Arc<Flow>>>,
    pub flows_total: AtomicU64,
    pub flows_completed: AtomicU64,
    pub flows_reset: AtomicU64,
    pub resumes: AtomicU64,
    pub udp_in: AtomicU64,
    pub udp_out: AtomicU64,
    pub udp_dropped: AtomicU64,
    /// Datagram-mode datagrams over their class's share (dropped at the ingress).
    pub udp_policed: AtomicU64,
    /// Datagrams missing at this gateway (sequence gaps in stream-mode UDP flows).
    pub udp_lost: AtomicU64,
}

impl Registry {
    fn insert(&self, f: &Arc<Flow>) {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(f.id, f.clone());
    }
    fn remove(&self, id: u64) {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
    /// The live flows now.
    pub fn snapshot(&self) -> Vec<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
    pub fn get(&self, id: u64) -> Option<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }
}

/// A running gateway's shared parts.
#[derive(Debug)]
pub struct Gateway {
    pub settings: Settings,
    pub ep: Endpoint,
    pub sched: Arc<Scheduler>,
    pub budget: Arc<Budget>,
    pub reg: Arc<Registry>,
    completed: Mutex<Completed>,
}

pub fn conn_config(
    s: &Settings,
    mode: Mode,
    fec: aerotp_net::FecSetting,
    rate: u64,
) -> ConnectionConfig {
    let mut c = ConnectionConfig::with_mode(mode);
    c.rate_bps = rate;
    c.mtu = s.mtu;
    c.fec = fec;
    c.idle_timeout = s.idle_timeout;
    // Small enough that confirmations are not stuck behind seconds of queued data.
    c.send_buffer = SEND_BUFFER;
    c
}

fn new_flow_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = t
        ^ (u64::from(std::process::id()) << 40)
        ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(20);
    // Spread the time, pid and counter bits over all 64 bits.
    aerotp_link::splitmix64(x, 1)
}

fn fid(id: u64) -> String {
    format!("{id:016x}")
}

impl Gateway {
    fn new(settings: Settings, ep: Endpoint, role: &'static str) -> Arc<Gateway> {
        let sched = Scheduler::new(settings.rate, settings.policy);
        sched.spawn();
        let budget = Budget::new(settings.store_capacity);
        Arc::new(Gateway {
            settings,
            ep,
            sched,
            budget,
            reg: Arc::new(Registry {
                role,
                ..Registry::default()
            }),
            completed: Mutex::new(Completed::default()),
        })
    }

    // ---------------------------------------------------------------- ingress

    /// Starts an ingress gateway: restores the store's flows, listens on every route.
    pub async fn ingress(settings: Settings) -> Result<Arc<Gateway>> {
        let peer = settings
            .peer
            .context("ingress needs --peer (the egress's address)")?;
        if settings.routes.is_empty() {
            anyhow::bail!(
                "ingress needs at least one flow (--tcp-listen, --udp-listen or [[flow]])"
            );
        }
        let needs_store = settings
            .routes
            .iter()
            .any(|r| r.kind == FlowKind::Tcp && r.mode == Mode::NearReliable);
        if needs_store && settings.store.is_none() {
            anyhow::bail!("near-reliable TCP flows need --store DIR (the custody store)");
        }
        let ep = Endpoint::bind(settings.bind, EndpointConfig::default())?;
        tracing::info!(local = %ep.local_addr(), %peer, "ingress up");
        let gw = Gateway::new(settings, ep, "ingress");
        if let Some(root) = &gw.settings.store {
            for r in store::restore_all(root)? {
                match r {
                    Ok(r) => {
                        let class = Class::from_u8(r.meta.class).unwrap_or(Class::Bulk);
                        tracing::info!(flow = %fid(r.meta.flow_id), base = r.base, end = r.end,
                            fin = r.fin, dest = %r.meta.dest, "restoring flow from the store");
                        let flow = Flow::new(
                            r.meta.flow_id,
                            class,
                            r.meta.dest.clone(),
                            r.meta.route.clone(),
                            Custody::Disk(r.log),
                            gw.budget.clone(),
                            u64::MAX,
                            r.base,
                            r.end,
                            r.fin,
                        );
                        flow.detach_tcp_source();
                        gw.reg.insert(&flow);
                        let g = gw.clone();
                        tokio::spawn(async move {
                            g.drive_ingress_flow(
                                flow,
                                Mode::NearReliable,
                                aerotp_net::FecSetting::Off,
                                true,
                            )
                            .await
                        });
                    }
                    Err((p, e)) => {
                        tracing::error!(dir = %p.display(), error = %e, "cannot restore flow; left in place")
                    }
                }
            }
        }
        for route in gw.settings.routes.clone() {
            match route.kind {
                FlowKind::Tcp => {
                    let l = TcpListener::bind(route.local)
                        .await
                        .with_context(|| format!("cannot listen on TCP {}", route.local))?;
                    tracing::info!(listen = %route.local, mode = %route.mode, class = route.class.name(), "TCP flow");
                    let g = gw.clone();
                    tokio::spawn(async move { g.accept_tcp(l, route).await });
                }
                FlowKind::Udp if route.mode == Mode::Datagram => {
                    crate::udp::start_ingress(gw.clone(), route, peer).await?
                }
                FlowKind::Udp => crate::udpstream::start_ingress(gw.clone(), route, peer).await?,
            }
        }
        Ok(gw)
    }

    async fn accept_tcp(self: Arc<Self>, l: TcpListener, route: Route) {
        loop {
            let (s, from) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "TCP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let id = new_flow_id();
            tracing::info!(flow = %fid(id), %from, mode = %route.mode, "new TCP flow");
            let custody = if route.mode == Mode::NearReliable {
                let meta = FlowMeta {
                    flow_id: id,
                    class: route.class as u8,
                    dest: route.dest.clone(),
                    route: route.local.to_string(),
                };
                let root = self.settings.store.clone().expect("checked at start");
                match tokio::task::spawn_blocking(move || DiskLog::create(&root, &meta)).await {
                    Ok(Ok(d)) => Custody::Disk(d),
                    r => {
                        tracing::error!(flow = %fid(id), result = ?r.map(|x| x.err()), "cannot create store: refusing the connection");
                        if let Ok(std) = s.into_std() {
                            let _ = socket2::SockRef::from(&std).set_linger(Some(Duration::ZERO));
                        }
                        continue;
                    }
                }
            } else {
                // End-to-end semantics: a small receive buffer so TCP's own flow control
                // carries the destination's pace back to the source.
                let _ = socket2::SockRef::from(&s).set_recv_buffer_size(64 * 1024);
                Custody::mem(0)
            };
            let window = if route.mode == Mode::NearReliable {
                u64::MAX
            } else {
                self.settings.window
            };
            let flow = Flow::new(
                id,
                route.class,
                route.dest.clone(),
                route.local.to_string(),
                custody,
                self.budget.clone(),
                window,
                0,
                0,
                false,
            );
            flow.attach_tcp(s).await;
            self.reg.insert(&flow);
            self.reg.flows_total.fetch_add(1, Ordering::Relaxed);
            let g = self.clone();
            let (mode, fec) = (route.mode, route.fec);
            tokio::spawn(async move { g.drive_ingress_flow(flow, mode, fec, false).await });
        }
    }

    /// Carries one flow to the egress, resuming on new connections while custody lasts.
    async fn drive_ingress_flow(
        self: Arc<Self>,
        flow: Arc<Flow>,
        mode: Mode,
        fec: aerotp_net::FecSetting,
        restored: bool,
    ) {
        let peer = self.settings.peer.expect("ingress has a peer");
        let deadline = Instant::now() + self.settings.resume_timeout;
        let mut attempt: u32 = 0;
        let end = loop {
            let rate = self.sched.initial_rate(flow.class);
            let cfg = conn_config(&self.settings, mode, fec, rate);
            let broken = match self.ep.connect(peer, TCP_PORT, cfg) {
                Err(e) => format!("connect: {e}"),
                Ok(mut conn) => {
                    let (in_delivered, _) = flow.in_progress();
                    let hello = Hello {
                        flow_id: flow.id,
                        resume: restored || attempt > 0,
                        custody: flow.custody_mode,
                        class: flow.class,
                        in_delivered,
                        dest: flow.dest.clone(),
                    };
                    let mut reader = BufReader::new(conn.clone());
                    let first = async {
                        conn.write_all(&hello.encode()).await?;
                        Frame::read(&mut reader).await
                    };
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, first).await {
                        Ok(Ok(Some(Frame::Accept { delivered, fin }))) => {
                            if let Err(e) = flow.peer_has(delivered, fin).await {
                                conn.abort(&e);
                                flow.reset(e.clone(), false);
                                break SessionEnd::Reset(e);
                            }
                            if attempt > 0 || restored {
                                self.reg.resumes.fetch_add(1, Ordering::Relaxed);
                                flow.lock().resumes += 1;
                                tracing::info!(flow = %fid(flow.id), from = delivered, "flow resumed");
                            }
                            let load = Arc::new(SessionLoad::default());
                            let reg = self.sched.register(
                                conn.clone(),
                                flow.class,
                                load.clone(),
                                Some(flow.clone()),
                            );
                            let e = run_session(flow.clone(), conn, reader, delivered, load).await;
                            drop(reg);
                            match e {
                                SessionEnd::Broken(r) => r,
                                e => break e,
                            }
                        }
                        Ok(Ok(Some(Frame::Refused(r)))) => {
                            conn.close();
                            if attempt > 0 || restored {
                                tracing::error!(flow = %fid(flow.id), reason = %r,
                                    "the egress refused to resume the flow: its custody is dropped \
                                     and the flow is lost (see the egress log)");
                            }
                            flow.reset(format!("refused by the egress: {r}"), false);
                            break SessionEnd::Reset(r);
                        }
                        Ok(Ok(other)) => {
                            conn.abort("bad handshake");
                            format!("bad handshake answer {other:?}")
                        }
                        Ok(Err(e)) => {
                            conn.abort("handshake failed");
                            format!("handshake: {e}")
                        }
                        Err(_) => {
                            conn.abort("handshake timeout");
                            "handshake timed out".into()
                        }
                    }
                }
            };
            if !flow.custody_mode || Instant::now() > deadline {
                flow.reset(format!("connection lost: {broken}"), false);
                break SessionEnd::Broken(broken);
            }
            attempt += 1;
            let wait = Duration::from_millis(250u64 << attempt.min(5)).min(Duration::from_secs(5));
            tracing::warn!(flow = %fid(flow.id), reason = %broken, ?wait, "connection lost; resuming");
            tokio::time::sleep(wait).await;
        };
        self.finish_flow(&flow, &end, true);
    }

    fn finish_flow(&self, flow: &Arc<Flow>, end: &SessionEnd, remove_store: bool) {
        match end {
            SessionEnd::Complete => {
                self.reg.flows_completed.fetch_add(1, Ordering::Relaxed);
                let st = flow.lock();
                tracing::info!(flow = %fid(flow.id), sent = st.end, received = st.in_delivered,
                    secs = flow.started.elapsed().as_secs_f64(), "flow complete");
            }
            SessionEnd::Reset(r) | SessionEnd::Broken(r) => {
                self.reg.flows_reset.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(flow = %fid(flow.id), reason = %r, "flow ended without completion");
            }
        }
        flow.release_budget();
        if !matches!(end, SessionEnd::Complete) {
            if let Some(log) = flow.take_progress() {
                if let Err(e) = log.remove() {
                    tracing::warn!(flow = %fid(flow.id), error = %e, "cannot remove the flow's egress record");
                }
            }
        }
        let keep =
            matches!(end, SessionEnd::Broken(_)) && flow.custody_mode && self.reg.role == "ingress";
        if remove_store && !keep {
            flow.remove_store();
        } else if keep {
            tracing::error!(flow = %fid(flow.id), "resume timeout: custody left in the store, retried at next start");
        }
        self.reg.remove(flow.id);
    }

    // ---------------------------------------------------------------- egress

    /// Starts an egress gateway.
    pub async fn egress(settings: Settings) -> Result<Arc<Gateway>> {
        let listen = settings
            .listen
            .context("egress needs --listen ADDR (UDP, for AeroTP)")?;
        let ep = Endpoint::bind(listen, EndpointConfig::default())?;
        // The ingress picks mode and FEC for its direction per flow; what the egress sends
        // back (answers, downloads) uses the egress's own `fec`.
        let mut cfg = conn_config(&settings, Mode::NearReliable, settings.fec, settings.rate);
        cfg.rate_bps = settings.rate;
        ep.listen(TCP_PORT, cfg.clone())?;
        ep.listen(crate::udpstream::UDP_STREAM_PORT, cfg)?;
        tracing::info!(local = %ep.local_addr(), "egress up");
        let gw = Gateway::new(settings, ep, "egress");
        if let Some(root) = gw.settings.store.clone() {
            gw.restore_egress(&root).await?;
        }
        crate::udp::start_egress(gw.clone()).await?;
        let g = gw.clone();
        tokio::spawn(async move {
            while let Some(conn) = g.ep.accept().await {
                let g2 = g.clone();
                match conn.mode() {
                    Mode::QuasiReliable | Mode::Unreliable => {
                        tokio::spawn(crate::udpstream::egress_flow(g2, conn))
                    }
                    _ => tokio::spawn(async move { g2.egress_conn(conn).await }),
                };
            }
        });
        Ok(gw)
    }

    /// Egress restart: flows recorded in the store wait for their ingress to resume them
    /// (docs/gateway.md §Egress restart); completed ones answer a late resume.
    async fn restore_egress(self: &Arc<Self>, root: &std::path::Path) -> Result<()> {
        let r = root.to_owned();
        let found = tokio::task::spawn_blocking(move || progress::restore_all(&r))
            .await?
            .with_context(|| {
                format!(
                    "cannot read the egress store {} (give a writable --store directory)",
                    root.display()
                )
            })?;
        let mut done = Vec::new();
        let boot = progress::boot_id();
        for f in found {
            let f = match f {
                Ok(f) => f,
                Err((p, e)) => {
                    tracing::error!(file = %p.display(), error = %e,
                        "cannot read an egress flow record; left in place (remove it if the flow is over)");
                    continue;
                }
            };
            if f.progress.flags & progress::COMPLETE != 0 {
                done.push(f);
                continue;
            }
            let id = f.meta.flow_id;
            let class = Class::from_u8(f.meta.class).unwrap_or(Class::Bulk);
            tracing::info!(flow = %fid(id), dest = %f.meta.dest, written = f.progress.written,
                intent = f.progress.intent, flags = f.progress.flags,
                "restored flow from the egress store; waiting for the ingress to resume it");
            let flow = Flow::new(
                id,
                class,
                f.meta.dest.clone(),
                String::new(),
                Custody::mem(0),
                self.budget.clone(),
                REVERSE_WINDOW,
                0,
                0,
                false,
            );
            {
                let mut st = flow.lock();
                st.in_delivered = f.progress.written;
                st.in_fin = f.progress.flags & progress::IN_FIN != 0;
            }
            let rebooted = f.meta.boot_id != boot;
            *flow.restored.lock().unwrap_or_else(|e| e.into_inner()) = Some((f.progress, rebooted));
            flow.set_progress(f.log);
            self.reg.insert(&flow);
            self.expire_unresumed(flow, 0);
        }
        done.sort_by_key(|f| f.modified);
        let mut c = self.completed.lock().unwrap_or_else(|e| e.into_inner());
        for f in done {
            c.push(
                f.meta.flow_id,
                f.progress.written,
                Some(f.log),
                COMPLETED_KEPT,
            );
        }
        Ok(())
    }

    /// Resets `flow` if no ingress resumes it within the resume timeout.
    fn expire_unresumed(self: &Arc<Self>, flow: Arc<Flow>, resumes: u64) {
        let g = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(g.settings.resume_timeout).await;
            let stale = flow.lock().resumes == resumes
                && flow
                    .conn
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none();
            if stale && g.reg.get(flow.id).is_some() {
                flow.reset("no resume within the resume timeout".into(), false);
                g.finish_flow(&flow, &SessionEnd::Reset("resume timeout".into()), false);
            }
        });
    }

    /// Egress: a flow restored after a restart is resumed by its ingress. Returns why it
    /// cannot continue exactly, or attaches a new destination connection.
    async fn continue_restored(
        &self,
        flow: &Arc<Flow>,
        (p, rebooted): (progress::Progress, bool),
    ) -> Result<(), String> {
        if rebooted {
            return Err(format!(
                "the egress host rebooted during this flow (boot id changed): the destination \
                 connection's unsent bytes died with it and the record of what was written \
                 may be stale ({} bytes recorded), so the flow is reset",
                p.written
            ));
        }
        if let Some((a, b)) = p.in_doubt() {
            return Err(format!(
                "the egress was restarted while writing bytes {a}..{b} of this flow to the \
                 destination; whether they reached it is unknown, so the flow is reset rather \
                 than risk a loss or a duplicate"
            ));
        }
        if p.flags & progress::REVERSE != 0 {
            return Err(format!(
                "the egress was restarted and the destination connection ({}) had already sent \
                 data back; a new connection cannot continue that conversation, so the flow \
                 is reset",
                flow.dest
            ));
        }
        if p.flags & progress::IN_FIN != 0 {
            // Everything, FIN included, reached the destination: nothing left to connect for.
            flow.detach_tcp_source();
            return Ok(());
        }
        let s = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&flow.dest)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(format!(
                    "{}: {e} (reconnecting after an egress restart)",
                    flow.dest
                ))
            }
            Err(_) => {
                return Err(format!(
                    "{}: connect timed out (after an egress restart)",
                    flow.dest
                ))
            }
        };
        flow.attach_tcp(s).await;
        tracing::info!(flow = %fid(flow.id), dest = %flow.dest, from = p.written,
            "egress restart: flow continues on a new destination connection");
        Ok(())
    }

    fn dest_for(&self, h: &Hello) -> Result<String, String> {
        let s = &self.settings;
        if h.dest.is_empty() {
            return s
                .tcp_connect
                .clone()
                .ok_or_else(|| "no destination and no default --tcp-connect".to_string());
        }
        if s.allow_any
            || s.allow.iter().any(|a| a == &h.dest)
            || s.tcp_connect.as_deref() == Some(&h.dest)
        {
            Ok(h.dest.clone())
        } else {
            Err(format!("destination {} not allowed at the egress", h.dest))
        }
    }

    async fn egress_conn(self: Arc<Self>, mut conn: aerotp_net::Connection) {
        let mut reader = BufReader::new(conn.clone());
        let hello = match tokio::time::timeout(HANDSHAKE_TIMEOUT, Hello::read(&mut reader)).await {
            Ok(Ok(h)) => h,
            r => {
                tracing::warn!(remote = %conn.remote_address(), result = ?r.map(|x| x.err()), "bad flow header");
                conn.abort("bad flow header");
                return;
            }
        };
        let refuse = |conn: &mut aerotp_net::Connection, reason: String| {
            let mut b = Vec::new();
            Frame::Refused(reason).encode(&mut b);
            let c = conn.clone();
            async move {
                let mut c2 = c.clone();
                let _ = c2.write_all(&b).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), c.finish()).await;
            }
        };
        let flow = if hello.resume {
            if let Some(f) = self.reg.get(hello.flow_id) {
                let restored = f.restored.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(p) = restored {
                    if let Err(why) = self.continue_restored(&f, p).await {
                        tracing::warn!(flow = %fid(f.id), reason = %why, "restored flow cannot continue");
                        refuse(&mut conn, why.clone()).await;
                        f.reset(why.clone(), false);
                        self.finish_flow(&f, &SessionEnd::Reset(why), false);
                        return;
                    }
                }
                let old = f.conn.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(old) = old {
                    old.abort("superseded by a resumed connection");
                }
                self.reg.resumes.fetch_add(1, Ordering::Relaxed);
                f.lock().resumes += 1;
                tracing::info!(flow = %fid(f.id), "flow resumed");
                f
            } else {
                let done = {
                    let c = self.completed.lock().unwrap_or_else(|e| e.into_inner());
                    c.delivered.get(&hello.flow_id).copied()
                };
                match done {
                    Some(delivered) => {
                        // Already complete: answer as the finished peer would.
                        let f = Flow::new(
                            hello.flow_id,
                            hello.class,
                            String::new(),
                            String::new(),
                            Custody::mem(hello.in_delivered),
                            self.budget.clone(),
                            0,
                            hello.in_delivered,
                            hello.in_delivered,
                            true,
                        );
                        f.set_in(delivered, true);
                        f
                    }
                    None => {
                        tracing::warn!(flow = %fid(hello.flow_id), store = self.settings.store.is_some(),
                            "resume of an unknown flow refused");
                        let why = if self.settings.store.is_some() {
                            "unknown flow: not in the egress's store (removed, expired, or the \
                             store directory changed)"
                        } else {
                            "unknown flow: the egress was restarted without --store, so it \
                             cannot know what reached the destination"
                        };
                        refuse(&mut conn, why.into()).await;
                        return;
                    }
                }
            }
        } else {
            let dest = match self.dest_for(&hello) {
                Ok(d) => d,
                Err(e) => {
                    refuse(&mut conn, e).await;
                    return;
                }
            };
            let s = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&dest)).await {
                Ok(Ok(s)) => s,
                r => {
                    let why = match r {
                        Ok(Err(e)) => format!("{dest}: {e}"),
                        _ => format!("{dest}: connect timed out"),
                    };
                    tracing::info!(flow = %fid(hello.flow_id), reason = %why, "destination refused");
                    refuse(&mut conn, why).await;
                    return;
                }
            };
            let window = if hello.custody {
                REVERSE_WINDOW
            } else {
                self.settings.window
            };
            let f = Flow::new(
                hello.flow_id,
                hello.class,
                dest.clone(),
                String::new(),
                Custody::mem(0),
                self.budget.clone(),
                window,
                0,
                0,
                false,
            );
            if let (Some(root), true) = (self.settings.store.clone(), hello.custody) {
                let meta = EgressMeta {
                    flow_id: hello.flow_id,
                    class: hello.class as u8,
                    dest: dest.clone(),
                    boot_id: progress::boot_id(),
                };
                match tokio::task::spawn_blocking(move || ProgressLog::create(&root, &meta)).await {
                    Ok(Ok(log)) => f.set_progress(log),
                    r => {
                        let why = format!(
                            "egress store error: {:?}; check the egress's --store directory",
                            r.map(|x| x.err())
                        );
                        tracing::error!(flow = %fid(f.id), reason = %why, "refusing the flow");
                        refuse(&mut conn, why).await;
                        return;
                    }
                }
            }
            f.attach_tcp(s).await;
            self.reg.insert(&f);
            self.reg.flows_total.fetch_add(1, Ordering::Relaxed);
            tracing::info!(flow = %fid(f.id), %dest, custody = hello.custody, "new TCP flow");
            f
        };
        let _session = flow.session.lock().await;
        if let Err(e) = flow.peer_has(hello.in_delivered, false).await {
            conn.abort(&e);
            flow.reset(e.clone(), false);
            self.finish_flow(&flow, &SessionEnd::Reset(e), false);
            return;
        }
        let (delivered, fin) = flow.in_progress();
        let mut b = Vec::new();
        Frame::Accept { delivered, fin }.encode(&mut b);
        if conn.write_all(&b).await.is_err() {
            return;
        }
        let load = Arc::new(SessionLoad::default());
        let reg = self
            .sched
            .register(conn.clone(), flow.class, load.clone(), Some(flow.clone()));
        let my_resumes = flow.lock().resumes;
        let end = run_session(flow.clone(), conn, reader, hello.in_delivered, load).await;
        drop(reg);
        drop(_session);
        match &end {
            SessionEnd::Complete => {
                if let Err(e) = flow.persist(|p| p.flags |= progress::COMPLETE).await {
                    tracing::warn!(flow = %fid(flow.id), error = %e, "cannot record completion");
                }
                let log = flow.take_progress();
                let mut c = self.completed.lock().unwrap_or_else(|e| e.into_inner());
                c.push(flow.id, flow.in_progress().0, log, COMPLETED_KEPT);
            }
            SessionEnd::Broken(r) if hello.custody => {
                // Keep the destination connection for a resume.
                tracing::warn!(flow = %fid(flow.id), reason = %r, "connection lost; waiting for a resume");
                self.expire_unresumed(flow.clone(), my_resumes);
                return;
            }
            SessionEnd::Broken(r) => flow.reset(format!("connection lost: {r}"), false),
            SessionEnd::Reset(_) => {}
        }
        // A newer session may have taken over while this one ended.
        if flow.lock().resumes == my_resumes {
            self.finish_flow(&flow, &end, false);
        }
    }
}

/// Address and port of a gateway's metrics endpoint, and what it serves.
pub fn local_addr(gw: &Gateway) -> SocketAddr {
    gw.ep.local_addr()
}
