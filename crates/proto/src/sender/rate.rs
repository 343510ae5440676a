//! What the sender tells the rate control (`crate::rate`): each path's delivery accounting,
//! its samples, and the TPDUs the peer reports corrupted (delivered, for the rate).

use super::Sender;
use crate::rate::{DeliverySampler, RateSample};
use aerotp_wire::expand_seq;
use std::time::Duration;

impl Sender {
    /// NACK or explicit loss notification: these TPDUs arrived corrupted. Each is resent,
    /// and counted lost on its path; for the path's rate it was delivered (the link carried
    /// it: corruption is not congestion).
    pub fn on_nack(&mut self, seqs: &[u32], now: Duration) {
        let expected = self.peer.cum.max(self.base);
        for &s in seqs {
            self.stats.nacks_received += 1;
            let seq = expand_seq(expected, s);
            let (path, len, snap) = match self.entry_mut(seq) {
                Some(Some(s)) if !s.acked && !s.queued => (s.path, s.body.len(), s.snap),
                _ => continue,
            };
            self.lanes.on_corrupted(now, path, len, &snap);
            // Counted lost for the statistics; the rate accounting took it as delivered, so
            // the loss it records is given back.
            if self.lose(seq) {
                self.lanes.forgive_loss(path, len);
            }
        }
    }

    /// Forgets queued retransmissions of TPDUs acknowledged since they were queued, so that
    /// `has_retransmission` says whether one will really go: a stale entry hid a due
    /// erasure repair behind a retransmission that `next_outgoing` then skipped.
    pub fn drop_answered_retransmissions(&mut self) {
        let (entries, base) = (&self.entries, self.base);
        self.retx.retain(|&seq| {
            let i = seq.checked_sub(base).and_then(|i| usize::try_from(i).ok());
            matches!(i.and_then(|i| entries.get(i)), Some(Some(s)) if !s.acked)
        });
    }

    /// TPDU-body bytes sent over every path (the rate's link-to-body conversion).
    pub fn body_bytes_sent(&self) -> u64 {
        self.lanes.bytes_sent()
    }

    /// The delivery accounting of `path`.
    pub fn delivery(&self, path: usize) -> Option<&DeliverySampler> {
        self.lanes.sampler(path)
    }

    /// `path`'s rate sample since the last call, and the bytes acknowledged on it since.
    pub fn take_rate_sample(&mut self, path: usize) -> (Option<RateSample>, u64) {
        self.lanes.take_rate_sample(path)
    }

    /// The pacer allowed a TPDU and there was nothing to send: what is in flight measures
    /// the application, not the link.
    pub fn on_app_limited(&mut self) {
        self.lanes.on_app_limited();
    }
}
