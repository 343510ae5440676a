//! The connection's side of a radio's word (`crate::radio`): its rate into the rate control,
//! down, up, pause and restart into the paths, latency into the first timers.

use super::Connection;
use crate::liveness::Liveness;
use crate::radio::RadioSignal;
use std::time::Duration;

impl Connection {
    /// What a radio said of path `path` (an index into the connection's paths); whether it
    /// changed what the radio says of the path (`crate::radio::PathRadio::note`: a modem
    /// repeats its destination's whole state, and a repeat is applied but is no change).
    pub(crate) fn radio(&mut self, now: Duration, path: usize, signal: RadioSignal) -> bool {
        if path >= self.paths.len() {
            return false;
        }
        self.record.note_time(now);
        let rate_before = self.rate.radio_rate(path);
        match signal {
            RadioSignal::Rate(bps) => self.rate.set_radio_rate(now, path, Some(bps)),
            RadioSignal::RateUnknown => self.rate.set_radio_rate(now, path, None),
            RadioSignal::Latency(one_way) => {
                self.paths.seed_rtt(path, one_way * 2);
                if !self.rtt.has_sample() {
                    self.rtt = crate::rtt::RttEstimator::new(one_way * 2, self.rtt.min_rto());
                }
            }
            RadioSignal::Down => self.radio_down(now, path),
            RadioSignal::Up => {
                self.paths.set_radio_up(now, path);
                if let Liveness::Silent { next_probe, wait } = &mut self.watch.liveness {
                    // The link is back: the outage probe goes now, not at its backed-off
                    // time (due here: a deadline at `now` reported after `handle_timeout`
                    // ran for it would be one nothing acts on).
                    self.outbox.due.probe = true;
                    *next_probe = now + *wait;
                }
                self.tx.on_app_limited();
            }
            RadioSignal::Pause => self.paths.set_held(path, true),
            RadioSignal::Restart => {
                if !self.paths.is_radio_down(path) {
                    self.paths.set_held(path, false);
                }
                // What went before the pause and is acknowledged after it measures the
                // pause, not the link.
                self.tx.on_app_limited();
            }
        }
        self.apply_path_rate();
        // A release makes the timers the hold suppressed due now (retransmission, loss, the
        // suspected-outage pause): they act here, as `handle_timeout` would have (the driver
        // ran it for `now` already, and a deadline reported in the past is one nothing acts
        // on). `handle_timeout` acts only on what is due, so it is safe after any signal.
        self.handle_timeout(now);
        let rate = (rate_before, self.rate.radio_rate(path));
        self.paths.note_radio(path, signal, rate)
    }

    /// What is in force after a radio change: the connection's pacing rate and why, and
    /// path `path`'s own pacing rate (b/s).
    pub(crate) fn radio_in_force(&self, path: usize) -> (u64, crate::rate::RateReason, u64) {
        (
            self.pacer.rate(),
            self.rate_reason(),
            self.path_rate(path).pacing_bps,
        )
    }

    /// The radio says path `path`'s destination is down: with another path up it goes down
    /// now (its TPDUs in flight are resent on the others, as when its silence says so); the
    /// last path up is held, and its silence then is an outage by the usual rules.
    fn radio_down(&mut self, now: Duration, path: usize) {
        let others_up = (0..self.paths.len()).any(|j| j != path && self.paths.is_usable(j));
        let was_up = self.paths.is_up(path);
        self.paths.set_radio_down(path);
        if was_up && others_up && self.ec.acknowledges() {
            self.paths.set_down(now, path, self.cfg.probe_interval);
            self.tx.path_down(path);
        }
    }

    /// The indices of the paths `target` names: those whose peer address is its peer and,
    /// when it names a local address, whose local address is that one.
    pub(crate) fn paths_toward(&self, target: crate::radio::RadioTarget) -> Vec<usize> {
        self.paths.toward(target.peer, target.local)
    }

    /// Whether the radio holds every path that is up: nothing but control may go.
    pub(super) fn radio_held(&self) -> bool {
        self.paths.data_held()
    }
}
