//! One TCP flow between the gateways, symmetric: each side holds its TCP socket, the custody
//! of the bytes it read from it that the peer has not confirmed, and how many of the peer's
//! bytes it has written to it. A flow outlives the AeroTP connection that carries it
//! ([`run_session`]); a near-reliable flow resumes on a new connection.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use aerotp_net::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::frame::Class;
use crate::progress::{self, Progress, ProgressLog};
use crate::sink::Sink;
pub use crate::sink::UserSink;
use crate::store::Custody;

/// Bytes read from TCP per read.
const TCP_READ: usize = 64 * 1024;

/// Bytes held in custody across all flows of a gateway (the store's bound).
#[derive(Debug)]
pub struct Budget {
    pub capacity: u64,
    pub held: AtomicU64,
    pub changed: watch::Sender<u64>,
}

impl Budget {
    pub fn new(capacity: u64) -> Arc<Budget> {
        Arc::new(Budget {
            capacity,
            held: AtomicU64::new(0),
            changed: watch::channel(0).0,
        })
    }
    pub fn free(&self) -> u64 {
        self.capacity
            .saturating_sub(self.held.load(Ordering::Relaxed))
    }
    fn release(&self, n: u64) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::Relaxed);
            self.changed.send_modify(|v| *v += 1);
        }
    }
}

/// Reads what the socket has into `buf`, and whether the EOF came right behind it: after a
/// read that did not fill `buf` the socket is asked once more without waiting, so a short
/// request and its FIN (already arrived) are taken together.
async fn read_with_eof(r: &mut OwnedReadHalf, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    let mut n = r.read(buf).await?;
    if n == 0 {
        return Ok((0, true));
    }
    while n < buf.len() {
        match r.try_read(&mut buf[n..]) {
            Ok(0) => return Ok((n, true)),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok((n, false))
}

/// The mutable state of a flow.
#[derive(Debug)]
pub struct FlowState {
    /// Confirmed by the peer (custody released below it).
    pub base: u64,
    /// Read from our TCP side.
    pub end: u64,
    /// Our TCP side reached EOF (`end` is final).
    pub fin: bool,
    /// The peer has shut its TCP write half after all our bytes.
    pub peer_fin: bool,
    /// Bytes of the peer's direction written to our TCP socket.
    pub in_delivered: u64,
    /// The peer's FIN was received and our TCP write half shut.
    pub in_fin: bool,
    /// Egress, reliable flow: confirm only what the destination's TCP acknowledged
    /// (`in_acked`, `in_fin_acked`), not what was written to our socket (docs/gateway.md §TCP
    /// reliable: end-to-end semantics).
    pub acked_only: bool,
    /// Of `in_delivered`, the bytes the destination acknowledged (`acked_only` flows).
    pub in_acked: u64,
    /// The destination acknowledged our FIN (`acked_only` flows).
    pub in_fin_acked: bool,
    /// The flow is aborted; the reason, and whether the peer still has to be told.
    pub reset: Option<(String, bool)>,
    /// Bytes sent on the AeroTP connections (including resends after a resume).
    pub bytes_sent: u64,
    pub resumes: u64,
    /// The connection of the current session (aborted on take-over), if any.
    pub conn: Option<Connection>,
    /// Egress: restored from the store after a restart, no destination connection yet: the
    /// record, and whether the host rebooted since the flow was created.
    pub restored: Option<(Progress, bool)>,
    /// The task reading our TCP socket into custody (aborted on reset).
    reader_task: Option<tokio::task::JoinHandle<()>>,
}

/// What a flow starts from: who it is, where it goes, and (restored from a store) the custody
/// range it already holds.
#[derive(Debug)]
pub struct FlowInit {
    pub id: u64,
    pub class: Class,
    pub dest: String,
    /// Ingress: the local address of the route the flow came in on (empty at the egress).
    pub route: String,
    /// Ingress: the source's TCP port, carried as the AeroTP `src_port` while free.
    pub src_port: Option<u16>,
    pub custody: Custody,
    /// Most bytes this flow holds unconfirmed (the read-ahead window).
    pub window: u64,
    /// Custody already held: confirmed offset, bytes read, source at EOF.
    pub base: u64,
    pub end: u64,
    pub fin: bool,
    /// Egress, reliable flow: confirm what the destination acknowledged ([`FlowState`]).
    pub acked_only: bool,
}

impl FlowInit {
    /// A new flow with nothing read yet.
    pub fn new(id: u64, class: Class, dest: String, custody: Custody, window: u64) -> FlowInit {
        FlowInit {
            id,
            class,
            dest,
            route: String::new(),
            src_port: None,
            custody,
            window,
            base: 0,
            end: 0,
            fin: false,
            acked_only: false,
        }
    }
}

impl FlowState {
    /// What we confirm to the peer of its direction: bytes, and its FIN.
    pub fn confirmable(&self) -> (u64, bool) {
        if self.acked_only {
            (self.in_acked, self.in_fin && self.in_fin_acked)
        } else {
            (self.in_delivered, self.in_fin)
        }
    }
}

/// A TCP flow through the gateway pair. Its locks, each for one reason: `state` (offsets,
/// flags, the current connection: short critical sections, never held across an await),
/// `custody` (its own lock because store I/O runs under it on a blocking thread), `record`
/// (the egress's delivery record, written around each TCP write), `tcp_w` (an async lock:
/// held across the awaited writes to the socket) and `session` (an egress resume waits on it
/// for the superseded session to stop).
pub struct Flow {
    pub id: u64,
    pub class: Class,
    pub dest: String,
    pub route: String,
    /// Ingress: the source's TCP port (docs/gateway.md §Flow protocol).
    pub src_port: Option<u16>,
    pub custody_mode: bool,
    pub started: Instant,
    state: Mutex<FlowState>,
    custody: Mutex<Custody>,
    budget: Arc<Budget>,
    /// Most bytes this flow holds (window).
    window: u64,
    pub(crate) changed: watch::Sender<u64>,
    tcp_w: tokio::sync::Mutex<Option<Sink>>,
    /// Held by the session running the flow (a resume waits for the old one to stop).
    pub session: tokio::sync::Mutex<()>,
    /// Egress with a store: the crash-safe record of what was written to the destination.
    record: Mutex<Option<ProgressLog>>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("id", &self.id).finish()
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEnd {
    /// Both directions delivered and confirmed.
    Complete,
    /// The flow was reset (locally or by the peer).
    Reset(String),
    /// The AeroTP connection broke first; a custody flow may resume.
    Broken(String),
}

impl Flow {
    pub fn new(init: FlowInit, budget: Arc<Budget>) -> Arc<Flow> {
        let custody_mode = init.custody.is_disk();
        budget
            .held
            .fetch_add(init.end - init.base, Ordering::Relaxed);
        Arc::new(Flow {
            id: init.id,
            class: init.class,
            dest: init.dest,
            route: init.route,
            src_port: init.src_port,
            custody_mode,
            started: Instant::now(),
            state: Mutex::new(FlowState {
                base: init.base,
                end: init.end,
                fin: init.fin,
                peer_fin: false,
                in_delivered: 0,
                in_fin: false,
                acked_only: init.acked_only,
                in_acked: 0,
                in_fin_acked: false,
                reset: None,
                bytes_sent: 0,
                resumes: 0,
                conn: None,
                restored: None,
                reader_task: None,
            }),
            custody: Mutex::new(init.custody),
            budget,
            window: init.window,
            changed: watch::channel(0).0,
            tcp_w: tokio::sync::Mutex::new(None),
            session: tokio::sync::Mutex::new(()),
            record: Mutex::new(None),
        })
    }

    /// The connection of the current session, if one runs.
    pub fn connection(&self) -> Option<Connection> {
        self.lock().conn.clone()
    }

    /// Egress: records this flow's deliveries in `log` from now on.
    pub fn set_progress(&self, log: ProgressLog) {
        *self.record.lock().unwrap_or_else(|e| e.into_inner()) = Some(log);
    }

    /// Egress: the flow's delivery record, taken (flow finished).
    pub fn take_progress(&self) -> Option<ProgressLog> {
        self.record.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn has_progress(&self) -> bool {
        self.record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Updates the delivery record and syncs it (flags; no-op without a record).
    pub async fn persist(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Progress) + Send + 'static,
    ) -> Result<(), String> {
        if !self.has_progress() {
            return Ok(());
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.record(f, true))
            .await
            .unwrap_or_else(|e| Err(format!("store task: {e}")))
    }

    /// Updates the delivery record (`sync`: and `fdatasync`s it; else one `pwrite`).
    fn record(&self, f: impl FnOnce(&mut Progress), sync: bool) -> Result<(), String> {
        let mut g = self.record.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(log) => {
                let mut p = log.last();
                f(&mut p);
                log.record(p, sync)
            }
            None => Ok(()),
        }
        .map_err(|e| {
            format!("egress store error (delivery record): {e}; check the --store directory")
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, FlowState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn custody(&self) -> MutexGuard<'_, Custody> {
        self.custody.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// Attaches the TCP socket: spawns the task reading it into custody.
    pub async fn attach_tcp(self: &Arc<Self>, s: TcpStream) {
        let _ = s.set_nodelay(true);
        let (r, w) = s.into_split();
        *self.tcp_w.lock().await = Some(Sink::Kernel(w));
        if self.lock().acked_only {
            tokio::spawn(Flow::follow_acks(Arc::downgrade(self)));
        }
        let me = self.clone();
        let h = tokio::spawn(async move { me.read_tcp(r).await });
        self.lock().reader_task = Some(h);
    }

    /// Attaches a connection of the user-space TCP (`crate::usertcp`): it hands the source's
    /// bytes over with [`Flow::take_source`] and takes the peer's through `sink`.
    pub fn attach_user(&self, sink: Arc<dyn UserSink>) {
        match self.tcp_w.try_lock() {
            Ok(mut w) => *w = Some(Sink::User(sink)),
            // Only a new flow is attached; nothing else holds its lock yet.
            Err(_) => sink.reset(),
        }
    }

    /// User-space TCP: takes the source's next bytes into custody, as many as the window and
    /// the budget have room for; returns how many (the rest is not acknowledged to the source,
    /// which sends it again).
    pub fn take_source(&self, data: &[u8]) -> usize {
        let held = {
            let st = self.lock();
            if st.reset.is_some() || st.fin {
                return 0;
            }
            st.end - st.base
        };
        let room = self.window.saturating_sub(held).min(self.budget.free());
        let n = data.len().min(room as usize);
        if n == 0 {
            return 0;
        }
        if let Err(e) = self.custody().append(&data[..n]) {
            self.reset(format!("custody error: {e}"), true);
            return 0;
        }
        self.budget.held.fetch_add(n as u64, Ordering::Relaxed);
        self.lock().end += n as u64;
        self.bump();
        n
    }

    /// User-space TCP: the source's FIN, after every byte it sent.
    pub fn source_fin(&self) {
        let mut st = self.lock();
        if st.fin || st.reset.is_some() {
            return;
        }
        st.fin = true;
        drop(st);
        let _ = self.custody().set_fin();
        self.bump();
    }

    /// Writes the peer's bytes into the user-space connection's send buffer, waiting for
    /// room (the source's window) as a kernel socket's write would.
    async fn deliver_user(&self, u: &dyn UserSink, d: &[u8]) -> Result<(), String> {
        let mut pos = 0;
        while pos < d.len() {
            let room = u.room().notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.lock().reset.is_some() {
                return Err("flow reset".into());
            }
            let n = u.push(&d[pos..]);
            if n == 0 {
                room.await;
                continue;
            }
            pos += n;
            self.lock().in_delivered += n as u64;
            self.bump();
        }
        Ok(())
    }

    /// No TCP socket any more (restored after a restart): reverse bytes are discarded.
    pub fn detach_tcp_source(&self) {
        let mut st = self.lock();
        st.fin = true;
        drop(st);
        let _ = self.custody().set_fin();
        self.bump();
    }

    async fn read_tcp(self: Arc<Self>, mut r: OwnedReadHalf) {
        let mut brx = self.budget.changed.subscribe();
        let mut frx = self.changed.subscribe();
        let mut buf = vec![0u8; TCP_READ];
        loop {
            // Backpressure: read only what the window and the store have room for.
            let room = loop {
                brx.borrow_and_update();
                frx.borrow_and_update();
                let held = {
                    let st = self.lock();
                    if st.reset.is_some() {
                        return;
                    }
                    st.end - st.base
                };
                let room = self.window.saturating_sub(held).min(self.budget.free());
                if room > 0 {
                    break room;
                }
                tokio::select! {
                    _ = brx.changed() => {}
                    _ = frx.changed() => {}
                }
            };
            let want = (room as usize).min(TCP_READ);
            let (n, eof) = match read_with_eof(&mut r, &mut buf[..want]).await {
                Ok(r) => r,
                Err(e) => {
                    self.reset(format!("source TCP error: {e}"), true);
                    return;
                }
            };
            if n == 0 {
                self.take_eof().await;
                return;
            }
            if self.has_progress() && self.lock().end == 0 {
                // Before the destination's first bytes can leave: an egress restart must know
                // that this conversation has a reverse direction it cannot replay.
                if let Err(e) = self.persist(|p| p.flags |= progress::REVERSE).await {
                    self.reset(e, true);
                    return;
                }
            }
            let data = buf[..n].to_vec();
            let res = if self.custody_mode {
                let me = self.clone();
                tokio::task::spawn_blocking(move || me.custody().append(&data))
                    .await
                    .unwrap_or_else(|e| Err(io::Error::other(e)))
            } else {
                self.custody().append(&data)
            };
            if let Err(e) = res {
                self.reset(format!("store error: {e}"), true);
                return;
            }
            self.budget.held.fetch_add(n as u64, Ordering::Relaxed);
            if eof {
                // The bytes and the EOF in one change, so the session sends them together.
                self.lock().end += n as u64;
                self.take_eof().await;
                return;
            }
            self.lock().end += n as u64;
            self.bump();
        }
    }

    /// Our TCP side reached EOF: `end` is final (recorded in the custody store).
    async fn take_eof(self: &Arc<Self>) {
        let res = {
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.custody().set_fin()).await
        };
        match res {
            Ok(Ok(())) => {
                self.lock().fin = true;
                self.bump();
                tracing::debug!(flow = %format!("{:016x}", self.id), "TCP EOF");
            }
            Ok(Err(e)) => self.reset(format!("store error: {e}"), true),
            Err(e) => self.reset(format!("store task: {e}"), true),
        }
    }

    /// Aborts the flow: our TCP is reset (RST), the peer is told if `tell_peer`.
    pub fn reset(&self, reason: String, tell_peer: bool) {
        let reader = {
            let mut st = self.lock();
            if st.reset.is_some() {
                return;
            }
            tracing::info!(flow = %format!("{:016x}", self.id), %reason, "flow reset");
            st.reset = Some((reason, tell_peer));
            st.reader_task.take()
        };
        if let Some(h) = reader {
            h.abort();
        }
        if let Ok(mut w) = self.tcp_w.try_lock() {
            if let Some(w) = w.take() {
                w.abort();
            }
        }
        self.bump();
    }

    /// Releases the flow's share of the store budget (flow finished or reset).
    pub fn release_budget(&self) {
        let st = self.lock();
        let held = st.end - st.base;
        drop(st);
        self.budget.release(held);
        let mut st = self.lock();
        st.base = st.end;
    }

    /// Removes the flow's on-disk store.
    pub fn remove_store(&self) {
        let mut c = self.custody();
        if let Custody::Disk(_) = &*c {
            if let Custody::Disk(d) = std::mem::replace(&mut *c, Custody::mem(0)) {
                if let Err(e) = d.remove() {
                    tracing::warn!(flow = %format!("{:016x}", self.id), error = %e, "cannot remove store");
                }
            }
        }
    }

    /// Trims custody below `to` (confirmed by the peer).
    pub(crate) async fn confirm(self: &Arc<Self>, to: u64, fin: bool) -> Result<(), String> {
        let (old, end) = {
            let st = self.lock();
            (st.base, st.end)
        };
        if to > end || (fin && to != end) {
            return Err(format!("peer confirmed {to} beyond {end}"));
        }
        if to > old {
            let me = self.clone();
            let r = if self.custody_mode {
                tokio::task::spawn_blocking(move || me.custody().trim(to))
                    .await
                    .unwrap_or_else(|e| Err(io::Error::other(e)))
            } else {
                self.custody().trim(to)
            };
            r.map_err(|e| format!("store error: {e}"))?;
            let mut st = self.lock();
            st.base = st.base.max(to);
            drop(st);
            self.budget.release(to - old);
        }
        if fin {
            self.lock().peer_fin = true;
        }
        self.bump();
        Ok(())
    }

    /// Peer's view at a (re)start of a session: it has `delivered` of our bytes.
    pub async fn peer_has(self: &Arc<Self>, delivered: u64, fin: bool) -> Result<(), String> {
        let base = self.lock().base;
        if delivered < base {
            return Err(format!(
                "peer has {delivered} bytes but {base} were confirmed: peer lost its state"
            ));
        }
        self.confirm(delivered, fin).await
    }

    /// Sets what we have delivered of the peer's direction (a completed flow's record).
    pub fn set_in(&self, delivered: u64, fin: bool) {
        let mut st = self.lock();
        st.in_delivered = delivered;
        st.in_fin = fin;
        st.peer_fin = true;
    }

    /// What we confirm of the peer's direction ([`FlowState::confirmable`]).
    pub fn in_progress(&self) -> (u64, bool) {
        self.lock().confirmable()
    }

    /// Flow complete on our side: everything confirmed both ways.
    pub(crate) fn complete(st: &FlowState) -> bool {
        st.fin && st.peer_fin && st.base == st.end && st.confirmable().1
    }

    /// Egress, `acked_only` flow: takes what the destination's TCP acknowledged from the
    /// socket's send queue (`SIOCOUTQ`: bytes written and not yet acknowledged, the FIN
    /// counting one). Racing a write only under-counts (the bytes are in the queue before
    /// `in_delivered` counts them), never over-counts.
    fn note_acked(&self, s: &TcpStream) {
        let mut outq: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one int; the descriptor is the open socket `s` borrows.
        if unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut outq) } < 0 {
            return;
        }
        let outq = outq.max(0) as u64;
        let mut st = self.lock();
        let (acked, fin) = if st.in_fin {
            (
                st.in_delivered.saturating_sub(outq.saturating_sub(1)),
                outq == 0,
            )
        } else {
            (st.in_delivered.saturating_sub(outq), false)
        };
        if acked > st.in_acked || (fin && !st.in_fin_acked) {
            st.in_acked = st.in_acked.max(acked);
            st.in_fin_acked |= fin;
            drop(st);
            self.bump();
        }
    }

    /// Egress, `acked_only` flow: follows the destination's acknowledgements while some of
    /// what we wrote is unacknowledged (every 2 ms), until the flow ends.
    async fn follow_acks(me: std::sync::Weak<Flow>) {
        let Some(rx) = me.upgrade().map(|f| f.changed.subscribe()) else {
            return;
        };
        let mut rx = rx;
        loop {
            let Some(f) = me.upgrade() else { return };
            let (waiting, over) = {
                let st = f.lock();
                let waiting = st.in_acked < st.in_delivered || (st.in_fin && !st.in_fin_acked);
                (waiting, st.reset.is_some() || st.in_fin_acked)
            };
            if over {
                return;
            }
            if waiting {
                if let Ok(g) = f.tcp_w.try_lock() {
                    if let Some(Sink::Kernel(w)) = g.as_ref() {
                        f.note_acked(w.as_ref());
                    }
                }
                drop(f);
                tokio::time::sleep(Duration::from_millis(2)).await;
            } else {
                drop(f);
                rx.borrow_and_update();
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// Writes a chunk of the peer's direction to our TCP socket, counting partial writes (a
    /// cancelled session never loses track of what reached the socket).
    pub(crate) async fn deliver(self: &Arc<Self>, d: &[u8]) -> Result<(), String> {
        let mut w = self.tcp_w.lock().await;
        let tw = match w.as_mut() {
            Some(Sink::Kernel(tw)) => tw,
            Some(Sink::User(u)) => {
                let u = u.clone();
                drop(w);
                return self.deliver_user(&*u, d).await;
            }
            None => {
                // No TCP socket (restored flow whose source is gone): discarded.
                self.lock().in_delivered += d.len() as u64;
                self.bump();
                return Ok(());
            }
        };
        let recorded = self.has_progress();
        let mut pos = 0;
        let acked_only = self.lock().acked_only;
        while pos < d.len() {
            if let Err(e) = self.writable(tw, acked_only).await {
                return Err(format!("TCP write error: {e}"));
            }
            if recorded {
                // Intent just before the syscall, written just after: a restart in between
                // knows exactly which bytes are in doubt (progress.rs).
                let from = self.lock().in_delivered;
                let to = from + (d.len() - pos) as u64;
                self.record(
                    move |p| {
                        p.written = from;
                        p.intent = to;
                    },
                    false,
                )?;
            }
            let r = tw.try_write(&d[pos..]);
            let n = match r {
                Ok(0) => return Err("TCP write returned 0".into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(format!("TCP write error: {e}")),
            };
            pos += n;
            if acked_only {
                self.lock().in_delivered += n as u64;
                self.note_acked(tw.as_ref());
                self.bump();
                continue;
            }
            let done = {
                let mut st = self.lock();
                st.in_delivered += n as u64;
                st.in_delivered
            };
            if recorded {
                self.record(
                    move |p| {
                        p.written = done;
                        p.intent = done;
                    },
                    false,
                )?;
            }
            if n > 0 {
                self.bump();
            }
        }
        Ok(())
    }

    /// Waits until the socket takes more; an `acked_only` flow follows the destination's
    /// acknowledgements meanwhile (the follower cannot take the socket while a write waits).
    async fn writable(&self, tw: &OwnedWriteHalf, acked_only: bool) -> io::Result<()> {
        if !acked_only {
            return tw.writable().await;
        }
        loop {
            tokio::select! {
                r = tw.writable() => return r,
                _ = tokio::time::sleep(Duration::from_millis(2)) => self.note_acked(tw.as_ref()),
            }
        }
    }

    pub(crate) async fn deliver_fin(self: &Arc<Self>) -> Result<(), String> {
        let mut w = self.tcp_w.lock().await;
        match w.as_mut() {
            Some(Sink::Kernel(tw)) => {
                let _ = tw.shutdown().await;
            }
            Some(Sink::User(u)) => u.finish(),
            None => {}
        }
        drop(w);
        self.persist(|p| p.flags |= progress::IN_FIN).await?;
        self.lock().in_fin = true;
        self.bump();
        Ok(())
    }

    /// Aborts our TCP socket with RST after a reset from the peer.
    pub(crate) async fn reset_tcp(&self, reason: String) {
        self.reset(reason, false);
        if let Some(w) = self.tcp_w.lock().await.take() {
            w.abort();
        }
    }
}
