//! Connections an endpoint released, remembered (bounded) so late TPDUs of a finished
//! connection are told apart from a new one: a late AFIN gets the final acknowledgement again,
//! a stray is dropped, and a CHALLENGE for a connection that just finished is still echoed.

use crate::admission::Key;
use aerotp_wire::Ack;
use std::collections::{HashMap, VecDeque};

/// Most recently finished connections remembered, oldest forgotten first.
const TOMBSTONE_LIMIT: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Tombstones {
    order: VecDeque<(Key, u8)>,
    /// (key, tag) → the final acknowledgement (`cum`, and `delivered`: a confirmed-delivery
    /// peer waits for it), if the peer's AFIN had arrived; and whether the connection ended
    /// otherwise than by a finished close (its peer's TPDUs get a RST, `connection::reset`).
    finals: HashMap<(Key, u8), (Option<Ack>, bool)>,
}

impl Tombstones {
    pub(crate) fn remember(&mut self, key: Key, tag: u8, final_ack: Option<Ack>, reset: bool) {
        if self.order.len() >= TOMBSTONE_LIMIT {
            if let Some(old) = self.order.pop_front() {
                self.finals.remove(&old);
            }
        }
        self.order.push_back((key, tag));
        self.finals.insert((key, tag), (final_ack, reset));
    }

    /// `Some(final acknowledgement)` if this connection was released.
    pub(crate) fn get(&self, key: Key, tag: u8) -> Option<Option<Ack>> {
        self.finals.get(&(key, tag)).map(|f| f.0)
    }

    /// Whether this released connection ended by a reset, abort or timeout.
    pub(crate) fn was_reset(&self, key: Key, tag: u8) -> bool {
        self.finals.get(&(key, tag)).is_some_and(|f| f.1)
    }
}
