//! Where a TCP flow writes the bytes of the peer's direction: a kernel socket, or a
//! connection of the ingress's user-space TCP (`aerotp-usertcp`), behind [`UserSink`] so that
//! `flow` depends on neither.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// A source TCP connection terminated by the ingress's own user-space TCP (`aerotp-usertcp`,
/// docs/gateway.md §TCP reliable): where the reverse direction's bytes go.
pub use aerotp_usertcp::UserSink;

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
