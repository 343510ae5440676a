//! The ingress gateway: takes TCP connections and UDP datagrams from local applications and
//! carries each flow over AeroTP to the egress (docs/gateway.md).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerotp_net::{CloseOutcome, FecSetting, Mode};
use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::config::{FlowKind, Route, Settings};
use crate::ctx::{
    fid, new_flow_id, Ctx, DropReason, Role, HANDSHAKE_TIMEOUT, OPEN_WAIT, TCP_PORT,
    UDP_STREAM_PORT,
};
use crate::flow::{Flow, FlowInit, FlowRole, SessionEnd};
use crate::frame::{flow_reset, reset_reason, Class, Dest, Open, Resumed, RESUMED_LEN};
use crate::session::{run_session, Offsets};
use crate::store::{self, Custody, DiskLog, FlowMeta};
use crate::tcpside;
use crate::transparent::{origdst, Transparent};
use crate::tunroutes;

/// Said at start-up when reliable-mode interception runs on the kernel listener.
const KERNEL_RELIABLE: &str = "reliable-mode interception on --transparent-tcp: the ingress's \
    kernel acknowledges up to the flow window plus socket buffers before the destination has \
    the bytes; --transparent-tun makes the acknowledgements end to end (docs/gateway.md §TCP \
    reliable)";

/// Said at start-up for each explicit reliable TCP route.
const KERNEL_RELIABLE_ROUTE: &str = "reliable TCP on a kernel listener: the ingress's kernel \
    acknowledges up to the flow window plus socket buffers before the destination has the \
    bytes (with --transparent-tun, a reliable route on an address this host does not have is \
    served by the user-space TCP and acknowledged end to end; docs/gateway.md §TCP reliable)";

/// A running ingress gateway.
#[derive(Debug)]
pub struct Ingress {
    pub ctx: Arc<Ctx>,
    /// The egress's AeroTP address.
    pub peer: SocketAddr,
    /// The user-space TCP of reliable-mode interception (`--transparent-tun`), when running.
    pub usertcp: std::sync::OnceLock<aerotp_usertcp::UserTcp>,
}

/// How one attempt to carry a flow on a connection ended.
enum Attempt {
    /// The flow is over (complete or reset): no further attempt.
    Done(SessionEnd),
    /// The connection broke (or never came up): a custody flow tries again.
    Broken(String),
}

/// A flow the ingress carries, with the settings of its connections.
#[derive(Debug, Clone)]
struct Carried {
    flow: Arc<Flow>,
    /// The source's TCP port, carried as the AeroTP `src_port` while free
    /// (docs/gateway.md §Flow protocol); none for a flow restored from the store.
    src_port: Option<u16>,
    mode: Mode,
    fec: FecSetting,
    erasure: aerotp_net::ErasureChoice,
    /// Restored from the store at start-up: every session is a resume.
    restored: bool,
    /// A user-space TCP connection whose SYN waits for the flow's AeroTP connection to be up
    /// (`aerotp-usertcp`): told when it is (no first bytes to wait for: the source sends
    /// none before its handshake).
    held_syn: Option<Arc<dyn crate::flow::UserSink>>,
}

impl Ingress {
    /// Starts an ingress: restores the store's flows, listens on every route.
    pub async fn start(settings: Settings) -> Result<Arc<Ingress>> {
        let peer = settings
            .paths
            .peer
            .context("ingress needs --peer (the egress's address)")?;
        if settings.routes.is_empty() && settings.transparent.is_none() {
            anyhow::bail!(
                "ingress needs at least one flow (--tcp-listen, --udp-listen, [[flow]] or \
                 --transparent-tcp/--transparent-udp)"
            );
        }
        let transparent_store = settings
            .transparent
            .as_ref()
            .is_some_and(|t| t.tcp.is_some() && t.mode == Mode::NearReliable);
        let needs_store = transparent_store
            || settings
                .routes
                .iter()
                .any(|r| r.kind == FlowKind::Tcp && r.mode == Mode::NearReliable);
        if needs_store && settings.custody.store.is_none() {
            anyhow::bail!("near-reliable TCP flows need --store DIR (the custody store)");
        }
        let ep = crate::ctx::bind_endpoint(&settings, settings.paths.bind)?;
        tracing::info!(local = %ep.local_addr(), %peer, "ingress up");
        let ing = Arc::new(Ingress {
            ctx: Ctx::new(settings, ep, Role::Ingress),
            peer,
            usertcp: std::sync::OnceLock::new(),
        });
        if let Some(root) = ing.ctx.settings.custody.store.clone() {
            ing.restore_store(&root)?;
        }
        ing.start_routes().await?;
        Ok(ing)
    }

    /// Listens on every route of the settings.
    async fn start_routes(self: &Arc<Self>) -> Result<()> {
        let mut datagrams = None;
        let tun = self
            .ctx
            .settings
            .transparent
            .as_ref()
            .and_then(|t| t.tun.clone());
        let mut on_tun = Vec::new();
        for route in self.ctx.settings.routes.clone() {
            match route.kind {
                FlowKind::Tcp if tunroutes::served_on_tun(&route, tun.is_some()) => {
                    on_tun.push(route)
                }
                FlowKind::Tcp => {
                    let l = TcpListener::bind(route.local)
                        .await
                        .map_err(|e| tunroutes::bind_error(e, &route, tun.as_deref()))?;
                    tracing::info!(listen = %route.local, mode = %route.mode, class = route.class.name(), "TCP flow");
                    if route.mode == Mode::Reliable {
                        tracing::warn!(listen = %route.local, "{KERNEL_RELIABLE_ROUTE}");
                    }
                    let me = self.clone();
                    tokio::spawn(async move { me.accept_tcp(l, route).await });
                }
                FlowKind::Udp if route.mode == Mode::Datagram => {
                    // One client table and one reply receiver for all datagram routes.
                    let d = datagrams.get_or_insert_with(|| {
                        crate::udp::IngressDatagrams::start(self.ctx.clone(), self.peer)
                    });
                    d.add_route(route).await?;
                }
                FlowKind::Udp => {
                    crate::udpstream::start_ingress(self.ctx.clone(), route, self.peer).await?
                }
            }
        }
        if let Some(t) = self.ctx.settings.transparent.clone() {
            let on_tun = tunroutes::TunRoutes::new(on_tun);
            self.start_transparent(t, on_tun, &mut datagrams).await?;
        }
        Ok(())
    }

    /// The route an intercepted flow takes: no configured destination (the application's is
    /// learned per flow), intercepted UDP in its own class.
    fn intercepted_route(
        &self,
        t: &Transparent,
        kind: FlowKind,
        local: SocketAddr,
        mode: Mode,
    ) -> Route {
        Route {
            kind,
            local,
            dest: String::new(),
            mode,
            class: if kind == FlowKind::Udp {
                t.udp_class
            } else {
                t.class
            },
            fec: self.ctx.settings.coding.fec,
            erasure: self.ctx.settings.coding.erasure,
        }
    }

    /// Transparent interception: the TPROXY listeners (docs/gateway.md §Transparent
    /// interception). Each flow's destination is the one its application addressed.
    async fn start_transparent(
        self: &Arc<Self>,
        t: Transparent,
        on_tun: tunroutes::TunRoutes,
        datagrams: &mut Option<Arc<crate::udp::IngressDatagrams>>,
    ) -> Result<()> {
        let template = |kind, local, mode| self.intercepted_route(&t, kind, local, mode);
        if let Some(dev) = &t.tun {
            self.start_usertcp(dev, &t, on_tun)?;
        } else if t.tcp.is_some() && t.mode == Mode::Reliable {
            tracing::warn!("{KERNEL_RELIABLE}");
        }
        // `[::]:P` is both families: one socket each (`origdst::listen_set`).
        for a in t.tcp.map(origdst::listen_set).unwrap_or_default() {
            let l = origdst::tcp_listener(a)
                .with_context(|| format!("cannot listen on transparent TCP {a}"))?;
            tracing::info!(listen = %a, mode = %t.mode, "transparent TCP interception");
            let (me, route) = (self.clone(), template(FlowKind::Tcp, a, t.mode));
            let t = t.clone();
            tokio::spawn(async move { me.accept_transparent(l, route, t).await });
        }
        for a in t.udp.map(origdst::listen_set).unwrap_or_default() {
            let sock = origdst::udp_socket(a)
                .with_context(|| format!("cannot bind transparent UDP {a}"))?;
            let d = datagrams
                .get_or_insert_with(|| {
                    crate::udp::IngressDatagrams::start(self.ctx.clone(), self.peer)
                })
                .clone();
            let route = template(FlowKind::Udp, a, Mode::Datagram);
            // Fragments leave room for the longest destination this socket's family can name.
            let dest_len = origdst::longest_dest_text(a);
            let framing = crate::udp::framing(&self.ctx, route.fec, &route.erasure, dest_len)
                .with_context(|| format!("transparent UDP {a}"))?;
            tracing::info!(listen = %a, "transparent UDP interception (datagram mode)");
            let (ctx, policy) = (self.ctx.clone(), t.policy.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let mut policer = crate::policer::Policer::new(Instant::now());
                loop {
                    let (n, from, orig) = match origdst::recv_orig(&sock, &mut buf).await {
                        Ok(x) => x,
                        Err(e) => {
                            tracing::warn!(error = %e, "transparent UDP recv failed; retrying in 100 ms");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    ctx.reg.udp_in.fetch_add(1, Ordering::Relaxed);
                    let orig = match orig {
                        Some(o) if !origdst::is_direct(o, a) && policy.permits(o) => o,
                        other => {
                            let why = match other {
                                Some(o) if !origdst::is_direct(o, a) => {
                                    format!("{o} denied by the allow/deny lists")
                                }
                                _ => "sent to the interception port itself".into(),
                            };
                            let detail = format!("transparent datagram from {from}: {why}");
                            ctx.reg.drop_udp(DropReason::NoDestination, &detail);
                            continue;
                        }
                    };
                    let r = (&route, from, orig, framing);
                    d.carry_transparent(r, &buf[..n], &mut policer);
                }
            });
        }
        Ok(())
    }

    /// Reliable-mode interception through the TUN device `dev`: the user-space TCP
    /// (`aerotp-usertcp`) terminates each connection and acknowledges only what the egress
    /// confirmed; each new connection becomes a flow to the destination it addressed, or, if
    /// it addressed an explicit route served on the device (`crate::tunroutes`), to that
    /// route's destination.
    fn start_usertcp(
        self: &Arc<Self>,
        dev: &str,
        t: &Transparent,
        on_tun: tunroutes::TunRoutes,
    ) -> Result<()> {
        let me = self.clone();
        let (classes, routes) = (t.tcp_classes.clone(), on_tun.clone());
        let tun_route = format!("tun:{dev}");
        let accept: aerotp_usertcp::Accept = Arc::new(move |src, dst, sink| {
            let settings = &me.ctx.settings;
            let (class, dest, route, fec, erasure) = match routes.route_for(dst) {
                Some(r) => (
                    r.class,
                    r.dest.clone(),
                    r.local.to_string(),
                    r.fec,
                    r.erasure,
                ),
                None => (
                    classes.class_for(dst),
                    dst.to_string(),
                    tun_route.clone(),
                    settings.coding.fec,
                    settings.coding.erasure,
                ),
            };
            let id = new_flow_id();
            tracing::info!(flow = %fid(id), %src, %dest, class = class.name(), %route, "new TCP flow (user-space TCP, reliable)");
            // The same window as the user-space TCP's: what it takes, the flow holds.
            let window = me.ctx.settings.tun_window();
            let init = FlowInit::new(id, class, dest, Custody::mem(0), window);
            let flow = Flow::new(init, FlowRole::Ingress, me.ctx.budget.clone());
            tcpside::attach_user(&flow, sink.clone());
            me.ctx.reg.insert(&flow);
            me.ctx.reg.flows_total.fetch_add(1, Ordering::Relaxed);
            let carried = Carried {
                flow: flow.clone(),
                src_port: Some(src.port()),
                mode: Mode::Reliable,
                fec,
                erasure,
                restored: false,
                held_syn: Some(sink),
            };
            let m = me.clone();
            tokio::spawn(async move { m.drive(carried).await });
            Some(flow as Arc<dyn aerotp_usertcp::Carrier>)
        });
        // A route's address is the gateway's: only its port is served there.
        let (policy, routes) = (t.policy.clone(), on_tun.clone());
        let permit = Arc::new(move |d: SocketAddr| {
            if routes.owns(d.ip()) {
                routes.route_for(d).is_some()
            } else {
                policy.permits(d)
            }
        });
        let u = aerotp_usertcp::UserTcp::start(aerotp_usertcp::Settings {
            device: dev.to_owned(),
            window: self.ctx.settings.tun_window(),
            max_conns: self.ctx.settings.admission.max_connections,
            permit,
            accept,
        })
        .with_context(|| format!("transparent TUN device {dev} (--transparent-tun)"))?;
        tracing::info!(device = %u.device, "transparent TCP interception, reliable end to end (user-space TCP)");
        on_tun.install(&u.device)?;
        let _ = self.usertcp.set(u);
        Ok(())
    }

    /// Accepts intercepted TCP connections: each one's local address is its original
    /// destination, which gives its class (`t.tcp_class`); a denied one is reset.
    async fn accept_transparent(self: Arc<Self>, l: TcpListener, route: Route, t: Transparent) {
        let policy = &t.policy;
        loop {
            let (s, from) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "transparent TCP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let orig = match origdst::tcp_orig(&s) {
                Ok(o) if !origdst::is_direct(o, route.local) && policy.permits(o) => o,
                r => {
                    let why = match r {
                        Ok(o) if origdst::is_direct(o, route.local) => {
                            "connected to the interception port itself".to_string()
                        }
                        Ok(o) => format!("destination {o} denied by the allow/deny lists"),
                        Err(e) => format!("no original destination: {e}"),
                    };
                    tracing::info!(%from, reason = %why, "intercepted TCP connection refused (reset)");
                    reset(s);
                    continue;
                }
            };
            let route = Route {
                dest: orig.to_string(),
                class: t.tcp_class(orig),
                ..route.clone()
            };
            self.take_tcp(s, from, &route).await;
        }
    }

    /// Resumes every flow found in the custody store.
    fn restore_store(self: &Arc<Self>, root: &std::path::Path) -> Result<()> {
        for r in store::restore_all(root)? {
            let r = match r {
                Ok(r) => r,
                Err((p, e)) => {
                    tracing::error!(dir = %p.display(), error = %e, "cannot restore flow; left in place");
                    continue;
                }
            };
            let class = Class::from_u8(r.meta.class).unwrap_or(Class::Bulk);
            tracing::info!(flow = %fid(r.meta.flow_id), base = r.base, end = r.end,
                fin = r.fin, dest = %r.meta.dest, "restoring flow from the store");
            let init = FlowInit {
                base: r.base,
                end: r.end,
                fin: r.fin,
                ..FlowInit::new(
                    r.meta.flow_id,
                    class,
                    r.meta.dest.clone(),
                    Custody::Disk(r.log),
                    u64::MAX,
                )
            };
            let flow = Flow::new(init, FlowRole::Ingress, self.ctx.budget.clone());
            flow.detach_tcp_source();
            self.ctx.reg.insert(&flow);
            let carried = Carried {
                flow,
                src_port: None,
                mode: Mode::NearReliable,
                // The route's own `fec` is not in the store: the gateway's (default auto).
                fec: self.ctx.settings.coding.fec,
                erasure: self.ctx.settings.coding.erasure,
                restored: true,
                held_syn: None,
            };
            let me = self.clone();
            tokio::spawn(async move { me.drive(carried).await });
        }
        Ok(())
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
            self.take_tcp(s, from, &route).await;
        }
    }

    /// A new source connection on `route`: its flow, carried to the egress.
    async fn take_tcp(self: &Arc<Self>, s: TcpStream, from: SocketAddr, route: &Route) {
        let id = new_flow_id();
        tracing::info!(flow = %fid(id), %from, dest = %route.dest, mode = %route.mode, class = route.class.name(), "new TCP flow");
        let Some(flow) = self.new_tcp_flow(id, s, route).await else {
            return;
        };
        self.ctx.reg.insert(&flow);
        self.ctx.reg.flows_total.fetch_add(1, Ordering::Relaxed);
        let carried = Carried {
            flow,
            src_port: Some(from.port()),
            mode: route.mode,
            fec: route.fec,
            erasure: route.erasure,
            restored: false,
            held_syn: None,
        };
        let me = self.clone();
        tokio::spawn(async move { me.drive(carried).await });
    }

    /// The flow of a new source connection: its custody (a store log for near-reliable, memory
    /// for reliable), or `None` (and the source reset) if the store cannot take it.
    async fn new_tcp_flow(&self, id: u64, s: TcpStream, route: &Route) -> Option<Arc<Flow>> {
        let (custody, window) = if route.mode == Mode::NearReliable {
            let meta = FlowMeta {
                flow_id: id,
                class: route.class as u8,
                dest: route.dest.clone(),
                route: route.local.to_string(),
            };
            let root = self.ctx.settings.custody.store.clone()?;
            let created = tokio::task::spawn_blocking(move || DiskLog::create(&root, &meta))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match created {
                Ok(d) => (Custody::Disk(d), u64::MAX),
                Err(e) => {
                    tracing::error!(flow = %fid(id), error = %e, "cannot create store: refusing the connection");
                    reset(s);
                    return None;
                }
            }
        } else {
            // End-to-end semantics: a small receive buffer so TCP's own flow control
            // carries the destination's pace back to the source.
            let _ = socket2::SockRef::from(&s).set_recv_buffer_size(64 * 1024);
            (Custody::mem(0), self.ctx.settings.custody.window)
        };
        let init = FlowInit::new(id, route.class, route.dest.clone(), custody, window);
        let flow = Flow::new(init, FlowRole::Ingress, self.ctx.budget.clone());
        tcpside::attach_tcp(&flow, s);
        Some(flow)
    }

    /// Carries one flow to the egress, resuming on new connections while custody lasts.
    async fn drive(self: Arc<Self>, c: Carried) {
        let deadline = Instant::now() + self.ctx.settings.timeouts.resume;
        let mut attempt: u32 = 0;
        let end = loop {
            let broken = match self.attempt(&c, c.restored || attempt > 0).await {
                Attempt::Done(end) => break end,
                Attempt::Broken(why) => why,
            };
            if !c.flow.custody_mode || Instant::now() > deadline {
                c.flow.reset(format!("connection lost: {broken}"), false);
                break SessionEnd::Broken(broken);
            }
            attempt += 1;
            let wait = Duration::from_millis(250u64 << attempt.min(5)).min(Duration::from_secs(5));
            tracing::warn!(flow = %fid(c.flow.id), reason = %broken,
                wait_ms = wait.as_millis() as u64, "connection lost; resuming");
            tokio::time::sleep(wait).await;
        };
        self.ctx.finish_flow(&c.flow, &end, true);
    }

    /// One connection for `c`: the open record (and on a resume the egress's answer), then
    /// the session. A fresh flow's bytes follow the record at once (docs/gateway.md §Flow
    /// protocol); a refusal arrives as a flow reset.
    async fn attempt(&self, c: &Carried, resume: bool) -> Attempt {
        let flow = &c.flow;
        let mut cfg = self.ctx.conn_config(c.mode, c.fec, c.erasure, flow.class);
        cfg.confirm_delivery = true;
        let dest = match Dest::parse(&flow.dest) {
            Ok(d) => d,
            Err(e) => {
                flow.reset(e.clone(), false);
                return Attempt::Done(SessionEnd::Reset(e));
            }
        };
        let (dst_port, port) = translated_port(&dest);
        let (in_delivered, _) = flow.in_progress();
        let open = Open {
            class: flow.class,
            custody: flow.custody_mode,
            resume,
            flow_id: if flow.custody_mode || resume {
                flow.id
            } else {
                0
            },
            in_delivered: if resume { in_delivered } else { 0 },
            dest,
            port,
        };
        let record = open.encode();
        if !resume && c.held_syn.is_none() {
            first_bytes(flow).await;
        }
        let mut conn = match self
            .ctx
            .ep
            .connect_from(self.peer, dst_port, c.src_port, cfg)
        {
            Ok(conn) => conn,
            Err(e) => return Attempt::Broken(format!("connect: {e}")),
        };
        for &p in &self.ctx.settings.paths.peer_paths {
            if let Err(e) = crate::ctx::add_path(&conn, p) {
                return Attempt::Broken(format!("path {p}: {e}"));
            }
        }
        if let Some(u) = c.held_syn.clone() {
            tokio::spawn(answer_when_up(conn.clone(), u));
        }
        // A resume's record goes alone (the egress's answer says where to send from); a new
        // flow's goes with its first bytes.
        let prefix = if resume {
            if let Err(e) = conn.write_all(&record).await {
                return Attempt::Broken(format!("open record: {e}"));
            }
            Vec::new()
        } else {
            record.clone()
        };
        let mut reader = conn.clone();
        let answer = if resume {
            match self.resumed_answer(flow, &conn, &mut reader).await {
                Ok(r) => Some(r),
                Err(a) => return a,
            }
        } else {
            None
        };
        let from = answer.map_or(0, |r| r.delivered);
        let in_skip = if resume { RESUMED_LEN as u64 } else { 0 };
        let off = Offsets {
            out_skip: record.len() as u64,
            out_base: from,
            in_skip,
            in_base: in_delivered,
        };
        self.accepted(flow, conn, reader, answer, off, prefix).await
    }

    /// The egress's answer to a resume: what it has of the flow, or why not.
    async fn resumed_answer(
        &self,
        flow: &Arc<Flow>,
        conn: &aerotp_net::Connection,
        reader: &mut aerotp_net::Connection,
    ) -> Result<Resumed, Attempt> {
        let mut b = [0u8; RESUMED_LEN];
        let why = match tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.read_exact(&mut b)).await {
            Ok(Ok(_)) => match Resumed::parse(&b) {
                Ok(r) => return Ok(r),
                Err(e) => e.to_string(),
            },
            Ok(Err(e)) => {
                if let Some(CloseOutcome::Reset(r)) = conn.outcome() {
                    if let Some(why) = flow_reset(&r) {
                        tracing::error!(flow = %fid(flow.id), reason = %why,
                            "the egress refused to resume the flow: its custody is dropped \
                             and the flow is lost (see the egress log)");
                        flow.reset(format!("refused by the egress: {why}"), false);
                        return Err(Attempt::Done(SessionEnd::Reset(why.to_owned())));
                    }
                }
                format!("resume: {e}")
            }
            Err(_) => "no answer to the resume within 30 s".into(),
        };
        conn.abort(&why);
        Err(Attempt::Broken(why))
    }

    /// Runs the session from what the egress has (`answer`, on a resume; from the start
    /// otherwise).
    async fn accepted(
        &self,
        flow: &Arc<Flow>,
        conn: aerotp_net::Connection,
        reader: aerotp_net::Connection,
        answer: Option<Resumed>,
        off: Offsets,
        prefix: Vec<u8>,
    ) -> Attempt {
        let resume = answer.is_some();
        let Resumed { delivered, fin } = answer.unwrap_or(Resumed {
            delivered: 0,
            fin: false,
        });
        if let Err(e) = flow.peer_has(delivered, fin).await {
            conn.abort(&reset_reason(&e));
            flow.reset(e.clone(), false);
            return Attempt::Done(SessionEnd::Reset(e));
        }
        if resume {
            self.ctx.reg.resumes.fetch_add(1, Ordering::Relaxed);
            flow.lock().resumed();
            tracing::info!(flow = %fid(flow.id), from = delivered, "flow resumed");
        }
        match run_session(flow.clone(), conn, reader, off, prefix).await {
            SessionEnd::Broken(r) => Attempt::Broken(r),
            e => Attempt::Done(e),
        }
    }
}

/// Waits until a new flow's source has sent its first bytes (or closed), at most
/// `OPEN_WAIT`: the AeroTP connection opens with the open record and those bytes (with the
/// FIN, when the TCP read found it right behind them) in one ASYN (docs/gateway.md §Flow
/// protocol). A source that waits for the server to speak first (SSH, SMTP) costs
/// `OPEN_WAIT` once.
async fn first_bytes(flow: &Arc<Flow>) {
    let mut rx = flow.changed.subscribe();
    let spoke = |f: &Flow| {
        let st = f.lock();
        st.range().held() > 0 || st.fin() || st.reset().is_some()
    };
    let _ = tokio::time::timeout(OPEN_WAIT, async {
        while !spoke(flow) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
}

/// Answers a held SYN (`aerotp-usertcp`) when the flow's AeroTP connection is up (the
/// egress's ASYNACK: one air round trip), so the source's handshake RTT is the air's. Not
/// later, when the egress has connected to the destination (its first confirmation, one
/// round trip more): measured, that cost cubic sources at 250 ms one way the round trip
/// their first bytes no longer rode the ASYN in (docs/results/gw.md, "The SYN held"). A
/// connection that ends first leaves the answer to the flow's reset (a RST to the source).
async fn answer_when_up(conn: aerotp_net::Connection, u: Arc<dyn crate::flow::UserSink>) {
    if conn.connected().await.is_ok() {
        u.up();
    }
}

/// The AeroTP ports of a flow to `dest`: the header's `dst_port` is the TCP destination port,
/// except the egress's default (`TCP_PORT`) and a port the header cannot hold because the
/// gateway's UDP streams use it (0 and `UDP_STREAM_PORT`: then `TCP_PORT`, and the record
/// carries the port).
fn translated_port(dest: &Dest) -> (u16, Option<u16>) {
    match dest.port() {
        None => (TCP_PORT, None),
        Some(p) if p == 0 || p == UDP_STREAM_PORT => (TCP_PORT, Some(p)),
        Some(p) => (p, None),
    }
}

/// Closes `s` with a TCP reset (linger 0), so its application sees a refusal, not an end.
fn reset(s: TcpStream) {
    if let Ok(std) = s.into_std() {
        let _ = socket2::SockRef::from(&std).set_linger(Some(Duration::ZERO));
    }
}
