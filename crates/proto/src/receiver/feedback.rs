//! The receiver's feedback scheduler: when an acknowledgement (MACK or cumulative ACK), a
//! NACK or a receiver report is due — the count and timer triggers, the asks that send at
//! once, the aggregation hold a MACK reports, and the feedback budget that keeps all of it
//! within its share of the return link. What goes in the feedback (the reorder buffer's
//! state) is the receiver's; when it may go is this part's.

use crate::config::ConnectionConfig;
use crate::error_control::Feedback;
use crate::feedback_budget::{FeedbackBudget, TYPICAL_FEEDBACK_BYTES};
use aerotp_wire::{Nack, OVERHEAD};
use std::time::Duration;

/// Receiver reports while data flows, at most this often.
const REPORT_INTERVAL: Duration = Duration::from_millis(200);
/// The first receiver report of a connection, this long after data starts.
const FIRST_REPORT: Duration = Duration::from_millis(50);
/// Longest a MACK waits for its aggregate to fill once the budget allows it. Beyond this the
/// sender's loss detection and timeout (which add the hold) suffer more than the return link
/// gains; the budget, not the hold, is what protects a thin return link.
const MAX_AGGREGATION: Duration = Duration::from_millis(25);
/// Most NACK entries in one TPDU (as many as SNACK ranges).
const MAX_NACKS: usize = 64;
/// With confirmed delivery, the least an acknowledgement of arrived data waits: long enough
/// for the application to deliver and confirm what arrived (microseconds at a gateway) and
/// for an AFIN right behind it, so one acknowledgement — often the AFINACK — carries them,
/// not one per step (docs/results/gw.md, "Flow framing").
pub(super) const CONFIRM_WAIT: Duration = Duration::from_millis(2);

/// The spacing of new data-bearing TPDUs, smoothed (7/8 old, 1/8 new): it sets how long an
/// acknowledgement waits for its aggregate.
#[derive(Debug, Default, Clone, Copy)]
struct Spacing {
    smoothed: Option<Duration>,
    last: Option<Duration>,
}

impl Spacing {
    fn on_arrival(&mut self, now: Duration) {
        if let Some(last) = self.last {
            let gap = now.saturating_sub(last);
            self.smoothed = Some(match self.smoothed {
                None => gap,
                Some(i) => (i * 7 + gap) / 8,
            });
        }
        self.last = Some(now);
    }
}

/// When the receiver's feedback is due (see the module documentation).
#[derive(Debug)]
pub(super) struct FeedbackSchedule {
    /// Keeps feedback within its share of the return link.
    budget: FeedbackBudget,
    /// Bytes a feedback TPDU costs beyond its control body (header, CRC, IP/UDP).
    extra: usize,
    /// Wire size of the last feedback TPDU, for the hold the MACKs report.
    last_len: usize,
    /// The MTU, which bounds how many entries a MACK carries.
    mtu: usize,
    mack_count: u16,
    ack_every: u32,
    fixed_ack_delay: Option<Duration>,
    /// The least an acknowledgement waits (`CONFIRM_WAIT` with confirmed delivery, or zero).
    min_ack_delay: Duration,
    /// TPDUs taken in since the last acknowledgement.
    since_ack: u32,
    /// When the oldest unacknowledged TPDU (or confirmation) arrived.
    ack_pending_since: Option<Duration>,
    /// An acknowledgement is asked for at once.
    ack_now: bool,
    /// Selective entries for the next MACK, and whether some were left over from the last.
    entries: Vec<u32>,
    more_entries: bool,
    /// Corrupted TPDUs to NACK.
    nacks: Vec<u32>,
    spacing: Spacing,
    /// The latest TPDU's timestamp and arrival, for the MACK's echo.
    latest_ts: u32,
    latest_at: Duration,
    report_due: Option<Duration>,
    reports_wanted: bool,
}

impl FeedbackSchedule {
    pub(super) fn new(cfg: &ConnectionConfig) -> FeedbackSchedule {
        FeedbackSchedule {
            budget: FeedbackBudget::new(
                cfg.return_rate_bps.unwrap_or(cfg.rate_bps),
                cfg.feedback_share,
            ),
            extra: OVERHEAD + cfg.per_packet_overhead,
            last_len: TYPICAL_FEEDBACK_BYTES,
            mtu: cfg.mtu,
            mack_count: cfg.mack_count,
            ack_every: cfg.ack_every,
            fixed_ack_delay: cfg.ack_delay,
            min_ack_delay: if cfg.confirm_delivery {
                CONFIRM_WAIT
            } else {
                Duration::ZERO
            },
            since_ack: 0,
            ack_pending_since: None,
            ack_now: false,
            entries: Vec::new(),
            more_entries: false,
            nacks: Vec::new(),
            spacing: Spacing::default(),
            latest_ts: 0,
            latest_at: Duration::ZERO,
            report_due: None,
            reports_wanted: false,
        }
    }

    /// How long an acknowledgement waits for its aggregate to fill: 1.5 × the time
    /// `mack_count` TPDUs take at the observed arrival rate, within 1 ms – 25 ms; nothing at
    /// all when traffic is sparse (TPDUs further apart than that bound: there is no aggregate
    /// to wait for, and a prompt acknowledgement is what lets the sender repair a lost
    /// message within a round trip or two). At least `min_ack_delay`.
    fn ack_delay(&self) -> Duration {
        let d = self.fixed_ack_delay.unwrap_or(match self.spacing.smoothed {
            Some(per) if per < MAX_AGGREGATION => (per * u32::from(self.mack_count) * 3 / 2)
                .clamp(Duration::from_millis(1), MAX_AGGREGATION),
            _ => Duration::ZERO,
        });
        d.max(self.min_ack_delay)
    }

    /// The longest an acknowledgement is now held, in whole milliseconds (rounded up), for
    /// MACKs: the aggregation delay or, on a return link thin enough that the budget spaces
    /// feedback further apart, that spacing.
    pub(super) fn max_delay_ms(&self) -> u16 {
        let hold = self.ack_delay().max(self.budget.interval(self.last_len));
        u16::try_from(hold.as_micros().div_ceil(1000)).unwrap_or(u16::MAX)
    }

    /// The latest TPDU's timestamp to echo and how long it has been held since it arrived, in
    /// 100 µs units.
    pub(super) fn echo(&self, now: Duration) -> (u32, u16) {
        let held = now.saturating_sub(self.latest_at).as_micros() / 100;
        (self.latest_ts, u16::try_from(held).unwrap_or(u16::MAX))
    }

    /// A data TPDU arrived (new or not) with the sender's `timestamp`; `spaced`: a new one
    /// with a body, whose spacing sets the aggregation delay (empty TPDUs and duplicates
    /// would make it look far shorter than it is).
    pub(super) fn on_arrival(&mut self, now: Duration, timestamp: u32, spaced: bool) {
        if spaced {
            self.spacing.on_arrival(now);
        }
        self.latest_ts = timestamp;
        self.latest_at = now;
    }

    /// The latest TPDU's timestamp (a rebuilt TPDU is as new as it).
    pub(super) fn latest_ts(&self) -> u32 {
        self.latest_ts
    }

    /// A new TPDU was taken in; `entry`: its number, for the next MACK's entries (at most
    /// `mack_count` kept). Starts the acknowledgement timer.
    pub(super) fn on_stored(&mut self, now: Duration, entry: Option<u32>) {
        if let Some(e) = entry.filter(|_| self.entries.len() < usize::from(self.mack_count)) {
            self.entries.push(e);
        }
        self.since_ack += 1;
        self.start_ack_timer(now);
    }

    /// Something to acknowledge since `now` (unless the timer already runs).
    pub(super) fn start_ack_timer(&mut self, now: Duration) {
        if self.ack_pending_since.is_none() {
            self.ack_pending_since = Some(now);
        }
    }

    /// Nothing left to acknowledge (the AFINACK covered it).
    pub(super) fn stop_ack_timer(&mut self) {
        self.ack_pending_since = None;
    }

    /// Acknowledge at once.
    pub(super) fn ask(&mut self) {
        self.ack_now = true;
    }

    /// Acknowledge at once if `acknowledges` (the mode does); an ask already made stands.
    pub(super) fn ask_if(&mut self, acknowledges: bool) {
        self.ack_now |= acknowledges;
    }

    /// A duplicate arrived: our acknowledgement was lost or late, so answer at once if the
    /// mode acknowledges (and drop any ask if it does not).
    pub(super) fn on_duplicate(&mut self, acknowledges: bool) {
        self.ack_now = acknowledges;
    }

    pub(super) fn asked(&self) -> bool {
        self.ack_now
    }

    /// Queues a NACK for the corrupted TPDU `seq`; false if the list is full.
    pub(super) fn nack(&mut self, seq: u32) -> bool {
        if self.nacks.len() >= MAX_NACKS {
            return false;
        }
        self.nacks.push(seq);
        true
    }

    /// `seq` was rebuilt: no NACK for it.
    pub(super) fn forget_nack(&mut self, seq: u32) {
        self.nacks.retain(|&n| n != seq);
    }

    pub(super) fn nacks_pending(&self) -> usize {
        self.nacks.len()
    }

    /// The NACK due, if any, taken.
    pub(super) fn take_nack(&mut self) -> Option<Nack> {
        (!self.nacks.is_empty()).then(|| Nack {
            seqs: std::mem::take(&mut self.nacks),
        })
    }

    pub(super) fn mtu(&self) -> usize {
        self.mtu
    }

    /// The MACK entries that fit in `fit`, those `redundant` dropped first; any left over
    /// go in the next MACK, at once.
    pub(super) fn take_entries(&mut self, fit: usize, redundant: impl Fn(u32) -> bool) -> Vec<u32> {
        self.entries.retain(|&e| !redundant(e));
        if self.entries.len() <= fit {
            return std::mem::take(&mut self.entries);
        }
        let rest = self.entries.split_off(fit);
        self.more_entries = true;
        std::mem::replace(&mut self.entries, rest)
    }

    /// The count triggers: enough TPDUs (or entries) since the last acknowledgement.
    fn count_due(&self, feedback: Feedback) -> bool {
        match feedback {
            Feedback::Selective => {
                self.since_ack >= u32::from(self.mack_count)
                    || self.entries.len() >= usize::from(self.mack_count)
            }
            Feedback::CumulativeWithHoles { .. } => self.since_ack >= self.ack_every,
            Feedback::None => false,
        }
    }

    /// When the acknowledgement timer fires, if it runs.
    fn ack_timer(&self, feedback: Feedback) -> Option<Duration> {
        let since = self.ack_pending_since?;
        match feedback {
            Feedback::Selective => Some(since + self.ack_delay()),
            Feedback::CumulativeWithHoles { min_period } => {
                Some(since + self.ack_delay().max(min_period))
            }
            Feedback::None => None,
        }
    }

    /// Whether an acknowledgement of kind `feedback` is due at `now`.
    pub(super) fn ack_due(&self, now: Duration, feedback: Feedback) -> bool {
        if feedback == Feedback::None {
            return false;
        }
        self.ack_now
            || self.count_due(feedback)
            || self.ack_timer(feedback).is_some_and(|t| now >= t)
    }

    /// Nothing arrived since the last feedback and nothing asks for any (no count, timer,
    /// NACK or report due, and the count triggers need at least one TPDU).
    pub(super) fn idle(&self) -> bool {
        !self.ack_now
            && self.since_ack == 0
            && self.ack_pending_since.is_none()
            && self.entries.is_empty()
            && self.nacks.is_empty()
            && self.report_due.is_none()
            && self.mack_count > 0
            && self.ack_every > 0
    }

    /// When feedback is due next: the acknowledgement's triggers and timer, a NACK, a report,
    /// and `snack` (near-reliable's hole report), but never before the budget allows.
    pub(super) fn deadline(&self, feedback: Feedback, snack: Option<Duration>) -> Option<Duration> {
        let mut d: Option<Duration> = None;
        let mut min = |t: Duration| d = Some(d.map_or(t, |x: Duration| x.min(t)));
        // The count triggers are due at once too: a receiver asked only at its deadlines (the
        // endpoint's timer table) must not hold a count-due ACK for the periodic timer.
        if self.ack_now || self.count_due(feedback) || !self.nacks.is_empty() {
            min(Duration::ZERO);
        }
        if let Some(t) = self.ack_timer(feedback) {
            min(t);
        }
        if let Some(s) = snack {
            min(s);
        }
        if let Some(r) = self.report_due {
            min(r);
        }
        d.map(|d| d.max(self.budget.ready_at()))
    }

    /// Feedback may not go before this (the budget).
    pub(super) fn ready_at(&self) -> Duration {
        self.budget.ready_at()
    }

    /// An acknowledgement went: the count and timer start again; entries left over ask for
    /// the next one at once.
    pub(super) fn acknowledged(&mut self) {
        self.ack_now = std::mem::take(&mut self.more_entries);
        self.since_ack = 0;
        self.ack_pending_since = None;
    }

    /// A feedback TPDU with a control body of `body_len` bytes went at `now`.
    pub(super) fn sent(&mut self, now: Duration, body_len: usize) {
        self.last_len = body_len + self.extra;
        self.budget.spend(now, self.last_len);
    }

    /// The return link's rate changed.
    pub(super) fn set_return_rate(&mut self, rate_bps: u64, share: f64) {
        self.budget.set_rate(rate_bps, share);
    }

    /// The sender repairs across TPDUs: it wants receiver reports.
    pub(super) fn want_reports(&mut self) {
        self.reports_wanted = true;
    }

    pub(super) fn reports_wanted(&self) -> bool {
        self.reports_wanted
    }

    /// Data arrived: a report within `FIRST_REPORT` (`first`: none went yet) or
    /// `REPORT_INTERVAL`, unless one is due already or none is wanted.
    pub(super) fn schedule_report(&mut self, now: Duration, first: bool) {
        if self.reports_wanted && self.report_due.is_none() {
            // The first report soon: a sender repairing across TPDUs starts from a guess of
            // the loss and should learn the real one within a few dozen TPDUs.
            let wait = if first { FIRST_REPORT } else { REPORT_INTERVAL };
            self.report_due = Some(now + wait);
        }
    }

    /// A report at once, if reports are wanted.
    pub(super) fn report_now(&mut self, now: Duration) {
        if self.reports_wanted {
            self.report_due = Some(now);
        }
    }

    /// Whether the report timer has fired at `now`.
    pub(super) fn report_timer(&self, now: Duration) -> bool {
        self.report_due.is_some_and(|r| now >= r)
    }

    /// A report went, or the timer fired with nothing to report.
    pub(super) fn report_done(&mut self) {
        self.report_due = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn schedule(mack_count: u16, ack_delay: Option<Duration>) -> FeedbackSchedule {
        FeedbackSchedule::new(&ConnectionConfig {
            mack_count,
            ack_every: 8,
            ack_delay,
            ..ConnectionConfig::default()
        })
    }

    #[test]
    fn the_aggregation_delay_follows_the_arrival_spacing_within_its_bounds() {
        let mut f = schedule(4, None);
        assert_eq!(f.ack_delay(), Duration::ZERO, "no spacing seen");
        for t in [0, 2, 4, 6] {
            f.on_arrival(ms(t), 0, true);
        }
        // 2 ms apart, 4 per MACK: 1.5 × 8 ms.
        assert_eq!(f.ack_delay(), ms(12));
        assert_eq!(f.max_delay_ms(), 12);
        // Duplicates and empty TPDUs do not count.
        f.on_arrival(ms(7), 0, false);
        assert_eq!(f.ack_delay(), ms(12));
        // Sparse traffic: no hold at all.
        let mut sparse = schedule(4, None);
        sparse.on_arrival(ms(0), 0, true);
        sparse.on_arrival(ms(40), 0, true);
        assert_eq!(sparse.ack_delay(), Duration::ZERO);
        // Dense traffic: at least 1 ms.
        let mut dense = schedule(1, None);
        dense.on_arrival(Duration::from_micros(0), 0, true);
        dense.on_arrival(Duration::from_micros(100), 0, true);
        assert_eq!(dense.ack_delay(), ms(1));
    }

    #[test]
    fn an_acknowledgement_is_due_on_count_timer_or_ask_and_the_deadline_says_when() {
        let mut f = schedule(3, Some(ms(10)));
        let sel = Feedback::Selective;
        assert!(f.idle());
        assert_eq!(f.deadline(sel, None), None);
        f.on_stored(ms(5), None);
        assert!(!f.idle());
        assert!(!f.ack_due(ms(5), sel));
        assert_eq!(f.deadline(sel, None), Some(ms(15)), "the timer");
        assert!(f.ack_due(ms(15), sel));
        f.on_stored(ms(6), Some(9));
        f.on_stored(ms(7), None);
        assert!(f.ack_due(ms(7), sel), "the count");
        assert_eq!(f.deadline(sel, None), Some(Duration::ZERO));
        assert!(
            !f.ack_due(ms(7), Feedback::None),
            "a mode without acknowledgements"
        );
        f.acknowledged();
        assert!(f.idle() || !f.entries.is_empty());
        assert_eq!(f.take_entries(4, |_| false), vec![9]);
        assert!(f.idle());
        f.ask();
        assert!(f.ack_due(ms(8), sel));
        assert_eq!(f.deadline(sel, Some(ms(3))), Some(Duration::ZERO));
    }

    #[test]
    fn entries_left_over_ask_for_the_next_mack_at_once() {
        let mut f = schedule(8, Some(ms(10)));
        for e in 1..=6 {
            f.on_stored(ms(0), Some(e));
        }
        assert_eq!(f.take_entries(4, |e| e == 1), vec![2, 3, 4, 5]);
        f.acknowledged();
        assert!(f.asked(), "one entry left");
        assert_eq!(f.take_entries(4, |_| false), vec![6]);
        f.acknowledged();
        assert!(!f.asked());
    }

    #[test]
    fn nacks_are_bounded_and_a_rebuilt_tpdu_needs_none() {
        let mut f = schedule(4, None);
        for s in 0..MAX_NACKS as u32 {
            assert!(f.nack(s));
        }
        assert!(!f.nack(1000), "the list is full");
        f.forget_nack(3);
        assert_eq!(f.nacks_pending(), MAX_NACKS - 1);
        let n = f.take_nack().unwrap();
        assert!(!n.seqs.contains(&3));
        assert!(f.take_nack().is_none());
    }

    #[test]
    fn reports_come_soon_at_first_then_at_the_interval_and_only_when_wanted() {
        let mut f = schedule(4, None);
        f.schedule_report(ms(0), true);
        f.report_now(ms(0));
        assert!(!f.report_timer(ms(1000)), "not wanted");
        f.want_reports();
        f.schedule_report(ms(0), true);
        assert_eq!(f.deadline(Feedback::None, None), Some(FIRST_REPORT));
        f.schedule_report(ms(10), false);
        assert!(f.report_timer(FIRST_REPORT), "the first stands");
        f.report_done();
        f.schedule_report(ms(100), false);
        assert!(!f.report_timer(ms(299)));
        assert!(f.report_timer(ms(300)));
        f.report_now(ms(120));
        assert!(f.report_timer(ms(120)));
    }

    #[test]
    fn the_budget_holds_feedback_back_on_a_thin_return_link() {
        let mut f = FeedbackSchedule::new(&ConnectionConfig {
            return_rate_bps: Some(9600),
            mack_count: 1,
            ..ConnectionConfig::default()
        });
        f.on_stored(ms(0), None);
        assert_eq!(f.deadline(Feedback::Selective, None), Some(Duration::ZERO));
        let mut sent = 0;
        while f.ready_at() == Duration::ZERO && sent < 1000 {
            f.sent(ms(0), 40);
            sent += 1;
        }
        assert!(sent < 1000, "the budget never ran out");
        let at = f.deadline(Feedback::Selective, None).unwrap();
        assert!(at > ms(0), "held by the budget");
        assert_eq!(at, f.ready_at());
        // No aggregation delay here: the hold a MACK reports is the budget's spacing.
        let spacing = f.budget.interval(40 + f.extra);
        assert!(spacing > Duration::ZERO);
        assert_eq!(
            u128::from(f.max_delay_ms()),
            spacing.as_micros().div_ceil(1000)
        );
    }
}
