//! The reorder buffer's byte bounds: per connection (`reorder_bytes`) and, through the
//! endpoint's shared [`ReorderBudget`], per endpoint (docs/security.md).

use super::Receiver;
use crate::reorder_budget::ReorderBudget;

impl Receiver {
    /// Bytes of out-of-order TPDUs held now (bodies and bookkeeping, `reorder_budget::tpdu_cost`).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Shares the endpoint's reorder memory (before the first TPDU is stored).
    pub fn set_reorder_budget(&mut self, budget: ReorderBudget) {
        debug_assert_eq!(self.held_bytes, 0);
        self.reorder = budget;
    }

    /// Whether a new TPDU costing `len` bytes (`reorder_budget::tpdu_cost`) fits the reorder buffer's byte bounds; takes
    /// them from the endpoint's budget if so. The TPDU every delivery waits for (`expected`)
    /// always fits: storing it frees the buffer behind it. A refused TPDU is counted and
    /// treated as never arrived, so the retransmitting modes resend it.
    pub(super) fn admit(&mut self, seq: u64, len: usize) -> bool {
        if seq == self.expected {
            return true;
        }
        let fits = self.held_bytes + len <= self.max_held && self.reorder.try_take(len);
        if !fits {
            self.stats.tpdus_dropped_memory += 1;
        }
        fits
    }
}

impl Drop for Receiver {
    /// A released connection's out-of-order bytes go back to the endpoint.
    fn drop(&mut self) {
        self.reorder.give(self.held_bytes);
    }
}
