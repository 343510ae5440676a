//! A connection over several paths (docs/spec.md §9; the rules are `crate::paths`'s): what
//! the connection does when a path is added, heard from, measured, overdue or probed. With
//! one path every function here returns at once.

use super::Connection;
use crate::endpoint_types::PathAddr;
use crate::paths::PathStats;
use crate::rtt::PathTiming;
use std::net::SocketAddr;
use std::time::Duration;

impl Connection {
    /// The peer's address on the connection's first path (where it opened, or where the
    /// peer moved to).
    pub fn remote(&self) -> SocketAddr {
        self.paths.remote(0)
    }

    /// The connection's first path (where it opened, or where the peer moved to).
    pub(crate) fn first_path(&self) -> PathAddr {
        self.paths.addr(0)
    }

    /// The connection's paths, both ends of each.
    pub fn path_addrs(&self) -> impl Iterator<Item = PathAddr> + '_ {
        self.paths.addrs()
    }

    /// Whether `addr` is one of the connection's paths.
    pub(crate) fn has_path(&self, addr: PathAddr) -> bool {
        self.paths.index_of(addr).is_some()
    }

    /// Where the datagram `poll_transmit` produced last goes, and from where.
    pub fn transmit_path(&self) -> PathAddr {
        self.paths.tx_addr()
    }

    /// Adds the path `addr` (the peer proven to receive there); `None` if the connection has
    /// `MAX_PATHS` already.
    pub(crate) fn add_path(&mut self, now: Duration, addr: PathAddr) -> Option<usize> {
        let i = self.paths.add(addr, now, self.rtt.fresh())?;
        self.tx.add_path(i);
        self.set_path_timings();
        self.apply_path_rate();
        Some(i)
    }

    /// `n` paths this end asked for are being validated: until they are added the paths
    /// there are carry only their share of the rate.
    pub(crate) fn expect_paths(&mut self, n: usize) {
        self.paths.expect(n);
        self.apply_path_rate();
    }

    /// The current retransmission timeout.
    pub(crate) fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// Least time between two CHALLENGEs of a new address: two smoothed round trips (an
    /// ECHO can come back within that), which `Migrations` raises to 250 ms.
    pub(crate) fn challenge_spacing(&self) -> Duration {
        self.rtt.smoothed() * 2
    }

    /// The peer moved (or this end did): the path it has been silent on longest is `new`
    /// from now on. Returns the path it replaces.
    pub(crate) fn move_path(&mut self, new: PathAddr) -> PathAddr {
        let i = self.paths.stalest();
        let old = self.paths.addr(i);
        self.paths.replace(i, new);
        old
    }

    /// Whether the peer was heard on any of the connection's paths after `t`.
    pub(crate) fn heard_since(&self, t: Duration) -> bool {
        self.paths.heard_since(t)
    }

    /// TPDUs received that were new (not duplicates, taken in).
    pub(crate) fn tpdus_received(&self) -> u64 {
        self.rx.tpdus_received()
    }

    pub(crate) fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// A datagram of `bytes` arrived on path `addr`: which path it came on, and a down path
    /// that is heard from again is up. False (and nothing counted) if `addr` is none of the
    /// connection's paths.
    pub(crate) fn arrived_from(&mut self, now: Duration, addr: PathAddr, bytes: usize) -> bool {
        self.record.note_time(now);
        let Some(i) = self.paths.index_of(addr) else {
            return false;
        };
        if self.paths.on_heard(now, i, bytes) {
            self.apply_path_rate();
        }
        true
    }

    /// The pacer runs at the connection's fixed rate times the share of the paths that are
    /// up, or at the sum of the up paths' discovered rates (each path then weighed by its
    /// rate); a radio's rate caps either (`crate::radio`). While the radio holds every path
    /// the pacer keeps its rate: only control goes then.
    pub(super) fn apply_path_rate(&mut self) {
        if self.radio_held() {
            return;
        }
        if self.rate.discovers() {
            let (rate, _) = self.path_rate_now();
            self.pacer.set_rate(rate);
            if self.paths.multi() {
                let rate = &self.rate;
                let paths = &self.paths;
                let shares: Vec<Option<f64>> = (0..paths.len())
                    .map(|i| rate.share(i, |j| paths.is_usable(j)))
                    .collect();
                self.paths.set_rate_shares(&shares);
            }
            return;
        }
        let (radio, _) = self.path_rate_now();
        let rate = (self.rate.cap() as f64 * self.paths.up_fraction()) as u64;
        self.pacer.set_rate(rate.min(radio).max(1));
    }

    /// After feedback: each path's latency samples, weights and the loss-detection timing of
    /// the paths without a sample.
    pub(super) fn measure_paths(&mut self, now: Duration) {
        if !self.paths.multi() {
            return;
        }
        for i in 0..self.paths.len() {
            if let Some(sent) = self.tx.take_path_latency(i) {
                let hold = self.rtt.peer_max_delay();
                self.paths.on_latency(i, now.saturating_sub(sent), hold);
            }
        }
        self.set_path_timings();
        self.paths.reweigh(now, &self.tx.path_stats());
    }

    /// The connection's loss time and timeout now, for the lanes of the paths without a
    /// sample of their own until the next feedback (`Paths::lane_timing`; a path with one
    /// runs on its own, read at each call).
    fn set_path_timings(&mut self) {
        self.paths.set_unsampled_timing(PathTiming {
            loss_time: self.rtt.loss_time(),
            rto: self.rtt.rto(),
        });
    }

    /// When the earliest up path is declared down if nothing on it is acknowledged. Only in
    /// modes with positive acknowledgements: elsewhere silence says nothing of a path (the
    /// quasi-reliable sender hears nothing on any), and its paths stay up.
    pub(super) fn path_down_deadline(&self) -> Option<Duration> {
        if !self.paths.multi() || self.watch.liveness.silent() || !self.ec.acknowledges() {
            return None;
        }
        (0..self.paths.len())
            .filter_map(|i| {
                self.paths.down_at(
                    i,
                    self.tx.unanswered_since(i),
                    self.cfg.probe_interval,
                    &self.rtt,
                )
            })
            .min()
    }

    /// When the next down path is probed.
    pub(super) fn path_probe_deadline(&self) -> Option<Duration> {
        if !self.paths.multi() || self.watch.liveness.silent() {
            return None;
        }
        self.paths.next_probe()
    }

    /// Declares down the paths whose deadline has come (their TPDUs in flight are resent on
    /// the others) and marks the probes that are due.
    pub(super) fn check_paths(&mut self, now: Duration) {
        if !self.paths.multi() {
            return;
        }
        let mut changed = false;
        for i in (0..self.paths.len()).filter(|_| self.ec.acknowledges()) {
            let at = self.paths.down_at(
                i,
                self.tx.unanswered_since(i),
                self.cfg.probe_interval,
                &self.rtt,
            );
            if at.is_some_and(|d| now >= d) {
                self.paths.set_down(now, i, self.cfg.probe_interval);
                self.tx.path_down(i);
                changed = true;
            }
        }
        if changed {
            self.apply_path_rate();
        }
        self.paths.probes_due(now);
    }

    /// Per-path statistics (one entry per path; one path has one too).
    pub(super) fn path_stats(&self) -> Vec<PathStats> {
        let mut s = self.paths.stats(self.record.clock, &self.tx.path_stats());
        for (i, p) in s.iter_mut().enumerate() {
            p.rate = self.path_rate(i);
        }
        s
    }
}
