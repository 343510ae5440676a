//! The receiving half of a connection: the reorder buffer, in-order delivery to the
//! application, and the feedback the mode calls for (MACK, cumulative ACK, NACK, SNACK,
//! receiver reports).

use crate::config::ConnectionConfig;
use crate::erasure::{Arrival, WireLoss};
use crate::error_control::{ErrorControl, Feedback, Hole};
use crate::feedback_budget::{FeedbackBudget, TYPICAL_FEEDBACK_BYTES};
use crate::reorder_budget::{tpdu_cost, ReorderBudget, SLOT_OVERHEAD};
use aerotp_fec::auto::BerEstimator;
use aerotp_wire::{expand_seq, Ack, ControlBody, Mack, Nack, Report, Snack, OVERHEAD};
use bytes::{Buf, Bytes};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Most SNACK ranges or NACK entries in one TPDU.
const MAX_LIST: usize = 64;
/// Longest a near-reliable receiver waits for reordering before it SNACKs a gap.
const MAX_REORDER_WAIT: Duration = Duration::from_millis(500);
/// Longest a near-reliable receiver waits before repeating a SNACK for holes still open.
const MAX_SNACK_REPEAT: Duration = Duration::from_secs(2);
/// Most received blocks a MACK re-reports (the newest; 8 bytes each).
const MAX_MACK_RANGES: usize = 16;
/// Receiver reports while data flows, at most this often.
const REPORT_INTERVAL: Duration = Duration::from_millis(200);
/// A gap of more TPDUs than this is reported at once (see `Receiver::on_data`).
const LONG_GAP: u64 = 16;
/// The first receiver report of a connection, this long after data starts.
const FIRST_REPORT: Duration = Duration::from_millis(50);
/// Longest a MACK waits for its aggregate to fill once the budget allows it. Beyond this the
/// sender's loss detection and timeout (which add the hold) suffer more than the return link
/// gains; the budget, not the hold, is what protects a thin return link.
const MAX_AGGREGATION: Duration = Duration::from_millis(25);

#[derive(Debug, Clone)]
struct Slot {
    body: Bytes,
    fin: bool,
    arrived: Duration,
    /// The sender's timestamp: tells an original that was overtaken from a retransmission.
    ts: u32,
}

/// A chunk delivered in order to the application.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub seq: u64,
    /// The TPDU's body: where the runtime handed the engine its receive buffer, a slice of
    /// it (holding a chunk holds that buffer; `aerotp_net` hands over only buffers that the
    /// chunks of one connection fill at least half of).
    pub data: Bytes,
}

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
    mack_count: u16,
    mtu: usize,
    /// Keeps feedback within its share of the return link.
    budget: FeedbackBudget,
    /// Bytes a feedback TPDU costs beyond its control body (header, CRC, IP/UDP).
    feedback_extra: usize,
    /// Wire size of the last feedback TPDU, for the hold the MACKs report.
    last_feedback_len: usize,
    /// Selective entries were left over for the next MACK.
    more_entries: bool,
    ack_every: u32,
    fixed_ack_delay: Option<Duration>,
    crc_check: bool,
    min_hole_timeout: Duration,
    /// Next TPDU number to deliver (= cumulative acknowledgement).
    expected: u64,
    highest: Option<u64>,
    buffer: BTreeMap<u64, Slot>,
    /// Bytes of the bodies in `buffer`, and their bounds (docs/security.md).
    held_bytes: usize,
    max_held: usize,
    /// The peer's address is not proven yet: at most `UNPROVEN_RECV_BYTES` held.
    unproven: bool,
    reorder: ReorderBudget,
    ready: VecDeque<Delivered>,
    ready_bytes: usize,
    pub delivered_bytes: u64,
    pub fin_delivered: bool,
    // feedback state
    pending_entries: Vec<u32>,
    since_ack: u32,
    ack_pending_since: Option<Duration>,
    ack_now: bool,
    latest_ts: u32,
    latest_at: Duration,
    pending_nacks: Vec<u32>,
    /// Near-reliable: arrival of the TPDU that opened the oldest gap not yet SNACKed.
    gap_open_since: Option<Duration>,
    last_snack: Option<Duration>,
    /// Near-reliable: how long a gap may stay open before it is SNACKed, learned from the
    /// reordering seen (an original arriving behind a TPDU sent after it); zero until then.
    reorder_wait: Duration,
    interarrival: Option<Duration>,
    last_arrival: Option<Duration>,
    pub ber: BerEstimator,
    /// Loss on the link as this end saw it (for reports and statistics).
    wire: WireLoss,
    /// While the peer sends erasure repairs, how long a hole may wait for them to rebuild
    /// it before lossy modes deliver past it (the peer's delay bound).
    erasure_wait: Duration,
    report_due: Option<Duration>,
    reports_wanted: bool,
    /// Round-trip estimate from NACK/SNACK to retransmission, for hole timeouts.
    repair_rtt: Duration,
    nack_sent_at: BTreeMap<u64, Duration>,
    /// Optional per-TPDU delivery trace: (TPDU number, time delivered in order, bytes).
    pub trace: Option<Vec<(u64, Duration, u32)>>,
    /// Confirmed delivery's state (`ConnectionConfig::confirm_delivery`), if on.
    confirmation: Option<crate::confirmation::Confirmation>,
    pub stats: ReceiverStats,
}

/// Most entries a delivery trace keeps.
pub const TRACE_LIMIT: usize = 1 << 22;

impl Receiver {
    /// The receiving half for `ec` (the connection's error control) and `cfg`.
    pub fn new(ec: ErrorControl, cfg: &ConnectionConfig) -> Receiver {
        Receiver {
            ec,
            window: cfg.recv_window,
            mack_count: cfg.mack_count,
            mtu: cfg.mtu,
            budget: FeedbackBudget::new(
                cfg.return_rate_bps.unwrap_or(cfg.rate_bps),
                cfg.feedback_share,
            ),
            feedback_extra: OVERHEAD + cfg.per_packet_overhead,
            last_feedback_len: TYPICAL_FEEDBACK_BYTES,
            more_entries: false,
            ack_every: cfg.ack_every,
            fixed_ack_delay: cfg.ack_delay,
            crc_check: cfg.crc_check,
            min_hole_timeout: cfg.min_hole_timeout,
            expected: 0,
            highest: None,
            buffer: BTreeMap::new(),
            held_bytes: 0,
            max_held: cfg.reorder_bytes,
            unproven: false,
            reorder: ReorderBudget::new(usize::MAX),
            ready: VecDeque::new(),
            ready_bytes: 0,
            delivered_bytes: 0,
            fin_delivered: false,
            pending_entries: Vec::new(),
            since_ack: 0,
            ack_pending_since: None,
            ack_now: false,
            latest_ts: 0,
            latest_at: Duration::ZERO,
            pending_nacks: Vec::new(),
            gap_open_since: None,
            last_snack: None,
            reorder_wait: Duration::ZERO,
            interarrival: None,
            last_arrival: None,
            ber: BerEstimator::new(),
            wire: WireLoss::default(),
            erasure_wait: Duration::ZERO,
            report_due: None,
            reports_wanted: false,
            repair_rtt: cfg.initial_rtt,
            nack_sent_at: BTreeMap::new(),
            trace: None,
            confirmation: cfg.confirm_delivery.then(Default::default),
            stats: ReceiverStats::default(),
        }
    }

    fn window_left(&self) -> u32 {
        let used = self.buffer.len() + self.ready.len();
        self.window
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
    }

    /// How long an acknowledgement waits for its aggregate to fill: 1.5 × the time
    /// `mack_count` TPDUs take at the observed arrival rate, within 1 ms – 25 ms; nothing at
    /// all when traffic is sparse (TPDUs further apart than that bound: there is no aggregate
    /// to wait for, and a prompt acknowledgement is what lets the sender repair a lost
    /// message within a round trip or two).
    fn ack_delay(&self) -> Duration {
        let d = self.fixed_ack_delay.unwrap_or(match self.interarrival {
            Some(per) if per < MAX_AGGREGATION => (per * u32::from(self.mack_count) * 3 / 2)
                .clamp(Duration::from_millis(1), MAX_AGGREGATION),
            _ => Duration::ZERO,
        });
        self.with_confirm_wait(d)
    }

    /// Nothing arrived since the last feedback and nothing asks for any: exactly the state in
    /// which `poll_feedback` builds an empty body and changes nothing (no count, timer, hole,
    /// NACK or report is due, and the count triggers need at least one TPDU). The common
    /// case of a sender's own receiver, which its connection asks before every datagram it
    /// sends: building the empty body each time was 3 % of the runtime's user-space
    /// instructions outside the CRC, and checking this first leaves 1.7 % fewer (callgrind
    /// on `aerotp bench loopback`, docs/results/loopback.md).
    fn nothing_to_feed_back(&self) -> bool {
        !self.ack_now
            && self.since_ack == 0
            && self.ack_pending_since.is_none()
            && self.pending_entries.is_empty()
            && self.pending_nacks.is_empty()
            && self.report_due.is_none()
            && !self.has_holes()
            && self.mack_count > 0
            && self.ack_every > 0
    }

    /// Feedback is asked for at once (a reopened window, a probe, a hole, a duplicate).
    pub fn feedback_asked(&self) -> bool {
        self.ack_now
    }

    /// The peer probes for feedback (an outage probe): acknowledge at once, as the budget
    /// allows, in the modes that acknowledge.
    pub fn request_feedback(&mut self) {
        self.ack_now |= self.ec.acknowledges();
    }

    /// The return link's rate changed (the runtime re-paced this end).
    pub fn set_return_rate(&mut self, rate_bps: u64, share: f64) {
        self.budget.set_rate(rate_bps, share);
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
        let hold = self
            .ack_delay()
            .max(self.budget.interval(self.last_feedback_len));
        u16::try_from(hold.as_micros().div_ceil(1000)).unwrap_or(u16::MAX)
    }

    /// The latest TPDU's timestamp to echo and how long it has been held since it arrived, in
    /// 100 µs units: what a MACK carries so the sender can measure the round trip.
    pub fn echo(&self, now: Duration) -> (u32, u16) {
        let held = now.saturating_sub(self.latest_at).as_micros() / 100;
        (self.latest_ts, u16::try_from(held).unwrap_or(u16::MAX))
    }

    /// Whether TPDUs of this connection use FEC, so the sender may want receiver reports.
    pub fn want_reports(&mut self) {
        self.reports_wanted = true;
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
        if new && !body.is_empty() {
            if let Some(last) = self.last_arrival {
                let gap = now.saturating_sub(last);
                self.interarrival = Some(match self.interarrival {
                    None => gap,
                    Some(i) => (i * 7 + gap) / 8,
                });
            }
            self.last_arrival = Some(now);
        }
        self.latest_ts = timestamp;
        self.latest_at = now;
        if let Some(sent) = self.nack_sent_at.remove(&seq) {
            let sample = now.saturating_sub(sent);
            self.repair_rtt = (self.repair_rtt * 7 + sample) / 8;
        }
        if !new {
            self.stats.tpdus_duplicate += 1;
            // A duplicate means our acknowledgement was lost or late: answer at once.
            self.ack_now = self.ec.acknowledges();
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
        if self.wire.on_arrival(seq, timestamp, true) == Arrival::Retransmission {
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
            self.ack_now = true;
        }
        // A long gap (an outage, a long burst) is reported at once, not at the next report
        // interval: a sender repairing across TPDUs owes catch-up repairs for it
        // (`ErasureTx::on_report`), and every millisecond the report waits, the data sent
        // after the gap pushes the oldest lost TPDUs out of the sources its encoder holds. A
        // 1 s outage at 3 Mb/s lost its 39 oldest TPDUs that way in 2 of 6 `aerotp demo` runs.
        if self.reports_wanted && prev_highest.is_some_and(|h| seq > h + LONG_GAP) {
            self.report_due = Some(now);
        }
        if self.reports_holes() {
            if new_gap && self.gap_open_since.is_none() {
                self.gap_open_since = Some(now);
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
        if self.ec.feedback == Feedback::Selective
            && seq != self.expected
            && self.pending_entries.len() < usize::from(self.mack_count)
        {
            self.pending_entries.push(seq as u32);
        }
        self.since_ack += 1;
        if self.ack_pending_since.is_none() {
            self.ack_pending_since = Some(now);
        }
        // The AFIN is answered at once, except with confirmed delivery: its AFINACK waits
        // for the application's confirmation of the end and then carries everything; until
        // then the acknowledgement timer above stands (one TPDU instead of two per close).
        if fin && self.confirmation.is_none() {
            self.ack_now = true;
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
        if self.reports_wanted && self.report_due.is_none() {
            // The first report soon: a sender repairing across TPDUs starts from a guess of
            // the loss and should learn the real one within a few dozen TPDUs.
            let wait = if self.stats.reports_sent == 0 {
                FIRST_REPORT
            } else {
                REPORT_INTERVAL
            };
            self.report_due = Some(now + wait);
        }
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
        self.wire.on_rebuilt(seq);
        self.nack_sent_at.remove(&seq);
        self.pending_nacks.retain(|&n| n != seq as u32);
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        // Rebuilt now from what the sender sent lately: as new as its newest TPDU.
        let ts = self.latest_ts;
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
            self.wire.on_arrival(seq, timestamp, false);
        }
        if self.ec.nacks_corrupted && self.pending_nacks.len() < MAX_LIST {
            self.pending_nacks.push(seq as u32);
            self.nack_sent_at.insert(seq, now);
            if self.nack_sent_at.len() > 4096 {
                self.nack_sent_at.pop_first();
            }
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
        if !body.is_empty() {
            self.ready_bytes += body.len();
            self.ready.push_back(Delivered {
                seq: self.expected,
                data: body,
            });
        }
        if fin {
            self.fin_delivered = true;
        }
        self.expected += 1;
    }

    /// How long a hole may stay open in lossy modes before the TPDUs behind it are delivered.
    fn hole_timeout(&self) -> Duration {
        let repair = match self.ec.hole {
            Hole::SkipAfterTimeout { nack_repair_rtts } => self.repair_rtt * nack_repair_rtts,
            Hole::Wait => Duration::ZERO,
        };
        self.min_hole_timeout.max(repair).max(self.erasure_wait)
    }

    /// See `erasure_wait`.
    pub fn set_erasure_wait(&mut self, d: Duration) {
        self.erasure_wait = d;
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
        let mut n = 0;
        while n < buf.len() {
            let Some(front) = self.ready.front_mut() else {
                break;
            };
            let k = front.data.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&front.data[..k]);
            front.data.advance(k);
            n += k;
            if front.data.is_empty() {
                self.ready.pop_front();
                self.release_unread(SLOT_OVERHEAD);
            }
        }
        self.consume(n);
        n
    }

    /// Takes the next delivered chunk whole (with its TPDU number).
    pub fn read_chunk(&mut self) -> Option<Delivered> {
        let c = self.ready.pop_front()?;
        self.release_unread(SLOT_OVERHEAD);
        self.consume(c.data.len());
        Some(c)
    }

    fn consume(&mut self, n: usize) {
        self.ready_bytes -= n;
        self.release_unread(n);
        self.delivered_bytes += n as u64;
        self.stats.bytes_delivered += n as u64;
        if n > 0 && self.window_left() < self.window / 4 {
            // The window reopened noticeably: tell the sender.
            self.ack_now |= self.ec.acknowledges();
        }
    }

    /// Bytes delivered in order and not yet read.
    pub fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    pub fn readable(&self) -> bool {
        !self.ready.is_empty()
    }

    /// All data and the AFIN delivered, and the application has read everything.
    pub fn at_eof(&self) -> bool {
        self.fin_delivered && self.ready.is_empty()
    }

    /// Whether the AFIN has arrived in order (all data before it received or skipped).
    pub fn fin_complete(&self) -> bool {
        self.fin_delivered
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
        let mut d: Option<Duration> = None;
        let mut min = |t: Duration| d = Some(d.map_or(t, |x: Duration| x.min(t)));
        // The count triggers of `poll_feedback` are due at once too: a receiver asked only at
        // its deadlines (the endpoint's timer table) must not hold a count-due ACK for the
        // periodic timer.
        let count_due = match self.ec.feedback {
            Feedback::Selective => {
                self.since_ack >= u32::from(self.mack_count)
                    || self.pending_entries.len() >= usize::from(self.mack_count)
            }
            Feedback::CumulativeWithHoles { .. } => self.since_ack >= self.ack_every,
            Feedback::None => false,
        };
        if self.ack_now || count_due || !self.pending_nacks.is_empty() {
            min(Duration::ZERO);
        }
        if let Some(since) = self.ack_pending_since {
            match self.ec.feedback {
                Feedback::Selective => min(since + self.ack_delay()),
                Feedback::CumulativeWithHoles { min_period } => {
                    min(since + self.ack_delay().max(min_period))
                }
                Feedback::None => {}
            }
        }
        if let Some(d) = self.snack_deadline() {
            min(d);
        }
        if let Some(r) = self.report_due {
            min(r);
        }
        // Nothing goes before the budget allows it; `poll_feedback` applies the same rule.
        d.map(|d| d.max(self.budget.ready_at()))
    }

    fn has_holes(&self) -> bool {
        self.highest
            .is_some_and(|h| h >= self.expected && !self.buffer.is_empty())
    }

    /// Builds the feedback TPDU body due at `now`, if any, and resets what it carries.
    pub fn poll_feedback(&mut self, now: Duration) -> Option<ControlBody> {
        if now < self.budget.ready_at() || self.nothing_to_feed_back() {
            return None;
        }
        let mut body = ControlBody::default();
        let ack_timer = self
            .ack_pending_since
            .is_some_and(|s| now >= s + self.ack_delay());
        match self.ec.feedback {
            Feedback::Selective => {
                let count_due = self.since_ack >= u32::from(self.mack_count)
                    || self.pending_entries.len() >= usize::from(self.mack_count);
                if self.ack_now || count_due || ack_timer {
                    let (ts_echo, ack_delay) = self.echo(now);
                    body.mack = Some(Mack {
                        ack: self.ack_fields(),
                        ts_echo,
                        ack_delay,
                        max_delay: self.max_delay_ms(),
                        entries: Vec::new(),
                        ranges: Vec::new(),
                    });
                    self.fill_selective(body.mack.as_mut().expect("just set"));
                }
            }
            Feedback::CumulativeWithHoles { min_period } => {
                let periodic = self
                    .ack_pending_since
                    .is_some_and(|s| now >= s + self.ack_delay().max(min_period));
                if self.ack_now || self.since_ack >= self.ack_every || periodic {
                    body.ack = Some(self.ack_fields());
                }
                if self.snack_deadline().is_some_and(|d| now >= d) {
                    let (ranges, later) = self.snack_ranges(now);
                    self.gap_open_since = later;
                    if !ranges.is_empty() {
                        self.note_repair_requests(now, &ranges);
                        body.snack = Some(Snack { ranges });
                        self.last_snack = Some(now);
                    }
                }
            }
            Feedback::None => {}
        }
        if !self.pending_nacks.is_empty() {
            body.nack = Some(Nack {
                seqs: std::mem::take(&mut self.pending_nacks),
            });
        }
        let report_timer = self.report_due.is_some_and(|r| now >= r);
        if (report_timer || (!body.is_empty() && self.reports_wanted)) && self.ber.samples() > 0 {
            body.report = Some(self.report());
            self.report_due = None;
        }
        if body.ack.is_some() || body.mack.is_some() {
            self.note_reported();
            self.ack_now = std::mem::take(&mut self.more_entries);
            self.since_ack = 0;
            self.ack_pending_since = None;
        } else if self.ack_now && !self.ec.acknowledges() {
            self.ack_now = false;
        }
        if body.is_empty() {
            if report_timer {
                self.report_due = None;
            }
            return None;
        }
        if body.mack.is_some() {
            self.stats.macks_sent += 1;
        }
        if body.ack.is_some() {
            self.stats.acks_sent += 1;
        }
        if body.nack.is_some() {
            self.stats.nacks_sent += 1;
        }
        if body.snack.is_some() {
            self.stats.snacks_sent += 1;
        }
        if body.report.is_some() {
            self.stats.reports_sent += 1;
        }
        self.last_feedback_len = body.len() + self.feedback_extra;
        self.budget.spend(now, self.last_feedback_len);
        Some(body)
    }

    pub fn report(&self) -> Report {
        let ber = self.ber.estimate().unwrap_or(0.0);
        Report {
            ber_ppb: (ber * 1e9).round().clamp(0.0, f64::from(u32::MAX)) as u32,
            tpdus: u32::try_from(self.ber.samples()).unwrap_or(u32::MAX),
            lost: u32::try_from(self.stats.tpdus_lost + self.stats.tpdus_corrupted)
                .unwrap_or(u32::MAX),
            // Cumulative counters, wrapping: the sender takes differences between reports.
            seen: self.wire.seen() as u32,
            wire_lost: self.wire.lost() as u32,
            bursts: self.wire.bursts() as u32,
        }
    }

    /// The cumulative acknowledgement for an AFINACK.
    pub fn final_ack(&self) -> Ack {
        self.ack_fields()
    }
}

mod confirm;
mod holes;
mod memory;
mod selective;
#[cfg(test)]
mod tests;
