//! Two endpoints over a fixed-delay link with a filter that drops chosen datagrams by their
//! header: for tests that decide exactly what is lost (life cycle, confirmed delivery). The
//! test drives it: `transmit`, then `next_event`, then `advance`. It runs on the same driver
//! as `Net` and the simulator (`aerotp_pair::Pair`), over loss-free paths.

use super::{addr_a, addr_b, ideal_link};
use aerotp_link::Path;
use aerotp_pair::{Dir, Links, Observer, Pair, Quiet};
use aerotp_proto::Endpoint;
use aerotp_wire::Header;
use std::time::Duration;

/// Which datagrams the link drops: (now, sent by a?, header) -> drop?
pub type Filter = Box<dyn FnMut(Duration, bool, &Header) -> bool>;

/// Derefs to the `Pair` (`link.a`, `link.b`, `link.now`).
pub struct Link {
    pub pair: Pair,
    pub drop: Filter,
}

impl std::ops::Deref for Link {
    type Target = Pair;
    fn deref(&self) -> &Pair {
        &self.pair
    }
}

impl std::ops::DerefMut for Link {
    fn deref_mut(&mut self) -> &mut Pair {
        &mut self.pair
    }
}

/// Tells `seen` of every datagram, then drops what the filter says.
struct Filtering<'f, S> {
    seen: S,
    drop: &'f mut Filter,
}

impl<S: FnMut(Duration, bool, &Header)> Observer for Filtering<'_, S> {
    fn sent(&mut self, now: Duration, dir: Dir, datagram: &[u8], _: &Endpoint) -> Option<u64> {
        let h = Header::parse(datagram).expect("endpoints send valid headers");
        let from_a = dir == Dir::Forward;
        (self.seen)(now, from_a, &h);
        (!(self.drop)(now, from_a, &h)).then_some(0)
    }
}

impl Link {
    pub fn new(a: Endpoint, b: Endpoint, delay: Duration) -> Link {
        let path = |seed| Path::new(vec![ideal_link(delay)], seed).expect("valid test link");
        Link {
            pair: Pair::new(a, b, Links::single(path(1), path(2)), addr_a(), addr_b()),
            drop: Box::new(|_, _, _| false),
        }
    }

    /// Sends what both endpoints have due now; `seen` is told of every datagram sent
    /// (dropped or not), before the filter.
    pub fn transmit(&mut self, seen: impl FnMut(Duration, bool, &Header)) {
        let mut filtering = Filtering {
            seen,
            drop: &mut self.drop,
        };
        self.pair.transmit(&mut filtering);
    }

    /// The next arrival or deadline of either endpoint.
    pub fn next_event(&self) -> Option<Duration> {
        self.pair.next_event(None)
    }

    /// Moves to `to` (never back): delivers what has arrived by then and lets both endpoints
    /// handle their timeouts.
    pub fn advance(&mut self, to: Duration) {
        self.pair.advance(&mut Quiet, Some(to), to);
    }

    /// Moves to the next event if it comes by `limit` (true); otherwise only the clock moves,
    /// to `limit` (false: the run is over).
    pub fn advance_within(&mut self, limit: Duration) -> bool {
        match self.next_event().filter(|&t| t <= limit) {
            Some(next) => {
                self.advance(next);
                true
            }
            None => {
                self.now = limit;
                false
            }
        }
    }
}
