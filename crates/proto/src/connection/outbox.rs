//! What the connection owes: control TPDUs to the peer (sent by `poll_transmit` before any
//! data) and notifications to the application (`poll_event`).

use crate::close_outcome::CloseOutcome;
use crate::control_due::ControlDue;
use std::collections::VecDeque;

/// Notifications for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEvent {
    Connected,
    Readable,
    Writable,
    /// Confirmed delivery: the peer confirmed more of what we sent (`peer_delivered` grew).
    Confirmed,
    Closed(CloseOutcome),
}

/// Most notifications held for the application; more of them are dropped (each kind is
/// held once anyway).
const EVENT_LIMIT: usize = 64;

#[derive(Debug)]
pub(super) struct Outbox {
    /// Control TPDUs waiting to go.
    pub(super) due: ControlDue,
    events: VecDeque<ConnEvent>,
    /// Whether the application was last told it may write (a full send buffer clears it).
    pub(super) was_writable: bool,
}

impl Outbox {
    pub(super) fn new(due: ControlDue) -> Outbox {
        Outbox {
            due,
            events: VecDeque::new(),
            was_writable: true,
        }
    }

    /// Queues `e` unless it waits already or too many do.
    pub(super) fn push_event(&mut self, e: ConnEvent) {
        if self.events.len() < EVENT_LIMIT && !self.events.contains(&e) {
            self.events.push_back(e);
        }
    }

    pub(super) fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }
}
