//! The receiver's byte bounds (docs/security.md, "State bounded under attack: receive
//! memory"). What a connection holds for its application — TPDUs out of order in the reorder
//! buffer and data delivered in order but not yet read — counts against its own bound
//! (`reorder_bytes`) and, through the endpoint's shared [`ReorderBudget`], against the
//! endpoint's (`max_reorder_bytes`); while its peer's address is unproven, also against the
//! endpoint's pool for unproven peers (`max_unproven_bytes`).

use super::Receiver;
use crate::reorder_budget::ReorderBudget;
use aerotp_wire::expand_seq;
use bytes::Bytes;

/// Unread bytes under which a body stays a slice of its receive buffer (`resident`).
pub const SLICE_UNREAD_BYTES: usize = 64 << 10;

impl Receiver {
    /// Bytes of out-of-order TPDUs held now (bodies and bookkeeping, `reorder_budget::tpdu_cost`).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Bytes delivered in order and not yet read, as charged: bodies and bookkeeping.
    pub fn unread_charge(&self) -> usize {
        self.delivery.unread_charge()
    }

    /// Bytes of bodies delivered in order and not yet read.
    pub fn unread_bytes(&self) -> usize {
        self.delivery.unread_bytes()
    }

    /// All the receive memory this connection is charged for now.
    pub fn charged_bytes(&self) -> usize {
        self.held_bytes + self.unread_charge()
    }

    /// Shares the endpoint's receive memory (before the first TPDU is stored).
    pub fn set_reorder_budget(&mut self, budget: ReorderBudget) {
        debug_assert_eq!(self.held_bytes, 0);
        self.reorder = budget;
    }

    /// While the peer's address is unproven, what the connection holds also counts against
    /// the endpoint's pool for unproven peers; the most it has held there goes back when it
    /// is proven (or released). The most, not what it holds now: an application reads
    /// nothing of an unproven peer, so the two differ only by what an out-of-order buffer
    /// delivered, and the pool never counts less than is held.
    pub fn set_unproven(&mut self, unproven: bool) {
        match (unproven, self.unproven) {
            (true, None) => self.unproven = Some(0),
            (false, Some(charged)) => {
                self.reorder.unproven().give(charged);
                self.unproven = None;
            }
            _ => {}
        }
    }

    /// Whether a new TPDU costing `len` bytes (`reorder_budget::tpdu_cost`) fits the
    /// connection's bound and the endpoint's budget (and, unproven, its pool for unproven
    /// peers); takes them if so. The TPDU every delivery waits for (`expected`) always fits
    /// while the application has read everything: storing it frees the buffer behind it, so
    /// a connection whose application reads always progresses, whatever others hold (it
    /// overshoots by that one TPDU at most). A refused TPDU is counted and treated as never
    /// arrived, so the retransmitting modes resend it.
    pub(super) fn admit(&mut self, seq: u64, len: usize) -> bool {
        if seq == self.expected && self.delivery.is_empty() {
            self.reorder.take(len);
            if let Some(charged) = &mut self.unproven {
                self.reorder.unproven().take(len);
                *charged += len;
            }
            return true;
        }
        let mut fits = self.charged_bytes() + len <= self.max_held && self.reorder.try_take(len);
        if let (true, Some(charged)) = (fits, &mut self.unproven) {
            if self.reorder.unproven().try_take(len) {
                *charged += len;
            } else {
                self.reorder.give(len);
                fits = false;
            }
        }
        if !fits {
            self.stats.tpdus_dropped_memory += 1;
        }
        fits
    }

    /// `body` (of the TPDU numbered `wire_seq`) as it is to be kept: a slice of a shared
    /// receive buffer (`shared`, a GRO train) stays one only when it is delivered at once to
    /// an application that keeps up (at most `SLICE_UNREAD_BYTES` of bodies unread) on a proven
    /// connection — the hot path, no copy. Otherwise it is copied out, so that what a
    /// connection holds for long (out of order, unread, unproven) is charged for what it keeps
    /// resident; a slice kept pins at most 64 times its size (`codec::SHARED_MIN_BODY`), for
    /// at most `SLICE_UNREAD_BYTES` per connection.
    pub fn resident(&self, wire_seq: u32, body: Bytes, shared: bool) -> Bytes {
        let seq = expand_seq(self.highest.unwrap_or(self.expected), wire_seq);
        // Body bytes, not the charge: a whole train (64 kB) delivered to a reader that keeps
        // up stays slices whatever the bookkeeping is charged at.
        let keep = seq == self.expected
            && self.unproven.is_none()
            && self.unread_bytes() < SLICE_UNREAD_BYTES;
        if shared && !keep {
            Bytes::copy_from_slice(&body)
        } else {
            body
        }
    }

    /// The application took `n` bytes, or a chunk's bookkeeping, off the ready queue: they
    /// go back to the endpoint.
    pub(super) fn release_unread(&mut self, n: usize) {
        self.reorder.give(n);
    }
}

impl Drop for Receiver {
    /// A released connection's bytes go back to the endpoint.
    fn drop(&mut self) {
        self.reorder.give(self.held_bytes + self.unread_charge());
        self.set_unproven(false);
    }
}
