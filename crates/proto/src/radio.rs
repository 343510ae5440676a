//! What a radio says of the link toward a peer (DLEP, RFC 8175 and RFC 8651), as the engine
//! takes it: the runtime maps each DLEP destination to the peer address its paths reach and
//! passes these to `Endpoint::radio` (docs/dlep.md, "What the engine does with it").

use crate::endpoint_types::ConnectionHandle;
use crate::rate::RateReason;
use crate::table::{table, Table};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// One thing a radio said of the link toward a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RadioSignal {
    /// Current Data Rate (Transmit), b/s: the path's rate is capped by it at once; with a
    /// discovered rate it is also the starting point, a step up is probed at once and
    /// discovery keeps guarding the queue under it.
    Rate(u64),
    /// The radio no longer says a rate: the path's rate is the rate control's alone again.
    RateUnknown,
    /// The radio's latency to the destination (one way): before a round-trip sample, the
    /// path's timers start from twice it rather than from the configured initial guess.
    Latency(Duration),
    /// Destination Down, or the DLEP session ended: nothing goes on the path until the radio
    /// says it is up. With other paths up, the path goes down at once (its TPDUs in flight
    /// resent on them); the last path up is held instead, and the connection's outage rules
    /// (silence, probes) apply once its peer falls silent.
    Down,
    /// Destination Up: the path is probed at once (the answer brings it up) and released,
    /// unless the radio paused it (that waits for `Restart`).
    Up,
    /// RFC 8651 Pause: no new data, repair or retransmission on the path until `Restart`. What
    /// is in flight is still the modem's to send: no loss is counted for the pause, and the
    /// rate model takes the pause's samples as limited by the sender, not the link.
    Pause,
    /// RFC 8651 Restart.
    Restart,
}

impl RadioSignal {
    /// A short name for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            RadioSignal::Rate(_) => "rate",
            RadioSignal::RateUnknown => "rate_unknown",
            RadioSignal::Latency(_) => "latency",
            RadioSignal::Down => "down",
            RadioSignal::Up => "up",
            RadioSignal::Pause => "pause",
            RadioSignal::Restart => "restart",
        }
    }
}

/// Which paths a radio's word is for (`Endpoint::radio_on`): those toward `peer` (their
/// remote IP address) and, when `local` is given, only those from this host's address `local`
/// (`PathAddr::local`): the radio of that local address. Two radios on two local addresses
/// reaching one peer address each speak for their own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RadioTarget {
    pub peer: IpAddr,
    pub local: Option<IpAddr>,
}

impl RadioTarget {
    /// Every path toward `peer`, whatever its local address.
    pub fn peer(peer: IpAddr) -> RadioTarget {
        RadioTarget { peer, local: None }
    }

    /// The paths toward `peer` from this host's address `local`.
    pub fn on(local: IpAddr, peer: IpAddr) -> RadioTarget {
        RadioTarget {
            peer,
            local: Some(local),
        }
    }
}

impl std::fmt::Display for RadioTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.local {
            Some(l) => write!(f, "{}@{l}", self.peer),
            None => write!(f, "{}", self.peer),
        }
    }
}

/// Most targets (peers, or peers from one local address) whose radio state is kept: a DLEP modem reports destinations, and a
/// destination table beyond this is refused by the DLEP side already (docs/dlep.md).
pub const RADIO_PEERS: usize = 256;

/// What the radio last said of one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RadioState {
    rate: Option<u64>,
    latency: Option<Duration>,
    down: bool,
    paused: bool,
}

impl RadioState {
    /// Takes `signal` in.
    fn note(&mut self, signal: RadioSignal) {
        match signal {
            RadioSignal::Rate(r) => self.rate = Some(r),
            RadioSignal::RateUnknown => self.rate = None,
            RadioSignal::Latency(d) => self.latency = Some(d),
            RadioSignal::Down => self.down = true,
            RadioSignal::Up => self.down = false,
            RadioSignal::Pause => self.paused = true,
            RadioSignal::Restart => self.paused = false,
        }
    }

    /// The signals that bring a new path to this state.
    fn replay(&self) -> impl Iterator<Item = RadioSignal> {
        [
            self.rate.map(RadioSignal::Rate),
            self.latency.map(RadioSignal::Latency),
            self.down.then_some(RadioSignal::Down),
            self.paused.then_some(RadioSignal::Pause),
        ]
        .into_iter()
        .flatten()
    }
}

/// What a path's radio says now and how often it changed (`PathStats::radio`,
/// docs/stats.md). A signal that says what the radio said already (a modem repeats its
/// destination's whole state at each update) changes nothing and is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathRadio {
    /// The radio's latency to the destination (one way), if it said one.
    pub latency: Option<Duration>,
    /// The radio said the destination is down and has not said it is up since.
    pub down: bool,
    /// The radio paused the path (RFC 8651) and has not restarted it (a Destination Up does
    /// not: the DLEP side follows an Up with Restart or Pause as the modem's queues say).
    pub paused: bool,
    /// Times the radio's rate changed (a new rate, or none any more).
    pub rate_changes: u64,
    pub latency_changes: u64,
    pub downs: u64,
    pub ups: u64,
    pub pauses: u64,
    pub restarts: u64,
}

impl PathRadio {
    /// Takes `signal` in; whether it changed what the radio says of the path. `rate` is the
    /// radio's rate before and after the signal (the rate control keeps it, clamped).
    pub(crate) fn note(&mut self, signal: RadioSignal, rate: (Option<u64>, Option<u64>)) -> bool {
        let (count, changed) = match signal {
            RadioSignal::Rate(_) | RadioSignal::RateUnknown => {
                (&mut self.rate_changes, rate.0 != rate.1)
            }
            RadioSignal::Latency(d) => {
                let changed = self.latency.replace(d) != Some(d);
                (&mut self.latency_changes, changed)
            }
            RadioSignal::Down => (&mut self.downs, !std::mem::replace(&mut self.down, true)),
            RadioSignal::Up => (&mut self.ups, std::mem::replace(&mut self.down, false)),
            RadioSignal::Pause => (&mut self.pauses, !std::mem::replace(&mut self.paused, true)),
            RadioSignal::Restart => (
                &mut self.restarts,
                std::mem::replace(&mut self.paused, false),
            ),
        };
        if changed {
            *count += 1;
        }
        changed
    }
}

/// A change a radio made to one path, as the engine applied it (`Endpoint::poll_radio_change`):
/// for the runtime's log, qlog trace and metrics. Only what changed the path's radio state
/// (`PathRadio::note`) is reported, with the engine's own `now`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RadioChange {
    /// When the engine applied it (its `now`; the caller's clock).
    pub at: Duration,
    pub connection: ConnectionHandle,
    /// The path's index in the connection and its peer address.
    pub path: usize,
    pub remote: SocketAddr,
    pub signal: RadioSignal,
    /// The connection's pacing rate in force once the change was applied, b/s, and why.
    pub rate_bps: u64,
    pub rate_reason: RateReason,
    /// The path's own pacing rate then (`PathRate::pacing_bps`), b/s.
    pub path_rate_bps: u64,
}

/// Most radio changes the endpoint holds for `Endpoint::poll_radio_change`: a runtime drains
/// them at every step; a caller that never does (the simulator) loses the oldest, counted.
pub const RADIO_CHANGES_HELD: usize = 1024;

/// Every target's radio state (bounded by `RADIO_PEERS`): the endpoint's, for the paths
/// opened toward a peer after its radio spoke (`Endpoint::radio`, `Endpoint::radio_on`); and the changes applied
/// and not yet taken (bounded by `RADIO_CHANGES_HELD`).
#[derive(Debug)]
pub(crate) struct RadioBook {
    peers: Table<RadioTarget, RadioState>,
    changes: VecDeque<RadioChange>,
    /// Changes dropped at the bound, oldest first.
    pub changes_dropped: u64,
}

impl RadioBook {
    pub fn new(seed: u64) -> RadioBook {
        RadioBook {
            peers: table(seed),
            changes: VecDeque::new(),
            changes_dropped: 0,
        }
    }

    /// Holds `c` for the caller, the oldest dropped beyond `RADIO_CHANGES_HELD`.
    pub fn push_change(&mut self, c: RadioChange) {
        if self.changes.len() >= RADIO_CHANGES_HELD {
            self.changes.pop_front();
            self.changes_dropped += 1;
        }
        self.changes.push_back(c);
    }

    pub fn pop_change(&mut self) -> Option<RadioChange> {
        self.changes.pop_front()
    }

    /// Takes `signal` for `peer` (a target) in; false when the book is full of other targets
    /// (the signal is not kept). A target back to the default state (up, unpaused, nothing
    /// said) is forgotten.
    pub fn note(&mut self, peer: RadioTarget, signal: RadioSignal) -> bool {
        let known = self.peers.contains_key(&peer);
        if !known && self.peers.len() >= RADIO_PEERS {
            return false;
        }
        let st = self.peers.entry(peer).or_default();
        st.note(signal);
        if *st == RadioState::default() {
            self.peers.remove(&peer);
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The signals that bring a new path toward target `peer` to its radio's state.
    pub fn replay(&self, peer: RadioTarget) -> Vec<RadioSignal> {
        self.peers
            .get(&peer)
            .map(|st| st.replay().collect())
            .unwrap_or_default()
    }
}

/// What `Endpoint::radio` (or `radio_on`) did with a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RadioApplied {
    /// Paths of live connections it reached now.
    pub paths: usize,
    /// False when the book is full of other targets: the signal was not kept for later paths
    /// (it still reached the live ones).
    pub kept: bool,
}
