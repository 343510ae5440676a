//! The selective part of a MACK: the newest received blocks as ranges and the entries no
//! range covers, fitted to the MTU.

use super::{Receiver, MAX_MACK_RANGES};
use aerotp_wire::{expand_seq, Mack, MACK_FIXED_LEN, OVERHEAD};

impl Receiver {
    /// Blocks `[start, end)` of TPDUs received above `cum`, newest first, at most `max`.
    fn received_blocks(&self, max: usize) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &seq in self.buffer.keys().rev() {
            match out.last_mut() {
                Some((start, _)) if *start == seq + 1 => *start = seq,
                _ => {
                    if out.len() == max {
                        break;
                    }
                    out.push((seq, seq + 1));
                }
            }
        }
        out
    }

    /// The selective part of one MACK: the newest received blocks as ranges (re-reported in
    /// every MACK, so one lost MACK costs nothing), then the entries that arrived since the
    /// last MACK and no range covers — as many as fit the MTU next to a full NACK list and a
    /// report; entries left over go in the next MACK, at once.
    pub(super) fn fill_selective(&mut self, mack: &mut Mack) {
        let mut room = self
            .feedback
            .mtu()
            .saturating_sub(OVERHEAD + MACK_FIXED_LEN + 12 + 2 + 4 * self.feedback.nacks_pending());
        let blocks = self.received_blocks(MAX_MACK_RANGES.min(room / 8 / 2));
        room -= 8 * blocks.len();
        let expected = self.expected;
        // An entry below `cum` (delivered since) or inside a range says nothing new.
        let redundant = |seq: u32| {
            let seq = expand_seq(expected, seq);
            seq < expected || blocks.iter().any(|&(a, b)| (a..b).contains(&seq))
        };
        mack.entries = self.feedback.take_entries(room / 4, redundant);
        mack.ranges = blocks.iter().map(|&(a, b)| (a as u32, b as u32)).collect();
    }
}
