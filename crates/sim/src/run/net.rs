//! The network between the two endpoints: one forward and one reverse `Path` per path of the
//! scenario, and the weighted round robin that spreads datagrams over the paths.

use std::time::Duration;

use aerotp_link::{mix_seed, Delivery, Path};

use crate::scenario::Scenario;

/// Smooth weighted round robin (as nginx and Linux teql spread packets): each pick adds every
/// path's weight to its credit, takes the path with the most credit and charges it the total.
/// Over any window the picks follow the weights as closely as whole packets allow.
#[derive(Debug)]
struct RoundRobin {
    weights: Vec<i128>,
    credit: Vec<i128>,
}

impl RoundRobin {
    fn new(weights: impl Iterator<Item = u64>) -> RoundRobin {
        let weights: Vec<i128> = weights.map(i128::from).collect();
        RoundRobin {
            credit: vec![0; weights.len()],
            weights,
        }
    }

    fn pick(&mut self) -> usize {
        if self.weights.len() == 1 {
            return 0;
        }
        let total: i128 = self.weights.iter().sum();
        let mut best = 0;
        for i in 0..self.weights.len() {
            self.credit[i] += self.weights[i];
            if self.credit[i] > self.credit[best] {
                best = i;
            }
        }
        self.credit[best] -= total;
        best
    }
}

/// The network: per path a forward and a reverse `Path` (the papers' LAN hops around the
/// path's impaired link, or the link alone). The engine has no multipath scheduler yet, so
/// the driver spreads the sender's datagrams over the paths in proportion to their forward
/// rates and the receiver's over the reverse links in proportion to the reverse rates.
pub(super) struct Net {
    fwd: Vec<Path>,
    rev: Vec<Path>,
    fwd_rr: RoundRobin,
    rev_rr: RoundRobin,
}

/// Seed streams of path `i`: path 0 keeps the streams of the single-link simulator (1, 2) so
/// its results are unchanged; the others take their own. The path-level random outage's
/// schedule seed is shared by both directions of the path.
fn path_seeds(seed: u64, i: usize) -> (u64, u64, u64) {
    let i = i as u64;
    let (f, r) = if i == 0 {
        (1, 2)
    } else {
        (100 + 2 * i, 101 + 2 * i)
    };
    (mix_seed(seed, f), mix_seed(seed, r), mix_seed(seed, 50 + i))
}

impl Net {
    pub(super) fn new(s: &Scenario, seed: u64) -> Net {
        let (mut fwd, mut rev) = (Vec::new(), Vec::new());
        for i in 0..s.network.paths.len() {
            let (fs, rs, os) = path_seeds(seed, i);
            fwd.push(Path::new(s.hops(i, true, os), fs).expect("validated scenario"));
            rev.push(Path::new(s.hops(i, false, os), rs).expect("validated scenario"));
        }
        let paths = &s.network.paths;
        Net {
            fwd_rr: RoundRobin::new(paths.iter().map(|p| p.forward.rate_bps)),
            rev_rr: RoundRobin::new(paths.iter().map(|p| p.reverse_config(0).rate_bps)),
            fwd,
            rev,
        }
    }

    pub(super) fn send_fwd(&mut self, now: Duration, packet: Vec<u8>, tag: u64) {
        let i = self.fwd_rr.pick();
        self.fwd[i].send_tagged(now, packet, tag);
    }

    pub(super) fn send_rev(&mut self, now: Duration, packet: Vec<u8>) {
        let i = self.rev_rr.pick();
        self.rev[i].send(now, packet);
    }

    pub(super) fn recv_fwd(&mut self, now: Duration) -> Option<Delivery> {
        self.fwd.iter_mut().find_map(|p| p.recv_delivery(now))
    }

    pub(super) fn recv_rev(&mut self, now: Duration) -> Option<Delivery> {
        self.rev.iter_mut().find_map(|p| p.recv_delivery(now))
    }

    pub(super) fn next_arrival(&self) -> Option<Duration> {
        self.fwd
            .iter()
            .chain(&self.rev)
            .filter_map(Path::next_arrival)
            .min()
    }
}
