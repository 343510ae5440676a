//! The network between two endpoints: one forward and one reverse `aerotp_link::Path` per
//! path, and the weighted round robin that spreads datagrams over the paths.

use aerotp_link::{Delivery, Path};
use std::time::Duration;

use crate::Dir;

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

/// The paths each way. A datagram goes on the path the engine chose (`send_on`, by the
/// address it is sent to: [`crate::Pair::set_paths`]), or, below an engine that has one
/// path, spread over the paths in proportion to their weights as Linux `teql` stripes a
/// link (`send`; the simulator gives the forward rates one way and the reverse rates the
/// other).
#[derive(Debug)]
pub struct Links {
    fwd: Vec<Path>,
    rev: Vec<Path>,
    fwd_rr: RoundRobin,
    rev_rr: RoundRobin,
}

impl Links {
    /// Paths with their round-robin weights, forward (a → b) and reverse. Each side needs at
    /// least one path.
    pub fn new(fwd: Vec<(Path, u64)>, rev: Vec<(Path, u64)>) -> Links {
        assert!(
            !fwd.is_empty() && !rev.is_empty(),
            "a pair needs at least one path each way"
        );
        let (fwd, fw): (Vec<Path>, Vec<u64>) = fwd.into_iter().unzip();
        let (rev, rw): (Vec<Path>, Vec<u64>) = rev.into_iter().unzip();
        Links {
            fwd_rr: RoundRobin::new(fw.into_iter()),
            rev_rr: RoundRobin::new(rw.into_iter()),
            fwd,
            rev,
        }
    }

    /// One path each way.
    pub fn single(fwd: Path, rev: Path) -> Links {
        Links::new(vec![(fwd, 1)], vec![(rev, 1)])
    }

    /// Offers `packet` to the next path of `dir`, tagged (the tag comes back in its
    /// `Delivery`).
    pub fn send(&mut self, dir: Dir, now: Duration, packet: Vec<u8>, tag: u64) {
        match dir {
            Dir::Forward => {
                let i = self.fwd_rr.pick();
                self.fwd[i].send_tagged(now, packet, tag);
            }
            Dir::Reverse => {
                let i = self.rev_rr.pick();
                self.rev[i].send_tagged(now, packet, tag);
            }
        }
    }

    /// Offers `packet` to path `i` of `dir` (the last path if there is no `i`).
    pub fn send_on(&mut self, dir: Dir, i: usize, now: Duration, packet: Vec<u8>, tag: u64) {
        let paths = self.paths_mut(dir);
        let i = i.min(paths.len() - 1);
        paths[i].send_tagged(now, packet, tag);
    }

    /// A datagram of `dir` that has arrived by `now`, if any.
    pub fn recv(&mut self, dir: Dir, now: Duration) -> Option<Delivery> {
        self.recv_indexed(dir, now).map(|(_, d)| d)
    }

    /// A datagram of `dir` that has arrived by `now`, with the index of its path.
    pub fn recv_indexed(&mut self, dir: Dir, now: Duration) -> Option<(usize, Delivery)> {
        self.paths_mut(dir)
            .iter_mut()
            .enumerate()
            .find_map(|(i, p)| p.recv_delivery(now).map(|d| (i, d)))
    }

    /// The earliest arrival pending either way.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.fwd
            .iter()
            .chain(&self.rev)
            .filter_map(Path::next_arrival)
            .min()
    }

    /// Whether every path of `dir` is up at `now` (no outage).
    pub fn is_up(&self, dir: Dir, now: Duration) -> bool {
        self.paths(dir).iter().all(|p| p.is_up(now))
    }

    pub fn paths(&self, dir: Dir) -> &[Path] {
        match dir {
            Dir::Forward => &self.fwd,
            Dir::Reverse => &self.rev,
        }
    }

    fn paths_mut(&mut self, dir: Dir) -> &mut [Path] {
        match dir {
            Dir::Forward => &mut self.fwd,
            Dir::Reverse => &mut self.rev,
        }
    }
}
