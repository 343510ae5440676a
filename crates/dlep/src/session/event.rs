//! Events the router side reports, and the bounded queue that holds them until polled.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use super::types::{Destination, Metrics, PeerInfo};
use crate::codec::{Mac, StatusCode};

/// Something the consumer (the engine) should know.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Session Initialization Response received with status Success.
    SessionUp(PeerInfo),
    /// The modem changed its modem-wide metrics (Session Update); `metrics` is the full new set.
    SessionUpdate { metrics: Metrics },
    /// Destination Up: a neighbour is reachable, with its metrics and addresses.
    DestinationUp(Destination),
    /// Destination Update (or Link Characteristics Response): the destination's full, current
    /// state after applying what the modem said.
    DestinationUpdate(Destination),
    /// Destination Down: the neighbour is gone.
    DestinationDown { mac: Mac },
    /// RFC 8651 Pause: stop sending the named queues (255: everything), to `mac` or (`None`)
    /// to every destination.
    Pause { mac: Option<Mac>, queues: Vec<u8> },
    /// RFC 8651 Restart: resume the named queues.
    Restart { mac: Option<Mac>, queues: Vec<u8> },
    /// Link Characteristics Response to [`crate::Session::request_link_characteristics`].
    LinkCharacteristics {
        mac: Mac,
        status: StatusCode,
        metrics: Metrics,
    },
    /// Something odd the modem sent that did not end the session (logged too).
    Anomaly(Anomaly),
    /// The session is over: every destination it had is down. `destinations` lists them.
    SessionLost {
        reason: LostReason,
        destinations: Vec<Mac>,
    },
    /// (client) Trying to open a session to this address.
    Connecting { addr: SocketAddr },
    /// (client) The connection attempt failed; the client retries after `retry_in`.
    ConnectFailed {
        addr: Option<SocketAddr>,
        error: String,
        retry_in: Duration,
    },
    /// (client) Peer Discovery got an offer: the modem's session address.
    PeerDiscovered { addr: SocketAddr },
}

/// A non-fatal oddity in what the modem sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Anomaly {
    /// A metric no radio means: a data rate of 0 or above [`crate::Config::max_rate_bps`], a
    /// latency above [`crate::Config::max_latency`] (or a latency range whose minimum exceeds
    /// its maximum), an MTU of 0. The value is ignored (`item` is its data item type).
    Implausible {
        mac: Option<Mac>,
        item: u16,
        value: u64,
    },
    /// A message about a destination that is not up (never was, was refused, or went down).
    UnknownDestination { mac: Mac, message: u16 },
    /// Destination Up refused: the table holds the configured maximum already.
    DestinationTableFull { mac: Mac },
    /// More addresses than the per-destination cap; the extra ones are ignored.
    TooManyAddresses { mac: Option<Mac> },
    /// A Destination Up for a destination already up: treated as an update.
    DuplicateDestinationUp { mac: Mac },
    /// A response to a request this side never made; ignored.
    StrayResponse { message: u16 },
    /// A message lacking a data item it must carry, or with one it must not; the session goes
    /// on when that is safe.
    MissingItem { message: u16, item: u16 },
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The modem sent Session Termination.
    PeerTerminated { status: StatusCode, text: String },
    /// The modem refused the session (Session Initialization Response with a failure status).
    InitRejected { status: StatusCode, text: String },
    /// No Session Initialization Response in time.
    InitTimeout,
    /// Nothing heard from the modem for the missed-heartbeats allowance.
    HeartbeatTimeout { silent_for: Duration },
    /// The modem sent something this side cannot accept; this side terminated with `status`.
    ProtocolError { status: StatusCode, detail: String },
    /// The TCP connection closed without a Session Termination.
    ConnectionClosed,
    /// A socket error.
    Io(String),
    /// This side ended the session (shutdown).
    LocalShutdown,
    /// Events or responses piled up beyond their bounds (a flood, or a consumer that does not
    /// poll): the session is dropped so that a new one re-synchronises the state.
    Overloaded,
}

impl Event {
    /// The destination an update-like event is about, for coalescing: later updates carry the
    /// full state, so they supersede earlier ones.
    fn coalesce_key(&self) -> Option<Option<Mac>> {
        match self {
            Event::DestinationUpdate(d) => Some(Some(d.mac)),
            Event::SessionUpdate { .. } => Some(None),
            _ => None,
        }
    }

    /// Whether an event concerns the destination (`Some`) or session (`None`) `key`.
    fn concerns(&self, key: Option<Mac>) -> bool {
        match (self, key) {
            (Event::DestinationUp(d) | Event::DestinationUpdate(d), Some(m)) => d.mac == m,
            (Event::DestinationDown { mac } | Event::LinkCharacteristics { mac, .. }, Some(m)) => {
                *mac == m
            }
            (Event::SessionUpdate { .. } | Event::SessionUp(_), None) => true,
            (Event::SessionLost { .. }, _) => true,
            _ => false,
        }
    }
}

/// Events waiting to be polled, bounded: beyond `cap`, an update replaces the previous pending
/// update for the same destination and anomalies are dropped (both counted); if the queue still
/// grows to twice `cap` the session reports itself overloaded.
#[derive(Debug)]
pub(crate) struct EventQueue {
    q: VecDeque<Event>,
    cap: usize,
    pub(crate) coalesced: u64,
    pub(crate) dropped: u64,
}

impl EventQueue {
    pub(crate) fn new(cap: usize) -> Self {
        EventQueue {
            q: VecDeque::new(),
            cap: cap.max(1),
            coalesced: 0,
            dropped: 0,
        }
    }

    /// Queues `e`; false when the queue is past its hard bound (the caller ends the session).
    pub(crate) fn push(&mut self, e: Event) -> bool {
        if self.q.len() >= self.cap {
            if matches!(e, Event::Anomaly(_)) {
                self.dropped += 1;
                return true;
            }
            if let Some(key) = e.coalesce_key() {
                // Only the latest event about this destination may be replaced: an Up or Down
                // after it must keep its place in the order.
                if let Some(last) = self.q.iter_mut().rev().find(|x| x.concerns(key)) {
                    if last.coalesce_key() == Some(key) {
                        *last = e;
                        self.coalesced += 1;
                        return true;
                    }
                }
            }
        }
        if self.q.len() >= 2 * self.cap && !matches!(e, Event::SessionLost { .. }) {
            return false;
        }
        self.q.push_back(e);
        true
    }

    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.q.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }
}
