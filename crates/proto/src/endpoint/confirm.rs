//! Confirmed delivery through the endpoint (`ConnectionConfig::confirm_delivery`,
//! docs/spec.md §4): the receiving application says what it delivered onward; the sending
//! one reads what its peer confirmed.

use super::{ConnectionHandle, Endpoint, EndpointError};
use std::time::Duration;

impl Endpoint {
    /// The application has delivered the first `upto` bytes it read from this connection
    /// onward (written to a socket, synced to a file), and with `end` the end of the stream
    /// as well (it read to EOF, delivered everything and closed its side onward). The peer
    /// learns it in the acknowledgements' `delivered` field; the AFINACK waits for `end`.
    /// Clamped to what was read, never going back. Returns the `delivered` value now
    /// confirmed: bytes, plus one once the end is. Without confirmed delivery it changes
    /// nothing and returns the bytes read.
    pub fn confirm(
        &mut self,
        h: ConnectionHandle,
        now: Duration,
        upto: u64,
        end: bool,
    ) -> Result<u64, EndpointError> {
        Ok(self.conn(h)?.confirm(now, upto, end))
    }

    /// What the peer has acknowledged as delivered: with confirmed delivery, the bytes its
    /// application confirmed, plus one once it confirmed the end of the stream; otherwise
    /// the bytes it has read.
    pub fn peer_delivered(&self, h: ConnectionHandle) -> Option<u64> {
        self.conns.get(&h).map(|c| c.peer_delivered())
    }
}
