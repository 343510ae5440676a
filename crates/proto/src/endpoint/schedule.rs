//! The endpoint's timer table: each connection's deadline, kept instead of asked for.
//!
//! A connection's `poll_timeout` is a function of its state alone, so it changes only when
//! the endpoint touches the connection (a datagram for it, a timeout, a transmit, a call from
//! the application, a new share of the link). The endpoint marks such a connection stale and
//! recomputes its deadline once, before the next question that needs it. Asking every
//! connection for its deadline, its next datagram and its events on each turn of the driver
//! cost O(connections) calls of real work per datagram: a gateway with 1,000 flows spent its
//! core on it (docs/results/gw.md, "Many flows"). What is left per turn is one scan of this
//! compact table (about a nanosecond a connection), the round-robin order of `poll_transmit`
//! unchanged.
//!
//! Slots are sorted by handle: handles only grow and a connection is appended when created, so
//! the table's order is the order of creation — the round-robin order the endpoint always used.

use std::time::Duration;

use crate::connection::Connection;
use crate::table::Table;
use crate::{ConnectionHandle, TrafficClass};

#[derive(Debug, Clone, Copy)]
struct Slot {
    h: ConnectionHandle,
    /// `Connection::poll_timeout` as last computed (valid unless `stale`).
    deadline: Option<Duration>,
    /// Touched since `deadline` was computed.
    stale: bool,
    /// Touched since its events were last collected.
    events: bool,
    /// The connection's class as of its last refresh (a change touches it).
    class: TrafficClass,
}

#[derive(Debug, Default)]
pub(super) struct Schedule {
    slots: Vec<Slot>,
    /// Handles of the stale slots (each once).
    stale: Vec<ConnectionHandle>,
    /// Handles of the slots that may have events (each once).
    with_events: Vec<ConnectionHandle>,
    /// Where the next round-robin scan of `poll_transmit` starts.
    rr: usize,
}

impl Schedule {
    fn pos(&self, h: ConnectionHandle) -> Option<usize> {
        self.slots.binary_search_by_key(&h.0, |s| s.h.0).ok()
    }

    /// A new connection, its handle larger than any before.
    pub(super) fn add(&mut self, h: ConnectionHandle) {
        debug_assert!(self.slots.last().is_none_or(|s| s.h.0 < h.0));
        self.slots.push(Slot {
            h,
            deadline: None,
            stale: true,
            events: true,
            class: TrafficClass::Bulk,
        });
        self.stale.push(h);
        self.with_events.push(h);
    }

    pub(super) fn remove(&mut self, h: ConnectionHandle) {
        let Some(p) = self.pos(h) else { return };
        let s = self.slots.remove(p);
        if s.stale {
            self.stale.retain(|x| *x != h);
        }
        if s.events {
            self.with_events.retain(|x| *x != h);
        }
        if p < self.rr {
            self.rr -= 1;
        }
        if self.rr >= self.slots.len() {
            self.rr = 0;
        }
    }

    /// The connection's state may have changed: its deadline and events are to be looked at.
    pub(super) fn touch(&mut self, h: ConnectionHandle) {
        let Some(p) = self.pos(h) else { return };
        let s = &mut self.slots[p];
        if !s.stale {
            s.stale = true;
            self.stale.push(h);
        }
        if !s.events {
            s.events = true;
            self.with_events.push(h);
        }
    }

    /// Recomputes the deadlines of the stale slots.
    pub(super) fn refresh(&mut self, conns: &Table<ConnectionHandle, Connection>) {
        // Drained, not taken: the list keeps its capacity (taking it allocated on every
        // touch after, a tenth of the engine's instructions).
        let mut stale = std::mem::take(&mut self.stale);
        for h in stale.drain(..) {
            if let Some(p) = self.pos(h) {
                let s = &mut self.slots[p];
                let c = conns.get(&h);
                s.deadline = c.and_then(|c| c.poll_timeout());
                s.class = c.map_or(TrafficClass::Bulk, |c| c.config().class);
                s.stale = false;
            }
        }
        self.stale = stale;
    }

    /// The earliest deadline of any connection (a stale one is asked).
    pub(super) fn next_deadline(
        &self,
        conns: &Table<ConnectionHandle, Connection>,
    ) -> Option<Duration> {
        // The table's invariant, checked in debug builds (every test): a slot not marked stale
        // holds the connection's deadline as the connection would compute it now.
        #[cfg(debug_assertions)]
        for s in self.slots.iter().filter(|s| !s.stale) {
            let live = conns.get(&s.h).and_then(|c| c.poll_timeout());
            debug_assert_eq!(
                live, s.deadline,
                "{:?} changed without being touched: its deadline moved",
                s.h
            );
        }
        let fresh = self
            .slots
            .iter()
            .filter(|s| !s.stale)
            .filter_map(|s| s.deadline)
            .min();
        let stale = self
            .stale
            .iter()
            .filter_map(|h| conns.get(h).and_then(|c| c.poll_timeout()))
            .min();
        fresh.into_iter().chain(stale).min()
    }

    /// Puts in `out` (cleared first) the connections whose deadline is at or before `now`
    /// (call `refresh` first), in order.
    pub(super) fn due(&self, now: Duration, out: &mut Vec<ConnectionHandle>) {
        debug_assert!(self.stale.is_empty());
        out.clear();
        out.extend(
            self.slots
                .iter()
                .filter(|s| s.deadline.is_some_and(|d| d <= now))
                .map(|s| s.h),
        );
    }

    /// The next connection, round robin from where the last send left off, whose deadline is
    /// at or before `now` and that `try_send` says sent; the next scan starts after it.
    /// `by_class`: connections of a higher class are asked first (the link's next datagram
    /// goes to the highest class that has one). Every connection asked is touched: one that
    /// sends nothing may still have changed (feedback found not due any more, a report timer
    /// cleared). Call `refresh` first.
    pub(super) fn send_round_robin(
        &mut self,
        now: Duration,
        by_class: bool,
        mut try_send: impl FnMut(ConnectionHandle) -> bool,
    ) -> Option<ConnectionHandle> {
        debug_assert!(self.stale.is_empty());
        // One pass per class, highest first (`TrafficClass::ALL`'s order), or one for all.
        let all = TrafficClass::ALL.map(Some);
        let classes: &[Option<TrafficClass>] = if by_class { &all } else { &[None] };
        let n = self.slots.len();
        for (class, i) in classes.iter().flat_map(|&c| (0..n).map(move |i| (c, i))) {
            let idx = (self.rr + i) % n;
            let s = self.slots[idx];
            if s.deadline.is_none_or(|d| d > now) || class.is_some_and(|c| c != s.class) {
                continue;
            }
            let sent = try_send(s.h);
            self.touch(s.h);
            if sent {
                self.rr = (idx + 1) % n;
                return Some(s.h);
            }
        }
        None
    }

    /// Puts in `out` (its contents replaced) the connections touched since their events were
    /// last taken, in handle order (the order events were always collected in). The two
    /// lists trade buffers, so neither allocates once grown.
    pub(super) fn take_with_events(&mut self, out: &mut Vec<ConnectionHandle>) {
        out.clear();
        std::mem::swap(out, &mut self.with_events);
        out.sort_unstable_by_key(|h| h.0);
        for h in out.iter() {
            if let Some(p) = self.pos(*h) {
                self.slots[p].events = false;
            }
        }
    }
}
