//! The radios' word at the endpoint (`crate::radio`): what each peer's radio said last,
//! applied to every path toward that peer now and to every path opened toward it later (a
//! radio that said "1 Mb/s" before a transfer starts must not see its first flight at the
//! cap).

use super::{ConnectionHandle, Endpoint};
use crate::radio::{RadioApplied, RadioChange, RadioSignal};
use std::net::IpAddr;
use std::time::Duration;

impl Endpoint {
    /// What a radio said of the link toward `peer`: applied at once to every path of every
    /// connection whose peer address is `peer`, and kept for the paths opened toward it
    /// later. A peer whose radio is up, unpaused and says no rate or latency is forgotten.
    pub fn radio(&mut self, now: Duration, peer: IpAddr, signal: RadioSignal) -> RadioApplied {
        let kept = self.radio.note(peer, signal);
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
        if self.radio.is_empty() {
            return;
        }
        let Some(c) = self.conns.get(&h) else { return };
        let mut peers: Vec<IpAddr> = c.path_addrs().map(|p| p.remote.ip()).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            let signals = self.radio.replay(peer);
            if signals.is_empty() {
                continue;
            }
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
                if !c.radio(now, i, s) {
                    continue;
                }
                let (rate_bps, rate_reason, path_rate_bps) = c.radio_in_force(i);
                let Some(remote) = c.path_addrs().nth(i).map(|a| a.remote) else {
                    continue;
                };
                self.radio.push_change(RadioChange {
                    at: now,
                    connection: h,
                    path: i,
                    remote,
                    signal: s,
                    rate_bps,
                    rate_reason,
                    path_rate_bps,
                });
            }
        }
        if !paths.is_empty() {
            self.schedule.touch(h);
        }
        paths.len()
    }
}

impl Endpoint {
    /// The next radio change the engine applied to a path (oldest first): for the caller's
    /// log, trace and metrics. At most `crate::radio::RADIO_CHANGES_HELD` wait; beyond, the
    /// oldest are dropped and counted (`radio_changes_dropped`).
    pub fn poll_radio_change(&mut self) -> Option<RadioChange> {
        self.radio.pop_change()
    }

    /// Radio changes dropped because nobody took them in time (`poll_radio_change`).
    pub fn radio_changes_dropped(&self) -> u64 {
        self.radio.changes_dropped
    }
}
