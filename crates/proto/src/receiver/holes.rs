//! Near-reliable's hole reports (SNACK): when a gap has stayed open long enough to be a loss
//! rather than reordering, and which ranges to ask for. The waits themselves (reordering,
//! repeat, repair round trip) are `hole_wait::HoleWait`'s.

use super::{Receiver, MAX_LIST};
use crate::error_control::Feedback;
use aerotp_wire::{expand_seq, Snack};
use std::time::Duration;

impl Receiver {
    /// A TPDU filled a gap. If it was sent before the TPDU that opened the gap (its timestamp
    /// is older), it is the original, overtaken rather than lost: the gap should have been
    /// given at least this long before it was SNACKed (RFC 8985's reordering window, learned
    /// at the receiver because here the receiver decides what is missing).
    pub(super) fn learn_reordering(&mut self, now: Duration, seq: u64, ts: u32) {
        let Some((_, opener)) = self.buffer.range(seq + 1..).next() else {
            return;
        };
        // Timestamps wrap (32-bit microseconds): compare as a signed difference.
        if (ts.wrapping_sub(opener.ts) as i32) < 0 {
            let opened = now.saturating_sub(opener.arrived);
            self.holes.learn_reordering(opened);
        }
    }

    /// Near-reliable: when the open holes are (re)reported. A new gap is reported once it has
    /// stayed open for the reordering wait (zero until reordering has been seen); a hole found
    /// without a jump in sequence numbers (its TPDU arrived corrupted and the NACK was lost,
    /// say) once the TPDU behind it has waited the minimum hole time; reports repeat every two
    /// repair round trips while holes stay open.
    pub(super) fn snack_deadline(&self) -> Option<Duration> {
        if !self.reports_holes() || !self.has_holes() {
            return None;
        }
        let oldest = self.buffer.values().next()?.arrived;
        Some(self.holes.snack_deadline(oldest))
    }

    /// Whether this receiver reports its holes (SNACK), and so learns how long reordering
    /// keeps a gap open before it reports one.
    pub(super) fn reports_holes(&self) -> bool {
        matches!(self.ec.feedback, Feedback::CumulativeWithHoles { .. })
    }

    /// The SNACK due at `now`, if any: the holes whose gap has been open for the reordering
    /// wait; the TPDUs it asks for are remembered for the repair round trip.
    pub(super) fn poll_snack(&mut self, now: Duration) -> Option<Snack> {
        if self.snack_deadline().is_none_or(|d| now < d) {
            return None;
        }
        let (ranges, later) = self.snack_ranges(now);
        let sent = !ranges.is_empty();
        if sent {
            self.note_repair_requests(now, &ranges);
        }
        self.holes.snack_considered(now, later, sent);
        sent.then_some(Snack { ranges })
    }

    /// The holes to SNACK at `now`: those whose gap has been open for the reordering wait
    /// (the TPDU behind a hole opened it, near enough). Also returns when the oldest gap left
    /// out opened, for the next report.
    pub(super) fn snack_ranges(&self, now: Duration) -> (Vec<(u32, u32)>, Option<Duration>) {
        let mut out = Vec::new();
        let mut later: Option<Duration> = None;
        let mut cursor = self.expected;
        let reorder_wait = self.holes.reorder_wait();
        for (&seq, slot) in &self.buffer {
            if seq > cursor {
                if slot.arrived + reorder_wait <= now {
                    if out.len() < MAX_LIST {
                        out.push((cursor as u32, seq as u32));
                    }
                } else {
                    later = Some(later.map_or(slot.arrived, |l: Duration| l.min(slot.arrived)));
                }
            }
            cursor = seq + 1;
        }
        (out, later)
    }

    /// Remembers when the TPDUs of SNACKed holes were asked for, so their arrival measures the
    /// repair round trip (which spaces repeated SNACKs). Bounded like the NACK record.
    pub(super) fn note_repair_requests(&mut self, now: Duration, ranges: &[(u32, u32)]) {
        for &(a, b) in ranges {
            let start = expand_seq(self.expected, a);
            let end = expand_seq(start, b);
            // The latest request: a TPDU asked for before an outage and repaired after it
            // would otherwise read as a repair round trip of minutes.
            for seq in start..end.min(start + 64) {
                self.holes.requested(now, seq);
            }
        }
    }
}
