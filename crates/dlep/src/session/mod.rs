//! The router side of one DLEP session (RFC 8175 §5, §10, §12), sans IO: bytes in from the
//! TCP stream, bytes out to it, timers and events, with the time always passed in (`now`, a
//! [`Duration`] since any fixed origin, like the rest of AeroTP's engine).
//!
//! ```text
//! new() --Session Initialization--> AwaitInit --Init Response (Success)--> Up
//!   Up: Heartbeats both ways; Destination Up/Update/Down; Session Update; Pause/Restart;
//!       Link Characteristics
//!   any state --error, timeout, Termination, EOF, close()--> Terminating --> Closed
//! ```
//! A protocol error from the modem makes this side send Session Termination with the RFC's
//! status (Unknown Message, Unexpected Message, Invalid Data, Timed Out) and report
//! [`Event::SessionLost`] at once; the caller then closes the connection once
//! [`Session::is_closed`] (or after a short grace period for the Termination Response).

mod config;
mod digest;
mod event;
mod handle;
mod types;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

pub use config::Config;
pub use event::{Anomaly, Event, LostReason};
pub use types::{Addresses, Destination, Metrics, PeerInfo};

use crate::codec::ids::message as msg;
use crate::codec::{message_frame_len, DataItem, Mac, Message, StatusCode};
use event::EventQueue;

/// Messages waiting to be written, at most; more means the peer floods us with requests
/// faster than the caller writes the responses.
const MAX_PENDING_TX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitInit { deadline: Duration },
    Up,
    Terminating { deadline: Duration },
    Closed,
}

/// Counters for logs and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub messages_in: u64,
    pub messages_out: u64,
    pub anomalies: u64,
    /// Updates replaced by a later one while the event queue was full.
    pub events_coalesced: u64,
    /// Anomaly events dropped while the event queue was full.
    pub events_dropped: u64,
}

/// One router-side session. Create it when the TCP connection is up; it queues Session
/// Initialization at once.
#[derive(Debug)]
pub struct Session {
    cfg: Config,
    state: State,
    rx: Vec<u8>,
    tx: VecDeque<Vec<u8>>,
    events: EventQueue,
    peer: Option<PeerInfo>,
    dests: BTreeMap<Mac, Destination>,
    /// The modem's interval (ours while unknown or zero): the silence allowance's unit.
    peer_interval: Duration,
    last_rx: Duration,
    next_heartbeat: Duration,
    lost: bool,
    stats: Stats,
}

impl Session {
    pub fn new(cfg: Config, now: Duration) -> Session {
        let mut s = Session {
            state: State::AwaitInit {
                deadline: now.saturating_add(cfg.init_timeout),
            },
            rx: Vec::new(),
            tx: VecDeque::new(),
            events: EventQueue::new(cfg.event_capacity),
            peer: None,
            dests: BTreeMap::new(),
            peer_interval: cfg.heartbeat_interval,
            last_rx: now,
            next_heartbeat: now,
            lost: false,
            stats: Stats::default(),
            cfg,
        };
        let mut items = vec![
            DataItem::HeartbeatInterval(s.cfg.heartbeat_ms()),
            DataItem::PeerType {
                secured: false,
                description: s.cfg.peer_type.clone(),
            },
        ];
        if !s.cfg.extensions.is_empty() {
            items.push(DataItem::ExtensionsSupported(s.cfg.extensions.clone()));
        }
        s.send(Message::new(msg::SESSION_INITIALIZATION, items));
        s
    }

    /// Bytes read from the TCP connection, any amount.
    pub fn handle_bytes(&mut self, now: Duration, data: &[u8]) {
        if matches!(self.state, State::Closed) {
            return;
        }
        self.rx.extend_from_slice(data);
        let terminating = matches!(self.state, State::Terminating { .. });
        let mut at = 0;
        while let Some(len) = message_frame_len(&self.rx[at..]) {
            if self.rx.len() - at < len {
                break;
            }
            let frame = self.rx[at..at + len].to_vec();
            at += len;
            self.handle_message(now, &frame);
            let ended = match self.state {
                State::Closed => true,
                State::Terminating { .. } => !terminating,
                _ => false,
            };
            if ended {
                // Nothing after an error or a termination is read (but a session already
                // terminating reads on, for the Termination Response).
                self.rx.clear();
                return;
            }
        }
        self.rx.drain(..at);
    }

    /// The TCP connection reached end of file.
    pub fn handle_eof(&mut self, _now: Duration) {
        if !matches!(self.state, State::Closed) {
            self.lose(LostReason::ConnectionClosed);
            self.state = State::Closed;
        }
    }

    /// The connection failed (read or write error); the session is over.
    pub fn handle_io_error(&mut self, error: String) {
        if !matches!(self.state, State::Closed) {
            self.lose(LostReason::Io(error));
            self.state = State::Closed;
        }
    }

    /// Ends the session: Session Termination (status Success), then wait for its response.
    pub fn close(&mut self, now: Duration) {
        match self.state {
            State::AwaitInit { .. } | State::Up => self.terminate(
                now,
                StatusCode::SUCCESS,
                "router shutting down",
                LostReason::LocalShutdown,
            ),
            State::Terminating { .. } | State::Closed => {}
        }
    }

    /// When [`Session::handle_timeout`] wants to be called next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            State::AwaitInit { deadline } | State::Terminating { deadline } => Some(deadline),
            State::Up => Some(self.next_heartbeat.min(self.dead_at())),
            State::Closed => None,
        }
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        match self.state {
            State::AwaitInit { deadline } if now >= deadline => {
                tracing::warn!(
                    "DLEP: no Session Initialization Response in {:?}",
                    self.cfg.init_timeout
                );
                self.terminate(
                    now,
                    StatusCode::TIMED_OUT,
                    "no Session Initialization Response",
                    LostReason::InitTimeout,
                );
            }
            State::Up if now >= self.dead_at() => {
                let silent_for = now.saturating_sub(self.last_rx);
                tracing::warn!("DLEP: modem silent for {silent_for:?}: session timed out");
                self.terminate(
                    now,
                    StatusCode::TIMED_OUT,
                    "heartbeat timeout",
                    LostReason::HeartbeatTimeout { silent_for },
                );
            }
            State::Up if now >= self.next_heartbeat => {
                self.send(Message::new(msg::HEARTBEAT, vec![]));
                let step = self.cfg.heartbeat_interval.max(Duration::from_millis(1));
                self.next_heartbeat = self.next_heartbeat.saturating_add(step);
                if self.next_heartbeat <= now {
                    // Called late (a stalled caller): do not send a burst to catch up.
                    self.next_heartbeat = now.saturating_add(step);
                }
            }
            State::Terminating { deadline } if now >= deadline => self.state = State::Closed,
            _ => {}
        }
    }

    /// The next message to write to the connection.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.tx.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// Events waiting in [`Session::poll_event`].
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// True once the session has ended and the queued output is all that is left to write.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// True while the session is initialised and running.
    pub fn is_up(&self) -> bool {
        matches!(self.state, State::Up)
    }

    pub fn peer(&self) -> Option<&PeerInfo> {
        self.peer.as_ref()
    }

    pub fn destination(&self, mac: &Mac) -> Option<&Destination> {
        self.dests.get(mac)
    }

    pub fn destinations(&self) -> impl Iterator<Item = &Destination> {
        self.dests.values()
    }

    pub fn stats(&self) -> Stats {
        Stats {
            events_coalesced: self.events.coalesced,
            events_dropped: self.events.dropped,
            ..self.stats
        }
    }

    /// Sends a Link Characteristics Request (RFC 8175 §12.11) for a destination that is up,
    /// asking for the given Current Data Rate (Transmit) and/or Latency; the answer arrives as
    /// [`Event::LinkCharacteristics`]. Returns false (nothing sent) when the session is not up
    /// or the destination unknown.
    pub fn request_link_characteristics(
        &mut self,
        mac: Mac,
        current_rate_tx: Option<u64>,
        latency_us: Option<u64>,
    ) -> bool {
        if !self.is_up() || !self.dests.contains_key(&mac) {
            return false;
        }
        let mut items = vec![DataItem::MacAddress(mac)];
        items.extend(current_rate_tx.map(DataItem::CurrentDataRateTx));
        items.extend(latency_us.map(DataItem::Latency));
        self.send(Message::new(msg::LINK_CHARACTERISTICS_REQUEST, items));
        true
    }

    fn dead_at(&self) -> Duration {
        // Saturating: no configuration or modem value can make the arithmetic panic.
        self.last_rx.saturating_add(
            self.peer_interval
                .saturating_mul(self.cfg.missed_heartbeats.max(1)),
        )
    }

    fn send(&mut self, m: Message) {
        match m.to_bytes() {
            Ok(b) => {
                if self.tx.len() >= MAX_PENDING_TX {
                    tracing::error!("DLEP: {MAX_PENDING_TX} messages unsent: dropping the session");
                    self.tx.clear();
                    self.lose(LostReason::Overloaded);
                    self.state = State::Closed;
                    return;
                }
                self.stats.messages_out += 1;
                self.tx.push_back(b);
            }
            // Every message this side builds fits its fields; a failure is a bug, and is
            // logged rather than taking the process down.
            Err(e) => tracing::error!("DLEP: cannot encode message type {}: {e}", m.ty),
        }
    }

    fn emit(&mut self, e: Event) {
        if !self.events.push(e) {
            tracing::error!(
                "DLEP: event queue overflow (consumer not polling): dropping the session"
            );
            if !matches!(self.state, State::Closed) {
                self.tx.clear();
                self.lose(LostReason::Overloaded);
                self.state = State::Closed;
            }
        }
    }

    fn anomaly(&mut self, a: Anomaly) {
        tracing::warn!("DLEP: {a:?}");
        self.stats.anomalies += 1;
        self.emit(Event::Anomaly(a));
    }

    /// Reports the loss once: every destination goes with the session.
    fn lose(&mut self, reason: LostReason) {
        if self.lost {
            return;
        }
        self.lost = true;
        let destinations = std::mem::take(&mut self.dests).into_keys().collect();
        tracing::info!("DLEP: session lost: {reason:?}");
        // Pushed past any bound: the consumer must learn the session is gone.
        self.events.push(Event::SessionLost {
            reason,
            destinations,
        });
    }

    /// Sends Session Termination and waits for its response (or the timeout).
    fn terminate(&mut self, now: Duration, status: StatusCode, text: &str, reason: LostReason) {
        self.send(Message::new(
            msg::SESSION_TERMINATION,
            vec![DataItem::Status {
                code: status,
                text: text.to_string(),
            }],
        ));
        self.lose(reason);
        if !matches!(self.state, State::Closed) {
            self.state = State::Terminating {
                deadline: now.saturating_add(self.cfg.termination_timeout),
            };
        }
    }
}

#[cfg(test)]
mod tests;
