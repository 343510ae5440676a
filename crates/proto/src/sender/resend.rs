//! Resending in bulk: what an outage holds back, and everything unacknowledged once the link
//! is back (or a RETRY says the peer lost what was in flight).

use super::Sender;

impl Sender {
    /// Drops every queued retransmission (while the link is out, only probes are sent).
    pub fn hold_retransmissions(&mut self) {
        for seq in std::mem::take(&mut self.retx) {
            if let Some(Some(s)) = self.entry_mut(seq) {
                s.queued = false;
            }
        }
    }

    /// After an outage: every unacknowledged TPDU is retransmitted.
    pub fn retransmit_all_unacked(&mut self) {
        let seqs: Vec<u64> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Some(s) if !s.acked))
            .map(|(i, _)| self.base + i as u64)
            .collect();
        for s in seqs {
            self.queue_retx(s);
        }
    }
}
