//! The receiving half of a connection: the reorder buffer, in-order delivery to the
//! application, and the feedback the mode calls for (MACK, cumulative ACK, NACK, SNACK,
//! receiver reports). The reorder buffer is its own; the rest is in owned parts:
//! `delivery::Delivery` (delivered, unread data), `feedback::FeedbackSchedule` (when feedback
//! is due, within the return link's budget), `channel::ChannelEstimate` (bit error rate and
//! link loss, for reports), `hole_wait::HoleWait` (how long a hole waits: repair round trip,
//! reordering and erasure waits); confirmed delivery in `confirm`.

use crate::codec::Quality;
use crate::config::ConnectionConfig;
use crate::erasure::Arrival;
use crate::error_control::{ErrorControl, Feedback};
use crate::reorder_budget::{tpdu_cost, ReorderBudget, SLOT_OVERHEAD};
use aerotp_wire::{expand_seq, Ack, ControlBody, Mack, Report};
use bytes::Bytes;
use channel::ChannelEstimate;
use delivery::Delivery;
use feedback::FeedbackSchedule;
use hole_wait::HoleWait;
use std::collections::BTreeMap;
use std::time::Duration;

/// Most SNACK ranges in one TPDU (NACK entries: `feedback::MAX_NACKS`, as many).
const MAX_LIST: usize = 64;
/// Most received blocks a MACK re-reports (the newest; 8 bytes each).
const MAX_MACK_RANGES: usize = 16;
/// A gap of more TPDUs than this is reported at once (see `Receiver::on_data`).
const LONG_GAP: u64 = 16;

#[derive(Debug, Clone)]
struct Slot {
    body: Bytes,
    fin: bool,
    arrived: Duration,
    /// The sender's timestamp: tells an original that was overtaken from a retransmission.
    ts: u32,
}

pub use delivery::Delivered;

#[derive(Debug, Clone, Default)]
pub struct ReceiverStats {
    pub tpdus_received: u64,
    pub tpdus_duplicate: u64,
    pub tpdus_corrected: u64,
    pub bits_corrected: u64,
    pub tpdus_corrupted: u64,
    /// TPDUs skipped for good (lossy modes).
    pub tpdus_lost: u64,
    pub tpdus_beyond_window: u64,
    /// Out-of-order TPDUs dropped because the reorder buffer was at its byte bound (the
    /// connection's `reorder_bytes` or the endpoint's `max_reorder_bytes`).
    pub tpdus_dropped_memory: u64,
    /// Bytes of out-of-order TPDU bodies held now.
    pub reorder_bytes_held: u64,
    /// Data TPDUs dropped because their body exceeds what the MTU in force allows.
    pub tpdus_oversized: u64,
    pub bytes_delivered: u64,
    /// Data TPDUs lost on the link (missing or uncorrectable), before any repair.
    pub wire_lost: u64,
    /// Runs of consecutive such losses.
    pub wire_bursts: u64,
    /// Lost TPDUs rebuilt by erasure decoding.
    pub tpdus_rebuilt: u64,
    /// Lost TPDUs that arrived again as retransmissions.
    pub tpdus_retransmitted_in: u64,
    pub macks_sent: u64,
    pub acks_sent: u64,
    pub nacks_sent: u64,
    pub snacks_sent: u64,
    pub reports_sent: u64,
}

#[derive(Debug)]
pub struct Receiver {
    ec: ErrorControl,
    window: u32,
    crc_check: bool,
    /// Next TPDU number to deliver (= cumulative acknowledgement).
    expected: u64,
    highest: Option<u64>,
    buffer: BTreeMap<u64, Slot>,
    /// Bytes of the bodies in `buffer`, and their bounds (docs/security.md).
    held_bytes: usize,
    max_held: usize,
    /// The peer's address is not proven yet: the bytes charged to the endpoint's pool for
    /// unproven peers (`memory`).
    unproven: Option<usize>,
    reorder: ReorderBudget,
    /// Delivered in order, not yet read.
    delivery: Delivery,
    /// When feedback is due, within the return link's budget.
    feedback: FeedbackSchedule,
    /// How long holes wait (to be skipped, to be SNACKed).
    holes: HoleWait,
    /// Bit error rate and loss on the link as this end saw them (for reports and statistics).
    channel: ChannelEstimate,
    /// Optional per-TPDU delivery trace: (TPDU number, time delivered in order, bytes).
    trace: Option<Vec<(u64, Duration, u32)>>,
    /// Confirmed delivery's state (`ConnectionConfig::confirm_delivery`), if on.
    confirmation: Option<crate::confirmation::Confirmation>,
    /// Counters; read through [`Receiver::stats`].
    stats: ReceiverStats,
}

/// Most entries a delivery trace keeps.
pub const TRACE_LIMIT: usize = 1 << 22;

impl Receiver {
    /// The receiving half for `ec` (the connection's error control) and `cfg`.
    pub fn new(ec: ErrorControl, cfg: &ConnectionConfig) -> Receiver {
        Receiver {
            ec,
            window: cfg.recv_window,
            crc_check: cfg.crc_check,
            expected: 0,
            highest: None,
            buffer: BTreeMap::new(),
            held_bytes: 0,
            max_held: cfg.reorder_bytes,
            unproven: None,
            reorder: ReorderBudget::new(usize::MAX),
            delivery: Delivery::default(),
            feedback: FeedbackSchedule::new(cfg),
            holes: HoleWait::new(cfg.min_hole_timeout, cfg.initial_rtt),
            channel: ChannelEstimate::new(),
            trace: None,
            confirmation: cfg.confirm_delivery.then(Default::default),
            stats: ReceiverStats::default(),
        }
    }

    fn window_left(&self) -> u32 {
        let used = self.buffer.len() + self.delivery.chunks();
        self.window
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
    }

    /// Nothing arrived since the last feedback and nothing asks for any: exactly the state in
    /// which `poll_feedback` builds an empty body and changes nothing (no count, timer, hole,
    /// NACK or report is due, and the count triggers need at least one TPDU). The common
    /// case of a sender's own receiver, which its connection asks before every datagram it
    /// sends: building the empty body each time was 3 % of the runtime's user-space
    /// instructions outside the CRC, and checking this first leaves 1.7 % fewer (callgrind
    /// on `aerotp bench loopback`, docs/results/loopback.md).
    fn nothing_to_feed_back(&self) -> bool {
        self.feedback.idle() && !self.has_holes()
    }

    /// Feedback is asked for at once (a reopened window, a probe, a hole, a duplicate).
    pub fn feedback_asked(&self) -> bool {
        self.feedback.asked()
    }

    /// The peer probes for feedback (an outage probe): acknowledge at once, as the budget
    /// allows, in the modes that acknowledge.
    pub fn request_feedback(&mut self) {
        self.feedback.ask_if(self.ec.acknowledges());
    }

    /// The return link's rate changed (the runtime re-paced this end).
    pub fn set_return_rate(&mut self, rate_bps: u64, share: f64) {
        self.feedback.set_return_rate(rate_bps, share);
    }

    /// A one-line summary of the reorder state, for diagnostics.
    pub fn describe(&self) -> String {
        let keys: Vec<u64> = self.buffer.keys().take(8).copied().collect();
        format!(
            "expected={} highest={:?} buffered={} first={:?}",
            self.expected,
            self.highest,
            self.buffer.len(),
            keys
        )
    }

    /// The longest this receiver now holds an acknowledgement, in whole milliseconds (rounded
    /// up), for MACKs: the aggregation delay or, on a return link thin enough that the budget
    /// spaces feedback further apart, that spacing.
    pub fn max_delay_ms(&self) -> u16 {
        self.feedback.max_delay_ms()
    }

    /// The latest TPDU's timestamp to echo and how long it has been held since it arrived, in
    /// 100 µs units: what a MACK carries so the sender can measure the round trip.
    pub fn echo(&self, now: Duration) -> (u32, u16) {
        self.feedback.echo(now)
    }

    /// Whether TPDUs of this connection use FEC, so the sender may want receiver reports.
    pub fn want_reports(&mut self) {
        self.feedback.want_reports();
    }

    /// A datagram of `bits` arrived with `quality` (`parity`: its FEC parity bytes): the
    /// bit-error-rate estimate and the correction counters.
    pub fn on_quality(&mut self, bits: usize, quality: Quality, parity: u8) {
        self.channel.on_quality(bits, quality, parity);
        if let Quality::Corrected { bits, .. } = quality {
            self.stats.tpdus_corrected += 1;
            self.stats.bits_corrected += bits as u64;
        }
    }

    /// A data TPDU was dropped because its body exceeds what the MTU in force allows.
    pub fn on_oversized(&mut self) {
        self.stats.tpdus_oversized += 1;
    }

    /// The bit error rate measured on arriving datagrams (zero before any).
    pub fn measured_ber(&self) -> f64 {
        self.channel.ber()
    }

    /// The counters, with the reorder buffer's bytes and the link loss as they are now.
    pub fn stats(&self) -> ReceiverStats {
        let mut s = self.stats.clone();
        s.reorder_bytes_held = self.held_bytes() as u64;
        (s.wire_lost, s.wire_bursts) = self.channel.wire_loss();
        s
    }

    /// Keep a delivery trace from now on (`ConnectionConfig::trace`).
    pub fn record_trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
    }

    /// The delivery trace, if kept: (TPDU number, time delivered in order, bytes).
    pub fn trace(&self) -> Option<&[(u64, Duration, u32)]> {
        self.trace.as_deref()
    }

    /// TPDUs received that were new (not duplicates, taken in).
    pub fn tpdus_received(&self) -> u64 {
        self.stats.tpdus_received
    }

    /// A data TPDU whose body checked (after correction, if any). Returns whether it was new.
    pub fn on_data(
        &mut self,
        now: Duration,
        wire_seq: u32,
        timestamp: u32,
        body: Bytes,
        fin: bool,
    ) -> bool {
        let seq = expand_seq(self.highest.unwrap_or(self.expected), wire_seq);
        let new = seq >= self.expected && !self.buffer.contains_key(&seq);
        // The arrival spacing of new data-bearing TPDUs sets the aggregation delay; empty
        // TPDUs (AFIN) and duplicates (the back-to-back ASYN copies) would make it look far
        // shorter than it is.
        self.feedback
            .on_arrival(now, timestamp, new && !body.is_empty());
        self.holes.on_arrival(now, seq);
        if !new {
            self.stats.tpdus_duplicate += 1;
            // A duplicate means our acknowledgement was lost or late: answer at once.
            self.feedback.on_duplicate(self.ec.acknowledges());
            return false;
        }
        if seq >= self.expected + u64::from(self.window) {
            self.stats.tpdus_beyond_window += 1;
            return false;
        }
        if !self.admit(seq, tpdu_cost(body.len())) {
            return false;
        }
        self.stats.tpdus_received += 1;
        if self.channel.on_arrival(seq, timestamp, true) == Arrival::Retransmission {
            self.stats.tpdus_retransmitted_in += 1;
        }
        let prev_highest = self.highest;
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        // A new gap: the sender should hear of it now rather than after the aggregate fills
        // (like TCP's immediate ACK on out-of-order data), so MACK aggregation does not slow
        // loss recovery.
        let new_gap = match prev_highest {
            Some(h) => seq > h + 1,
            None => seq > 0,
        };
        if new_gap && self.ec.feedback == Feedback::Selective {
            self.feedback.ask();
        }
        // A long gap (an outage, a long burst) is reported at once, not at the next report
        // interval: a sender repairing across TPDUs owes catch-up repairs for it
        // (`ErasureTx::on_report`), and every millisecond the report waits, the data sent
        // after the gap pushes the oldest lost TPDUs out of the sources its encoder holds. A
        // 1 s outage at 3 Mb/s lost its 39 oldest TPDUs that way in 2 of 6 `aerotp demo` runs.
        if prev_highest.is_some_and(|h| seq > h + LONG_GAP) {
            self.feedback.report_now(now);
        }
        if self.reports_holes() {
            if new_gap {
                self.holes.gap_opened(now);
            }
            if prev_highest.is_some_and(|h| seq < h) {
                self.learn_reordering(now, seq, timestamp);
            }
        }
        self.store(now, seq, body, fin, timestamp);
        true
    }

    /// Keeps a new TPDU in the reorder buffer, delivers what is in order and schedules the
    /// acknowledgement and report it calls for (arrivals and rebuilt TPDUs alike).
    fn store(&mut self, now: Duration, seq: u64, body: Bytes, fin: bool, ts: u32) {
        let entry = self.ec.feedback == Feedback::Selective && seq != self.expected;
        self.feedback.on_stored(now, entry.then_some(seq as u32));
        // The AFIN is answered at once, except with confirmed delivery: its AFINACK waits
        // for the application's confirmation of the end and then carries everything; until
        // then the acknowledgement timer above stands (one TPDU instead of two per close).
        if fin && self.confirmation.is_none() {
            self.feedback.ask();
        }
        self.held_bytes += tpdu_cost(body.len());
        if seq == self.expected {
            // In order: delivered at once, without a trip through the reorder buffer (an
            // insert and a remove per TPDU, most TPDUs on most links), then what waited
            // behind it.
            self.deliver_next(now, body, fin);
        } else {
            self.buffer.insert(
                seq,
                Slot {
                    body,
                    fin,
                    arrived: now,
                    ts,
                },
            );
        }
        self.deliver_in_order(now);
        self.feedback
            .schedule_report(now, self.stats.reports_sent == 0);
    }

    /// A data TPDU rebuilt by erasure decoding (it never arrived intact). Like an arrival,
    /// without the timing an arrival gives (no echo, no spacing, no repair round trip).
    /// Returns whether it was new.
    pub fn on_rebuilt(&mut self, now: Duration, wire_seq: u32, body: Bytes, fin: bool) -> bool {
        let seq = expand_seq(self.highest.unwrap_or(self.expected), wire_seq);
        if seq < self.expected
            || self.buffer.contains_key(&seq)
            || seq >= self.expected + u64::from(self.window)
        {
            return false;
        }
        if !self.admit(seq, tpdu_cost(body.len())) {
            return false;
        }
        self.stats.tpdus_rebuilt += 1;
        self.channel.on_rebuilt(seq);
        self.holes.forget(seq);
        self.feedback.forget_nack(seq as u32);
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        // Rebuilt now from what the sender sent lately: as new as its newest TPDU.
        let ts = self.feedback.latest_ts();
        self.store(now, seq, body, fin, ts);
        true
    }

    /// A TPDU whose header checked but whose body did not.
    pub fn on_corrupted(
        &mut self,
        now: Duration,
        wire_seq: u32,
        timestamp: u32,
        body: Bytes,
        fin: bool,
    ) {
        self.stats.tpdus_corrupted += 1;
        let seq = expand_seq(self.highest.unwrap_or(self.expected), wire_seq);
        if self.ec.may_deliver_corrupted && !self.crc_check {
            self.on_data(now, wire_seq, timestamp, body, fin);
            return;
        }
        if seq < self.expected || self.buffer.contains_key(&seq) {
            return;
        }
        if seq < self.expected + u64::from(self.window) {
            self.channel.on_arrival(seq, timestamp, false);
        }
        if self.ec.nacks_corrupted && self.feedback.nack(seq as u32) {
            self.holes.requested(now, seq);
        }
        // Knowing the TPDU exists also tells us how far the sender got.
        if seq < self.expected + u64::from(self.window) {
            self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        }
    }

    fn deliver_in_order(&mut self, now: Duration) {
        while let Some(slot) = self.buffer.remove(&self.expected) {
            self.deliver_next(now, slot.body, slot.fin);
        }
    }

    /// Hands the TPDU numbered `expected` to the application (held and reorder bytes
    /// released) and moves `expected` on.
    fn deliver_next(&mut self, now: Duration, body: Bytes, fin: bool) {
        // Its bytes stay charged until the application reads them (`memory`), except an empty
        // body's, which is not kept.
        self.held_bytes -= tpdu_cost(body.len());
        if body.is_empty() {
            self.reorder.give(tpdu_cost(0));
        }
        if let Some(t) = self.trace.as_mut().filter(|t| t.len() < TRACE_LIMIT) {
            t.push((self.expected, now, body.len() as u32));
        }
        self.delivery.push(self.expected, body, fin);
        self.expected += 1;
    }

    /// How long a hole may stay open in lossy modes before the TPDUs behind it are delivered.
    fn hole_timeout(&self) -> Duration {
        self.holes.hole_timeout(self.ec.hole)
    }

    /// While the peer sends erasure repairs, how long a hole may wait for them to rebuild
    /// it before lossy modes deliver past it (the peer's delay bound).
    pub fn set_erasure_wait(&mut self, d: Duration) {
        self.holes.set_erasure_wait(d);
    }

    /// Lossy modes: the time at which the oldest waiting TPDU stops waiting for the hole.
    pub fn hole_deadline(&self) -> Option<Duration> {
        if self.ec.delivers_everything() {
            return None;
        }
        self.buffer
            .values()
            .next()
            .map(|s| s.arrived + self.hole_timeout())
    }

    pub fn on_hole_timeout(&mut self, now: Duration) {
        if self.ec.delivers_everything() {
            return;
        }
        while let Some((&first, slot)) = self.buffer.iter().next() {
            if slot.arrived + self.hole_timeout() > now {
                break;
            }
            self.stats.tpdus_lost += first - self.expected;
            self.expected = first;
            self.deliver_in_order(now);
        }
    }

    /// Reads delivered data into `buf`; returns bytes copied.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let (n, emptied) = self.delivery.read(buf);
        self.release_unread(emptied * SLOT_OVERHEAD);
        self.consume(n);
        n
    }

    /// Takes the next delivered chunk whole (with its TPDU number).
    pub fn read_chunk(&mut self) -> Option<Delivered> {
        let c = self.delivery.pop()?;
        self.release_unread(SLOT_OVERHEAD);
        self.consume(c.data.len());
        Some(c)
    }

    /// The application read `n` bytes (already taken off the delivery queue).
    fn consume(&mut self, n: usize) {
        self.release_unread(n);
        self.stats.bytes_delivered += n as u64;
        if n > 0 && self.window_left() < self.window / 4 {
            // The window reopened noticeably: tell the sender.
            self.feedback.ask_if(self.ec.acknowledges());
        }
    }

    /// Bytes delivered in order and not yet read.
    pub fn ready_bytes(&self) -> usize {
        self.delivery.unread_bytes()
    }

    pub fn readable(&self) -> bool {
        !self.delivery.is_empty()
    }

    /// All data and the AFIN delivered, and the application has read everything.
    pub fn at_eof(&self) -> bool {
        self.delivery.fin() && self.delivery.is_empty()
    }

    /// Whether the AFIN has arrived in order (all data before it received or skipped).
    pub fn fin_complete(&self) -> bool {
        self.delivery.fin()
    }

    /// Whether `wire_seq` can be the peer's next TPDU number (what its RST carries): above
    /// every TPDU heard from it and within the window; any number before one was heard.
    pub fn could_be_next(&self, wire_seq: u32) -> bool {
        let Some(h) = self.highest else { return true };
        let low = self.expected.max(h + 1);
        let seq = expand_seq(low, wire_seq);
        seq >= low && seq <= low + u64::from(self.window)
    }

    fn ack_fields(&self) -> Ack {
        Ack {
            cum: self.expected,
            delivered: self.delivered_field(),
            window: self.window_left(),
        }
    }

    /// When feedback is due next, for the timer.
    pub fn feedback_deadline(&self) -> Option<Duration> {
        self.feedback
            .deadline(self.ec.feedback, self.snack_deadline())
    }

    fn has_holes(&self) -> bool {
        self.highest
            .is_some_and(|h| h >= self.expected && !self.buffer.is_empty())
    }

    /// Builds the feedback TPDU body due at `now`, if any, and resets what it carries.
    pub fn poll_feedback(&mut self, now: Duration) -> Option<ControlBody> {
        if now < self.feedback.ready_at() || self.nothing_to_feed_back() {
            return None;
        }
        let mut body = ControlBody::default();
        let ack_due = self.feedback.ack_due(now, self.ec.feedback);
        match self.ec.feedback {
            Feedback::Selective if ack_due => {
                let (ts_echo, ack_delay) = self.echo(now);
                let mut mack = Mack {
                    ack: self.ack_fields(),
                    ts_echo,
                    ack_delay,
                    max_delay: self.max_delay_ms(),
                    entries: Vec::new(),
                    ranges: Vec::new(),
                };
                self.fill_selective(&mut mack);
                body.mack = Some(mack);
            }
            Feedback::CumulativeWithHoles { .. } => {
                if ack_due {
                    body.ack = Some(self.ack_fields());
                }
                body.snack = self.poll_snack(now);
            }
            _ => {}
        }
        body.nack = self.feedback.take_nack();
        let report_timer = self.feedback.report_timer(now);
        if (report_timer || (!body.is_empty() && self.feedback.reports_wanted()))
            && self.channel.samples() > 0
        {
            body.report = Some(self.report());
            self.feedback.report_done();
        }
        if body.ack.is_some() || body.mack.is_some() {
            self.note_reported();
            self.feedback.acknowledged();
        } else if !self.ec.acknowledges() {
            self.feedback.on_duplicate(false);
        }
        if body.is_empty() {
            if report_timer {
                self.feedback.report_done();
            }
            return None;
        }
        self.count_sent(&body);
        self.feedback.sent(now, body.len());
        Some(body)
    }

    /// Counts the kinds of feedback `body` carries.
    fn count_sent(&mut self, body: &ControlBody) {
        let s = &mut self.stats;
        s.macks_sent += u64::from(body.mack.is_some());
        s.acks_sent += u64::from(body.ack.is_some());
        s.nacks_sent += u64::from(body.nack.is_some());
        s.snacks_sent += u64::from(body.snack.is_some());
        s.reports_sent += u64::from(body.report.is_some());
    }

    pub fn report(&self) -> Report {
        self.channel
            .report(self.stats.tpdus_lost + self.stats.tpdus_corrupted)
    }

    /// The cumulative acknowledgement for an AFINACK.
    pub fn final_ack(&self) -> Ack {
        self.ack_fields()
    }
}

mod channel;
mod confirm;
mod delivery;
mod feedback;
mod hole_wait;
mod holes;
mod memory;
mod selective;
#[cfg(test)]
mod tests;
