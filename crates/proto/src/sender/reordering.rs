//! What the sender's loss detection keeps of its own about reordering (RFC 8985 §6.2): whether
//! it was seen, and the window it widens the time rule by, with that window's bound.

use std::time::Duration;

/// What loss detection keeps of its own about reordering: whether it was seen, and the window
/// it widened the time rule by, with that window's bound.
#[derive(Debug)]
pub(super) struct Reordering {
    /// The loss time of the latest MACK applied (`on_mack_entries`; 100 ms before any):
    /// the reorder window's bound, and its step before a minimum RTT is known. Not the
    /// estimator's current loss time, which loss detection reads (`LossTiming`): an
    /// acknowledgement applied before a MACK's entries, or by an ACK, widens the window
    /// against the loss time as the previous MACK left it (on a long path the first MACK's
    /// cumulative part meets 100 ms here, not 9/8 of the sample it carries).
    pub(super) bound: Duration,
    /// Reordering has been seen: a first transmission was acknowledged after one sent later
    /// (RFC 8985 §6.2). From then on the packet-count rule, which takes reordering for loss,
    /// is off and only the time rule declares losses.
    pub(super) seen: bool,
    /// Reorder window added to the time rule: widened by a quarter of the minimum RTT each
    /// time a retransmission proves needless (its original was acknowledged), up to the
    /// loss time itself (about one smoothed RTT), as RFC 8985 widens `reo_wnd` on DSACKs.
    pub(super) window: Duration,
    /// The newest transmission an attributable acknowledgement answered: a first
    /// transmission acknowledged after it is reordering.
    pub(super) largest_acked_tx: Option<u64>,
}

impl Reordering {
    pub(super) fn new() -> Reordering {
        Reordering {
            bound: Duration::from_millis(100),
            seen: false,
            window: Duration::ZERO,
            largest_acked_tx: None,
        }
    }

    /// A retransmission proved needless (the original arrived after all): the reordering (or
    /// delay) window was too narrow.
    pub(super) fn widen(&mut self, min_rtt: Option<Duration>) {
        let step = min_rtt.unwrap_or(self.bound) / 4;
        self.window = (self.window + step).min(self.bound);
    }

    /// An attributable acknowledgement of transmission `tx`.
    pub(super) fn on_acked_tx(&mut self, tx: u64) {
        self.largest_acked_tx = Some(self.largest_acked_tx.map_or(tx, |l| l.max(tx)));
    }
}
