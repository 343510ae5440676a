//! The connection's side of the TPDU size (`crate::tpdu_size`): what it knows of the link
//! when new data is cut.

use super::Connection;
use crate::tpdu_size::LinkFacts;
use std::time::Duration;

impl Connection {
    /// The body of the next new TPDU: at most `max_body` (what the MTU allows under the
    /// current parity), smaller where the link's rate, bit errors and outages make a smaller
    /// one deliver more. Retransmissions keep the size they were cut at.
    pub(super) fn new_tpdu_body(&mut self, now: Duration, max_body: usize) -> usize {
        let facts = LinkFacts {
            rate_bps: self.known_path_rate(),
            ber: self.coding.peer_ber,
            parity: self.coding.fec.parity(),
            mean_up: self.coding.tpdu.mean_up(now),
            per_packet_overhead: self.cfg.per_packet_overhead,
            body_reserve: self.coding.etx.body_reserve(),
        };
        self.coding.tpdu.body(&facts, max_body)
    }

    /// The slowest usable path's rate, where the engine has learnt it: discovered (once
    /// measured), or said by the radio (DLEP Current Data Rate, the lower of the two when
    /// both). A fixed rate alone gives none: the user sized that allocation and its MTU, and
    /// the TPDU stays the MTU as in the papers (every fixed-rate figure unchanged).
    fn known_path_rate(&self) -> Option<u64> {
        let discovers = self.rate.discovers();
        (0..self.paths.len())
            .filter(|&i| self.paths.is_usable(i))
            .filter_map(|i| {
                let p = self.rate.path(i);
                let measured = (discovers && p.estimate_bps > 0).then_some(p.estimate_bps);
                match (measured, p.radio_bps) {
                    (Some(m), Some(r)) => Some(m.min(r)),
                    (m, r) => m.or(r),
                }
            })
            .min()
    }
}
