//! One TCP flow between the gateways, symmetric: each side holds its TCP socket, the custody
//! of the bytes it read from it that the peer has not confirmed, and how many of the peer's
//! bytes it has written to it. A flow outlives the AeroTP connection that carries it
//! ([`run_session`]); a near-reliable flow resumes on a new connection.
//!
//! Both roles run the same code; what only the egress keeps is its own type, fixed when the
//! flow is created ([`FlowRole`]: `Ingress`, or `Egress` with its [`EgressParts`]): for a
//! reliable flow, what the destination's TCP acknowledged ([`DestAcked`]: only that is
//! confirmed to the peer), a flow restored from the egress store after a restart, and with
//! a store the crash-safe delivery record. An ingress flow has none of them.
//!
//! Who touches a flow: the session's two halves (`crate::session`: sending custody, taking
//! the peer's bytes and confirmations), the task reading the TCP socket into custody and the
//! task owning the socket's write half (`crate::tcpside`), and the gateway's own code (the
//! ingress's driver, the egress's resume). What they share, and why each lock:
//!
//! * `state` ([`Locked`], a std mutex): [`FlowState`], the offsets and flags every one of
//!   them reads and moves and the current session's connection, beside the role's own
//!   parts: the confirmation rule ([`Locked::confirmable`]) reads what was written and what
//!   the destination acknowledged at once. The custody range is there, once ([`Range`]:
//!   `base..end`, `fin`), moved only by the flow's custody methods ([`Flow::take_read`],
//!   [`Flow::take_source`], [`Flow::take_eof`], [`Flow::source_fin`],
//!   [`Flow::detach_tcp_source`], [`Flow::confirm`], [`Flow::release_budget`]),
//!   each after the store took its part, the range's methods charging or releasing the
//!   gateway's [`Budget`] in the same step. Short critical sections, never held across an
//!   await. Changes are announced on the `changed` watch.
//! * `custody` (a std mutex): the bytes held until the peer confirms them, appended by the
//!   reader (through those methods), read by the session, trimmed by confirmations; its own
//!   lock because store I/O runs under it (on a blocking thread for a disk custody), never
//!   taken while `state` is held.
//! * the egress's delivery record (with a store: [`Record`], in [`EgressParts`], its own
//!   lock because a `pwrite` or `fdatasync` runs under it): written by the TCP writer
//!   around each write, by the reader (`REVERSE`) and by the egress (`COMPLETE`). Its
//!   handle is fixed at creation; a user clones it out of `state` and writes without that.
//!
//! The write half has no lock: one task owns it and takes the peer's bytes, tagged with
//! their flow offsets, through [`Out`] (a channel bounded in bytes), reporting what it
//! wrote (and, at the egress for a reliable flow, what the destination acknowledged) in
//! `state`. A session taking over waits for the one it supersedes on `state.conn` and the
//! watch ([`Flow::take_over`]), not on a lock of its own.

mod range;
mod state;

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use aerotp_net::Connection;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::frame::Class;
use crate::progress::{self, Progress, ProgressLog, Record};
pub use crate::sink::UserSink;
use crate::store::Custody;
pub use range::{Budget, Range};
pub use state::FlowState;

/// Most bytes of the peer's direction queued for a flow's TCP writer (the flow's window,
/// capped: a disk-custody flow's window is unbounded).
const OUT_MAX: u64 = 4 << 20;

/// Egress, reliable flow: of the bytes written to the destination (`in_delivered`), what
/// its TCP acknowledged. Only this is confirmed to the peer, so the source behind the
/// ingress learns of nothing the destination does not have (docs/gateway.md §TCP reliable:
/// end-to-end semantics).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DestAcked {
    pub in_acked: u64,
    /// The destination acknowledged our FIN.
    pub in_fin_acked: bool,
}

/// What only the egress keeps of a flow. It sits under the state lock beside [`FlowState`]
/// because the confirmation rule ([`Locked::confirmable`]) reads both at once.
#[derive(Debug)]
pub struct EgressParts {
    /// A reliable flow's destination acknowledgements (`None`: confirm what was written).
    acked: Option<DestAcked>,
    /// Restored from the store after a restart, no destination connection yet: the record,
    /// and whether the host rebooted since the flow was created (taken by the resume).
    restored: Option<(Progress, bool)>,
    /// With a store: the crash-safe record of what was written to the destination. Fixed
    /// at creation; its own lock (store I/O runs under it), so a user clones it out.
    record: Option<Arc<Record>>,
}

impl EgressParts {
    /// A new egress flow: `acked_only` for a reliable one, `record` with a store.
    pub fn new(acked_only: bool, record: Option<ProgressLog>) -> EgressParts {
        EgressParts {
            acked: acked_only.then(DestAcked::default),
            restored: None,
            record: record.map(Record::new),
        }
    }

    /// A flow restored from the store (`rebooted`: the host's boot id changed since).
    pub fn restored(log: ProgressLog, p: Progress, rebooted: bool) -> EgressParts {
        EgressParts {
            restored: Some((p, rebooted)),
            ..EgressParts::new(false, Some(log))
        }
    }

    /// What the destination acknowledged, for a flow that follows it.
    pub fn acked(&self) -> Option<DestAcked> {
        self.acked
    }

    /// A restored flow's record and whether the host rebooted, taken by its first resume.
    pub fn take_restored(&mut self) -> Option<(Progress, bool)> {
        self.restored.take()
    }
}

/// A flow's role, fixed when it is created: the ingress keeps nothing of its own; the
/// egress its [`EgressParts`].
#[derive(Debug)]
pub enum FlowRole {
    Ingress,
    Egress(EgressParts),
}

/// What a flow's state lock guards: the state both roles use (reached through `Deref`, so
/// role-neutral code reads it as a [`FlowState`]) and the role's own.
#[derive(Debug)]
pub struct Locked {
    st: FlowState,
    role: FlowRole,
}

impl std::ops::Deref for Locked {
    type Target = FlowState;
    fn deref(&self) -> &FlowState {
        &self.st
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut FlowState {
        &mut self.st
    }
}

impl Locked {
    /// The egress's parts (`None` at the ingress).
    pub fn egress(&mut self) -> Option<&mut EgressParts> {
        match &mut self.role {
            FlowRole::Egress(e) => Some(e),
            FlowRole::Ingress => None,
        }
    }

    fn acked(&self) -> Option<DestAcked> {
        match &self.role {
            FlowRole::Egress(e) => e.acked,
            FlowRole::Ingress => None,
        }
    }

    /// The flow confirms only what the destination acknowledged ([`DestAcked`]).
    pub fn follows_acks(&self) -> bool {
        self.acked().is_some()
    }

    /// What we confirm to the peer of its direction: bytes, and its FIN (a flow following
    /// the destination's acknowledgements: what it acknowledged).
    pub fn confirmable(&self) -> (u64, bool) {
        match self.acked() {
            Some(a) => (a.in_acked, self.st.in_fin && a.in_fin_acked),
            None => (self.st.in_delivered, self.st.in_fin),
        }
    }

    /// A flow following the destination's acknowledgements wrote bytes (or its FIN) the
    /// destination has not acknowledged.
    pub fn unacked(&self) -> bool {
        self.acked().is_some_and(|a| {
            a.in_acked < self.st.in_delivered || (self.st.in_fin && !a.in_fin_acked)
        })
    }
}

/// What a flow starts from: who it is, where it goes, and (restored from a store) the custody
/// range it already holds.
#[derive(Debug)]
pub struct FlowInit {
    pub id: u64,
    pub class: Class,
    pub dest: String,
    pub custody: Custody,
    /// Most bytes this flow holds unconfirmed (the read-ahead window).
    pub window: u64,
    /// Custody already held: confirmed offset, bytes read, source at EOF.
    pub base: u64,
    pub end: u64,
    pub fin: bool,
}

impl FlowInit {
    /// A new flow with nothing read yet.
    pub fn new(id: u64, class: Class, dest: String, custody: Custody, window: u64) -> FlowInit {
        FlowInit {
            id,
            class,
            dest,
            custody,
            window,
            base: 0,
            end: 0,
            fin: false,
        }
    }
}

/// What the flow's TCP writer is given, in order (one pointer each: the channel's slots are
/// allocated per flow, 32 at a time).
#[derive(Debug)]
pub(crate) enum OutCmd {
    Data(Box<Chunk>),
    /// The peer's FIN, after all its bytes.
    Fin,
}

/// The peer's bytes from flow offset `at`: what the socket already has of them is skipped (a
/// resumed session sends again from what was written when it started). They hold
/// [`Flow::out_share`] of the queue's bound, given back by the writer once written.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) at: u64,
    pub(crate) data: Vec<u8>,
}

/// The way to the task owning the flow's TCP write half (`crate::tcpside`): a queue
/// bounded in bytes by `room` (closed when the writer stops).
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) tx: mpsc::UnboundedSender<OutCmd>,
    pub(crate) room: Arc<Semaphore>,
}

/// A TCP flow through the gateway pair (the module doc says who shares it and why each
/// lock).
pub struct Flow {
    pub id: u64,
    pub class: Class,
    pub dest: String,
    pub custody_mode: bool,
    pub started: Instant,
    state: Mutex<Locked>,
    custody: Mutex<Custody>,
    /// Most bytes this flow holds (window).
    window: u64,
    pub(crate) changed: watch::Sender<u64>,
    /// The TCP writer, once a socket is attached (never for a flow without one).
    out: OnceLock<Out>,
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
    pub(crate) fn new(init: FlowInit, role: FlowRole, budget: Arc<Budget>) -> Arc<Flow> {
        let custody_mode = init.custody.is_disk();
        Arc::new(Flow {
            id: init.id,
            class: init.class,
            dest: init.dest,
            custody_mode,
            started: Instant::now(),
            state: Mutex::new(Locked {
                st: FlowState::new(Range::new(init.base, init.end, init.fin, budget)),
                role,
            }),
            custody: Mutex::new(init.custody),
            window: init.window,
            changed: watch::channel(0).0,
            out: OnceLock::new(),
        })
    }

    /// The connection of the current session, if one runs.
    pub fn connection(&self) -> Option<Connection> {
        self.lock().conn.clone()
    }

    /// Egress with a store: the flow's delivery record (cloned out of the state lock: its
    /// writes run under its own).
    pub(crate) fn record(&self) -> Option<Arc<Record>> {
        self.lock().egress().and_then(|e| e.record.clone())
    }

    /// Egress: the flow's delivery record, taken (flow finished).
    pub fn take_progress(&self) -> Option<ProgressLog> {
        self.record().and_then(|r| r.take())
    }

    /// Updates the delivery record and syncs it (flags; no-op without a record).
    pub async fn persist(
        &self,
        f: impl FnOnce(&mut Progress) + Send + 'static,
    ) -> Result<(), String> {
        match self.record() {
            Some(r) => r.persist(f).await,
            None => Ok(()),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Locked> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn custody(&self) -> MutexGuard<'_, Custody> {
        self.custody.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// The most bytes the source may add to custody now (the window's and the store's room;
    /// `None`: the flow was reset).
    pub(crate) fn room(&self) -> Option<u64> {
        let st = self.lock();
        st.reset.is_none().then(|| st.range.room(self.window))
    }

    /// The budget's change notifications (a reader waiting for room follows them).
    pub(crate) fn budget_changes(&self) -> watch::Receiver<u64> {
        self.lock().range.budget_changes()
    }

    /// Takes bytes read from our TCP socket into custody: the store, then the range (and
    /// its budget charge). Disk custody appends (and fsyncs) on a blocking thread.
    pub(crate) async fn take_read(self: &Arc<Self>, data: Vec<u8>) -> Result<(), String> {
        let n = data.len() as u64;
        let res = if self.custody_mode {
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.custody().append(&data))
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)))
        } else {
            self.custody().append(&data)
        };
        res.map_err(|e| format!("store error: {e}"))?;
        self.lock().range.took(n);
        Ok(())
    }

    /// Our TCP socket reached EOF: `end` is final, in the store (on a blocking thread) and
    /// then in the range.
    pub(crate) async fn take_eof(self: &Arc<Self>) -> Result<(), String> {
        let me = self.clone();
        match tokio::task::spawn_blocking(move || me.custody().set_fin()).await {
            Ok(Ok(())) => {
                self.lock().range.finish();
                self.bump();
                Ok(())
            }
            Ok(Err(e)) => Err(format!("store error: {e}")),
            Err(e) => Err(format!("store task: {e}")),
        }
    }

    /// The TCP writer's queue bound, in bytes.
    pub(crate) fn out_bound(&self) -> u64 {
        self.window.clamp(crate::frame::MAX_DATA as u64, OUT_MAX)
    }

    /// The share of the queue's bound a chunk of `len` bytes holds while queued.
    pub(crate) fn out_share(&self, len: usize) -> u32 {
        (len as u64).clamp(1, self.out_bound()) as u32
    }

    /// Hands the write half's queue to the flow (once: `Err` if a writer is attached).
    pub(crate) fn set_out(&self, out: Out) -> Result<(), Out> {
        self.out.set(out)
    }

    /// Registers the task reading the TCP socket (aborted on reset).
    pub(crate) fn set_reader(&self, h: tokio::task::JoinHandle<()>) {
        let mut st = self.lock();
        if st.reset.is_some() {
            h.abort();
        } else {
            st.reader_task = Some(h);
        }
    }

    /// Becomes the flow's session on `conn`: a session still running (superseded: a resume
    /// on a new connection) is aborted and waited for.
    pub async fn take_over(&self, conn: &Connection) {
        let mut rx = self.changed.subscribe();
        loop {
            rx.borrow_and_update();
            let old = {
                let mut st = self.lock();
                match &st.conn {
                    None => {
                        st.conn = Some(conn.clone());
                        return;
                    }
                    Some(c) => c.clone(),
                }
            };
            old.abort("superseded by a resumed connection");
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The session on the current connection ended (a resume waiting to take over goes on).
    pub(crate) fn session_ended(&self) {
        self.lock().conn = None;
        self.bump();
    }

    /// User-space TCP: takes the source's next bytes into custody, as many as the window and
    /// the budget have room for; returns how many (the rest is not acknowledged to the source,
    /// which sends it again).
    pub fn take_source(&self, data: &[u8]) -> usize {
        let room = {
            let st = self.lock();
            if st.reset.is_some() || st.fin() {
                return 0;
            }
            st.range.room(self.window)
        };
        let n = data.len().min(room as usize);
        if n == 0 {
            return 0;
        }
        if let Err(e) = self.custody().append(&data[..n]) {
            self.reset(format!("custody error: {e}"), true);
            return 0;
        }
        self.lock().range.took(n as u64);
        self.bump();
        n
    }

    /// User-space TCP: the source's FIN, after every byte it sent.
    pub fn source_fin(&self) {
        let mut st = self.lock();
        if st.fin() || st.reset.is_some() {
            return;
        }
        st.range.finish();
        drop(st);
        let _ = self.custody().set_fin();
        self.bump();
    }

    /// No TCP socket any more (restored after a restart): reverse bytes are discarded.
    pub fn detach_tcp_source(&self) {
        self.lock().range.finish();
        let _ = self.custody().set_fin();
        self.bump();
    }

    /// Aborts the flow: our TCP is reset (RST: the writer does it when it sees the reset),
    /// the peer is told if `tell_peer`.
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
        self.bump();
    }

    /// Releases the flow's share of the store budget (flow finished or reset).
    pub fn release_budget(&self) {
        self.lock().range.release();
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
            (st.base(), st.end())
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
            self.lock().range.confirmed(to);
        }
        if fin {
            self.lock().peer_fin = true;
        }
        self.bump();
        Ok(())
    }

    /// Peer's view at a (re)start of a session: it has `delivered` of our bytes.
    pub async fn peer_has(self: &Arc<Self>, delivered: u64, fin: bool) -> Result<(), String> {
        let base = self.lock().base();
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

    /// What we confirm of the peer's direction ([`Locked::confirmable`]).
    pub fn in_progress(&self) -> (u64, bool) {
        self.lock().confirmable()
    }

    /// Flow complete on our side: everything confirmed both ways.
    pub(crate) fn complete(st: &Locked) -> bool {
        st.fin() && st.peer_fin && st.range.held() == 0 && st.confirmable().1
    }

    /// Egress, flow following the destination's acknowledgements ([`DestAcked`]): the
    /// socket's send queue holds `outq` bytes written and not yet acknowledged (`SIOCOUTQ`,
    /// the FIN counting one): the rest of what was written is the destination's. Racing a
    /// write only under-counts (the bytes are in the queue before `in_delivered` counts
    /// them), never over-counts. A no-op for any other flow.
    pub(crate) fn note_outq(&self, outq: u64) {
        let mut g = self.lock();
        let (delivered, in_fin) = (g.in_delivered, g.in_fin);
        let Some(a) = g.egress().and_then(|e| e.acked.as_mut()) else {
            return;
        };
        let (acked, fin) = if in_fin {
            (delivered.saturating_sub(outq.saturating_sub(1)), outq == 0)
        } else {
            (delivered.saturating_sub(outq), false)
        };
        if acked > a.in_acked || (fin && !a.in_fin_acked) {
            a.in_acked = a.in_acked.max(acked);
            a.in_fin_acked |= fin;
            drop(g);
            self.bump();
        }
    }

    /// Hands the peer's bytes from flow offset `at` to the TCP writer, waiting while its
    /// queue is full. Only what the writer has written counts as delivered (`in_delivered`).
    /// Without a TCP socket (a restored flow whose source is gone) they are discarded.
    pub(crate) async fn deliver(&self, at: u64, data: Vec<u8>) -> Result<(), String> {
        let Some(out) = self.out.get() else {
            self.lock().in_delivered += data.len() as u64;
            self.bump();
            return Ok(());
        };
        let gone = || "flow reset (TCP writer stopped)".to_string();
        let room = out.room.acquire_many(self.out_share(data.len())).await;
        // Given back by the writer (`add_permits`) once the chunk is written.
        room.map_err(|_| gone())?.forget();
        out.tx
            .send(OutCmd::Data(Box::new(Chunk { at, data })))
            .map_err(|_| gone())
    }

    /// The peer's FIN, after its bytes: the writer shuts our TCP write half, then records it
    /// (`in_fin`). Without a TCP socket, recorded at once.
    pub(crate) async fn deliver_fin(&self) -> Result<(), String> {
        if let Some(out) = self.out.get() {
            return out
                .tx
                .send(OutCmd::Fin)
                .map_err(|_| "flow reset (TCP writer stopped)".to_string());
        }
        self.persist(|p| p.flags |= progress::IN_FIN).await?;
        self.lock().in_fin = true;
        self.bump();
        Ok(())
    }
}
/// What the user-space TCP (`aerotp-usertcp`) needs of the flow a connection feeds.
impl aerotp_usertcp::Carrier for Flow {
    fn take_source(&self, data: &[u8]) -> usize {
        Flow::take_source(self, data)
    }
    fn source_fin(&self) {
        Flow::source_fin(self)
    }
    fn confirmed(&self) -> (u64, bool) {
        let st = self.lock();
        (st.base(), st.peer_fin())
    }
    fn is_reset(&self) -> bool {
        self.lock().reset().is_some()
    }
    fn reset(&self, reason: String, tell_peer: bool) {
        Flow::reset(self, reason, tell_peer)
    }
    fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(role: FlowRole) -> Arc<Flow> {
        let init = FlowInit::new(1, Class::Bulk, "x".into(), Custody::mem(0), 1 << 16);
        Flow::new(init, role, Budget::new(1 << 20))
    }

    /// 10 bytes and the FIN written to our socket.
    fn written(f: &Flow) {
        f.set_in(10, true);
    }

    #[test]
    fn flows_not_following_acks_confirm_what_was_written() {
        for role in [
            FlowRole::Ingress,
            FlowRole::Egress(EgressParts::new(false, None)),
        ] {
            let f = flow(role);
            written(&f);
            // A queue reading means nothing to them.
            f.note_outq(4);
            let st = f.lock();
            assert_eq!((st.confirmable(), st.unacked()), ((10, true), false));
        }
    }

    #[test]
    fn a_flow_following_acks_confirms_what_the_destination_acknowledged() {
        let f = flow(FlowRole::Egress(EgressParts::new(true, None)));
        written(&f);
        assert_eq!(f.in_progress(), (0, false));
        assert!(f.lock().unacked());
        // 3 bytes and the FIN still queued: 7 acknowledged, not the FIN.
        f.note_outq(4);
        assert_eq!(f.in_progress(), (7, false));
        f.note_outq(1);
        assert_eq!(
            f.in_progress(),
            (10, false),
            "the FIN counts one in the queue"
        );
        f.note_outq(0);
        assert_eq!(f.in_progress(), (10, true));
        assert!(!f.lock().unacked());
        // A later, larger reading (a write racing it) never takes back what was confirmed.
        f.note_outq(5);
        assert_eq!(f.in_progress(), (10, true));
    }

    #[tokio::test]
    async fn a_restored_flow_is_taken_once_and_keeps_its_record() {
        let root = tempfile::tempdir().unwrap();
        let meta = progress::EgressMeta {
            flow_id: 1,
            class: 0,
            dest: "x".into(),
            boot_id: progress::boot_id(),
        };
        let log = ProgressLog::create(root.path(), &meta).unwrap();
        let p = Progress {
            written: 5,
            ..Progress::default()
        };
        let f = flow(FlowRole::Egress(EgressParts::restored(log, p, true)));
        let take = || f.lock().egress().and_then(EgressParts::take_restored);
        assert_eq!(take(), Some((p, true)));
        assert_eq!(take(), None);
        f.persist(|p| p.flags |= progress::COMPLETE).await.unwrap();
        let log = f.take_progress().expect("the record");
        assert_eq!(log.last().flags, progress::COMPLETE);
        assert!(f.take_progress().is_none(), "taken once");
        assert!(flow(FlowRole::Ingress).lock().egress().is_none());
        assert!(flow(FlowRole::Ingress).take_progress().is_none());
    }

    /// What the user-space TCP relies on (`aerotp_usertcp::Carrier`, modelled by its unit
    /// tests' flow): bytes taken up to the window past what was confirmed, the confirmation
    /// read with the peer's end, nothing taken after the FIN or a reset, every change
    /// announced.
    #[tokio::test]
    async fn the_user_space_tcp_sees_the_window_the_confirmations_and_the_reset() {
        use aerotp_usertcp::Carrier;
        let f = flow(FlowRole::Ingress);
        let c: &dyn Carrier = &*f;
        let mut rx = c.changes();
        assert_eq!(c.take_source(&[0; 40_000]), 40_000);
        assert_eq!(
            c.take_source(&[0; 40_000]),
            (1 << 16) - 40_000,
            "the window"
        );
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        f.confirm(10_000, false).await.unwrap();
        assert!(rx.has_changed().unwrap());
        assert_eq!(c.confirmed(), (10_000, false));
        assert_eq!(
            c.take_source(&[0; 40_000]),
            10_000,
            "room by what was confirmed"
        );
        c.source_fin();
        assert_eq!(c.take_source(&[0; 10]), 0, "nothing after the FIN");
        f.confirm(50_000, false).await.unwrap();
        f.confirm(75_536, true).await.unwrap();
        assert_eq!(
            c.confirmed(),
            (75_536, true),
            "every byte taken and the FIN"
        );
        let g = flow(FlowRole::Ingress);
        let c: &dyn Carrier = &*g;
        assert!(!c.is_reset());
        c.reset("test".into(), false);
        assert!(c.is_reset());
        assert_eq!(c.take_source(&[0; 10]), 0, "nothing after a reset");
    }
}
