//! What a connection knows of its peer's reachability: not heard yet, heard (and whether new
//! data is paused on a suspected outage), or silent (an outage: probing, backing off). One
//! value instead of the flags it replaced (`heard_once`, `silent`, `paused`, `next_probe`,
//! `probe_wait`), so no combination of them can contradict another.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Nothing heard from the peer yet.
    Unheard,
    /// The peer has been heard. `paused`: nothing heard for `pause_after` while data is
    /// unacknowledged, so new data and repairs wait (`connection::timers::pause_at`).
    Heard { paused: bool },
    /// An outage: nothing heard for the silence threshold with data unacknowledged. Only
    /// PROBEs go: the next at `next_probe`, the one after `wait` later (doubling to a bound).
    Silent {
        next_probe: Duration,
        wait: Duration,
    },
}

impl Liveness {
    pub(crate) fn heard(self) -> bool {
        !matches!(self, Liveness::Unheard)
    }

    pub(crate) fn silent(self) -> bool {
        matches!(self, Liveness::Silent { .. })
    }

    pub(crate) fn paused(self) -> bool {
        matches!(self, Liveness::Heard { paused: true })
    }

    /// When the next outage PROBE goes (only while silent).
    pub(crate) fn next_probe(self) -> Option<Duration> {
        match self {
            Liveness::Silent { next_probe, .. } => Some(next_probe),
            _ => None,
        }
    }
}
