//! The driver task: owns the UDP socket, feeds the engine arrivals and timeouts, sends what
//! it offers, and hands its events to the application's handles through the shared state.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use aerotp_proto as proto;
use bytes::BytesMut;
use proto::{CloseOutcome, ConnectionHandle, Event};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::counters::{IoCounters, Totals};
use crate::sources::LocalAddrs;
use crate::tap::{wall_clock, EngineTap, TapHandle, TAP_RECEIVED, TAP_SENT};
use crate::udp;
use crate::BATCH;

/// Most datagrams the driver reads from the socket per wake before serving timers again.
const RECV_BATCH: usize = 256;
/// Wake-ups in a row with a passed deadline and nothing sent after which the driver reports
/// an engine bug and backs off (see the loop in `drive`).
const STALL_REPORT: u32 = 1000;
/// After the last application handle is dropped, the longest the driver keeps serving
/// connections that are still closing.
const DRAIN_LIMIT: Duration = Duration::from_secs(15);

pub(crate) struct Slot {
    pub(crate) read_waker: Option<Waker>,
    pub(crate) write_waker: Option<Waker>,
    pub(crate) status: Arc<Notify>,
    pub(crate) connected: bool,
    /// The engine's `is_proven`: the peer showed it receives what is sent to its address.
    pub(crate) proven: bool,
    pub(crate) outcome: Option<CloseOutcome>,
    /// No application handle left: release as soon as closed.
    pub(crate) detached: bool,
}

impl Slot {
    pub(crate) fn new() -> Slot {
        Slot {
            read_waker: None,
            write_waker: None,
            status: Arc::new(Notify::new()),
            connected: false,
            proven: false,
            outcome: None,
            detached: false,
        }
    }
}

pub(crate) struct State {
    pub(crate) engine: proto::Endpoint,
    pub(crate) slots: HashMap<ConnectionHandle, Slot>,
    pub(crate) incoming: VecDeque<ConnectionHandle>,
    /// Application handles alive (endpoints and connections); 0 = the driver may stop.
    pub(crate) users: usize,
    pub(crate) driver_stopped: bool,
    pub(crate) send_errors: u64,
    pub(crate) recv_errors: u64,
    /// Datagrams and bytes through the socket (what a capture of the endpoint holds).
    pub(crate) io: IoCounters,
    /// Final counters of released connections, summed, so that totals over the endpoint's
    /// life never go down when a connection is released (Prometheus counters).
    pub(crate) retired: Totals,
    /// Connections opened (connect or accept) and closed (any outcome).
    pub(crate) opened: u64,
    pub(crate) closed: u64,
    /// A copy of every datagram, if asked for (`--pcap`).
    pub(crate) tap: Option<TapHandle>,
    /// The engine's connections after each step, if asked for (`--qlog`).
    pub(crate) engine_tap: Option<Arc<dyn EngineTap>>,
    /// The local address each datagram leaves from (a socket bound to the unspecified
    /// address: pinned per path, learned from what peers sent to; `crate::sources`).
    pub(crate) local_addrs: LocalAddrs,
    /// The DSCP each class's datagrams carry (`Endpoint::set_dscp_plan`).
    pub(crate) marks: crate::marks::DscpPlan,
    /// The driver's steps: how many have taken datagrams from the engine, and the last one
    /// whose datagrams were all handed to the socket. A datagram the engine counts as sent
    /// may still be in the driver's hands (it sends outside the lock); what was taken by
    /// step N has left once `steps_sent >= N` (`Connection::settled` waits for it).
    pub(crate) steps_taken: u64,
    pub(crate) steps_sent: u64,
}

impl State {
    /// Releases a closed connection after adding its final counters to `retired`.
    pub(crate) fn release(&mut self, h: ConnectionHandle) {
        if let Some(s) = self.engine.stats(h) {
            self.retired.add(&s);
        }
        self.engine.release(h);
    }

    /// Shows the engine tap, if any, connection `only` or every connection with a slot.
    pub(crate) fn show_engine_tap(&self, only: Option<ConnectionHandle>) {
        let Some(t) = &self.engine_tap else {
            return;
        };
        let at = wall_clock();
        let show = |h: ConnectionHandle| {
            if let (Some(s), Some(state)) = (self.engine.stats(h), self.engine.state(h)) {
                t.connection(at, h.0, &s, state);
            }
        };
        match only {
            Some(h) => show(h),
            None => self.slots.keys().copied().for_each(show),
        }
    }

    /// Hands the engine's events to the waiting tasks.
    pub(crate) fn dispatch(&mut self, shared: &Shared) {
        while let Some(e) = self.engine.poll_event() {
            match e {
                Event::Connected(h) => {
                    if let Some(s) = self.slots.get_mut(&h) {
                        s.connected = true;
                        s.status.notify_waiters();
                    }
                }
                Event::Accepted(h) => {
                    self.opened += 1;
                    let mut s = Slot::new();
                    s.connected = true;
                    self.slots.insert(h, s);
                    self.incoming.push_back(h);
                    shared.accept.notify_one();
                }
                Event::Readable(h) => {
                    if let Some(w) = self.slots.get_mut(&h).and_then(|s| s.read_waker.take()) {
                        w.wake();
                    }
                }
                Event::Writable(h) => {
                    if let Some(w) = self.slots.get_mut(&h).and_then(|s| s.write_waker.take()) {
                        w.wake();
                    }
                }
                Event::Confirmed(h) => {
                    if let Some(s) = self.slots.get(&h) {
                        s.status.notify_waiters();
                    }
                }
                Event::Closed(h, o) => {
                    self.closed += 1;
                    // Its last look before it may be released below.
                    self.show_engine_tap(Some(h));
                    let release = match self.slots.get_mut(&h) {
                        Some(s) => {
                            s.outcome = Some(o);
                            if let Some(w) = s.read_waker.take() {
                                w.wake();
                            }
                            if let Some(w) = s.write_waker.take() {
                                w.wake();
                            }
                            s.status.notify_waiters();
                            s.detached
                        }
                        None => true,
                    };
                    if release {
                        self.slots.remove(&h);
                        self.release(h);
                    }
                }
                Event::Datagram => shared.datagram.notify_one(),
            }
        }
        // Proof is no event: look at the connections still waiting for it.
        for (h, s) in self.slots.iter_mut().filter(|(_, s)| !s.proven) {
            if self.engine.is_proven(*h) {
                s.proven = true;
                s.status.notify_waiters();
                // A read held until the proof (`Connection::poll_unproven`) goes on.
                if let Some(w) = s.read_waker.take() {
                    w.wake();
                }
            }
        }
    }
}

pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Wakes the driver after the application changed something.
    pub(crate) wake: Notify,
    pub(crate) accept: Notify,
    pub(crate) datagram: Notify,
    pub(crate) epoch: Instant,
    pub(crate) local_addr: SocketAddr,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the engine in an unknown state; carry on with
        // it rather than poisoning every handle (the engine's methods keep it consistent).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

/// Counts an application handle; the driver stops after the last one is gone and the
/// remaining connections have closed (or after [`DRAIN_LIMIT`]).
pub(crate) struct UserRef(pub(crate) Arc<Shared>);

impl UserRef {
    pub(crate) fn new(shared: &Arc<Shared>) -> UserRef {
        shared.lock().users += 1;
        UserRef(shared.clone())
    }
}

impl Drop for UserRef {
    fn drop(&mut self) {
        self.0.lock().users -= 1;
        self.0.wake.notify_one();
    }
}

/// Sleeps until `t`, or forever.
pub(crate) async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

pub(crate) async fn drive(shared: Arc<Shared>, mut io: udp::UdpIo) {
    let mut rbuf = BytesMut::new();
    let mut outbox = udp::Outbox::default();
    let mut unused_since: Option<Instant> = None;
    let mut stalled_wakeups = 0u32;
    loop {
        let max_segments = io.max_segments();
        let (deadline, more, stop, step) = {
            let mut st = shared.lock();
            let now = shared.now();
            // What has arrived goes in before the timers run: after the thread was descheduled
            // (a loaded machine), acknowledgements waiting in the socket must not be taken for
            // losses by a retransmission timeout checked first.
            receive(&io, &mut st, &mut rbuf, now);
            st.engine.handle_timeout(now);
            st.dispatch(&shared);
            st.steps_taken += 1;
            let step = st.steps_taken;
            let more = fill_batch(&mut st, &mut outbox, max_segments, now);
            st.dispatch(&shared);
            st.report_radio_changes(now);
            st.show_engine_tap(None);
            let deadline = st.engine.poll_timeout();
            let stop = stop_when_unused(&mut st, &mut unused_since);
            (deadline, more, stop, step)
        };
        let sent_any = !outbox.is_empty();
        let trains = outbox.take();
        for t in &trains {
            let failed = io.send(t).await;
            if failed > 0 {
                shared.lock().send_errors += failed as u64;
            }
        }
        outbox.recycle(trains);
        shared.lock().steps_sent = step;
        if stop {
            shared.accept.notify_waiters();
            shared.datagram.notify_waiters();
            break;
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let wake_at = wake_time(
            &shared,
            deadline,
            sent_any,
            &mut stalled_wakeups,
            unused_since.is_some(),
        );
        tokio::select! {
            // Arrivals first when several branches are ready (see `receive` above).
            biased;
            r = io.readable() => {
                stalled_wakeups = 0;
                if let Err(e) = r {
                    tracing::debug!(error = %e, "socket not readable");
                    shared.lock().recv_errors += 1;
                    continue;
                }
                let mut st = shared.lock();
                let now = shared.now();
                receive(&io, &mut st, &mut rbuf, now);
            }
            _ = sleep_until(wake_at) => {}
            _ = shared.wake.notified() => {}
        }
    }
}

/// Fills `outbox` with what the engine sends at `now`, up to a batch; true when the batch
/// is full and the engine may have more.
fn fill_batch(
    st: &mut State,
    outbox: &mut udp::Outbox,
    max_segments: usize,
    now: Duration,
) -> bool {
    let mut more = false;
    // One clock reading per batch: the datagrams of a batch leave together. The DSCP plan is
    // read once per batch too.
    let tap = st.tap.clone().map(|t| (t, wall_clock()));
    let marks = st.marks;
    loop {
        // A batch ends with a full train: ended at `BATCH` datagrams exactly, every
        // second `sendmsg` carried a 21-datagram remainder (64 = 43 + 21 at 1500-byte
        // datagrams, 65,000 bytes a train), a third of the calls for a fifth of the
        // data (docs/results/loopback.md, "Full trains").
        if outbox.datagrams >= BATCH && !outbox.last_has_room(max_segments) {
            more = true;
            break;
        }
        // The engine encodes straight into the train the datagram leaves in.
        let engine = &mut st.engine;
        let Some(((remote, src, tos), dgram)) = outbox.fill(max_segments, |train| {
            engine
                .poll_transmit(now, train)
                .map(|t| (t.remote, t.local, marks.tos(t.class)))
        }) else {
            break;
        };
        st.io.datagrams_sent += 1;
        st.io.bytes_sent += dgram.len() as u64;
        if let Some((tap, at)) = &tap {
            let local = st.local_addrs.named(remote, src);
            tap.marked_datagram(TAP_SENT, *at, (local, remote, tos), dgram);
        }
    }
    if st.local_addrs.chooses() {
        // The engine's choice of local address (its path's), else pinned, learned or
        // routing's (`crate::sources`).
        for t in &mut outbox.trains {
            if t.src.is_none() {
                t.src = st.local_addrs.source(t.dest);
            }
        }
    }
    more
}

/// With no application handle left: detaches the connections still there (each released
/// when it closes) and says whether the driver stops, when none is left or after
/// [`DRAIN_LIMIT`] of draining.
fn stop_when_unused(st: &mut State, unused_since: &mut Option<Instant>) -> bool {
    if st.users != 0 {
        return false;
    }
    let since = *unused_since.get_or_insert_with(Instant::now);
    for s in st.slots.values_mut() {
        s.detached = true;
    }
    let stop = st.engine.connection_count() == 0 || since.elapsed() > DRAIN_LIMIT;
    if stop {
        st.driver_stopped = true;
    }
    stop
}

/// When the loop wakes next without arrivals: at the engine's `deadline`, and at least every
/// 100 ms while `draining` (to notice the last connection go).
fn wake_time(
    shared: &Shared,
    deadline: Option<Duration>,
    sent_any: bool,
    stalled_wakeups: &mut u32,
    draining: bool,
) -> Option<Instant> {
    // The engine's contract (`proto::Endpoint::poll_timeout`, checked by the property test
    // `crates/proto/tests/deadlines.rs` and the `proto_endpoint` fuzz target): after
    // `handle_timeout(now)` and draining `poll_transmit(now)`, the deadline is later than
    // `now`. A deadline that has passed since is work due, so the loop runs again at once.
    // Only a broken contract makes it wake again and again with nothing sent: that is a
    // bug, reported loudly, and the loop backs off instead of spinning a core.
    let mut wake_at = deadline.map(|d| shared.epoch + d);
    if let Some(t) = wake_at {
        if t <= Instant::now() && !sent_any {
            *stalled_wakeups += 1;
            if *stalled_wakeups == STALL_REPORT {
                let st = shared.lock();
                tracing::error!(
                    deadline = ?deadline,
                    now = ?shared.now(),
                    connections = st.engine.connection_count(),
                    "engine bug: it keeps reporting a deadline that has passed without acting on it ({STALL_REPORT} wake-ups with nothing sent); backing off 1 ms per wake-up. Please report this with a --qlog trace"
                );
            }
            if *stalled_wakeups >= STALL_REPORT {
                wake_at = Some(Instant::now() + Duration::from_millis(1));
            }
        } else {
            *stalled_wakeups = 0;
        }
    }
    if draining {
        let limit = Instant::now() + Duration::from_millis(100);
        wake_at = Some(wake_at.map_or(limit, |t| t.min(limit)));
    }
    wake_at
}

/// Feeds the engine what the socket holds without waiting, up to [`RECV_BATCH`] datagrams.
/// Each read is one datagram or one GRO train of datagrams `stride` bytes long (the last may
/// be shorter). A train that fills at least half the buffer is handed over
/// (`Endpoint::handle_train`: the bodies of one connection's train stay where the kernel put
/// them, and the next read gets a new buffer while they are held); anything smaller is
/// copied out of the buffer, which is read into again, so that a body never holds a buffer
/// it fills less than half of.
pub(crate) fn receive(io: &udp::UdpIo, st: &mut State, rbuf: &mut BytesMut, now: Duration) {
    let mut taken = 0;
    let tap = st.tap.clone();
    while taken < RECV_BATCH {
        match io.try_recv(rbuf) {
            Ok(udp::Read {
                len: n,
                from,
                stride,
                to,
            }) => {
                if let Some(to) = to {
                    st.local_addrs.learn(from, to);
                }
                let stride = stride.max(1);
                // The datagrams of one GRO train arrived together: one timestamp.
                let tapped = tap
                    .as_ref()
                    .map(|t| (t, wall_clock(), st.local_addrs.named(from, to)));
                let path = st.local_addrs.arrival(from, to);
                for d in rbuf.chunks(stride) {
                    st.io.datagrams_received += 1;
                    st.io.bytes_received += d.len() as u64;
                    if let Some((tap, at, local)) = &tapped {
                        tap.datagram(TAP_RECEIVED, *at, from, *local, d);
                    }
                    taken += 1;
                }
                if n > stride && n * 2 >= udp::RECV_BUFFER {
                    let train = rbuf.split().freeze();
                    st.engine.handle_train(now, path, &train, stride);
                } else {
                    for d in rbuf.chunks(stride) {
                        st.engine.handle_datagram(now, path, d);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::debug!(error = %e, "recv failed");
                st.recv_errors += 1;
                taken += 1;
            }
        }
    }
}
