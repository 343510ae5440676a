//! The sending half of a connection: the application's byte queue, segmentation into TPDUs,
//! the record of what is in flight, and the error-control reactions (MACK, NACK, SNACK,
//! timeout) that schedule retransmissions. Which reactions apply is the mode's composition.

use crate::error_control::{ErrorControl, Keep};
use crate::rtt::LossTiming;
use aerotp_wire::{expand_seq, Ack, Flags};
use bytes::Bytes;
use lanes::{Lanes, Transmission};
use queue::ByteQueue;
use reordering::Reordering;
use std::collections::VecDeque;
use std::time::Duration;

mod lanes;
mod loss;
mod paths;
mod queue;
mod rate;
mod record;
mod reordering;
mod resend;
pub use lanes::{LaneStats, MAX_LANES};
use record::{current, Sent};
pub use record::{Outgoing, SenderStats};

/// Most application bytes the redundant ASYN copies carry. Short enough that a copy is
/// rarely hit by bit errors (544 bytes on the wire: 35 % at BER 1e-4 without FEC, all three
/// copies lost 4 %), long enough for a typical first telemetry message; the rest follows in
/// full-size TPDUs from number 1.
pub const ASYN_DATA_MAX: usize = 512;

#[derive(Debug)]
pub struct Sender {
    ec: ErrorControl,
    /// Written bytes not yet cut into TPDUs.
    queue: ByteQueue,
    /// The AFIN: asked for, numbered, acknowledged.
    fin: Fin,
    next_seq: u64,
    /// Lowest TPDU number still tracked; entries[i] is TPDU base + i.
    base: u64,
    entries: VecDeque<Option<Sent>>,
    /// Transmissions in send order, per path, for loss detection and timeouts.
    lanes: Lanes,
    /// Sequence numbers a lane call declared lost (kept to save an allocation per ACK).
    lost: Vec<u64>,
    retx: VecDeque<u64>,
    next_tx: u64,
    /// Longest transmission-to-acknowledgement time seen since last taken.
    ack_latency: Option<Duration>,
    /// What the peer's latest acknowledgements said.
    peer: PeerAcks,
    retention: Duration,
    /// Entries sent and not yet acknowledged (kept in step with `entries`).
    unacked: usize,
    /// When the first TPDU of the data now unacknowledged was sent (`outstanding_since`).
    outstanding_since: Duration,
    /// The redundant copies of the opening ASYN still to go.
    asyn: AsynCopies,
    /// What loss detection keeps of its own: reordering seen and the window it widened.
    reordering: Reordering,
    /// While erasure repairs may still rebuild a lost TPDU at the receiver, loss detection
    /// waits this much longer (and the packet-count rule, which cannot wait, is off).
    repair_wait: Duration,
    stats: SenderStats,
}

impl Sender {
    pub fn new(
        ec: ErrorControl,
        queue_limit: usize,
        initial_window: u32,
        retention: Duration,
    ) -> Sender {
        Sender {
            ec,
            queue: ByteQueue::new(queue_limit),
            fin: Fin::default(),
            next_seq: 0,
            base: 0,
            entries: VecDeque::new(),
            lanes: Lanes::new(),
            lost: Vec::new(),
            retx: VecDeque::new(),
            next_tx: 0,
            ack_latency: None,
            peer: PeerAcks {
                cum: 0,
                window: initial_window,
                delivered: 0,
            },
            retention,
            unacked: 0,
            outstanding_since: Duration::ZERO,
            asyn: AsynCopies::default(),
            reordering: Reordering::new(),
            repair_wait: Duration::ZERO,
            stats: SenderStats::default(),
        }
    }

    /// Queues application bytes; returns how many were taken (backpressure when full).
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.fin.requested {
            return 0;
        }
        let n = self.queue.write(data);
        self.stats.bytes_written += n as u64;
        n
    }

    /// As [`Sender::write`], without copying: takes the queued bytes off the front of `data`,
    /// and the TPDU bodies cut from them share its buffer.
    pub fn write_shared(&mut self, data: &mut Bytes) -> usize {
        if self.fin.requested {
            return 0;
        }
        let n = self.queue.write_shared(data);
        self.stats.bytes_written += n as u64;
        n
    }

    /// Application bytes written and not yet cut into TPDUs.
    pub fn unsent(&self) -> usize {
        self.queue.len()
    }

    /// At least half the send buffer waits unsent: the application is held back by it.
    pub fn backlogged(&self) -> bool {
        self.queue.half_full()
    }

    pub fn writable(&self) -> usize {
        if self.fin.requested {
            0
        } else {
            self.queue.room()
        }
    }

    pub fn finish(&mut self) {
        self.fin.requested = true;
    }

    pub fn fin_requested(&self) -> bool {
        self.fin.requested
    }

    pub fn fin_sent(&self) -> bool {
        self.fin.seq.is_some()
    }

    /// The peer has the AFIN (acknowledged, or its AFINACK came).
    pub fn fin_acked(&self) -> bool {
        self.fin.acked
    }

    /// The sending half's counters (`ConnectionStats::sender`; the connection adds the
    /// PROBEs it sends itself).
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Bytes the peer application has read, from its acknowledgements (confirmed delivery).
    pub fn peer_delivered(&self) -> u64 {
        self.peer.delivered
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Everything written has been sent and acknowledged (or, for modes without positive
    /// acknowledgements, sent).
    pub fn all_acked(&self) -> bool {
        self.queue.len() == 0 && self.fin.seq.is_some() && self.fin.acked && self.outstanding() == 0
    }

    /// TPDUs sent and not yet acknowledged (kept for retransmission).
    pub fn outstanding(&self) -> usize {
        self.unacked
    }

    pub fn has_outstanding(&self) -> bool {
        self.unacked > 0
    }

    /// When the data now unacknowledged began to be: the first TPDU sent while nothing was
    /// outstanding (meaningful while `has_outstanding`).
    pub fn outstanding_since(&self) -> Duration {
        self.outstanding_since
    }

    /// Whether new data (or the AFIN) is waiting and the peer's window admits it.
    pub fn has_new(&self) -> bool {
        let window_ok =
            !self.ec.acknowledges() || self.next_seq < self.peer.cum + u64::from(self.peer.window);
        window_ok && (self.queue.len() > 0 || (self.fin.requested && self.fin.seq.is_none()))
    }

    pub fn has_retransmission(&self) -> bool {
        !self.retx.is_empty()
    }

    /// The next TPDU to send: retransmissions first, then new data up to `max_body` bytes.
    /// `path` chooses the path it goes on, given the path a retransmission was lost on.
    pub fn next_outgoing(
        &mut self,
        now: Duration,
        max_body: usize,
        asyn: bool,
        path: &mut impl FnMut(Option<u8>) -> u8,
    ) -> Option<Outgoing> {
        if self.asyn.left > 0 {
            return Some(self.next_asyn_copy(now, max_body, path(None)));
        }
        let loss_by_time = self.ec.loss_by_time;
        while let Some(seq) = self.retx.pop_front() {
            let tx = self.next_tx;
            let Some(Some(s)) = self.entry_mut(seq) else {
                continue;
            };
            s.queued = false;
            if s.acked {
                continue;
            }
            // The opening TPDU stays on the first path: sent on another, before the peer has
            // proven that address, it would open a second connection there.
            let p = if s.flags.contains(Flags::ASYN) {
                0
            } else {
                path(Some(s.path))
            };
            s.sends += 1;
            s.tx = tx;
            s.path = p;
            s.last_sent = now;
            let out = Outgoing {
                seq,
                flags: s.flags,
                body: None,
                len: s.body.len(),
                retransmission: true,
                path: p,
            };
            let timed = loss_by_time || s.flags.contains(Flags::AFIN);
            self.next_tx += 1;
            if timed {
                self.lanes.push(p, Transmission { tx, seq, at: now });
            }
            let snap = self.lanes.on_sent(now, p, out.len, true);
            if let Some(Some(s)) = self.entry_mut(seq) {
                s.snap = snap;
                s.in_flight = true;
            }
            self.stats.tpdus_retransmitted += 1;
            self.stats.tpdus_sent += 1;
            return Some(out);
        }
        if !self.has_new() {
            return None;
        }
        let n = self.queue.len().min(max_body);
        let body = self.queue.take_front(n);
        let mut flags = Flags::empty();
        if asyn && self.next_seq == 0 {
            flags.insert(Flags::ASYN);
        }
        if self.fin.requested && self.queue.len() == 0 {
            flags.insert(Flags::AFIN);
            self.fin.seq = Some(self.next_seq);
        }
        Some(self.new_tpdu(now, body, flags, path(None)))
    }

    /// A one-line summary of the send state, for diagnostics.
    pub fn describe(&self) -> String {
        let unacked: Vec<u64> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Some(s) if !s.acked))
            .map(|(i, _)| self.base + i as u64)
            .take(8)
            .collect();
        format!(
            "base={} next={} peer_cum={} unacked={} first_unacked={:?} retx={:?} flight={}",
            self.base,
            self.next_seq,
            self.peer.cum,
            self.unacked,
            unacked,
            self.retx,
            self.lanes.in_flight()
        )
    }

    /// Numbers, records (if the mode keeps TPDUs) and returns a new TPDU.
    fn new_tpdu(&mut self, now: Duration, body: Bytes, flags: Flags, path: u8) -> Outgoing {
        let seq = self.next_seq;
        self.next_seq += 1;
        let tx = self.next_tx;
        self.next_tx += 1;
        self.stats.tpdus_sent += 1;
        self.stats.bytes_sent_payload += body.len() as u64;
        let len = body.len();
        let kept = self.ec.keep != Keep::Nothing || flags.contains(Flags::AFIN);
        let snap = self.lanes.on_sent(now, path, len, kept);
        let mut body = Some(body);
        // Modes without retransmission keep only the AFIN (resent until AFINACK or CLOSE_TO).
        if kept {
            while self.base + (self.entries.len() as u64) < seq {
                self.entries.push_back(None);
            }
            self.entries.push_back(Some(Sent {
                body: body.take().unwrap_or_default(),
                flags,
                first_sent: now,
                last_sent: now,
                sends: 1,
                tx,
                path,
                acked: false,
                queued: false,
                snap,
                in_flight: true,
            }));
            if self.unacked == 0 {
                self.outstanding_since = now;
            }
            self.unacked += 1;
            // Only modes with positive acknowledgements time out data; every mode times out
            // its AFIN (resent until AFINACK or CLOSE_TO).
            if self.ec.loss_by_time || flags.contains(Flags::AFIN) {
                self.lanes.push(path, Transmission { tx, seq, at: now });
            }
        }
        Outgoing {
            seq,
            flags,
            body,
            len,
            retransmission: false,
            path,
        }
    }

    /// Opens the connection with `copies` back-to-back copies of the ASYN TPDU (number 0)
    /// before any further data: a TPDU sent redundantly establishes the receiver one
    /// propagation delay after connect even when some copies are lost. The copies carry the
    /// first application bytes already queued when they go (up to `ASYN_DATA_MAX`), so the
    /// first data arrives with the connection, as opportunistic set-up intends, and is as
    /// loss-proof as the set-up itself. With 0 copies the ASYN rides on the first data TPDU
    /// once, as in the papers.
    pub fn open(&mut self, copies: u8) {
        if self.next_seq == 0 {
            self.asyn.left = copies;
        }
    }

    /// Whether an ASYN copy is waiting to go.
    pub fn asyn_pending(&self) -> bool {
        self.asyn.left > 0
    }

    fn next_asyn_copy(&mut self, now: Duration, max_body: usize, path: u8) -> Outgoing {
        self.asyn.left -= 1;
        if self.next_seq == 0 {
            let n = self.queue.len().min(max_body).min(ASYN_DATA_MAX);
            let body = self.queue.take_front(n);
            if self.asyn.left > 0 {
                self.asyn.body.clone_from(&body);
            }
            return self.new_tpdu(now, body, Flags::ASYN, path);
        }
        self.stats.tpdus_sent += 1;
        self.stats.asyn_copies += 1;
        let body = if self.asyn.left > 0 {
            self.asyn.body.clone()
        } else {
            std::mem::take(&mut self.asyn.body)
        };
        self.lanes.on_sent(now, path, body.len(), false);
        Outgoing {
            len: body.len(),
            seq: 0,
            flags: Flags::ASYN,
            body: Some(body),
            retransmission: false,
            path,
        }
    }

    /// The body of `o`: its own, or the one this sender keeps under its number. `None` only
    /// if the kept TPDU was released since `next_outgoing` handed `o` out, which nothing
    /// between the two calls does (checked in debug builds); the caller then sends nothing,
    /// and the TPDU goes again as any lost one.
    pub fn body_of<'a>(&'a self, o: &'a Outgoing) -> Option<&'a [u8]> {
        if let Some(b) = &o.body {
            return Some(b);
        }
        let kept = o
            .seq
            .checked_sub(self.base)
            .and_then(|i| self.entries.get(usize::try_from(i).ok()?))
            .and_then(Option::as_ref)
            .map(|s| &s.body[..]);
        debug_assert!(kept.is_some(), "TPDU {} handed out without its body", o.seq);
        kept
    }

    fn entry_mut(&mut self, seq: u64) -> Option<&mut Option<Sent>> {
        let idx = seq.checked_sub(self.base)?;
        self.entries.get_mut(usize::try_from(idx).ok()?)
    }

    fn queue_retx(&mut self, seq: u64) -> bool {
        match self.entry_mut(seq) {
            Some(Some(s)) if !s.acked && !s.queued => {
                s.queued = true;
                if std::mem::take(&mut s.in_flight) {
                    let (path, len) = (s.path, s.body.len());
                    self.lanes.leave_flight(path, len);
                }
                // Lowest sequence first, as TCP repairs from its oldest unacknowledged byte:
                // the receiver delivers in order, so the lowest hole holds everything behind
                // it. Losses are found in transmission order, which is not sequence order
                // once a TPDU has been resent: after a dropped call a TPDU whose last copy
                // went into the drop was found after the older transmissions of the TPDUs
                // behind it, and in-order delivery waited for all of them (one channel of
                // seed 003: 14 s per drop).
                let at = self.retx.partition_point(|&x| x < seq);
                self.retx.insert(at, seq);
                true
            }
            _ => false,
        }
    }

    /// Takes the longest transmission-to-acknowledgement time of the TPDUs acknowledged since
    /// the last call, measured at `now`.
    pub fn take_ack_latency(&mut self, now: Duration) -> Option<Duration> {
        self.ack_latency.take().map(|sent| now.saturating_sub(sent))
    }

    /// Marks TPDU `seq` acknowledged; gives the path and index of the transmission that
    /// arrived when that can be told, and whether it was the TPDU's only one.
    fn mark_acked(
        &mut self,
        seq: u64,
        now: Duration,
        min_rtt: Option<Duration>,
    ) -> Option<(u8, u64, bool)> {
        let largest = self.reordering.largest_acked_tx;
        let (tx, path, len, first, attributable, snap, left) = match self.entry_mut(seq) {
            Some(Some(s)) if !s.acked => {
                s.acked = true;
                let left = std::mem::take(&mut s.in_flight);
                // Which copy arrived? Certainly this one if it is the only one; this one too
                // if the acknowledgement came at least a minimum round trip after it was sent
                // (an earlier copy's acknowledgement cannot be told from it otherwise).
                let attributable =
                    s.sends == 1 || min_rtt.is_some_and(|m| now.saturating_sub(s.last_sent) >= m);
                let first = (s.sends == 1).then_some(s.last_sent);
                (
                    s.tx,
                    s.path,
                    s.body.len(),
                    first,
                    attributable,
                    s.snap,
                    left,
                )
            }
            _ => return None,
        };
        // Karn: a retransmitted TPDU's acknowledgement may answer any of its copies, so it
        // gives no latency sample.
        if let Some(sent) = first {
            self.ack_latency = Some(self.ack_latency.map_or(sent, |o: Duration| o.min(sent)));
        }
        self.unacked -= 1;
        self.stats.acked_tpdus += 1;
        self.lanes.on_acked(now, path, len, first, &snap);
        if left {
            self.lanes.leave_flight(path, len);
        }
        if self.fin.seq == Some(seq) {
            self.fin.acked = true;
        }
        if first.is_some() && largest.is_some_and(|l| tx < l) {
            self.reordering.seen = true;
        }
        if !attributable {
            // The original arrived after all: the retransmission was needless, the reordering
            // (or delay) window too narrow.
            self.reordering.widen(min_rtt);
        }
        // The same ambiguity for loss detection: if the original of a retransmitted TPDU is
        // what arrived, counting the acknowledgement against the newest transmission would
        // declare lost everything sent between the two (on a long path, a probe sent before
        // the first sample made the whole first flight look lost). Only an attributable
        // acknowledgement moves the newest-acknowledged transmission, as RFC 8985 ignores
        // acknowledgements it cannot attribute.
        attributable.then_some((path, tx, first.is_some()))
    }

    /// An attributable acknowledgement of transmission `tx` on `path` (`only`: the TPDU's
    /// only transmission). With several paths a retransmission's acknowledgement says
    /// nothing of its path: the copy that arrived may be the original on a slower path,
    /// later than a minimum round trip of this one (taking it as this path's moved its
    /// newest acknowledged transmission ahead of TPDUs still on their way, declared them
    /// lost and sent them to the slow path, whose queue grew with every round).
    fn note_acked_tx(&mut self, path: u8, tx: u64, only: bool) {
        self.reordering.on_acked_tx(tx);
        if only || self.lanes.single() {
            self.lanes.on_acked_tx(path, tx);
        }
    }

    fn release_front(&mut self) {
        while let Some(front) = self.entries.front() {
            match front {
                Some(s) if !s.acked => break,
                _ => {
                    self.entries.pop_front();
                    self.base += 1;
                }
            }
        }
    }

    /// Applies a cumulative acknowledgement (ACK, or the cumulative part of a MACK), with
    /// the smallest round trip measured so far (`min_rtt`, to tell which copy of a
    /// retransmitted TPDU arrived).
    pub fn on_ack(&mut self, ack: &Ack, now: Duration, min_rtt: Option<Duration>) {
        let cum = ack.cum.min(self.next_seq);
        let from = self.base.max(self.peer.cum.min(cum));
        for seq in from..cum {
            if let Some((path, tx, only)) = self.mark_acked(seq, now, min_rtt) {
                self.note_acked_tx(path, tx, only);
            }
        }
        if cum > self.peer.cum {
            self.peer.cum = cum;
        }
        if let Some(f) = self.fin.seq {
            if cum > f {
                self.fin.acked = true;
            }
        }
        self.peer.window = ack.window;
        self.peer.delivered = self.peer.delivered.max(ack.delivered);
        self.release_front();
    }

    /// AFINACK in modes without positive acknowledgements: the AFIN arrived; stop resending it.
    pub fn on_fin_acked(&mut self, min_rtt: Option<Duration>) {
        if let Some(f) = self.fin.seq {
            self.mark_acked(f, Duration::ZERO, min_rtt);
            self.release_front();
        }
        self.fin.acked = true;
    }

    /// Applies a MACK's selective part: its entries (single TPDUs) and ranges (`[start, end)`
    /// blocks, low 32 bits), then runs loss detection, with the estimator's timing `t` taken
    /// after the MACK's sample (its loss time bounds the reorder window from now on:
    /// `Reordering::bound`).
    pub fn on_mack_entries(
        &mut self,
        entries: &[u32],
        ranges: &[(u32, u32)],
        now: Duration,
        t: &LossTiming,
    ) {
        self.reordering.bound = t.loss_time;
        let expected = self.peer.cum;
        let tracked_end = self.next_seq.min(self.base + self.entries.len() as u64);
        let acked = |s: &mut Sender, seq: u64| {
            if let Some((path, tx, only)) = s.mark_acked(seq, now, t.min_rtt) {
                s.note_acked_tx(path, tx, only);
            }
        };
        for &e in entries {
            let seq = expand_seq(expected, e);
            if seq < tracked_end {
                acked(self, seq);
            }
        }
        for &(a, b) in ranges {
            let start = expand_seq(expected, a).max(self.base);
            // Bounded by what we track: a forged or stale range cannot make this loop long.
            let end = expand_seq(start, b).min(tracked_end);
            for seq in start..end {
                acked(self, seq);
            }
        }
        self.release_front();
        self.detect_losses(now, t);
    }

    /// Queues the TPDUs of `lost` for retransmission, each counted against the path it was
    /// lost on; empties `lost`.
    fn declare_lost(&mut self, lost: &mut Vec<u64>) {
        for seq in lost.drain(..) {
            self.lose(seq);
        }
    }

    /// Queues `seq` for retransmission and counts it lost on its path, if it is unacknowledged
    /// and not queued already.
    fn lose(&mut self, seq: u64) -> bool {
        let (path, len) = match self.entry_mut(seq) {
            Some(Some(s)) if !s.acked && !s.queued => (s.path, s.body.len()),
            _ => return false,
        };
        self.lanes.on_lost(path, len);
        self.queue_retx(seq)
    }

    #[inline]
    fn is_current_unacked(&self, t: Transmission) -> bool {
        current(&self.entries, self.base, t.seq, t.tx)
    }

    /// SNACK: these ranges are missing at the receiver (as it saw them when it sent the SNACK).
    /// A TPDU (re)transmitted less than a minimum round trip ago cannot have reached the
    /// receiver and been missed by it yet: the SNACK predates it, and resending it would be
    /// needless (on a long path the receiver's repeated SNACKs would otherwise resend every
    /// hole once per repetition while the first repair is still on its way).
    /// `fresh` is that minimum round trip, or before any sample the one to assume (the
    /// connection's smoothed RTT, its initial one then): near-reliable's ACKs echo no
    /// timestamp, so a sender whose ASYNACK was lost never takes a sample, and with no floor
    /// it resent every hole once per repeated SNACK (at 30 % loss, 798 needless
    /// retransmissions per 10 MB instead of 27).
    pub fn on_snack(&mut self, ranges: &[(u32, u32)], now: Duration, fresh: Duration) {
        let expected = self.peer.cum.max(self.base);
        for &(a, b) in ranges {
            self.stats.snack_ranges_received += 1;
            let start = expand_seq(expected, a);
            let end = expand_seq(start, b).min(self.next_seq);
            // Bounded by what we track.
            let end = end.min(self.base + self.entries.len() as u64);
            for seq in start.max(self.base)..end {
                let recent = matches!(
                    self.entry_mut(seq),
                    Some(Some(s)) if now.saturating_sub(s.last_sent) < fresh
                );
                if !recent {
                    self.lose(seq);
                }
            }
        }
    }

    /// Hybrid-nack keeps TPDUs only for `retention` (no positive acknowledgement frees them).
    pub fn expire_retained(&mut self, now: Duration) {
        if self.ec.keep != Keep::ForRetention {
            return;
        }
        while let Some(Some(s)) = self.entries.front() {
            if s.first_sent + self.retention > now || self.fin.seq == Some(self.base) {
                break;
            }
            if !s.acked {
                self.unacked -= 1;
            }
            self.entries.pop_front();
            self.base += 1;
        }
        while matches!(self.entries.front(), Some(None)) {
            self.entries.pop_front();
            self.base += 1;
        }
    }

    pub fn retention_deadline(&self) -> Option<Duration> {
        if self.ec.keep != Keep::ForRetention {
            return None;
        }
        // The AFIN is never expired (`expire_retained` keeps it until acknowledged), so its
        // retention is no deadline: reporting it would wake the driver for nothing, forever.
        if self.fin.seq == Some(self.base) {
            return None;
        }
        match self.entries.front() {
            Some(Some(s)) => Some(s.first_sent + self.retention),
            _ => None,
        }
    }
}

/// The AFIN of the sending half.
#[derive(Debug, Default)]
struct Fin {
    /// The application closed: the AFIN follows the queued data.
    requested: bool,
    /// The AFIN's TPDU number, once cut.
    seq: Option<u64>,
    acked: bool,
}

/// What the peer's latest acknowledgements said.
#[derive(Debug)]
struct PeerAcks {
    /// Every TPDU below this arrived.
    cum: u64,
    /// TPDUs beyond `cum` the receiver takes.
    window: u32,
    /// Bytes its application has read (confirmed delivery).
    delivered: u64,
}

/// The redundant copies of the opening ASYN (`Sender::open`).
#[derive(Debug, Default)]
struct AsynCopies {
    /// Copies still to send before further data.
    left: u8,
    /// The body of TPDU 0 while copies of it are still to go (modes that keep no sent TPDUs
    /// need it too).
    body: Bytes,
}

#[cfg(test)]
mod tests;
