//! The endpoint's timer table: each connection's deadline, kept instead of asked for.
//!
//! A connection's `poll_timeout` is a function of its state alone, so it changes only when
//! the endpoint touches the connection (a datagram for it, a timeout, a transmit, a call from
//! the application, a new share of the link). The endpoint marks such a connection stale and
//! recomputes its deadline once, before the next question that needs it. Asking every
//! connection for its deadline, its next datagram and its events on each turn of the driver
//! cost O(connections) calls of real work per datagram: a gateway with 1,000 flows spent its
//! core on it (docs/results/gw.md, "Many flows"). What is left per turn is one scan of this
//! compact table (about a nanosecond a connection) and a sort of the due connections of the
//! class that sends (`send_round_robin`: a fair queue by bytes, sparse connections first).
//!
//! Slots are sorted by handle: handles only grow and a connection is appended when created, so
//! the table's order is the order of creation — the round-robin order the endpoint always used,
//! which still breaks the fair queue's ties.

use std::time::Duration;

use crate::connection::Connection;
use crate::table::Table;
use crate::{ConnectionHandle, TrafficClass};

/// A sparse connection's allowance per round before its MTU is known, bytes.
const SPARSE_QUANTUM_DEFAULT: u64 = 600;

#[derive(Debug, Clone, Copy)]
struct Slot {
    h: ConnectionHandle,
    /// `Connection::poll_timeout` as last computed (valid unless `stale`), or, if `early`,
    /// a send slot already due when computed (`Connection::poll_timeout_by`): the
    /// connection's earliest deadline is then at or before it.
    deadline: Option<Duration>,
    early: bool,
    /// Touched since `deadline` was computed.
    stale: bool,
    /// Touched since its events were last collected.
    events: bool,
    /// The connection's class as of its last refresh (a change touches it).
    class: TrafficClass,
    /// Its virtual finish tag in its class's fair queue (`send_round_robin`): the start tag
    /// of its last datagram plus that datagram's bytes.
    finish: u64,
    /// Seen with nothing to send since its last datagram (no application bytes unsent at a
    /// refresh, or asked and sending nothing): a sparse connection, if it has also sent less
    /// than `quantum` bytes this round.
    idle: bool,
    /// Half the connection's MTU, bytes.
    quantum: u64,
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
    /// Per class (`TrafficClass as usize`; the last for all, without classes) the virtual
    /// time of its fair queue: the start tag of the datagram it sent last.
    vtime: [u64; 4],
    /// `send_round_robin`'s candidates (kept for its capacity).
    order: Vec<(bool, u64, u64, usize)>,
    /// The connection that sent the endpoint's last datagram (`None` once a turn found
    /// nothing to send): `sole_sender`.
    last_sent: Option<ConnectionHandle>,
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
            early: false,
            stale: true,
            events: true,
            class: TrafficClass::Bulk,
            finish: 0,
            idle: true,
            quantum: SPARSE_QUANTUM_DEFAULT,
        });
        self.stale.push(h);
        self.with_events.push(h);
    }

    pub(super) fn remove(&mut self, h: ConnectionHandle) {
        if self.last_sent == Some(h) {
            self.last_sent = None;
        }
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

    /// Recomputes the deadlines of the stale slots, as of `now` (a deadline found due by
    /// then may stand for an earlier one: see `Slot::deadline`).
    pub(super) fn refresh(&mut self, conns: &Table<ConnectionHandle, Connection>, now: Duration) {
        // Drained, not taken: the list keeps its capacity (taking it allocated on every
        // touch after, a tenth of the engine's instructions).
        let mut stale = std::mem::take(&mut self.stale);
        for h in stale.drain(..) {
            if let Some(p) = self.pos(h) {
                let s = &mut self.slots[p];
                let c = conns.get(&h);
                (s.deadline, s.early) = c.map_or((None, false), |c| c.poll_timeout_by(now));
                let class = c.map_or(TrafficClass::Bulk, |c| c.config().class);
                if class != s.class {
                    // Its tag counted another class's bytes: it starts at its new class's
                    // virtual time (a gateway's egress accepts every flow as bulk first).
                    s.finish = 0;
                }
                s.class = class;
                s.quantum = c.map_or(SPARSE_QUANTUM_DEFAULT, |c| c.config().mtu as u64 / 2);
                // No application bytes wait to be cut into TPDUs (a backlog of none).
                s.idle |= c.is_none_or(|c| !c.backlog_outlasts(Duration::ZERO));
                s.stale = false;
            }
        }
        self.stale = stale;
    }

    /// The earliest deadline of any connection (a stale one is asked); a deadline found due
    /// at a refresh may stand for an earlier one (`Slot::deadline`).
    pub(super) fn next_deadline(
        &self,
        conns: &Table<ConnectionHandle, Connection>,
    ) -> Option<Duration> {
        // The table's invariant, checked in debug builds (every test): a slot not marked stale
        // holds the connection's deadline as the connection would compute it now.
        #[cfg(debug_assertions)]
        for s in self.slots.iter().filter(|s| !s.stale) {
            let live = conns.get(&s.h).and_then(|c| c.poll_timeout());
            if s.early {
                debug_assert!(
                    live.is_some_and(|l| s.deadline.is_some_and(|d| l <= d)),
                    "{:?} changed without being touched: its deadline {live:?} is not due by {:?}",
                    s.h,
                    s.deadline
                );
            } else {
                debug_assert_eq!(
                    live, s.deadline,
                    "{:?} changed without being touched: its deadline moved",
                    s.h
                );
            }
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

    /// The next connection whose deadline is at or before `now` and that `try_send` says
    /// sent (the bytes it sent). `by_class`: connections of a higher class are asked first
    /// (the link's next datagram goes to the highest class that has one).
    ///
    /// Within a class, a start-time fair queue by bytes with sparse connections first (as
    /// fq_codel serves its new flows first). A connection's start tag is its finish tag (the
    /// start tag of its last datagram plus that datagram's bytes) or the class's virtual time
    /// (the start tag of the class's last datagram), whichever is later. A connection is
    /// sparse if it was seen with nothing to send since its last datagram (its queue emptied,
    /// as fq_codel's new flows) and has sent less than half its MTU beyond the virtual time
    /// (in the current round); the sparse ones go
    /// first, then the least start tag, the least finish tag, and round robin from where the
    /// last send left off. Connections that always have a full datagram due are served round
    /// robin as before; one that sends a small datagram now and then — an interactive flow
    /// beside fifty uploads of its class — is served next instead of after a round of them
    /// (docs/results/gw.md, "Where a sparse flow in a busy class waited"). A connection
    /// cannot take more than half an MTU a round ahead of its turn that way, nor bank turns:
    /// idle, its tag falls behind the class's virtual time and starts from that time again.
    ///
    /// Every connection asked is touched: one that sends nothing may still have changed
    /// (feedback found not due any more, a report timer cleared). Call `refresh` first.
    pub(super) fn send_round_robin(
        &mut self,
        now: Duration,
        by_class: bool,
        mut try_send: impl FnMut(ConnectionHandle) -> Option<usize>,
    ) -> Option<ConnectionHandle> {
        debug_assert!(self.stale.is_empty());
        // One pass per class, highest first (`TrafficClass::ALL`'s order), or one for all.
        let all = TrafficClass::ALL.map(Some);
        let classes: &[Option<TrafficClass>] = if by_class { &all } else { &[None] };
        let n = self.slots.len();
        let mut order = std::mem::take(&mut self.order);
        let mut found = None;
        'classes: for &class in classes {
            let q = class.map_or(3, |c| c as usize);
            let vtime = self.vtime[q];
            order.clear();
            for i in 0..n {
                let idx = (self.rr + i) % n;
                let s = &mut self.slots[idx];
                if class.is_some_and(|c| c != s.class) {
                    continue;
                }
                if s.deadline.is_none_or(|d| d > now) {
                    continue;
                }
                let sparse = s.idle && s.finish.saturating_sub(vtime) < s.quantum;
                order.push((!sparse, s.finish.max(vtime), s.finish, i));
            }
            order.sort_unstable();
            for &(_, start, _, i) in order.iter() {
                let idx = (self.rr + i) % n;
                let h = self.slots[idx].h;
                let sent = try_send(h);
                self.touch(h);
                match sent {
                    Some(len) => {
                        self.charge(idx, q, start, len);
                        found = Some(h);
                        break 'classes;
                    }
                    None => self.slots[idx].idle = true,
                }
            }
        }
        self.order = order;
        self.last_sent = found;
        found
    }

    /// The table's only connection, if it sent the endpoint's last datagram: the one
    /// `send_round_robin` without classes would ask, and none other.
    pub(super) fn sole_sender(&self) -> Option<ConnectionHandle> {
        match self.slots.as_slice() {
            [s] if self.last_sent == Some(s.h) => Some(s.h),
            _ => None,
        }
    }

    /// A datagram of `len` bytes that `sole_sender` sent when asked directly: the fair
    /// queue's bookkeeping as `send_round_robin` without classes does it, and a touch.
    pub(super) fn sent_alone(&mut self, h: ConnectionHandle, len: usize) {
        debug_assert_eq!(self.sole_sender(), Some(h));
        // Without classes, the one queue for all (`send_round_robin`).
        let q = 3;
        let start = self.slots[0].finish.max(self.vtime[q]);
        self.charge(0, q, start, len);
        self.touch(h);
    }

    /// Slot `idx` sent a datagram of `len` bytes with start tag `start` in queue `q`: its
    /// finish tag, the queue's virtual time, and the round robin's next start.
    fn charge(&mut self, idx: usize, q: usize, start: u64, len: usize) {
        let s = &mut self.slots[idx];
        s.finish = start + len as u64;
        s.idle = false;
        self.vtime[q] = start;
        self.rr = (idx + 1) % self.slots.len();
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
