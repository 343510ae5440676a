//! The bytes an endpoint's connections hold for their applications — TPDU bodies out of order
//! in the reorder buffers, and data delivered in order but not yet read — bounded per endpoint
//! (this budget) and per connection (`reorder_bytes`), so that peers sending bodies far ahead
//! of a hole, or in order to an application that does not read, cannot grow a receiver's
//! memory without bound (docs/security.md, "State bounded under attack").
//!
//! The endpoint makes one budget and hands a clone to each connection it creates; an atomic
//! counter because the endpoint may move between threads (it is never shared by two at once:
//! relaxed ordering suffices). Nothing here reads a clock or allocates per TPDU.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Default bound of all reorder buffers of one endpoint together.
/// 192 MiB: with the process's own memory (socket buffers, the engine's other tables) a
/// receiver stays under 256 MB however many peers send out of order (docs/results/security.md).
pub const DEFAULT_ENDPOINT_REORDER_BYTES: usize = 192 << 20;

/// At most this many bytes of a connection's receive memory (out of order and unread) while
/// its peer's address is unproven (docs/security.md): a spoofed or never-proven peer holds
/// this much, however long it sends. 128 half-open connections (the default
/// `max_half_open`) hold 128 MiB together, under the endpoint's `max_reorder_bytes`. A real
/// peer's first flight beyond it is dropped and sent again once proven, one round trip
/// later: at 256 KiB a 5 Mb/s first flight at 0.5 s one way (unproven for a round trip and
/// more) resent ten times the TPDUs and lost 4.6 % of its goodput (the papers' delay
/// experiment, `aerotp experiment seeds`).
pub const UNPROVEN_RECV_BYTES: usize = 1 << 20;

/// Bytes a buffered TPDU is counted for beside its body: the map entry and slot that hold it
/// (about 60 bytes), so that the bounds bound memory, not only payload.
pub const SLOT_OVERHEAD: usize = 160;

/// What a TPDU with a body of `len` bytes costs the reorder buffer.
pub fn tpdu_cost(len: usize) -> usize {
    len + SLOT_OVERHEAD
}

/// A share of the endpoint's reorder memory.
#[derive(Debug, Clone)]
pub struct ReorderBudget {
    used: Arc<AtomicUsize>,
    max: usize,
}

impl ReorderBudget {
    /// A budget of `max` bytes for the connections that will share it.
    pub fn new(max: usize) -> ReorderBudget {
        ReorderBudget {
            used: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Takes `n` bytes if they fit under the bound.
    pub fn try_take(&self, n: usize) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = cur.checked_add(n).filter(|&x| x <= self.max) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Takes `n` bytes whatever the bound (the TPDU every delivery waits for is never
    /// refused: it frees what it unblocks at once).
    pub fn take(&self, n: usize) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }

    /// Gives back `n` bytes taken before.
    pub fn give(&self, n: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }

    /// Bytes held now by all connections sharing the budget.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }
}

impl Default for ReorderBudget {
    fn default() -> Self {
        ReorderBudget::new(DEFAULT_ENDPOINT_REORDER_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_across_clones_and_give_returns_it() {
        let b = ReorderBudget::new(1000);
        let c = b.clone();
        assert!(b.try_take(600));
        assert!(!c.try_take(401), "over the shared bound");
        assert!(c.try_take(400));
        assert_eq!(b.used(), 1000);
        c.take(50);
        assert_eq!(b.used(), 1050, "the awaited TPDU is taken past the bound");
        b.give(1050);
        assert_eq!(c.used(), 0);
        b.give(10);
        assert_eq!(b.used(), 0, "never below zero");
        assert!(!b.try_take(usize::MAX));
    }
}
