//! D-SACK (RFC 2883) for one user-space TCP connection: which duplicate the next
//! acknowledgement reports in its first SACK block (docs/gateway.md §TCP reliable:
//! end-to-end semantics).
//!
//! Why: a source whose retransmission timer fired while an air repair held our
//! acknowledgement back resends bytes we already have; telling it so lets Linux undo the
//! timeout (`tcp_check_dsack` counts `undo_retrans` down; at zero `tcp_try_undo_loss` /
//! `tcp_try_undo_dsack` restore the window) where timestamps are not in use.
//!
//! Most such duplicates are *above* our acknowledgement (taken, not yet confirmed). Linux
//! takes a first block as a D-SACK only if it starts below the acknowledgement number, or
//! lies inside the second block; the second would have to start at the acknowledgement
//! number, which Linux discards as a SACK block (`tcp_is_sackblock_valid`), and its undo
//! counting only uses D-SACKs wholly below its left edge. So a duplicate is reported once the
//! acknowledgement has passed all of it — in the acknowledgement that passes it or a later
//! one, at most [`MAX_PENDING`] waiting; a duplicate already below the acknowledgement goes
//! in the next one. A duplicate of out-of-order bytes we hold goes in the next one too, the
//! block holding it second (the SACK blocks follow), as RFC 2883 §4 has it and Linux takes
//! it (`TCPDSACKOfoRecv`). Each is reported once.

/// Duplicate ranges waiting to be reported; more are not recorded (a missed D-SACK only
/// costs the source an undo).
pub const MAX_PENDING: usize = 16;

/// A connection's duplicates not reported yet, by stream offset.
#[derive(Debug, Default)]
pub struct Dups {
    /// [start, end), sorted, neither overlapping nor adjacent.
    pending: Vec<(u64, u64)>,
    /// A duplicate of held out-of-order bytes, for the next acknowledgement.
    held: Option<(u64, u64)>,
}

impl Dups {
    /// Bytes [from, to) came again.
    pub fn add(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let (mut lo, mut hi) = (from, to);
        // Merge with every range it overlaps or touches.
        self.pending.retain(|&(s, e)| {
            let apart = e < lo || s > hi;
            if !apart {
                lo = lo.min(s);
                hi = hi.max(e);
            }
            apart
        });
        if self.pending.len() >= MAX_PENDING {
            return;
        }
        let at = self.pending.partition_point(|&(s, _)| s < lo);
        self.pending.insert(at, (lo, hi));
    }

    /// Held out-of-order bytes [from, to) came again: for the next acknowledgement (the
    /// latest such duplicate replaces one not reported yet).
    pub fn add_held(&mut self, from: u64, to: u64) {
        self.held = (from < to).then_some((from, to));
    }

    /// The duplicate to report with the acknowledgement at stream offset `ack`: one of held
    /// bytes, else the lowest one wholly below `ack`; taken out.
    pub fn report(&mut self, ack: u64) -> Option<(u64, u64)> {
        if let Some(h) = self.held.take() {
            return Some(h);
        }
        let first = *self.pending.first()?;
        (first.1 <= ack).then(|| self.pending.remove(0))
    }

    /// Ranges waiting.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_is_reported_once_when_the_acknowledgement_has_passed_it() {
        let mut d = Dups::default();
        d.add(1000, 2000);
        assert_eq!(d.report(1000), None, "not yet below the acknowledgement");
        assert_eq!(d.report(1500), None, "not all of it below");
        assert_eq!(d.report(2000), Some((1000, 2000)));
        assert_eq!(d.report(5000), None, "once");
    }

    #[test]
    fn a_duplicate_of_held_bytes_goes_in_the_next_acknowledgement() {
        let mut d = Dups::default();
        d.add(0, 500);
        d.add_held(3000, 4000);
        assert_eq!(d.report(1000), Some((3000, 4000)), "above the ack, at once");
        assert_eq!(d.report(1000), Some((0, 500)));
        assert_eq!(d.report(1000), None);
    }

    #[test]
    fn duplicates_merge_and_come_out_lowest_first_within_the_bound() {
        let mut d = Dups::default();
        d.add(3000, 4000);
        d.add(1000, 2000);
        d.add(2000, 2500);
        d.add(3500, 4200);
        assert_eq!(d.waiting(), 2);
        assert_eq!(d.report(9000), Some((1000, 2500)));
        assert_eq!(d.report(9000), Some((3000, 4200)));
        for i in 0..40u64 {
            d.add(i * 10, i * 10 + 5);
        }
        assert_eq!(d.waiting(), MAX_PENDING);
        d.add(7, 9);
        assert_eq!(d.waiting(), MAX_PENDING);
    }
}
