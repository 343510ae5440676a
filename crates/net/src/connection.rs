//! One connection as a byte stream: `AsyncRead`, `AsyncWrite`, close and finish.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use aerotp_proto::ConnectionHandle;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::driver::{Shared, Slot, State, UserRef};
use crate::report::{outcome_error, Report};
use crate::{CloseOutcome, ConnectionStats, Delivered, Mode};

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
            st.release(self.h);
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
    pub(crate) fn new(shared: &Arc<Shared>, h: ConnectionHandle, remote: SocketAddr) -> Connection {
        let user = UserRef::new(shared);
        let (status, mode) = {
            let st = shared.lock();
            let status = st
                .slots
                .get(&h)
                .map_or_else(|| Arc::new(Notify::new()), |s| s.status.clone());
            let mode = st.engine.peer(h).map_or(Mode::Reliable, |p| p.mode);
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

    /// The AeroTP port of this end (for an accepted connection, the listener's): what a
    /// gateway tells its kinds of flow apart by. 0 once the engine has released it.
    pub fn local_port(&self) -> u16 {
        let st = self.shared().lock();
        st.engine.peer(self.inner.h).map_or(0, |p| p.local_port)
    }

    /// The peer's AeroTP port (for a connection this end opened, the port it connected to).
    /// 0 once the engine has released it.
    pub fn remote_port(&self) -> u16 {
        let st = self.shared().lock();
        st.engine.peer(self.inner.h).map_or(0, |p| p.remote_port)
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

    /// Opens another path to the peer's address `remote` (docs/spec.md §9): the peer is
    /// challenged there and, once it answers, the connection spreads its data over all its
    /// paths. The endpoint's one socket sends to every path; the path's local address is the
    /// one the host's routing picks towards `remote` ([`Connection::add_path_from`] chooses
    /// it): bind the endpoint to the wildcard address (`0.0.0.0:port`) and give each path
    /// its own route (a subnet per radio or channel, as the lab's paths have).
    pub fn add_path(&self, remote: SocketAddr) -> Result<(), crate::Error> {
        self.open_path(remote, None)
    }

    /// As [`Connection::add_path`], with the path's local end: this host's address `local`
    /// (see [`crate::Endpoint::pin_source`] for what it needs). On an endpoint bound to the
    /// wildcard address a path is both of its addresses, so two local addresses to one peer
    /// address are two paths (two radios reaching one ground address).
    pub fn add_path_from(
        &self,
        local: std::net::IpAddr,
        remote: SocketAddr,
    ) -> Result<(), crate::Error> {
        self.open_path(remote, Some(local))
    }

    fn open_path(
        &self,
        remote: SocketAddr,
        local: Option<std::net::IpAddr>,
    ) -> Result<(), crate::Error> {
        let shared = self.shared();
        {
            let mut st = shared.lock();
            let now = shared.now();
            if st.local_addrs.tells_engine() {
                let path = st.local_addrs.path(remote, local)?;
                st.engine.add_path(now, self.inner.h, path)?;
            } else {
                // The engine is not told local addresses (a socket bound to one, or reads
                // without their destination): the local end is pinned per peer address.
                let before = st.local_addrs.pinned(remote);
                if let Some(l) = local {
                    st.local_addrs.pin(remote, l)?;
                }
                if let Err(e) = st.engine.add_path(now, self.inner.h, remote) {
                    // The path was refused: its local address goes back to what it was.
                    st.local_addrs.restore(remote, before);
                    return Err(e.into());
                }
            }
        }
        shared.wake.notify_one();
        Ok(())
    }

    /// Changes the sending rate (backpressure).
    pub fn set_rate(&self, rate_bps: u64) {
        let _ = self.shared().lock().engine.set_rate(self.inner.h, rate_bps);
        self.shared().wake.notify_one();
    }

    /// Changes the connection's traffic class (its share of the endpoint's link follows
    /// within `aerotp_proto::SHARE_PERIOD`).
    pub fn set_class(&self, class: aerotp_proto::TrafficClass) {
        let _ = self.shared().lock().engine.set_class(self.inner.h, class);
        self.shared().wake.notify_one();
    }

    /// Waits until a status condition holds (checked under the lock after every change).
    async fn wait_status<T>(&self, mut f: impl FnMut(&State, &Slot) -> Option<T>) -> T {
        loop {
            let notified = self.inner.status.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.shared().lock();
                match st.slots.get(&self.inner.h) {
                    Some(s) => {
                        if let Some(t) = f(&st, s) {
                            return t;
                        }
                    }
                    None => {
                        let gone = Slot {
                            outcome: Some(CloseOutcome::Aborted),
                            ..Slot::new()
                        };
                        if let Some(t) = f(&st, &gone) {
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
        self.wait_until(|s| s.connected).await
    }

    /// Waits until `flag` holds (`Ok`) or the connection ended first (`Err`).
    async fn wait_until(&self, flag: impl Fn(&Slot) -> bool) -> Result<(), CloseOutcome> {
        self.wait_status(|_, s| {
            if flag(s) {
                Some(Ok(()))
            } else {
                s.outcome.clone().map(Err)
            }
        })
        .await
    }

    /// Waits until the peer has proven that it receives what is sent to its address (`Ok`;
    /// at once for a connection this end opened, or with a key), or the connection ended
    /// first (`Err`, `CloseOutcome::SetupTimeout` when no proof came: a spoofed ASYN).
    /// Commit what outlives the connection — a file, a connection onwards — only after this
    /// (docs/security.md, "Half-open connections").
    pub async fn proven(&self) -> Result<(), CloseOutcome> {
        self.wait_until(|s| s.proven).await
    }

    /// Waits for the end of the connection, without closing it.
    pub async fn closed(&self) -> Report {
        let outcome = self.wait_status(|_, s| s.outcome.clone()).await;
        Report::new(self.inner.mode, outcome, self.stats())
    }

    /// Waits until the connection has ended, or until nothing the application needs
    /// remains: only the linger is left (both halves done, our AFINACK sent:
    /// `aerotp_proto::Endpoint::lingering`), or, with `peer_has_all` (the application read the
    /// peer's own word that everything we sent arrived, e.g. a receiver's verdict), the
    /// peer's close is answered even if the acknowledgement of our AFIN is still on its way.
    /// The report's outcome is then the `Finished` the linger would end with. The endpoint
    /// keeps answering late retransmissions while it runs, but a command may exit here
    /// instead of waiting the linger out (at least two outage-probe intervals: about 4 s).
    pub async fn settled(&self, peer_has_all: bool) -> Report {
        let closed = self.closed();
        tokio::pin!(closed);
        // The driver step whose datagrams (our AFINACK among them) must have left before the
        // process may exit with the socket.
        let mut left_with: Option<u64> = None;
        loop {
            let done = {
                let st = self.shared().lock();
                let done = st.engine.lingering(self.inner.h)
                    || (peer_has_all && st.engine.close_answered(self.inner.h));
                if done && left_with.is_none() {
                    left_with = Some(st.steps_taken);
                }
                done && left_with.is_some_and(|n| st.steps_sent >= n)
            };
            if done {
                let confirmed =
                    aerotp_proto::ErrorControl::for_mode(self.inner.mode).delivers_everything();
                return Report::new(
                    self.inner.mode,
                    CloseOutcome::Finished { confirmed },
                    self.stats(),
                );
            }
            // No event marks the AFINACK's departure: look again shortly.
            tokio::select! {
                r = &mut closed => return r,
                () = tokio::time::sleep(std::time::Duration::from_millis(2)) => {}
            }
        }
    }

    /// No more data from us: the AFIN follows what was written. Returns at once.
    pub fn close(&self) {
        let _ = self.shared().lock().engine.close(self.inner.h);
        self.shared().wake.notify_one();
    }

    /// Confirmed delivery (`ConnectionConfig::confirm_delivery`, docs/spec.md §4): the first
    /// `upto` bytes read from this connection are delivered onward, and with `end` the end of
    /// the stream too (read to EOF, everything delivered, the onward side closed). The peer
    /// hears it in its acknowledgements; our AFINACK waits for `end`. Returns the value now
    /// confirmed (bytes, plus one with the end); see `aerotp_proto::Endpoint::confirm`.
    pub fn confirm(&self, upto: u64, end: bool) -> u64 {
        let shared = self.shared();
        let now = shared.now();
        let v = shared
            .lock()
            .engine
            .confirm(self.inner.h, now, upto, end)
            .unwrap_or(0);
        shared.wake.notify_one();
        v
    }

    /// What the peer acknowledged as delivered (with confirmed delivery: what its application
    /// confirmed, plus one once it confirmed the end). `None` once released.
    pub fn peer_delivered(&self) -> Option<u64> {
        self.shared().lock().engine.peer_delivered(self.inner.h)
    }

    /// Waits until the peer's `delivered` exceeds `than` (`Ok` with the new value), or the
    /// connection ended first (`Err`; a connection that finished has had every
    /// confirmation).
    pub async fn confirmed_beyond(&self, than: u64) -> Result<u64, CloseOutcome> {
        let h = self.inner.h;
        self.wait_status(|st, s| match st.engine.peer_delivered(h) {
            Some(v) if v > than => Some(Ok(v)),
            _ => s.outcome.clone().map(Err),
        })
        .await
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
        if let Some(wait) = self.poll_unproven(&mut st, cx) {
            return wait.map(|r| r.map(|()| None));
        }
        if let Ok(Some(d)) = st.engine.read_chunk(h) {
            drop(st);
            shared.wake.notify_one();
            return Poll::Ready(Ok(Some(d)));
        }
        self.poll_end(&mut st, cx).map(|r| r.map(|()| None))
    }

    /// Nothing is read from a connection whose peer has not proven its address — and, with a
    /// key, that it is no recording of an earlier connection (docs/security.md, "Replays"):
    /// `Some(Pending)` with the waker registered (the driver wakes it at the proof), or
    /// `Some(Ready(Err))` if the connection ended unproven. `None`: read on.
    fn poll_unproven(&self, st: &mut State, cx: &mut Context<'_>) -> Option<Poll<io::Result<()>>> {
        let s = st.slots.get_mut(&self.inner.h)?;
        if s.proven {
            return None;
        }
        Some(match &s.outcome {
            None => {
                s.read_waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Some(o) => Poll::Ready(Err(outcome_error(o))),
        })
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

    /// Writes all of `buf` and closes our half (`close`) in the same step as the last bytes
    /// are queued, so that the engine can send the end with them: a short request and its
    /// FIN then go in one TPDU, not two.
    pub async fn write_last(&self, buf: &[u8]) -> io::Result<()> {
        let mut pos = 0;
        poll_fn(|cx| {
            while pos < buf.len() {
                match self.poll_write_step(cx, &buf[pos..], true) {
                    Poll::Ready(Ok(n)) => pos += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            Poll::Ready(Ok(()))
        })
        .await?;
        if buf.is_empty() {
            self.close();
        }
        Ok(())
    }

    /// Writes all of `data` without copying it: the TPDUs are cut from `data`'s buffer, which
    /// stays shared until the peer has them (as `write_all`, for bytes the application holds
    /// in [`Bytes`] already; `write_all` copies them into the connection's queue).
    pub async fn write_chunk(&self, mut data: Bytes) -> io::Result<()> {
        poll_fn(|cx| {
            while !data.is_empty() {
                match self
                    .poll_write_with(cx, data.len(), false, |e, h| e.write_shared(h, &mut data))
                {
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            Poll::Ready(Ok(()))
        })
        .await
    }

    fn poll_write_inner(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_step(cx, buf, false)
    }

    /// Queues what the engine takes of `buf`; with `last`, closes our half once all of it is
    /// taken, before the driver is woken.
    fn poll_write_step(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        last: bool,
    ) -> Poll<io::Result<usize>> {
        self.poll_write_with(cx, buf.len(), last, |e, h| e.write(h, buf))
    }

    /// Queues what `write` has the engine take of `len` bytes; with `last`, closes our half
    /// once all of them are taken, before the driver is woken.
    fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        last: bool,
        write: impl FnOnce(
            &mut aerotp_proto::Endpoint,
            ConnectionHandle,
        ) -> Result<usize, aerotp_proto::EndpointError>,
    ) -> Poll<io::Result<usize>> {
        if len == 0 {
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
        match write(&mut st.engine, h) {
            Ok(0) => {
                if let Some(s) = st.slots.get_mut(&h) {
                    s.write_waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            Ok(n) => {
                if last && n == len {
                    let _ = st.engine.close(h);
                }
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
        if let Some(wait) = self.poll_unproven(&mut st, cx) {
            return wait;
        }
        // Initialise only what the engine has to give: a large, uninitialised read buffer
        // (a gateway flow's) is then not touched, and costs no resident memory, beyond it.
        let want = buf.remaining().min(st.engine.ready_bytes(h));
        let n = st
            .engine
            .read(h, buf.initialize_unfilled_to(want))
            .unwrap_or(0);
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
