//! TCP timestamps (RFC 7323) on the receive side of one user-space TCP connection: which
//! TSval each acknowledgement echoes (docs/gateway.md §TCP reliable: end-to-end semantics).
//!
//! Why: our acknowledgement lags what we took by everything the egress has not confirmed, so
//! while an air repair holds the confirmations back the source's retransmission timer can
//! fire although every byte reached us. Linux undoes such a timeout when the acknowledgement
//! that finally moves its left edge echoes a TSval older than its first retransmission
//! (Eifel, RFC 3522: `tcp_packet_delayed` in `tcp_try_undo_loss`): the original was
//! received. So the echo must be the TSval of the segment that *delivered* the byte at the
//! left edge — the original, since a resent copy of bytes we have is dropped.
//!
//! That is RFC 7323 §4.3's rule with the left edge where it is for us: TS.Recent is the
//! TSval of the segment at `Last.ACK.sent` (its rule (2): a delayed acknowledgement echoes the
//! earliest unacknowledged segment; rule (3): a hole filled by a retransmission echoes the
//! retransmission — the byte at the edge came in it, so a real loss is never taken for a
//! spurious timeout). A plain RFC 7323 receiver updates TS.Recent only from a segment that
//! starts at or before `Last.ACK.sent`; ours hardly ever sees one (the source has long
//! sent past our edge), so the TSval of each taken range is kept by stream offset until the
//! edge passes it, bounded by [`Stamps::new`]'s `cap` ranges.

use std::collections::BTreeMap;
use std::time::Instant;

/// One connection's timestamps: our clock, and the TSvals of the source's bytes.
#[derive(Debug)]
pub struct Stamps {
    /// Our TSval clock: milliseconds since `base`, plus a per-connection offset (RFC 7323
    /// §5.4 recommends one, so our clock says nothing about the host's).
    base: Instant,
    offset: u32,
    /// Start offset → (end offset, TSval) of bytes taken or held, from the left edge on.
    ranges: BTreeMap<u64, (u64, u32)>,
    cap: usize,
    /// The RFC 7323 TS.Recent, for when no range holds the left edge (everything taken is
    /// acknowledged: the next segment to come is at the edge).
    recent: u32,
}

/// Whether TSval `a` is at or after `b` (modulo 2^32, RFC 7323 §5.2).
fn at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

impl Stamps {
    /// Timestamps for a connection whose SYN carried `syn_tsval`; our clock starts at
    /// `offset`. At most `cap` ranges are kept.
    pub fn new(syn_tsval: u32, offset: u32, cap: usize) -> Stamps {
        Stamps {
            base: Instant::now(),
            offset,
            ranges: BTreeMap::new(),
            cap: cap.max(1),
            recent: syn_tsval,
        }
    }

    /// Our TSval now (one tick a millisecond, as Linux's).
    pub fn now(&self) -> u32 {
        let ms = self.base.elapsed().as_millis() as u32;
        self.offset.wrapping_add(ms)
    }

    /// A segment of the source starting at stream offset `seq_off`, with TSval `tsval`; the
    /// left edge (what our last acknowledgement said) is `edge`. The RFC 7323 TS.Recent
    /// update: only from a segment at or before the edge, and never backwards.
    pub fn seen(&mut self, seq_off: u64, tsval: u32, edge: u64) {
        if seq_off <= edge && at_or_after(tsval, self.recent) {
            self.recent = tsval;
        }
    }

    /// Bytes [from, to) newly taken or held, delivered by a segment with TSval `tsval`.
    /// Bytes already recorded keep their first TSval (a resent copy of bytes we have says
    /// nothing about when they arrived). When `cap` ranges are kept, the newest one is
    /// widened to cover the bytes if it ends where they start, with the later of the two
    /// TSvals (an echo a little too new only makes the source's undo more careful); if not,
    /// the bytes go unrecorded (their echo falls back to TS.Recent).
    pub fn took(&mut self, from: u64, to: u64, tsval: u32) {
        if from >= to {
            return;
        }
        if let Some((_, &(end, _))) = self.ranges.range(..=from).next_back() {
            if end > from {
                return;
            }
        }
        // Up to the next range, if one starts inside (an overlapping out-of-order segment).
        let to = match self.ranges.range(from + 1..).next() {
            Some((&next, _)) => to.min(next),
            None => to,
        };
        if self.ranges.len() >= self.cap {
            if let Some(mut last) = self.ranges.last_entry() {
                let (end, ts) = *last.get();
                if end == from {
                    let later = if at_or_after(tsval, ts) { tsval } else { ts };
                    *last.get_mut() = (to, later);
                }
            }
            return;
        }
        self.ranges.insert(from, (to, tsval));
    }

    /// The TSval to echo with the left edge at stream offset `edge` (the acknowledgement sent
    /// last): the TSval of the segment that delivered the byte at `edge`, else TS.Recent.
    pub fn echo(&self, edge: u64) -> u32 {
        match self.ranges.range(..=edge).next_back() {
            Some((_, &(end, ts))) if end > edge => ts,
            _ => self.recent,
        }
    }

    /// Forgets the ranges wholly below the new left edge `edge` (the one holding `edge`
    /// stays: the next acknowledgement echoes it). TS.Recent becomes the TSval of the byte at
    /// the edge, or of the last byte before it when everything taken is acknowledged — as
    /// for a receiver whose edge segment just came.
    pub fn advance(&mut self, edge: u64) {
        let holding = |at: u64| match self.ranges.range(..=at).next_back() {
            Some((_, &(end, ts))) if end > at => Some(ts),
            _ => None,
        };
        let edge_ts = holding(edge).or_else(|| edge.checked_sub(1).and_then(holding));
        while let Some(first) = self.ranges.first_entry() {
            if first.get().0 > edge {
                break;
            }
            first.remove();
        }
        if let Some(ts) = edge_ts.filter(|&ts| at_or_after(ts, self.recent)) {
            self.recent = ts;
        }
    }

    /// Ranges kept now.
    #[cfg(test)]
    pub fn kept(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_is_the_tsval_of_the_segment_that_delivered_the_edge_byte() {
        let mut s = Stamps::new(100, 0, 64);
        // Originals at TSval 200, 201, 202 for bytes [0,1000), [1000,2000), [2000,3000).
        for (i, ts) in [200u32, 201, 202].into_iter().enumerate() {
            let from = i as u64 * 1000;
            s.seen(from, ts, 0);
            s.took(from, from + 1000, ts);
        }
        assert_eq!(s.echo(0), 200, "the edge byte came at 200");
        // A resend of [0,1000) at TSval 900 (the source's timer fired): the bytes were had.
        s.seen(0, 900, 0);
        s.took(0, 1000, 900);
        assert_eq!(
            s.echo(0),
            200,
            "the original's TSval, older than the resend: the source's Eifel sees the delay"
        );
        s.advance(1500);
        assert_eq!(s.echo(1500), 201);
        assert_eq!(s.kept(), 2);
        s.advance(3000);
        assert_eq!(s.kept(), 0);
        assert_eq!(
            s.echo(3000),
            900,
            "all acknowledged: TS.Recent, which the resend at the edge set (RFC 7323's rule)"
        );
        // The next segment at the edge sets TS.Recent (RFC 7323's rule).
        s.seen(3000, 950, 3000);
        assert_eq!(s.echo(3000), 950);
        // A segment beyond the edge does not.
        s.seen(4000, 990, 3000);
        assert_eq!(s.echo(3000), 950);
    }

    #[test]
    fn a_hole_filled_by_a_retransmission_echoes_the_retransmission() {
        let mut s = Stamps::new(1, 0, 64);
        // [1000,2000) out of order at 300, then the hole [0,1000) filled by a resend at 700.
        s.took(1000, 2000, 300);
        s.took(0, 1000, 700);
        assert_eq!(
            s.echo(0),
            700,
            "RFC 7323 rule (3): the segment that filled the hole, not the earlier one behind it"
        );
    }

    #[test]
    fn ranges_are_bounded_and_widened_when_full() {
        let mut s = Stamps::new(1, 0, 2);
        s.took(0, 10, 5);
        s.took(10, 20, 6);
        s.took(20, 30, 7);
        assert_eq!(s.kept(), 2);
        assert_eq!(
            s.echo(25),
            7,
            "the last range widened, with the later TSval"
        );
        assert_eq!(s.echo(15), 7);
        s.took(40, 50, 8);
        assert_eq!((s.kept(), s.echo(45)), (2, 1), "not adjacent: unrecorded");
    }

    #[test]
    fn tsvals_compare_modulo_2_32() {
        let mut s = Stamps::new(u32::MAX - 1, 0, 4);
        s.seen(0, 3, 0);
        assert_eq!(s.echo(0), 3, "3 is after 2^32 - 2");
        s.seen(0, u32::MAX, 0);
        assert_eq!(s.echo(0), 3, "never backwards");
    }
}
