//! Two endpoints over a fixed-delay link with a filter that drops chosen datagrams by their
//! header: for tests that decide exactly what is lost (life cycle, confirmed delivery). The
//! test drives it: `transmit`, then `next_event`, then `advance`.

use super::{addr_a, addr_b};
use aerotp_proto::Endpoint;
use aerotp_wire::Header;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which datagrams the link drops: (now, sent by a?, header) -> drop?
pub type Filter = Box<dyn FnMut(Duration, bool, &Header) -> bool>;

pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    pub now: Duration,
    pub delay: Duration,
    /// Arrival time, counter -> (to b?, bytes).
    queue: BTreeMap<(Duration, u64), (bool, Vec<u8>)>,
    n: u64,
    pub drop: Filter,
}

impl Link {
    pub fn new(a: Endpoint, b: Endpoint, delay: Duration) -> Link {
        Link {
            a,
            b,
            now: Duration::ZERO,
            delay,
            queue: BTreeMap::new(),
            n: 0,
            drop: Box::new(|_, _, _| false),
        }
    }

    /// Sends what both endpoints have due now; `seen` is told of every datagram sent
    /// (dropped or not), before the filter.
    pub fn transmit(&mut self, mut seen: impl FnMut(Duration, bool, &Header)) {
        let mut buf = Vec::new();
        for from_a in [true, false] {
            loop {
                let ep = if from_a { &mut self.a } else { &mut self.b };
                if ep.poll_transmit(self.now, &mut buf).is_none() {
                    break;
                }
                let h = Header::parse(&buf).expect("endpoints send valid headers");
                seen(self.now, from_a, &h);
                if !(self.drop)(self.now, from_a, &h) {
                    self.n += 1;
                    self.queue
                        .insert((self.now + self.delay, self.n), (from_a, buf.clone()));
                }
            }
        }
    }

    /// The next arrival or deadline of either endpoint.
    pub fn next_event(&self) -> Option<Duration> {
        [
            self.queue.keys().next().map(|k| k.0),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Moves to `to` (never back): delivers what has arrived by then and lets both endpoints
    /// handle their timeouts.
    pub fn advance(&mut self, to: Duration) {
        self.now = self.now.max(to);
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let (to_b, d) = entry.remove();
            if to_b {
                self.b.handle_datagram(self.now, addr_a(), &d);
            } else {
                self.a.handle_datagram(self.now, addr_b(), &d);
            }
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }
}
