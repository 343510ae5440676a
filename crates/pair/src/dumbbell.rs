//! N sender–receiver pairs of endpoints over one shared bottleneck (a dumbbell), in virtual
//! time: each pair's forward datagrams share the bottleneck's queue and rate, and each pair
//! has a reverse path of its own (uncongested; its delay sets the pair's round trip), so
//! fairness between AeroTP connections of different endpoints is a deterministic figure.
//!
//! A turn, as for [`crate::Pair`]: the applications act on `flows[i].a` and `flows[i].b`,
//! then [`Dumbbell::transmit`], then [`Dumbbell::advance`].

use aerotp_link::Path;
use aerotp_proto::Endpoint;
use std::net::SocketAddr;
use std::time::Duration;

use crate::Advance;

/// One pair: its sender `a`, its receiver `b`, their addresses and `b`'s path back to `a`.
#[derive(Debug)]
pub struct Flow {
    pub a: Endpoint,
    pub b: Endpoint,
    pub addr_a: SocketAddr,
    pub addr_b: SocketAddr,
    reverse: Path,
}

/// The pairs, the shared bottleneck and virtual time.
#[derive(Debug)]
pub struct Dumbbell {
    pub flows: Vec<Flow>,
    /// Every pair's forward datagrams, tagged with the pair's index.
    pub bottleneck: Path,
    pub now: Duration,
    stalled: u32,
    buf: Vec<u8>,
}

impl Dumbbell {
    /// An empty dumbbell over `bottleneck`.
    pub fn new(bottleneck: Path) -> Dumbbell {
        Dumbbell {
            flows: Vec::new(),
            bottleneck,
            now: Duration::ZERO,
            stalled: 0,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    /// Adds a pair: sender `a` at `addr_a`, receiver `b` at `addr_b`, and `b`'s path back.
    /// Returns its index.
    pub fn add(
        &mut self,
        a: Endpoint,
        b: Endpoint,
        addr_a: SocketAddr,
        addr_b: SocketAddr,
        reverse: Path,
    ) -> usize {
        self.flows.push(Flow {
            a,
            b,
            addr_a,
            addr_b,
            reverse,
        });
        self.flows.len() - 1
    }

    /// Sends what every endpoint has due now: senders into the bottleneck, receivers on
    /// their own paths back.
    pub fn transmit(&mut self) {
        for (i, f) in self.flows.iter_mut().enumerate() {
            loop {
                self.buf.clear();
                if f.a.poll_transmit(self.now, &mut self.buf).is_none() {
                    break;
                }
                self.bottleneck
                    .send_tagged(self.now, self.buf.clone(), i as u64);
            }
            loop {
                self.buf.clear();
                if f.b.poll_transmit(self.now, &mut self.buf).is_none() {
                    break;
                }
                f.reverse.send(self.now, self.buf.clone());
            }
        }
    }

    /// The next time something happens: an arrival, an endpoint's deadline, or `wake`.
    pub fn next_event(&self, wake: Option<Duration>) -> Option<Duration> {
        let flows = self.flows.iter().flat_map(|f| {
            [
                f.reverse.next_arrival(),
                f.a.poll_timeout(),
                f.b.poll_timeout(),
            ]
        });
        flows
            .chain([self.bottleneck.next_arrival(), wake])
            .flatten()
            .min()
    }

    /// Jumps to the next event (never back, never past `cap`), hands every endpoint what has
    /// arrived by then and runs the timers.
    ///
    /// # Panics
    /// When [`STALL_LIMIT`] turns in a row leave time where it was (an engine that reports a
    /// deadline it does not act on).
    pub fn advance(&mut self, wake: Option<Duration>, cap: Duration) -> Advance {
        let next = self.next_event(wake);
        let flows = &self.flows;
        if let Some(stop) = crate::move_time(&mut self.now, &mut self.stalled, next, cap, || {
            let deadlines: Vec<_> = flows
                .iter()
                .map(|f| (f.a.poll_timeout(), f.b.poll_timeout()))
                .collect();
            format!("the pairs' deadlines {deadlines:?}")
        }) {
            return stop;
        }
        let now = self.now;
        while let Some(d) = self.bottleneck.recv_delivery(now) {
            if let Some(f) = usize::try_from(d.tag)
                .ok()
                .and_then(|i| self.flows.get_mut(i))
            {
                f.b.handle_datagram(now, f.addr_a, &d.packet);
            }
        }
        for f in &mut self.flows {
            while let Some(p) = f.reverse.recv(now) {
                f.a.handle_datagram(now, f.addr_b, &p);
            }
            f.a.handle_timeout(now);
            f.b.handle_timeout(now);
        }
        Advance::Moved
    }
}
