//! Where a TCP flow writes the bytes of the peer's direction: a kernel socket, or a
//! connection of the ingress's user-space TCP (`crate::usertcp`), behind [`UserSink`] so that
//! `flow` depends on neither.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// A source TCP connection terminated by the ingress's own user-space TCP (`crate::usertcp`,
/// docs/gateway.md §TCP reliable): where the reverse direction's bytes go.
pub trait UserSink: Send + Sync + std::fmt::Debug {
    /// Queues as much of `d` as the connection's send buffer has room for (0: full, wait on
    /// [`UserSink::room`]).
    fn push(&self, d: &[u8]) -> usize;
    /// Notified when the send buffer has room again (or the connection ended).
    fn room(&self) -> &tokio::sync::Notify;
    /// The reverse direction is over: a FIN after the queued bytes.
    fn finish(&self);
    /// The flow is aborted: a RST to the source.
    fn reset(&self);
    /// The flow's AeroTP connection is up (the egress answered): the source's held SYN is
    /// answered.
    fn up(&self);
}

/// Where the bytes of the peer's direction are written: a kernel TCP socket, or a connection
/// of the user-space TCP.
#[derive(Debug)]
pub(crate) enum Sink {
    Kernel(OwnedWriteHalf),
    User(Arc<dyn UserSink>),
}

impl Sink {
    pub(crate) fn abort(self) {
        match self {
            Sink::Kernel(w) => rst(w),
            Sink::User(u) => u.reset(),
        }
    }
}

/// Closes a TCP socket with RST (SO_LINGER 0).
pub fn rst(w: OwnedWriteHalf) {
    let s: &TcpStream = w.as_ref();
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
    // Dropping the write half would shut it down (FIN) first; `forget` leaves the closing to
    // the read half (owned by the aborted reader task): the socket then closes with RST.
    w.forget();
}
