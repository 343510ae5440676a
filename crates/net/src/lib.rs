//! Tokio runtime driving the AeroTP engine (`aerotp-proto`) over UDP sockets, IPv4 and IPv6.
//!
//! Design (like quinn): one driver task per [`Endpoint`] owns the UDP socket; the sans-IO
//! engine sits behind an `Arc<Mutex<..>>` shared with the application-facing handles. The
//! driver wakes on a received datagram, on the engine's next timeout (`poll_timeout`), or when
//! the application did something (write, close, connect); after each wake it feeds the engine,
//! handles timers, dispatches the engine's events to wakers / `Notify`s and drains every
//! datagram `poll_transmit` offers (in batches of [`BATCH`]). Engine time is
//! `tokio::time::Instant` elapsed since the endpoint was bound, so tests may pause time.
//!
//! Connections are byte streams ([`Connection`] implements `AsyncRead` and `AsyncWrite`;
//! `shutdown` is the graceful close of our sending half); [`Connection::finish`] closes and
//! waits for the end, returning a [`Report`] that says whether the mode's guarantee was met.
//! Datagram mode is [`Endpoint::send_datagram`] / [`Endpoint::recv_datagram`].
//!
//! On IPv4 the socket sets `SO_NO_CHECK` so datagrams leave with a zero UDP checksum and a
//! corrupted payload reaches AeroTP's own CRC/FEC instead of being dropped by the receiving
//! kernel. IPv6 UDP checksums are mandatory (RFC 8200 §8.1): over IPv6 AeroTP sees bit errors
//! as losses. See docs/runtime.md.

use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use aerotp_proto as proto;
use proto::{ConnectionHandle, EndpointError, Event};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio::time::Instant;

mod udp;

pub use proto::{
    CloseOutcome, ConnectionConfig, ConnectionStats, DatagramMsg, Delivered, EndpointConfig,
    EndpointStats, FecSetting, Mode,
};

/// AeroTP port a listener uses unless told otherwise (AeroTP ports are not UDP ports).
pub const DEFAULT_PORT: u16 = 1;
/// Most datagrams the driver takes from the engine before it sends them and looks again.
pub const BATCH: usize = 64;
/// Most datagrams the driver reads from the socket per wake before serving timers again.
const RECV_BATCH: usize = 256;
/// Socket buffer sizes requested (best effort).
const SOCKET_BUFFER: usize = 8 << 20;
/// Linux `SO_NO_CHECK` (asm-generic/socket.h): send IPv4 UDP with a zero checksum.
const SO_NO_CHECK: libc::c_int = 11;
/// After the last application handle is dropped, the longest the driver keeps serving
/// connections that are still closing.
const DRAIN_LIMIT: Duration = Duration::from_secs(15);

/// Errors of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The UDP socket could not be created or bound.
    #[error("cannot bind UDP socket {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    /// The engine refused (bad settings, too many connections…).
    #[error(transparent)]
    Engine(#[from] EndpointError),
}

/// How a connection ended, with its final statistics.
#[derive(Debug, Clone)]
pub struct Report {
    pub mode: Mode,
    pub outcome: CloseOutcome,
    /// The peer acknowledged every byte we sent (modes with positive acknowledgements only).
    pub delivered_confirmed: bool,
    /// Whether the mode's guarantee was met: fully reliable modes need a confirmed finish;
    /// the others (statistical or no reliability) need a clean close, losses being reported
    /// in `stats`.
    pub guarantee_met: bool,
    pub stats: ConnectionStats,
}

impl Report {
    fn new(mode: Mode, outcome: CloseOutcome, stats: ConnectionStats) -> Report {
        let (clean, confirmed) = match outcome {
            CloseOutcome::Finished { confirmed } => (true, confirmed),
            _ => (false, false),
        };
        let guarantee_met = clean && (confirmed || !mode.is_fully_reliable());
        Report {
            mode,
            outcome,
            delivered_confirmed: confirmed,
            guarantee_met,
            stats,
        }
    }
}

/// Turns a close outcome that is not a clean finish into an I/O error.
pub fn outcome_error(o: &CloseOutcome) -> io::Error {
    match o {
        CloseOutcome::Finished { .. } => {
            io::Error::new(io::ErrorKind::BrokenPipe, "connection finished")
        }
        CloseOutcome::CloseTimeout => io::Error::new(
            io::ErrorKind::TimedOut,
            "close timed out before the final acknowledgements",
        ),
        CloseOutcome::IdleTimeout => io::Error::new(
            io::ErrorKind::TimedOut,
            "nothing heard from the peer for the idle timeout",
        ),
        CloseOutcome::Reset(r) => io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("reset by peer: {r}"),
        ),
        CloseOutcome::Aborted => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "connection aborted")
        }
    }
}

struct Slot {
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    status: Arc<Notify>,
    connected: bool,
    outcome: Option<CloseOutcome>,
    /// No application handle left: release as soon as closed.
    detached: bool,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            read_waker: None,
            write_waker: None,
            status: Arc::new(Notify::new()),
            connected: false,
            outcome: None,
            detached: false,
        }
    }
}

struct State {
    engine: proto::Endpoint,
    slots: HashMap<ConnectionHandle, Slot>,
    incoming: VecDeque<ConnectionHandle>,
    /// Application handles alive (endpoints and connections); 0 = the driver may stop.
    users: usize,
    driver_stopped: bool,
    send_errors: u64,
    recv_errors: u64,
}

impl State {
    /// Hands the engine's events to the waiting tasks.
    fn dispatch(&mut self, shared: &Shared) {
        while let Some(e) = self.engine.poll_event() {
            match e {
                Event::Connected(h) => {
                    if let Some(s) = self.slots.get_mut(&h) {
                        s.connected = true;
                        s.status.notify_waiters();
                    }
                }
                Event::Accepted(h) => {
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
                Event::Closed(h, o) => {
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
                        self.engine.release(h);
                    }
                }
                Event::Datagram => shared.datagram.notify_one(),
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the driver after the application changed something.
    wake: Notify,
    accept: Notify,
    datagram: Notify,
    epoch: Instant,
    local_addr: SocketAddr,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the engine in an unknown state; carry on with
        // it rather than poisoning every handle (the engine's methods keep it consistent).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

/// Counts an application handle; the driver stops after the last one is gone and the
/// remaining connections have closed (or after [`DRAIN_LIMIT`]).
struct UserRef(Arc<Shared>);

impl UserRef {
    fn new(shared: &Arc<Shared>) -> UserRef {
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

/// A UDP socket with its AeroTP endpoint and driver task. Cheap to clone.
#[derive(Clone)]
pub struct Endpoint {
    user: Arc<UserRef>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.local_addr())
            .finish_non_exhaustive()
    }
}

/// Whether a socket bound to `addr` sends zero UDP checksums (`SO_NO_CHECK`): on IPv4, unless
/// bound to a loopback address. A loopback-bound socket can only reach loopback, which corrupts
/// nothing, so zero checksums would buy nothing there, and they would cost GSO (the kernel
/// refuses segmentation offload with zero checksums).
pub fn zero_checksums(addr: SocketAddr) -> bool {
    addr.is_ipv4() && !addr.ip().is_loopback()
}

/// Creates the UDP socket: non-blocking, large buffers, `SO_NO_CHECK` where
/// [`zero_checksums`] says so.
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    if zero_checksums(addr) {
        set_no_check(&s)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

#[cfg(target_os = "linux")]
fn set_no_check(s: &Socket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: valid fd, pointer to a c_int of the given length.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NO_CHECK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set_no_check(_s: &Socket) -> io::Result<()> {
    Ok(())
}

impl Endpoint {
    /// Binds a UDP socket on `addr` (port 0 = any) and spawns the driver task. Must be called
    /// within a tokio runtime.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Endpoint, Error> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        Endpoint::bind_with_seed(addr, config, seed)
    }

    /// As [`Endpoint::bind`] with the engine's random seed given (connection tags, ports).
    pub fn bind_with_seed(
        addr: SocketAddr,
        config: EndpointConfig,
        seed: u64,
    ) -> Result<Endpoint, Error> {
        let socket = udp_socket(addr).map_err(|source| Error::Bind { addr, source })?;
        let local_addr = socket
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine: proto::Endpoint::new(config, seed),
                slots: HashMap::new(),
                incoming: VecDeque::new(),
                users: 0,
                driver_stopped: false,
                send_errors: 0,
                recv_errors: 0,
            }),
            wake: Notify::new(),
            accept: Notify::new(),
            datagram: Notify::new(),
            epoch: Instant::now(),
            local_addr,
        });
        let user = Arc::new(UserRef::new(&shared));
        tokio::spawn(drive(shared, socket, !zero_checksums(addr)));
        Ok(Endpoint { user })
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.user.0
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared().local_addr
    }

    /// Accepts connections to AeroTP port `port` with `config`'s rate, buffers and timers (the
    /// mode is the initiator's).
    pub fn listen(&self, port: u16, config: ConnectionConfig) -> Result<(), Error> {
        self.shared().lock().engine.listen(port, config)?;
        Ok(())
    }

    /// Opens a connection to AeroTP port `port` at `remote`. Returns at once (opportunistic
    /// set-up: data written now rides on the first TPDU); [`Connection::connected`] waits for
    /// the peer's answer.
    pub fn connect(
        &self,
        remote: SocketAddr,
        port: u16,
        config: ConnectionConfig,
    ) -> Result<Connection, Error> {
        let shared = self.shared();
        let h = {
            let mut st = shared.lock();
            let now = shared.now();
            let h = st.engine.connect(now, remote, port, config)?;
            st.slots.insert(h, Slot::new());
            h
        };
        shared.wake.notify_one();
        Ok(Connection::new(shared, h, remote))
    }

    /// The next accepted connection; `None` if the driver has stopped.
    pub async fn accept(&self) -> Option<Connection> {
        let shared = self.shared();
        loop {
            let notified = shared.accept.notified();
            {
                let mut st = shared.lock();
                if let Some(h) = st.incoming.pop_front() {
                    let remote = st
                        .engine
                        .connection(h)
                        .map(|c| c.remote)
                        .unwrap_or(shared.local_addr);
                    drop(st);
                    return Some(Connection::new(shared, h, remote));
                }
                if st.driver_stopped {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Sends one datagram-mode message to AeroTP port `port` at `remote`, with `parity`
    /// Reed–Solomon parity bytes per codeword (0 = none), within `mtu` bytes.
    pub fn send_datagram(
        &self,
        remote: SocketAddr,
        src_port: u16,
        port: u16,
        data: &[u8],
        parity: u8,
        mtu: usize,
    ) -> Result<(), Error> {
        self.shared()
            .lock()
            .engine
            .send_datagram(remote, src_port, port, data, parity, mtu)?;
        self.shared().wake.notify_one();
        Ok(())
    }

    /// The next datagram-mode message received; `None` if the driver has stopped.
    pub async fn recv_datagram(&self) -> Option<DatagramMsg> {
        let shared = self.shared();
        loop {
            let notified = shared.datagram.notified();
            {
                let mut st = shared.lock();
                if let Some(d) = st.engine.take_datagram() {
                    return Some(d);
                }
                if st.driver_stopped {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Connections the engine holds (open, closing, or closed and not yet released).
    pub fn connection_count(&self) -> usize {
        self.shared().lock().engine.connection_count()
    }

    /// The engine's endpoint counters, plus socket errors (send, receive).
    pub fn stats(&self) -> (EndpointStats, u64, u64) {
        let st = self.shared().lock();
        (st.engine.stats.clone(), st.send_errors, st.recv_errors)
    }
}

struct ConnInner {
    user: UserRef,
    h: ConnectionHandle,
    remote: SocketAddr,
    mode: Mode,
    status: Arc<Notify>,
}

impl Drop for ConnInner {
    fn drop(&mut self) {
        let shared = &self.user.0;
        let mut st = shared.lock();
        let closed = match st.slots.get_mut(&self.h) {
            Some(s) => {
                s.detached = true;
                s.outcome.is_some()
            }
            None => return,
        };
        if closed {
            st.slots.remove(&self.h);
            st.engine.release(self.h);
        } else {
            // Graceful: what was written still goes out; released when the close completes.
            let _ = st.engine.close(self.h);
        }
        drop(st);
        shared.wake.notify_one();
    }
}

/// One AeroTP connection. `AsyncRead` reads the in-order byte stream (in lossy modes, what
/// arrived); `AsyncWrite` queues bytes (`shutdown` = graceful close of our half). Clones share
/// the connection; the last one dropped closes it gracefully. One task should read and one
/// write at a time (a clone's waker replaces another's).
#[derive(Clone)]
pub struct Connection {
    inner: Arc<ConnInner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("handle", &self.inner.h)
            .field("remote", &self.inner.remote)
            .finish_non_exhaustive()
    }
}

impl Connection {
    fn new(shared: &Arc<Shared>, h: ConnectionHandle, remote: SocketAddr) -> Connection {
        let user = UserRef::new(shared);
        let (status, mode) = {
            let st = shared.lock();
            let status = st
                .slots
                .get(&h)
                .map_or_else(|| Arc::new(Notify::new()), |s| s.status.clone());
            let mode = st.engine.connection(h).map_or(Mode::Reliable, |c| c.mode);
            (status, mode)
        };
        Connection {
            inner: Arc::new(ConnInner {
                user,
                h,
                remote,
                mode,
                status,
            }),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.inner.user.0
    }

    pub fn remote_address(&self) -> SocketAddr {
        self.inner.remote
    }

    pub fn mode(&self) -> Mode {
        self.inner.mode
    }

    pub fn handle(&self) -> ConnectionHandle {
        self.inner.h
    }

    /// The engine's counters of this connection (see docs/stats.md).
    pub fn stats(&self) -> ConnectionStats {
        self.shared()
            .lock()
            .engine
            .stats(self.inner.h)
            .unwrap_or_default()
    }

    /// How the connection ended, if it has.
    pub fn outcome(&self) -> Option<CloseOutcome> {
        self.shared()
            .lock()
            .slots
            .get(&self.inner.h)
            .and_then(|s| s.outcome.clone())
    }

    /// Changes the sending rate (backpressure).
    pub fn set_rate(&self, rate_bps: u64) {
        let _ = self.shared().lock().engine.set_rate(self.inner.h, rate_bps);
        self.shared().wake.notify_one();
    }

    /// Waits until a status condition holds (checked under the lock after every change).
    async fn wait_status<T>(&self, mut f: impl FnMut(&Slot) -> Option<T>) -> T {
        loop {
            let notified = self.inner.status.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.shared().lock();
                match st.slots.get(&self.inner.h) {
                    Some(s) => {
                        if let Some(t) = f(s) {
                            return t;
                        }
                    }
                    None => {
                        let gone = Slot {
                            outcome: Some(CloseOutcome::Aborted),
                            ..Slot::new()
                        };
                        if let Some(t) = f(&gone) {
                            return t;
                        }
                    }
                }
            }
            notified.await;
        }
    }

    /// Waits until the peer has answered (`Ok`) or the connection ended first (`Err`).
    pub async fn connected(&self) -> Result<(), CloseOutcome> {
        self.wait_status(|s| {
            if s.connected {
                Some(Ok(()))
            } else {
                s.outcome.clone().map(Err)
            }
        })
        .await
    }

    /// Waits for the end of the connection, without closing it.
    pub async fn closed(&self) -> Report {
        let outcome = self.wait_status(|s| s.outcome.clone()).await;
        Report::new(self.inner.mode, outcome, self.stats())
    }

    /// No more data from us: the AFIN follows what was written. Returns at once.
    pub fn close(&self) {
        let _ = self.shared().lock().engine.close(self.inner.h);
        self.shared().wake.notify_one();
    }

    /// Ends the connection at once with RST.
    pub fn abort(&self, reason: &str) {
        let _ = self.shared().lock().engine.abort(self.inner.h, reason);
        self.shared().wake.notify_one();
    }

    /// Closes our half and waits until both halves are done; the report says whether the
    /// mode's guarantee was met. (A receiver should read to EOF first.)
    pub async fn finish(&self) -> Report {
        self.close();
        self.closed().await
    }

    /// The next delivered chunk with its TPDU number; `Ok(None)` at the end of the stream; an
    /// error if the connection broke first.
    pub async fn read_chunk(&self) -> io::Result<Option<Delivered>> {
        poll_fn(|cx| self.poll_read_chunk(cx)).await
    }

    pub fn poll_read_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Delivered>>> {
        let shared = self.shared();
        let mut st = shared.lock();
        let h = self.inner.h;
        if let Ok(Some(d)) = st.engine.read_chunk(h) {
            drop(st);
            shared.wake.notify_one();
            return Poll::Ready(Ok(Some(d)));
        }
        self.poll_end(&mut st, cx).map(|r| r.map(|()| None))
    }

    /// Nothing is readable now: EOF, an error, or register the waker.
    fn poll_end(&self, st: &mut State, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let h = self.inner.h;
        if st.engine.at_eof(h) {
            return Poll::Ready(Ok(()));
        }
        match st.slots.get_mut(&h) {
            Some(s) => match &s.outcome {
                Some(CloseOutcome::Finished { .. }) => Poll::Ready(Ok(())),
                Some(o) => Poll::Ready(Err(outcome_error(o))),
                None => {
                    s.read_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            },
            None => Poll::Ready(Ok(())),
        }
    }

    /// Bytes that `write` would take now.
    pub fn writable(&self) -> usize {
        self.shared().lock().engine.writable(self.inner.h)
    }

    fn poll_write_inner(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let shared = self.shared();
        let mut st = shared.lock();
        let h = self.inner.h;
        let Some(slot) = st.slots.get(&h) else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection released",
            )));
        };
        if let Some(o) = &slot.outcome {
            return Poll::Ready(Err(outcome_error(o)));
        }
        match st.engine.write(h, buf) {
            Ok(0) => {
                if let Some(s) = st.slots.get_mut(&h) {
                    s.write_waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            Ok(n) => {
                drop(st);
                shared.wake.notify_one();
                Poll::Ready(Ok(n))
            }
            Err(e) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                e.to_string(),
            ))),
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let shared = self.shared().clone();
        let mut st = shared.lock();
        let h = self.inner.h;
        let n = st.engine.read(h, buf.initialize_unfilled()).unwrap_or(0);
        if n > 0 {
            buf.advance(n);
            drop(st);
            shared.wake.notify_one();
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        self.poll_end(&mut st, cx)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_inner(cx, buf)
    }

    /// Data is in the engine's send queue: nothing to flush (use `finish` to wait for delivery).
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Graceful close of our sending half; returns at once.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.close();
        Poll::Ready(Ok(()))
    }
}

/// Sleeps until `t`, or forever.
async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn drive(shared: Arc<Shared>, socket: UdpSocket, gso: bool) {
    let mut io = udp::UdpIo::new(socket, gso);
    let mut rbuf = vec![0u8; udp::RECV_BUFFER];
    let mut dgram: Vec<u8> = Vec::new();
    let mut outbox = udp::Outbox::default();
    let mut unused_since: Option<Instant> = None;
    let mut idle_spins = 0u32;
    loop {
        let max_segments = io.max_segments();
        let (deadline, more, stop) = {
            let mut st = shared.lock();
            let now = shared.now();
            // What has arrived goes in before the timers run: after the thread was descheduled
            // (a loaded machine), acknowledgements waiting in the socket must not be taken for
            // losses by a retransmission timeout checked first.
            receive(&io, &mut st, &mut rbuf, now);
            st.engine.handle_timeout(now);
            st.dispatch(&shared);
            let mut more = false;
            loop {
                if outbox.datagrams >= BATCH {
                    more = true;
                    break;
                }
                match st.engine.poll_transmit(now, &mut dgram) {
                    Some(t) => outbox.push(t.remote, &dgram, max_segments),
                    None => break,
                }
            }
            st.dispatch(&shared);
            let deadline = st.engine.poll_timeout();
            if st.users == 0 {
                let since = *unused_since.get_or_insert_with(Instant::now);
                // Detach what is left: released when it closes.
                for s in st.slots.values_mut() {
                    s.detached = true;
                }
                let stop = st.engine.connection_count() == 0 || since.elapsed() > DRAIN_LIMIT;
                if stop {
                    st.driver_stopped = true;
                }
                (deadline, more, stop)
            } else {
                (deadline, more, false)
            }
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
        if stop {
            shared.accept.notify_waiters();
            shared.datagram.notify_waiters();
            break;
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        // A deadline already past with nothing sent: the engine has nothing to do right now
        // (e.g. window closed); do not spin on it.
        let mut wake_at = deadline.map(|d| shared.epoch + d);
        if let Some(t) = wake_at {
            if t <= Instant::now() && !sent_any {
                idle_spins += 1;
                if idle_spins > 2 {
                    wake_at = Some(Instant::now() + Duration::from_micros(500));
                }
            } else {
                idle_spins = 0;
            }
        }
        if unused_since.is_some() {
            let limit = Instant::now() + Duration::from_millis(100);
            wake_at = Some(wake_at.map_or(limit, |t| t.min(limit)));
        }
        tokio::select! {
            // Arrivals first when several branches are ready (see `receive` above).
            biased;
            r = io.readable() => {
                idle_spins = 0;
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

/// Feeds the engine what the socket holds without waiting, up to [`RECV_BATCH`] datagrams.
/// Each read is one datagram or one GRO train of datagrams `stride` bytes long (the last may
/// be shorter).
fn receive(io: &udp::UdpIo, st: &mut State, rbuf: &mut [u8], now: Duration) {
    let mut taken = 0;
    while taken < RECV_BATCH {
        match io.try_recv(rbuf) {
            Ok((n, from, stride)) => {
                for d in rbuf[..n].chunks(stride.max(1)) {
                    st.engine.handle_datagram(now, from, d);
                    taken += 1;
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

/// Runs `fut` with a bound; `None` if it took longer.
pub async fn within<T>(limit: Duration, fut: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(limit, fut).await.ok()
}
