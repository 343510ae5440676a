//! Near-reliable's hole reports (SNACK): when a gap has stayed open long enough to be a loss
//! rather than reordering, which ranges to ask for, and the repair round trip that spaces the
//! reports.

use super::{Receiver, MAX_LIST, MAX_REORDER_WAIT, MAX_SNACK_REPEAT};
use crate::error_control::Feedback;
use aerotp_wire::expand_seq;
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
            let sample = now.saturating_sub(opener.arrived) * 5 / 4;
            self.reorder_wait = self.reorder_wait.max(sample).min(MAX_REORDER_WAIT);
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
        let oldest =
            self.buffer.values().next()?.arrived + self.min_hole_timeout.max(self.reorder_wait);
        // Repeats at most MAX_SNACK_REPEAT apart: a repair round trip misjudged long (an
        // outage between request and repair) must not leave a hole unreported for minutes;
        // the sender ignores a SNACK for what it sent less than a round trip ago anyway.
        let repeat = match self.last_snack {
            Some(l) => oldest.max(l + (self.repair_rtt * 2).min(MAX_SNACK_REPEAT)),
            None => oldest,
        };
        Some(match self.gap_open_since {
            Some(g) => repeat.min(g + self.reorder_wait),
            None => repeat,
        })
    }

    /// Whether this receiver reports its holes (SNACK), and so learns how long reordering
    /// keeps a gap open before it reports one.
    pub(super) fn reports_holes(&self) -> bool {
        matches!(self.ec.feedback, Feedback::CumulativeWithHoles { .. })
    }

    /// The holes to SNACK at `now`: those whose gap has been open for the reordering wait
    /// (the TPDU behind a hole opened it, near enough). Also returns when the oldest gap left
    /// out opened, for the next report.
    pub(super) fn snack_ranges(&self, now: Duration) -> (Vec<(u32, u32)>, Option<Duration>) {
        let mut out = Vec::new();
        let mut later: Option<Duration> = None;
        let mut cursor = self.expected;
        for (&seq, slot) in &self.buffer {
            if seq > cursor {
                if slot.arrived + self.reorder_wait <= now {
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
                self.nack_sent_at.insert(seq, now);
            }
        }
        while self.nack_sent_at.len() > 4096 {
            self.nack_sent_at.pop_first();
        }
    }
}
