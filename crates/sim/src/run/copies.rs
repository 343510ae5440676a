//! Spurious retransmissions: the tag each data TPDU carries through the link, the copies of
//! each TPDU sent, and which copy first arrived intact.

use std::collections::HashMap;

/// Tag of a datagram the sender puts on the wire: bit 32 set for a data TPDU, its FEC parity
/// in bits 40-47, which copy of its TPDU it is in bits 48-63 (0 = the first), and its
/// sequence number below (read from the header while it is intact, so the receiver side
/// knows which TPDU arrived even if bits flip on the way).
pub(super) const DATA_TAG: u64 = 1 << 32;

pub(super) fn tag_of(datagram: &[u8]) -> u64 {
    match aerotp_wire::Header::parse(datagram) {
        Ok(h) if h.flags.is_data() => DATA_TAG | u64::from(h.fec) << 40 | u64::from(h.seq),
        _ => 0,
    }
}

/// Copies of each data TPDU, for spurious retransmissions: how many were sent, and the first
/// copy that arrived intact.
#[derive(Default)]
pub(super) struct Copies {
    /// Per wire TPDU number: (copies sent, index of the earliest copy that arrived intact).
    seqs: HashMap<u32, (u16, Option<u16>)>,
    /// Retransmissions as (TPDU number, copy index).
    pub(super) retransmitted: Vec<(u32, u16)>,
}

impl Copies {
    /// Numbers a data TPDU's copy; returns (copy index, whether an earlier copy was sent).
    pub(super) fn sent(&mut self, seq: u32) -> (u16, bool) {
        let e = self.seqs.entry(seq).or_insert((0, None));
        let k = e.0;
        e.0 = e.0.saturating_add(1);
        (k, k > 0)
    }

    pub(super) fn arrived_intact(&mut self, seq: u32, copy: u16) {
        if let Some(e) = self.seqs.get_mut(&seq) {
            e.1 = Some(e.1.map_or(copy, |c| c.min(copy)));
        }
    }

    pub(super) fn needs_check(&self, seq: u32, copy: u16) -> bool {
        self.seqs
            .get(&seq)
            .is_some_and(|e| e.1.is_none_or(|c| c > copy))
    }

    /// Retransmissions whose TPDU had an earlier copy arrive intact.
    pub(super) fn spurious(&self) -> u64 {
        self.retransmitted
            .iter()
            .filter(|(seq, k)| matches!(self.seqs.get(seq), Some((_, Some(c))) if c < k))
            .count() as u64
    }
}

/// Whether a delivered data TPDU arrived intact: its CRC checks as received, or after the FEC
/// decoding the receiver does (with the parity it was sent with). The driver checks this
/// itself rather than reading the engine's counters, whose snapshot costs far more than a CRC.
pub(super) fn usable(datagram: &[u8], parity: u8, scratch: &mut Vec<u8>) -> bool {
    if matches!(aerotp_wire::parse_tpdu(datagram), Ok(t) if t.body_ok) {
        return true;
    }
    if parity == 0 {
        return false;
    }
    scratch.clear();
    scratch.extend_from_slice(datagram);
    aerotp_fec::decode(parity, scratch).is_ok()
        && matches!(aerotp_wire::parse_tpdu(scratch), Ok(t) if t.body_ok && t.header.fec == parity)
}
