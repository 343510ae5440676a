//! The bytes an endpoint's connections hold for their applications — TPDU bodies out of order
//! in the reorder buffers, and data delivered in order but not yet read — bounded per endpoint
//! (this budget) and per connection (`reorder_bytes`), so that peers sending bodies far ahead
//! of a hole, or in order to an application that does not read, cannot grow a receiver's
//! memory without bound (docs/security.md, "State bounded under attack"). Within it, what
//! the connections whose peers are not yet proven hold is a pool of its own
//! (`max_unproven_bytes`): spoofed peers cannot take more, and a real peer's first flight
//! fits while it waits for the proof.
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

/// Default bound of what the connections whose peers are unproven hold together (a pool
/// within `DEFAULT_ENDPOINT_REORDER_BYTES`; docs/security.md): spoofed or never-proven peers
/// hold this much between them, however many and however long they send, and a real peer's
/// first flight waits in it for the proof, one round trip. 32 MiB: a 3 s one-way path at
/// 5 Mb/s sends 3.75 MB before the ECHO is back, and 10 Mb/s at 1 s 2.5 MB. It was 1 MiB per
/// connection (128 MiB for the default 128 half-open connections), and a first flight beyond
/// it was dropped and sent again once proven: the 3 s paths of `aerotp experiment`'s delay
/// figures fell from 0.82 to 0.65 of the ceiling with some 1,565 retransmissions
/// (docs/results/dynamic.md).
pub const DEFAULT_ENDPOINT_UNPROVEN_BYTES: usize = 32 << 20;

/// Bytes a buffered TPDU is counted for beside its body: the map entry and slot that hold it
/// (about 60 bytes), so that the bounds bound memory, not only payload.
pub const SLOT_OVERHEAD: usize = 160;

/// What a TPDU with a body of `len` bytes costs the reorder buffer.
pub fn tpdu_cost(len: usize) -> usize {
    len + SLOT_OVERHEAD
}

/// Bytes shared by clones under one bound.
#[derive(Debug, Clone)]
pub struct SharedBound {
    used: Arc<AtomicUsize>,
    max: usize,
}

impl SharedBound {
    fn new(max: usize) -> SharedBound {
        SharedBound {
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

    /// Gives back `n` bytes taken before (never below zero).
    pub fn give(&self, n: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }

    /// Bytes held now by all the clones together.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// A share of the endpoint's reorder memory (`all`), and of its pool for unproven peers
/// (`unproven`: an unproven connection's bytes count in both).
#[derive(Debug, Clone)]
pub struct ReorderBudget {
    all: SharedBound,
    unproven: SharedBound,
}

impl ReorderBudget {
    /// A budget of `max` bytes for the connections that will share it, of which those whose
    /// peers are unproven hold at most `DEFAULT_ENDPOINT_UNPROVEN_BYTES` (or `max`).
    pub fn new(max: usize) -> ReorderBudget {
        ReorderBudget::with_unproven(max, DEFAULT_ENDPOINT_UNPROVEN_BYTES)
    }

    /// A budget of `max` bytes, of which unproven peers' connections hold at most
    /// `max_unproven` together.
    pub fn with_unproven(max: usize, max_unproven: usize) -> ReorderBudget {
        ReorderBudget {
            all: SharedBound::new(max),
            unproven: SharedBound::new(max_unproven.min(max)),
        }
    }

    /// Takes `n` bytes of the whole if they fit under its bound.
    pub fn try_take(&self, n: usize) -> bool {
        self.all.try_take(n)
    }

    /// Takes `n` bytes of the whole whatever its bound (`SharedBound::take`).
    pub fn take(&self, n: usize) {
        self.all.take(n)
    }

    /// Gives back `n` bytes of the whole.
    pub fn give(&self, n: usize) {
        self.all.give(n)
    }

    /// Bytes all connections sharing the budget hold now.
    pub fn used(&self) -> usize {
        self.all.used()
    }

    /// The pool of the connections whose peers are unproven.
    pub fn unproven(&self) -> &SharedBound {
        &self.unproven
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

    #[test]
    fn the_unproven_pool_is_bounded_apart_and_within_the_whole() {
        let b = ReorderBudget::with_unproven(1000, 300);
        let c = b.clone();
        assert!(b.unproven().try_take(200));
        assert!(!c.unproven().try_take(101), "over the pool's bound");
        assert!(c.unproven().try_take(100));
        c.unproven().take(10);
        assert_eq!(b.unproven().used(), 310);
        b.unproven().give(310);
        assert_eq!(c.unproven().used(), 0);
        assert_eq!(b.used(), 0, "the whole counts apart");
        let small = ReorderBudget::with_unproven(100, 300);
        assert!(
            !small.unproven().try_take(101),
            "never above the whole's bound"
        );
    }
}
