//! The radios' word at the endpoint (`crate::radio`): what each peer's radio said last,
//! applied to every path toward that peer now and to every path opened toward it later (a
//! radio that said "1 Mb/s" before a transfer starts must not see its first flight at the
//! cap).

use super::{ConnectionHandle, Endpoint};
use crate::radio::RadioSignal;
use crate::table::{table, Table};
use std::net::IpAddr;
use std::time::Duration;

/// Most peers whose radio state is kept: a DLEP modem reports destinations, and a
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
    /// Takes `signal` in; false when it changes nothing.
    fn note(&mut self, signal: RadioSignal) -> bool {
        let before = *self;
        match signal {
            RadioSignal::Rate(r) => self.rate = Some(r),
            RadioSignal::RateUnknown => self.rate = None,
            RadioSignal::Latency(d) => self.latency = Some(d),
            RadioSignal::Down => self.down = true,
            RadioSignal::Up => self.down = false,
            RadioSignal::Pause => self.paused = true,
            RadioSignal::Restart => self.paused = false,
        }
        *self != before
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

/// Every peer's radio state (bounded by `RADIO_PEERS`).
#[derive(Debug)]
pub(crate) struct RadioBook {
    peers: Table<IpAddr, RadioState>,
}

impl RadioBook {
    pub fn new(seed: u64) -> RadioBook {
        RadioBook { peers: table(seed) }
    }
}

/// What `Endpoint::radio` did with a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RadioApplied {
    /// Paths of live connections it reached now.
    pub paths: usize,
    /// False when the book is full of other peers: the signal was not kept for later paths
    /// (it still reached the live ones).
    pub kept: bool,
}

impl Endpoint {
    /// What a radio said of the link toward `peer`: applied at once to every path of every
    /// connection whose peer address is `peer`, and kept for the paths opened toward it
    /// later. A peer whose radio is up, unpaused and says no rate or latency is forgotten.
    pub fn radio(&mut self, now: Duration, peer: IpAddr, signal: RadioSignal) -> RadioApplied {
        let kept = {
            let book = &mut self.radio.peers;
            let known = book.contains_key(&peer);
            if known || book.len() < RADIO_PEERS {
                let st = book.entry(peer).or_default();
                st.note(signal);
                if *st == RadioState::default() {
                    book.remove(&peer);
                }
                true
            } else {
                false
            }
        };
        let mut handles = std::mem::take(&mut self.handles);
        handles.clear();
        handles.extend(self.conns.keys().copied());
        let mut paths = 0;
        for &h in &handles {
            paths += self.radio_to(now, h, peer, &[signal]);
        }
        self.handles = handles;
        RadioApplied { paths, kept }
    }

    /// Brings connection `h`'s paths toward every peer with a radio state to it (a new
    /// connection, a path just added).
    pub(super) fn radio_replay(&mut self, now: Duration, h: ConnectionHandle) {
        if self.radio.peers.is_empty() {
            return;
        }
        let Some(c) = self.conns.get(&h) else { return };
        let mut peers: Vec<IpAddr> = c.path_addrs().map(|p| p.remote.ip()).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            let Some(st) = self.radio.peers.get(&peer).copied() else {
                continue;
            };
            let signals: Vec<RadioSignal> = st.replay().collect();
            self.radio_to(now, h, peer, &signals);
        }
    }

    /// `signals` to connection `h`'s paths toward `peer`; how many paths they reached.
    fn radio_to(
        &mut self,
        now: Duration,
        h: ConnectionHandle,
        peer: IpAddr,
        signals: &[RadioSignal],
    ) -> usize {
        let Some(c) = self.conns.get_mut(&h) else {
            return 0;
        };
        let paths = c.paths_toward(peer);
        for &i in &paths {
            for &s in signals {
                c.radio(now, i, s);
            }
        }
        if !paths.is_empty() {
            self.schedule.touch(h);
        }
        paths.len()
    }
}
