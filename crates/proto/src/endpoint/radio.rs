//! The radios' word at the endpoint (`crate::radio`): what each peer's radio said last (or
//! the radio of one local address toward that peer: `RadioTarget`), applied to every path
//! it names now and to every path opened toward it later (a
//! radio that said "1 Mb/s" before a transfer starts must not see its first flight at the
//! cap).

use super::{ConnectionHandle, Endpoint};
use crate::radio::{RadioApplied, RadioChange, RadioSignal, RadioTarget};
use std::net::IpAddr;
use std::time::Duration;

impl Endpoint {
    /// What a radio said of the link toward `peer`: applied at once to every path of every
    /// connection whose peer address is `peer`, and kept for the paths opened toward it
    /// later. A peer whose radio is up, unpaused and says no rate or latency is forgotten.
    /// `radio_on` with `RadioTarget::peer(peer)`.
    pub fn radio(&mut self, now: Duration, peer: IpAddr, signal: RadioSignal) -> RadioApplied {
        self.radio_on(now, RadioTarget::peer(peer), signal)
    }

    /// What a radio said of the link `target` names: applied at once to every path of every
    /// connection whose peer address is `target.peer` and, when `target.local` is given,
    /// whose local address is that one (the radio of that local address: two radios on two
    /// local addresses toward one peer each speak for their own path); kept the same way for
    /// the paths opened later. A path opened later takes what was said of its peer first,
    /// then what was said of its peer from its local address.
    pub fn radio_on(
        &mut self,
        now: Duration,
        target: RadioTarget,
        signal: RadioSignal,
    ) -> RadioApplied {
        let kept = self.radio.note(target, signal);
        let mut handles = std::mem::take(&mut self.handles);
        handles.clear();
        handles.extend(self.conns.keys().copied());
        let mut paths = 0;
        for &h in &handles {
            paths += self.radio_to(now, h, target, &[signal]);
        }
        self.handles = handles;
        RadioApplied { paths, kept }
    }

    /// Brings connection `h`'s paths toward every target with a radio state to it (a new
    /// connection, a path just added): each peer's state, then each peer's from each local
    /// address.
    pub(super) fn radio_replay(&mut self, now: Duration, h: ConnectionHandle) {
        if self.radio.is_empty() {
            return;
        }
        let Some(c) = self.conns.get(&h) else { return };
        let mut targets: Vec<RadioTarget> = c
            .path_addrs()
            .flat_map(|p| {
                let peer = p.remote.ip();
                [
                    Some(RadioTarget::peer(peer)),
                    p.local.map(|l| RadioTarget::on(l, peer)),
                ]
            })
            .flatten()
            .collect();
        // `None` sorts before `Some`: each peer's own state goes before its local ones.
        targets.sort_unstable_by_key(|t| (t.local.is_some(), *t));
        targets.dedup();
        for target in targets {
            let signals = self.radio.replay(target);
            if signals.is_empty() {
                continue;
            }
            self.radio_to(now, h, target, &signals);
        }
    }

    /// `signals` to connection `h`'s paths `target` names; how many paths they reached.
    fn radio_to(
        &mut self,
        now: Duration,
        h: ConnectionHandle,
        target: RadioTarget,
        signals: &[RadioSignal],
    ) -> usize {
        let Some(c) = self.conns.get_mut(&h) else {
            return 0;
        };
        let paths = c.paths_toward(target);
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
