//! A flow's custody range and the gateway's budget it is charged to. The range (`base..end`
//! held, `fin`) is held once, in the flow's state (`super::FlowState`, under its lock), and
//! moves only through [`Range`]'s methods, each of which charges or releases the [`Budget`] in
//! the same step: no caller moves the range and the budget one after the other. Only the flow
//! (`super`) calls them, after the store (`crate::store::Custody`, whose own offsets address
//! its bytes) took the bytes, the EOF or the trim.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// Bytes held in custody across all flows of a gateway (the store's bound).
#[derive(Debug)]
pub struct Budget {
    pub capacity: u64,
    pub held: AtomicU64,
    pub changed: watch::Sender<u64>,
}

impl Budget {
    pub fn new(capacity: u64) -> Arc<Budget> {
        Arc::new(Budget {
            capacity,
            held: AtomicU64::new(0),
            changed: watch::channel(0).0,
        })
    }
    pub fn free(&self) -> u64 {
        self.capacity
            .saturating_sub(self.held.load(Ordering::Relaxed))
    }
    fn charge(&self, n: u64) {
        self.held.fetch_add(n, Ordering::Relaxed);
    }
    fn release(&self, n: u64) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::Relaxed);
            self.changed.send_modify(|v| *v += 1);
        }
    }
}

/// What a flow holds in custody: the bytes read from our TCP side from `base` (confirmed by
/// the peer below it) to `end`, and whether `end` is final (`fin`), charged to the budget.
#[derive(Debug)]
pub struct Range {
    base: u64,
    end: u64,
    fin: bool,
    budget: Arc<Budget>,
}

impl Range {
    /// `base..end` already held (`fin`: the source is at EOF), charged to `budget`.
    pub(super) fn new(base: u64, end: u64, fin: bool, budget: Arc<Budget>) -> Range {
        budget.charge(end - base);
        Range {
            base,
            end,
            fin,
            budget,
        }
    }

    /// Confirmed by the peer (custody released below it).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Read from our TCP side.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Our TCP side reached EOF (`end` is final).
    pub fn fin(&self) -> bool {
        self.fin
    }

    /// Bytes held (read, not confirmed).
    pub fn held(&self) -> u64 {
        self.end - self.base
    }

    /// The most bytes the source may add now: the window's and the budget's room.
    pub(super) fn room(&self, window: u64) -> u64 {
        window.saturating_sub(self.held()).min(self.budget.free())
    }

    /// The budget's change notifications (a reader waiting for room follows them).
    pub(super) fn budget_changes(&self) -> watch::Receiver<u64> {
        self.budget.changed.subscribe()
    }

    /// `n` more bytes, in the store: held and charged.
    pub(super) fn took(&mut self, n: u64) {
        self.budget.charge(n);
        self.end += n;
    }

    /// Our TCP side reached EOF (in the store): `end` is final.
    pub(super) fn finish(&mut self) {
        self.fin = true;
    }

    /// The peer confirmed everything below `to` (the store trimmed): released.
    pub(super) fn confirmed(&mut self, to: u64) {
        if to > self.base {
            self.budget.release(to - self.base);
            self.base = to;
        }
    }

    /// The flow finished or was reset: all it holds released.
    pub(super) fn release(&mut self) {
        self.budget.release(self.held());
        self.base = self.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_moves_with_the_range() {
        let b = Budget::new(100);
        let mut r = Range::new(10, 30, false, b.clone());
        assert_eq!((b.free(), r.room(50)), (80, 30));
        r.took(40);
        assert_eq!((r.held(), b.free(), r.room(50)), (60, 40, 0));
        r.confirmed(50);
        r.confirmed(20);
        assert_eq!((r.base(), r.held(), b.free()), (50, 20, 80));
        r.finish();
        r.release();
        assert_eq!((r.base(), r.end(), r.fin(), b.free()), (70, 70, true, 100));
        r.release();
        assert_eq!(b.free(), 100, "released once");
    }
}
