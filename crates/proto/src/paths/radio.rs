//! What a radio says of a path (`crate::radio`): held (RFC 8651 Pause, or its destination
//! down) and down by the radio's word. The rate it gives lives in the rate control
//! (`crate::rate`), which owns every rate.

use super::Paths;
use std::net::IpAddr;
use std::time::Duration;

impl Paths {
    /// Up and not held by its radio: data may go on path `i`.
    pub fn is_usable(&self, i: usize) -> bool {
        self.list.get(i).is_some_and(|p| p.usable())
    }

    /// Whether no data may go at all: every path that is up is held by its radio (with one
    /// path: that path is held).
    pub fn data_held(&self) -> bool {
        let mut up = self.list.iter().filter(|p| p.up).peekable();
        up.peek().is_some() && up.all(|p| p.held)
    }

    /// The paths whose peer address is `peer` (a radio names a destination by address)
    /// and, when `local` is given, whose local address is `local` (the radio of that local
    /// address: a path whose local address the driver does not say is not its).
    pub fn toward(&self, peer: IpAddr, local: Option<IpAddr>) -> Vec<usize> {
        (0..self.list.len())
            .filter(|&i| {
                let a = self.list[i].addr;
                a.remote.ip() == peer && local.is_none_or(|l| a.local == Some(l))
            })
            .collect()
    }

    /// Path `i`'s radio holds it (`true`) or lets it go again.
    pub fn set_held(&mut self, i: usize, held: bool) {
        if let Some(p) = self.list.get_mut(i) {
            p.held = held;
        }
    }

    /// The radio says path `i`'s destination is down: held, and never probed until it says
    /// the destination is up. Whether it also goes down (its TPDUs in flight resent on the
    /// others) is the connection's call: not for the last path up, whose silence is an
    /// outage.
    pub fn set_radio_down(&mut self, i: usize) {
        if let Some(p) = self.list.get_mut(i) {
            p.held = true;
            p.radio_down = true;
            p.probe.cancel();
        }
    }

    /// The radio says path `i`'s destination is up: no longer held (unless the radio paused
    /// it: that waits for its Restart), and if the path is down its probe is due at once (the
    /// answer brings it up).
    pub fn set_radio_up(&mut self, now: Duration, i: usize) {
        if let Some(p) = self.list.get_mut(i) {
            p.held = p.radio.paused;
            p.radio_down = false;
            if !p.up {
                p.probe.due_now(now);
            }
        }
    }
}

impl Paths {
    /// Takes `signal` into path `i`'s radio record (`PathRadio::note`, `rate` the radio's
    /// rate before and after it); whether it changed what the radio says of the path.
    pub fn note_radio(
        &mut self,
        i: usize,
        signal: crate::radio::RadioSignal,
        rate: (Option<u64>, Option<u64>),
    ) -> bool {
        self.list
            .get_mut(i)
            .is_some_and(|p| p.radio.note(signal, rate))
    }

    /// The radio said the destination of path `i` is down and has not said it is up since.
    pub fn is_radio_down(&self, i: usize) -> bool {
        self.list.get(i).is_some_and(|p| p.radio_down)
    }

    /// Path `i`'s round-trip estimate starts from `initial` if it has no sample yet.
    pub fn seed_rtt(&mut self, i: usize, initial: Duration) {
        if let Some(p) = self.list.get_mut(i).filter(|p| !p.rtt.has_sample()) {
            p.rtt = crate::rtt::RttEstimator::new(initial, p.rtt.min_rto());
        }
    }
}
