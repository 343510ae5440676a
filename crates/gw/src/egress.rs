//! The egress gateway: accepts the ingress's AeroTP connections and connects each flow to its
//! destination; with `--store`, records what it wrote so that a restarted egress resumes
//! flows exactly (docs/gateway.md §Egress restart).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aerotp_net::{Connection, Mode};
use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::config::Settings;
use crate::ctx::{
    fid, new_flow_id, Ctx, Role, COMPLETED_KEPT, CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT,
    REVERSE_WINDOW, UDP_STREAM_PORT,
};
use crate::flow::{EgressParts, Flow, FlowInit, FlowRole, SessionEnd};
use crate::frame::{reset_reason, Class, Dest, Open, RecordError, Resumed, MAX_OPEN};
use crate::progress::{self, Completed, EgressMeta, Found, ProgressLog};
use crate::session::{run_session, Offsets};
use crate::store::Custody;
use crate::tcpside;

/// A running egress gateway.
#[derive(Debug)]
pub struct Egress {
    pub ctx: Arc<Ctx>,
    /// Flows completed lately: a resume whose final confirmation was lost is answered.
    completed: Mutex<Completed>,
}

/// Refuses the flow on `conn`: an RST with the flow-reset reason (the ingress resets its TCP
/// source and does not resume). The connection is held for 10 s so that a TPDU that crosses
/// the RST gets it again.
async fn refuse(conn: &Connection, reason: String) {
    conn.abort(&reset_reason(&reason));
    let held = conn.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(held);
    });
}

/// Reads the ingress's open record from the start of the stream, taking no byte beyond it.
async fn read_open(r: &mut Connection, dst_port: u16) -> Result<(Open, usize), String> {
    let mut b = Vec::with_capacity(32);
    let mut want = 3;
    loop {
        let have = b.len();
        b.resize(want, 0);
        r.read_exact(&mut b[have..])
            .await
            .map_err(|e| format!("open record: {e}"))?;
        match Open::parse(&b, dst_port) {
            Ok(ok) => return Ok(ok),
            Err(RecordError::Short(n)) if n <= MAX_OPEN => want = n,
            Err(e) => return Err(e.to_string()),
        }
    }
}

impl Egress {
    /// Starts an egress: restores the store's flows, accepts connections and datagrams.
    pub async fn start(settings: Settings) -> Result<Arc<Egress>> {
        let listen = settings
            .egress
            .listen
            .context("egress needs --listen ADDR (UDP, for AeroTP)")?;
        let ep = crate::ctx::bind_endpoint(&settings, listen)?;
        let ctx = Ctx::new(settings, ep, Role::Egress);
        // The ingress picks mode and FEC for its direction per flow; what the egress sends
        // back (answers, downloads) uses the egress's own `fec`.
        let s = &ctx.settings;
        // Accepted connections start as bulk; each flow's open record names its class. TCP
        // flows come to their destination's port (any port but the UDP streams'), and confirm
        // what reached the destination (docs/gateway.md §Flow protocol).
        let cfg = ctx.conn_config(
            Mode::NearReliable,
            s.coding.fec,
            s.coding.erasure,
            Class::Bulk,
        );
        // A UDP stream outlives its client's silence (`udpstream::FLOW_IDLE`).
        ctx.ep.listen(
            UDP_STREAM_PORT,
            aerotp_net::ConnectionConfig {
                idle_timeout: crate::udpstream::conn_idle_timeout(s.timeouts.idle),
                ..cfg.clone()
            },
        )?;
        ctx.ep.listen_any(aerotp_net::ConnectionConfig {
            confirm_delivery: true,
            ..cfg
        })?;
        tracing::info!(local = %ctx.ep.local_addr(), "egress up");
        let eg = Arc::new(Egress {
            ctx,
            completed: Mutex::default(),
        });
        if let Some(root) = eg.ctx.settings.custody.store.clone() {
            eg.restore(&root).await?;
        }
        crate::udp::start_egress(eg.ctx.clone());
        let me = eg.clone();
        tokio::spawn(async move {
            while let Some(conn) = me.ctx.ep.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    // UDP flows come to their own port, in any mode that carries a stream
                    // (quasi-reliable, unreliable, reliable); TCP flows to theirs.
                    let udp = conn.local_port() == UDP_STREAM_PORT
                        || matches!(conn.mode(), Mode::QuasiReliable | Mode::Unreliable);
                    if udp {
                        // No flow record or store for a UDP flow; its datagrams go to the
                        // destination once the connection is proven (reads wait for the proof:
                        // a replayed command must not reach its destination again,
                        // docs/security.md, "Replays").
                        crate::udpstream::egress_flow(me.ctx.clone(), conn).await;
                        return;
                    }
                    // No destination connection and no flow record for a peer that has not
                    // proven its address (docs/security.md, "Half-open connections").
                    if let Err(o) = conn.proven().await {
                        tracing::info!(peer = %conn.remote_address(),
                            reason = %aerotp_net::outcome_error(&o), "unproven connection dropped");
                        return;
                    }
                    me.handle_conn(conn).await;
                });
            }
        });
        Ok(eg)
    }

    /// Egress restart: flows recorded in the store wait for their ingress to resume them
    /// (docs/gateway.md §Egress restart); completed ones answer a late resume.
    async fn restore(self: &Arc<Self>, root: &std::path::Path) -> Result<()> {
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
        for f in found {
            match f {
                Ok(f) if f.progress.flags & progress::COMPLETE != 0 => done.push(f),
                Ok(f) => self.restore_one(f),
                Err((p, e)) => {
                    tracing::error!(file = %p.display(), error = %e,
                        "cannot read an egress flow record; left in place (remove it if the flow is over)");
                }
            }
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

    /// A recorded, unfinished flow: waits (without a destination connection) for its resume.
    fn restore_one(self: &Arc<Self>, f: Found) {
        let id = f.meta.flow_id;
        let class = Class::from_u8(f.meta.class).unwrap_or(Class::Bulk);
        tracing::info!(flow = %fid(id), dest = %f.meta.dest, written = f.progress.written,
            intent = f.progress.intent, flags = f.progress.flags,
            "restored flow from the egress store; waiting for the ingress to resume it");
        let init = FlowInit::new(
            id,
            class,
            f.meta.dest.clone(),
            Custody::mem(0),
            REVERSE_WINDOW,
        );
        let rebooted = f.meta.boot_id != progress::boot_id();
        let role = FlowRole::Egress(EgressParts::restored(f.log, f.progress, rebooted));
        let flow = Flow::new(init, role, self.ctx.budget.clone());
        flow.lock()
            .restore_written(f.progress.written, f.progress.flags & progress::IN_FIN != 0);
        self.ctx.reg.insert(&flow);
        self.expire_unresumed(flow, 0);
    }

    /// Resets `flow` if no ingress resumes it within the resume timeout.
    fn expire_unresumed(self: &Arc<Self>, flow: Arc<Flow>, resumes: u64) {
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ctx.settings.timeouts.resume).await;
            let stale = {
                let st = flow.lock();
                st.resumes() == resumes && st.conn().is_none()
            };
            if stale && ctx.reg.get(flow.id).is_some() {
                flow.reset("no resume within the resume timeout".into(), false);
                ctx.finish_flow(&flow, &SessionEnd::Reset("resume timeout".into()), false);
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
        let s = connect(&flow.dest)
            .await
            .map_err(|e| format!("{e} (reconnecting after an egress restart)"))?;
        tcpside::attach_tcp(flow, s);
        tracing::info!(flow = %fid(flow.id), dest = %flow.dest, from = p.written,
            "egress restart: flow continues on a new destination connection");
        Ok(())
    }

    fn dest_for(&self, d: &Dest) -> Result<String, String> {
        let s = &self.ctx.settings;
        if *d == Dest::Default {
            return s
                .egress
                .tcp_connect
                .clone()
                .ok_or_else(|| "no destination and no default --tcp-connect".to_string());
        }
        let text = d.to_string();
        if s.egress.allow_any
            || s.egress.allow.iter().any(|a| a == &text)
            || s.egress.tcp_connect.as_deref() == Some(&text)
        {
            Ok(text)
        } else {
            Err(format!("destination {text} not allowed at the egress"))
        }
    }

    /// One accepted TCP-flow connection: the flow's open record, then its session.
    async fn handle_conn(self: Arc<Self>, conn: Connection) {
        let mut reader = conn.clone();
        let dst_port = conn.local_port();
        let read = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_open(&mut reader, dst_port)).await;
        let (open, len) = match read {
            Ok(Ok(o)) => o,
            r => {
                let why = match r {
                    Ok(Err(e)) => e,
                    _ => "no open record within 30 s".to_string(),
                };
                tracing::warn!(remote = %conn.remote_address(), reason = %why,
                    "bad flow header on a new AeroTP connection: refused");
                refuse(&conn, format!("bad flow header: {why}")).await;
                return;
            }
        };
        let flow = if open.resume {
            self.resumed_flow(&conn, &open).await
        } else {
            self.new_flow(&conn, &open).await
        };
        if let Some(flow) = flow {
            self.run(flow, conn, reader, &open, len as u64).await;
        }
    }

    /// The flow a resume names: live (a broken connection), restored from the store, or
    /// completed. `None`: refused (and answered).
    async fn resumed_flow(&self, conn: &Connection, open: &Open) -> Option<Arc<Flow>> {
        let Some(f) = self.ctx.reg.get(open.flow_id) else {
            return self.completed_flow(conn, open).await;
        };
        let restored = f.lock().egress().and_then(EgressParts::take_restored);
        if let Some(p) = restored {
            if let Err(why) = self.continue_restored(&f, p).await {
                tracing::warn!(flow = %fid(f.id), reason = %why, "restored flow cannot continue");
                refuse(conn, why.clone()).await;
                f.reset(why.clone(), false);
                self.ctx.finish_flow(&f, &SessionEnd::Reset(why), false);
                return None;
            }
        }
        self.ctx.reg.resumes.fetch_add(1, Ordering::Relaxed);
        f.lock().resumed();
        tracing::info!(flow = %fid(f.id), "flow resumed");
        Some(f)
    }

    /// A resume of a flow no longer live: answered as the finished peer would if the flow
    /// completed lately, else refused.
    async fn completed_flow(&self, conn: &Connection, open: &Open) -> Option<Arc<Flow>> {
        let done = {
            let c = self.completed.lock().unwrap_or_else(|e| e.into_inner());
            c.delivered.get(&open.flow_id).copied()
        };
        let Some(delivered) = done else {
            let has_store = self.ctx.settings.custody.store.is_some();
            tracing::warn!(flow = %fid(open.flow_id), store = has_store,
                "resume of an unknown flow refused");
            let why = if has_store {
                "unknown flow: not in the egress's store (removed, expired, or the \
                 store directory changed)"
            } else {
                "unknown flow: the egress was restarted without --store, so it \
                 cannot know what reached the destination"
            };
            refuse(conn, why.into()).await;
            return None;
        };
        let init = FlowInit {
            base: open.in_delivered,
            end: open.in_delivered,
            fin: true,
            ..FlowInit::new(
                open.flow_id,
                open.class,
                String::new(),
                Custody::mem(open.in_delivered),
                0,
            )
        };
        // Nothing to write or record: the flow completed; only its answer is left.
        let role = FlowRole::Egress(EgressParts::new(false, None));
        let f = Flow::new(init, role, self.ctx.budget.clone());
        f.set_in(delivered, true);
        Some(f)
    }

    /// A new flow: its destination connected (and recorded with a store). `None`: refused.
    async fn new_flow(&self, conn: &Connection, open: &Open) -> Option<Arc<Flow>> {
        // A custody flow is known by the ingress's id (it resumes by it); others get ours.
        let id = if open.custody {
            open.flow_id
        } else {
            new_flow_id()
        };
        let dest = match self.dest_for(&open.dest) {
            Ok(d) => d,
            Err(e) => {
                refuse(conn, e).await;
                return None;
            }
        };
        let s = match connect(&dest).await {
            Ok(s) => s,
            Err(why) => {
                tracing::info!(flow = %fid(id), reason = %why, "destination refused");
                refuse(conn, why).await;
                return None;
            }
        };
        let window = if open.custody {
            REVERSE_WINDOW
        } else {
            self.ctx.settings.custody.window
        };
        let mut record = None;
        if let (Some(root), true) = (self.ctx.settings.custody.store.clone(), open.custody) {
            let meta = EgressMeta {
                flow_id: id,
                class: open.class as u8,
                dest: dest.clone(),
                boot_id: progress::boot_id(),
            };
            let created = tokio::task::spawn_blocking(move || ProgressLog::create(&root, &meta))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match created {
                Ok(log) => record = Some(log),
                Err(e) => {
                    let why =
                        format!("egress store error: {e}; check the egress's --store directory");
                    tracing::error!(flow = %fid(id), reason = %why, "refusing the flow");
                    refuse(conn, why).await;
                    return None;
                }
            }
        }
        // A reliable flow confirms only what the destination's TCP acknowledged: the source
        // behind the ingress learns of nothing the destination does not have.
        let init = FlowInit::new(id, open.class, dest.clone(), Custody::mem(0), window);
        let role = FlowRole::Egress(EgressParts::new(!open.custody, record));
        let f = Flow::new(init, role, self.ctx.budget.clone());
        tcpside::attach_tcp(&f, s);
        self.ctx.reg.insert(&f);
        self.ctx.reg.flows_total.fetch_add(1, Ordering::Relaxed);
        tracing::info!(flow = %fid(f.id), %dest, custody = open.custody, "new TCP flow");
        Some(f)
    }

    /// Runs the flow's session on `conn` (answering a resume first); then completes it,
    /// waits for a resume or resets it. `in_skip`: the open record's bytes.
    async fn run(
        self: &Arc<Self>,
        flow: Arc<Flow>,
        conn: Connection,
        reader: Connection,
        open: &Open,
        in_skip: u64,
    ) {
        // A resume's session starts once the one it supersedes has stopped.
        flow.take_over(&conn).await;
        if let Err(e) = flow.peer_has(open.in_delivered, false).await {
            refuse(&conn, e.clone()).await;
            flow.reset(e.clone(), false);
            flow.session_ended();
            self.ctx.finish_flow(&flow, &SessionEnd::Reset(e), false);
            return;
        }
        let (delivered, fin) = flow.in_progress();
        // A resume is answered first (the session writes it, with our first bytes).
        let prefix = if open.resume {
            Resumed { delivered, fin }.encode().to_vec()
        } else {
            Vec::new()
        };
        let out_skip = prefix.len() as u64;
        conn.set_class(flow.class);
        let off = Offsets {
            out_skip,
            out_base: open.in_delivered,
            in_skip,
            in_base: delivered,
        };
        let my_resumes = flow.lock().resumes();
        let end = run_session(flow.clone(), conn, reader, off, prefix).await;
        match &end {
            SessionEnd::Complete => {
                if let Err(e) = flow.persist(|p| p.flags |= progress::COMPLETE).await {
                    tracing::warn!(flow = %fid(flow.id), error = %e, "cannot record completion");
                }
                let log = flow.take_progress();
                let mut c = self.completed.lock().unwrap_or_else(|e| e.into_inner());
                c.push(flow.id, flow.in_progress().0, log, COMPLETED_KEPT);
            }
            SessionEnd::Broken(r) if open.custody => {
                // Keep the destination connection for a resume.
                tracing::warn!(flow = %fid(flow.id), reason = %r, "connection lost; waiting for a resume");
                self.expire_unresumed(flow.clone(), my_resumes);
                return;
            }
            SessionEnd::Broken(r) => flow.reset(format!("connection lost: {r}"), false),
            SessionEnd::Reset(_) => {}
        }
        // A newer session may have taken over while this one ended.
        if flow.lock().resumes() == my_resumes {
            self.ctx.finish_flow(&flow, &end, false);
        }
    }
}

/// Connects to a TCP destination within [`CONNECT_TIMEOUT`]; the error names it.
async fn connect(dest: &str) -> Result<TcpStream, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(dest)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("{dest}: {e}")),
        Err(_) => Err(format!("{dest}: connect timed out")),
    }
}
