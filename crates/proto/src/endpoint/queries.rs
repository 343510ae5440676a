//! What a driver may read about one connection, by handle: named accessors and stats
//! structs, never the connection itself.

use super::{ConnectionHandle, Endpoint, Peer};
use crate::connection::ConnectionStats;
use crate::state::State;
use std::time::Duration;

impl Endpoint {
    pub fn state(&self, h: ConnectionHandle) -> Option<State> {
        self.conns.get(&h).map(|c| c.state())
    }

    pub fn stats(&self, h: ConnectionHandle) -> Option<ConnectionStats> {
        self.conns.get(&h).map(|c| c.stats())
    }

    /// Whether only the connection's linger is left (see `Connection::lingering`): the
    /// application has nothing more to wait for.
    pub fn lingering(&self, h: ConnectionHandle) -> bool {
        self.conns.get(&h).is_some_and(|c| c.lingering())
    }

    /// Whether the peer's close is answered (`Connection::close_answered`), our own half
    /// done or not.
    pub fn close_answered(&self, h: ConnectionHandle) -> bool {
        self.conns.get(&h).is_some_and(|c| c.close_answered())
    }

    /// Bytes `read` would return now (delivered in order, not yet read).
    pub fn ready_bytes(&self, h: ConnectionHandle) -> usize {
        self.conns.get(&h).map_or(0, |c| c.ready_bytes())
    }

    /// Who the connection talks to, and in which mode.
    pub fn peer(&self, h: ConnectionHandle) -> Option<Peer> {
        self.conns.get(&h).map(|c| Peer {
            remote: c.remote(),
            local_port: c.local_port,
            remote_port: c.remote_port,
            tag: c.tag,
            mode: c.mode(),
        })
    }

    /// First-send time of each TPDU (`ConnectionConfig::trace`): (TPDU number, time).
    pub fn send_trace(&self, h: ConnectionHandle) -> Option<&[(u64, Duration)]> {
        self.conns.get(&h)?.send_trace()
    }

    /// In-order delivery of each TPDU (`ConnectionConfig::trace`): (TPDU number, time, bytes).
    pub fn delivery_trace(&self, h: ConnectionHandle) -> Option<&[(u64, Duration, u32)]> {
        self.conns.get(&h)?.delivery_trace()
    }

    /// One line of the connection's sending and receiving state, for debugging.
    pub fn describe(&self, h: ConnectionHandle) -> Option<String> {
        self.conns.get(&h).map(|c| c.describe())
    }
}
