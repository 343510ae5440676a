//! One virtual-time driver for two AeroTP endpoints over `aerotp-link` paths. The simulator
//! and the engine's integration tests both run on it, so a link condition means the same in
//! a test as in a figure, and the engine's deadline contract is checked in one place.
//!
//! A turn of the caller's loop: the applications act on `pair.a` and `pair.b` (write, read,
//! close), then [`Pair::transmit`] sends what both endpoints have due now, then
//! [`Pair::advance`] jumps virtual time to the next event — an arrival, either endpoint's
//! deadline, or a time the caller wakes for — delivers what has arrived and runs both
//! endpoints' timers. An [`Observer`] sees every datagram sent and arriving (taps, counters,
//! a test's loss filter).

mod dumbbell;
mod links;

pub use aerotp_link::Delivery;
pub use dumbbell::{Dumbbell, Flow};
pub use links::Links;

use aerotp_proto::{Endpoint, PathAddr};
use std::net::SocketAddr;
use std::time::Duration;

/// The direction of a datagram: `Forward` from `a` to `b`, `Reverse` from `b` to `a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Forward,
    Reverse,
}

/// What the caller learns of each datagram, and decides.
pub trait Observer {
    /// `sender` (`a` for `Forward`, `b` for `Reverse`) sent `datagram` at `now`. Returns the
    /// tag it travels with (given back in its [`Delivery`]), or `None` to drop it before the
    /// link (a test that chooses what is lost).
    fn sent(&mut self, now: Duration, dir: Dir, datagram: &[u8], sender: &Endpoint) -> Option<u64> {
        let _ = (now, dir, datagram, sender);
        Some(0)
    }

    /// `d` arrived at `now`, about to be handed to the receiving endpoint.
    fn arrived(&mut self, now: Duration, dir: Dir, d: &Delivery) {
        let _ = (now, dir, d);
    }

    /// Both endpoints handled what arrived by `now` and their timers.
    fn stepped(&mut self, now: Duration, a: &Endpoint, b: &Endpoint) {
        let _ = (now, a, b);
    }
}

/// An observer that sees nothing and drops nothing.
#[derive(Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// What [`Pair::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Time moved (or stayed, with work due) to the next event; arrivals and timers ran.
    Moved,
    /// Nothing will ever happen again: no arrival pending, no deadline, nothing to wake for.
    Idle,
    /// The next event lies beyond the cap: time stopped at the cap.
    Capped,
}

/// Steps in a row that may leave time where it was. An engine that keeps reporting a deadline
/// that has passed without acting on it breaks its contract (`Endpoint::poll_timeout`,
/// crates/proto/tests/deadlines.rs) and would spin a real runtime at 100 % CPU; a few in a row
/// are legitimate (several events at one instant).
pub const STALL_LIMIT: u32 = 10_000;

/// Jumps `now` to `next` (never back, never past `cap`) for an `advance`: `Some` when there is
/// nothing to run (no event: `Idle`; beyond the cap: `Capped`, time stopped at the cap).
/// Counts the turns in a row that leave time where it was.
///
/// # Panics
/// At [`STALL_LIMIT`] such turns, naming what `stuck` says (the engines' deadlines).
fn move_time(
    now: &mut Duration,
    stalled: &mut u32,
    next: Option<Duration>,
    cap: Duration,
    stuck: impl FnOnce() -> String,
) -> Option<Advance> {
    let Some(next) = next else {
        return Some(Advance::Idle);
    };
    if next > cap {
        *now = (*now).max(cap);
        return Some(Advance::Capped);
    }
    if next <= *now {
        *stalled += 1;
        assert!(
            *stalled < STALL_LIMIT,
            "engine livelock at {now:?}: {STALL_LIMIT} turns without time moving; {}",
            stuck()
        );
    } else {
        *stalled = 0;
        *now = next;
    }
    None
}

/// Two endpoints, the links between them and virtual time.
#[derive(Debug)]
pub struct Pair {
    pub a: Endpoint,
    pub b: Endpoint,
    pub now: Duration,
    pub links: Links,
    /// The addresses each endpoint sees the other's datagrams come from.
    pub addr_a: SocketAddr,
    pub addr_b: SocketAddr,
    /// Datagrams sent to an address that is not the peer's (`addr_b` for `a`, `addr_a` for
    /// `b`) are lost, as after the peer moved; off by default (every datagram reaches the
    /// peer whatever its address says). For migration tests: change `addr_a` or `addr_b`.
    pub drop_misaddressed: bool,
    /// Datagrams lost that way.
    pub misaddressed: u64,
    /// The engine chooses the path (`set_paths`): path `i` joins `a`'s address `.0` and
    /// `b`'s address `.1`. Empty: datagrams are striped below the engine (`Links::send`).
    paths: Vec<(SocketAddr, SocketAddr)>,
    /// Each endpoint is told the local address a datagram arrived at, and a datagram the
    /// engine sends from a local address goes on the path of both addresses
    /// (`tell_local_addresses`).
    locals: bool,
    stalled: u32,
    buf: Vec<u8>,
}

impl Pair {
    pub fn new(
        a: Endpoint,
        b: Endpoint,
        links: Links,
        addr_a: SocketAddr,
        addr_b: SocketAddr,
    ) -> Pair {
        Pair {
            a,
            b,
            now: Duration::ZERO,
            links,
            addr_a,
            addr_b,
            drop_misaddressed: false,
            misaddressed: 0,
            paths: Vec::new(),
            locals: false,
            stalled: 0,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    /// Lets the engine choose the path: a datagram sent to `b`'s address of path `i` goes on
    /// the `i`th path each way, and arrives from the other end's address of that path. One
    /// pair of addresses per path of `links`; the first is (`addr_a`, `addr_b`). A datagram
    /// to an address that is no path's is lost (counted in `misaddressed`).
    ///
    /// # Panics
    /// If the number of address pairs is not the number of paths each way.
    pub fn set_paths(&mut self, paths: Vec<(SocketAddr, SocketAddr)>) {
        assert!(
            paths.len() == self.links.paths(Dir::Forward).len()
                && paths.len() == self.links.paths(Dir::Reverse).len(),
            "one address pair per path"
        );
        if let Some(&(a, b)) = paths.first() {
            self.addr_a = a;
            self.addr_b = b;
        }
        self.paths = paths;
    }

    /// Hands each endpoint the local address every datagram arrived at (a path is then both
    /// of its addresses, as a runtime that reads the destination address tells the
    /// engine), and routes a datagram the engine sends from a local address on the path of
    /// both its addresses. So two paths may share one end's address: `a`'s two radios
    /// reaching one address of `b`. Needs `set_paths`; connections must then be opened and
    /// paths added with `PathAddr`s that name the local address.
    pub fn tell_local_addresses(&mut self) {
        self.locals = true;
    }

    /// The path a datagram to `remote` (from `local`, if the engine says) goes on, when the
    /// engine chooses.
    fn path_to(
        paths: &[(SocketAddr, SocketAddr)],
        dir: Dir,
        remote: SocketAddr,
        local: Option<std::net::IpAddr>,
    ) -> Option<usize> {
        paths.iter().position(|&(a, b)| {
            let (from, to) = match dir {
                Dir::Forward => (a, b),
                Dir::Reverse => (b, a),
            };
            to == remote && local.is_none_or(|l| l == from.ip())
        })
    }

    /// What the receiving endpoint is told a datagram of path `i` came on.
    fn arrival(&self, dir: Dir, i: usize) -> PathAddr {
        let (from, at) = match (self.paths.get(i), dir) {
            (Some(p), Dir::Forward) => (p.0, p.1),
            (Some(p), Dir::Reverse) => (p.1, p.0),
            (None, Dir::Forward) => (self.addr_a, self.addr_b),
            (None, Dir::Reverse) => (self.addr_b, self.addr_a),
        };
        PathAddr::new(self.locals.then(|| at.ip()), from)
    }

    /// Sends everything both endpoints have due now, `a` first.
    pub fn transmit(&mut self, obs: &mut impl Observer) {
        for dir in [Dir::Forward, Dir::Reverse] {
            loop {
                let sender = match dir {
                    Dir::Forward => &mut self.a,
                    Dir::Reverse => &mut self.b,
                };
                self.buf.clear();
                let Some(t) = sender.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                let peer = match dir {
                    Dir::Forward => self.addr_b,
                    Dir::Reverse => self.addr_a,
                };
                let path = if self.paths.is_empty() {
                    if self.drop_misaddressed && t.remote != peer {
                        self.misaddressed += 1;
                        continue;
                    }
                    None
                } else {
                    let Some(i) = Self::path_to(&self.paths, dir, t.remote, t.local) else {
                        self.misaddressed += 1;
                        continue;
                    };
                    Some(i)
                };
                let sender: &Endpoint = sender;
                if let Some(tag) = obs.sent(self.now, dir, &self.buf, sender) {
                    let packet = self.buf.clone();
                    match path {
                        Some(i) => self.links.send_on(dir, i, self.now, packet, tag),
                        None => self.links.send(dir, self.now, packet, tag),
                    }
                }
            }
        }
    }

    /// The next time something happens: an arrival, either endpoint's deadline, or `wake`
    /// (the caller's own next event, e.g. an application releasing a message).
    pub fn next_event(&self, wake: Option<Duration>) -> Option<Duration> {
        [
            self.links.next_arrival(),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            wake,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Jumps to the next event (`next_event(wake)`, never back, never past `cap`), hands both
    /// endpoints what has arrived by then and runs their timers.
    ///
    /// # Panics
    /// When [`STALL_LIMIT`] turns in a row leave time where it was: the engines keep asking
    /// to be woken at a time that has passed without doing anything — an engine bug, named
    /// with both endpoints' deadlines.
    pub fn advance(
        &mut self,
        obs: &mut impl Observer,
        wake: Option<Duration>,
        cap: Duration,
    ) -> Advance {
        let next = self.next_event(wake);
        let (a, b, links) = (&self.a, &self.b, &self.links);
        if let Some(stop) = move_time(&mut self.now, &mut self.stalled, next, cap, || {
            format!(
                "a's deadline {:?}, b's {:?}, next arrival {:?}",
                a.poll_timeout(),
                b.poll_timeout(),
                links.next_arrival()
            )
        }) {
            return stop;
        }
        let now = self.now;
        while let Some((i, d)) = self.links.recv_indexed(Dir::Forward, now) {
            obs.arrived(now, Dir::Forward, &d);
            let from = self.arrival(Dir::Forward, i);
            self.b.handle_datagram(now, from, &d.packet);
        }
        while let Some((i, d)) = self.links.recv_indexed(Dir::Reverse, now) {
            obs.arrived(now, Dir::Reverse, &d);
            let from = self.arrival(Dir::Reverse, i);
            self.a.handle_datagram(now, from, &d.packet);
        }
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        obs.stepped(now, &self.a, &self.b);
        Advance::Moved
    }

    /// `transmit`, then `advance`.
    pub fn step(
        &mut self,
        obs: &mut impl Observer,
        wake: Option<Duration>,
        cap: Duration,
    ) -> Advance {
        self.transmit(obs);
        self.advance(obs, wake, cap)
    }
}
