//! A connection's timers: the deadline it reports (`poll_timeout`) and what it does when that
//! deadline comes (`handle_timeout`) — kept side by side because the contract binds them: a
//! deadline reported is one `handle_timeout` acts on (crates/proto/tests/deadlines.rs).

use super::{CloseOutcome, ConnEvent, Connection, MAX_PROBE_INTERVAL};
use crate::liveness::Liveness;
use crate::state::StateEvent;
use std::time::Duration;

/// Gaps between heard TPDUs measured before `pause_after` trusts them over the RTO: the first
/// few include the set-up and the peer's first acknowledgement delay.
const GAP_SAMPLES: u32 = 16;

impl Connection {
    /// Silence long enough to call it an outage (modes with positive feedback only).
    fn silence_threshold(&self) -> Duration {
        (self.rtt.rto() * 2).max(self.ec.min_silence)
    }

    /// Since when the peer has been silent while owing an answer: the later of the last TPDU
    /// heard and the moment the data now unacknowledged began (the first TPDU sent while
    /// nothing was outstanding, `Sender::outstanding_since`). Silence before that moment is no
    /// sign of an outage: the peer had nothing to answer. Measured from the last TPDU heard
    /// alone, a connection sending one message every 2 s (a gateway's interactive flow, or an
    /// upload fed a window at a time after an idle gap) had "heard nothing" for 2 s the
    /// moment each message left, so every message was an outage: new data stopped, a probe
    /// went, and the first TPDU heard back (the echo, ahead of the acknowledgement held 2 ms
    /// for confirmed delivery) resent the message — 14,000 false outages in a gateway run
    /// (docs/results/gw.md). While data stays outstanding this is the last TPDU heard, as
    /// before: a busy connection finds a real outage as soon as ever, and in a lossy tail
    /// (the holes resent, the peer silent) the outage's probe still comes two RTOs after the
    /// last acknowledgement — counting from the first unanswered retransmission instead cost
    /// up to 2.1 % of goodput at BER 1e-4 without FEC (docs/results/gw.md).
    fn silent_since(&self) -> Duration {
        self.watch.last_heard.max(self.tx.outstanding_since())
    }

    /// When new data and repairs pause for a suspected outage: nothing heard for one RTO
    /// (before backoff) while data is unacknowledged. The silence threshold then starts the
    /// probes; pausing at one RTO halves what goes into a link that has just died (a 30-minute
    /// outage otherwise cost 1.9 % of a 10 MB transfer: the sender went on at full rate, then
    /// resent its whole flight on the timeout, into the dead link). While paused, a timeout
    /// resends only the oldest TPDU (retransmissions go; it is the only one queued). Any TPDU
    /// from the peer lifts the pause; feedback and control TPDUs never pause. Counted from
    /// `silent_since`, not the last TPDU heard: a sparse connection's new message would
    /// otherwise pause at once.
    pub(super) fn pause_at(&self) -> Option<Duration> {
        (self.watches_outages() && !self.watch.liveness.silent() && self.tx.has_outstanding())
            .then(|| self.silent_since() + self.pause_after())
    }

    /// Silence after which an outage is suspected: 1.5 RTOs, or sooner where feedback has come
    /// on a regular beat: twice the longest recent gap between TPDUs heard, never under a round
    /// trip and four times its variation. The RTO holds the peer's acknowledgement delay
    /// (near-reliable's periodic ACK may wait 200 ms), so 1.5 RTOs sent 80–190 ms of data into a
    /// 30-minute outage, 1.1–1.6 % of a 10 MB transfer at 5 Mb/s (docs/results/dynamic.md).
    /// The beat is trusted only on a connection that has rarely lost (under 5 % of its TPDUs
    /// resent): under heavy loss runs of lost TPDUs leave silences longer than the gaps
    /// measured, and pausing there cost 2 % of goodput at BER 1e-4 without FEC.
    fn pause_after(&self) -> Duration {
        let rto_based = self.rtt.base_rto() * 3 / 2;
        let s = self.tx.stats();
        let lossy = s.tpdus_retransmitted * 20 > s.tpdus_sent;
        if lossy || self.watch.heard_gaps < GAP_SAMPLES {
            return rto_based;
        }
        let regular = (self.watch.heard_gap * 2)
            .max(self.rtt.rtt_bound())
            .max(self.cfg.min_rto);
        rto_based.min(regular)
    }

    /// The AFINACK is due and may go: not from an acceptor not yet proven to reach a real
    /// peer, and with confirmed delivery only once the application confirmed the end.
    pub(super) fn afinack_ready(&self) -> bool {
        self.outbox.due.afinack && !self.life.unproven && self.rx.end_confirmed()
    }

    /// When an idle connection sends its next keep-alive PROBE: `keep_alive` after the later
    /// of the last TPDU heard and the last keep-alive, once the connection is established and
    /// while no outage is being probed (the outage probes do the same job then).
    /// The acceptor waits halfway from `keep_alive` to the idle timeout, so while the
    /// initiator probes (every `keep_alive`) only it does: one PROBE and one answer per
    /// interval, not two of each (a gateway's thousand idle flows).
    /// With confirmed delivery, a sender whose data is all acknowledged but not yet confirmed
    /// asks sooner, every silence threshold: the peer's confirmation (or the AFINACK carrying
    /// it) may have been lost, and a peer answers a PROBE with its feedback, or after
    /// releasing the connection with its final AFINACK (docs/spec.md §4).
    fn keepalive_at(&self) -> Option<Duration> {
        let k = if self.awaits_confirmation() && !self.tx.has_outstanding() {
            self.silence_threshold().max(self.cfg.probe_interval)
        } else {
            let mut k = self.cfg.keep_alive?;
            if self.role == super::Role::Acceptor {
                k += self.cfg.idle_timeout.saturating_sub(k) / 2;
            }
            k
        };
        (self.watch.liveness.heard()
            && !self.life.unproven
            && !self.watch.liveness.silent()
            && !self.outbox.due.keepalive)
            .then(|| self.watch.last_heard.max(self.watch.last_keepalive) + k)
    }

    fn watches_outages(&self) -> bool {
        self.watch.liveness.heard() && self.ec.acknowledges()
    }

    /// CLOSE_TO: after the AFIN, how long to wait without hearing from the peer. Modes that
    /// promise delivery keep trying while data is unacknowledged (an outage may last half an
    /// hour; the idle timeout ends a dead peer) and start CLOSE_TO only for the AFINACK itself.
    fn close_deadline(&self) -> Option<Duration> {
        let f = self.life.fin_sent_at?;
        if self.ec.delivers_everything()
            && self.tx.outstanding() > usize::from(!self.tx.fin_acked())
        {
            return None;
        }
        // On a slow or long link one AFIN retransmission can take longer than the configured
        // close timeout (a 1500 B TPDU is 5 s at 2.4 kb/s): allow at least three timeouts'
        // worth of retransmissions before giving up.
        let wait = self.cfg.close_timeout.max(self.rtt.rto() * 3);
        Some(f.max(self.watch.last_heard) + wait)
    }

    /// The connection's timers, by name (see [`Timer`]): the one function that lists them,
    /// each with its deadline. `poll_timeout` takes the earliest; `handle_timeout` acts on
    /// the due ones of `life_timers`.
    fn each_timer(&self, f: &mut impl FnMut(Timer, Duration)) {
        self.life_timers(f);
        if !self.life.phase.ended() {
            self.send_timers(f);
        }
    }

    /// The whole table, for diagnostics (`describe`).
    pub(crate) fn timers(&self) -> Timers {
        let mut t = Timers::default();
        self.each_timer(&mut |k, d| t.set(k, d));
        t
    }

    /// The entries `handle_timeout` acts on itself: idle, close, linger, keepalive, hole,
    /// pause, silence, probe, retention (and, once ended, the last send slot). Kept apart
    /// from the sending entries so a `handle_timeout` does not compute those too: that cost
    /// 10 % more engine instructions per byte (callgrind, `engine_loopback`).
    fn life_timers(&self, f: &mut impl FnMut(Timer, Duration)) {
        if self.life.phase.ended() {
            // Ended: only the final acknowledgement or the RST may still go, at the pacer's
            // slot.
            if self.outbox.due.rst.is_some() || self.outbox.due.final_ack {
                f(Timer::Send, self.pacer.next_send());
            }
            return;
        }
        f(Timer::Idle, self.watch.last_heard + self.cfg.idle_timeout);
        // While paused (suspected outage) no data goes, so no send time is a deadline; the
        // pause itself is one (`handle_timeout` then pauses).
        if !self.watch.liveness.paused() {
            if let Some(d) = self.pause_at() {
                f(Timer::Pause, d);
            }
        }
        if let Some(d) = self.keepalive_at() {
            f(Timer::Keepalive, d);
        }
        if let Some(d) = self.rx.hole_deadline() {
            f(Timer::Hole, d);
        }
        if !self.watch.liveness.silent() && self.watches_outages() && self.tx.has_outstanding() {
            // From `silent_since`: the threshold must pass with data unanswered, not merely
            // since the peer last spoke (a sparse connection's every message was an outage).
            f(
                Timer::Silence,
                self.silent_since() + self.silence_threshold(),
            );
        }
        if let Some(d) = self.watch.liveness.next_probe() {
            f(Timer::Probe, d);
        }
        if let Some(d) = self.tx.retention_deadline() {
            f(Timer::Retention, d);
        }
        // Several paths only (one branch with one path, the common case).
        if self.paths.multi() {
            if let Some(d) = self.path_down_deadline() {
                f(Timer::PathDown, d);
            }
            if let Some(d) = self.path_probe_deadline() {
                f(Timer::PathProbe, d);
            }
        }
        // CLOSE_TO only while our side is unconfirmed, LISTEN_TO only once it is: a deadline
        // that has passed and can no longer act must not be reported (the caller would spin).
        if !self.send_done() {
            if let Some(d) = self.close_deadline() {
                f(Timer::Close, d);
            }
        } else if let Some(l) = self.life.peer_fin.linger_until() {
            // The linger only ends the connection once the AFINACK is out and the peer's AFIN
            // complete (`check_finished`); before that the AFINACK's pacer slot is the
            // deadline that acts. Reporting `l` then would be a deadline nothing acts on.
            if !self.outbox.due.afinack && self.rx.fin_complete() {
                f(Timer::Linger, l);
            }
        }
    }

    /// The entries `poll_transmit` acts on (send, feedback, repair, rechoose) and those the
    /// sender checks each transmission against in `handle_timeout` (retransmit, loss).
    fn send_timers(&self, f: &mut impl FnMut(Timer, Duration)) {
        let paused = self.watch.liveness.paused() || self.radio_held();
        let silent = self.watch.liveness.silent();
        if let Some(d) = self.send_deadline() {
            f(Timer::Send, d);
        }
        if let Some(d) = self.feedback_entry() {
            f(Timer::Feedback, d);
        }
        if silent {
            return;
        }
        if let Some(d) = self
            .coding
            .etx
            .next_repair_time()
            .filter(|_| !paused)
            .map(|d| d.max(self.pacer.next_send()))
        {
            f(Timer::Repair, d);
        }
        // `poll_transmit` re-chooses the erasure strength (`ErasureTx::update`) once the
        // pacer allows and the link is not paused: a moved estimate is due then.
        if let Some(d) = self
            .coding
            .etx
            .rechoose_at(self.rtt.smoothed(), self.pacer.rate())
            .filter(|_| !paused)
            .map(|d| d.max(self.pacer.next_send()))
        {
            f(Timer::Rechoose, d);
        }
        let lanes = |i| self.paths.lane_timing(i);
        if let Some(d) = self
            .tx
            .timeout_deadline(&self.rtt.loss_timing(&lanes))
            .filter(|_| !self.radio_held())
        {
            f(Timer::Retransmit, d);
        }
        // Loss detection by time runs in `handle_timeout` only through `Sender::on_timeout`,
        // which it calls with a round-trip sample and while not paused (paused, the timeout
        // resends only the oldest TPDU): report the loss deadline only then, or a paused
        // connection reports a deadline nothing acts on (found by the proto_endpoint fuzz
        // target's core-hour campaign).
        if self.ec.loss_by_time && self.rtt.has_sample() && !paused {
            let lanes = |i| self.paths.lane_timing(i);
            if let Some(d) = self.tx.loss_deadline(&self.rtt.loss_timing(&lanes)) {
                f(Timer::Loss, d);
            }
        }
    }

    /// The send entry of the table (not ended): the pacer's next slot, when something waits
    /// to go.
    fn send_deadline(&self) -> Option<Duration> {
        self.has_send_due().then(|| self.pacer.next_send())
    }

    /// Whether the send entry is in the table: something other than feedback or a repair
    /// waits to go. Every clause is a pure read; the cheap and usual ones (a bulk sender's
    /// new data) come first, and the paths are walked for the radio's hold only when it
    /// decides, since this is asked three or four times per datagram (callgrind,
    /// `engine_loopback`, docs/results/loopback.md).
    fn has_send_due(&self) -> bool {
        let liveness = self.watch.liveness;
        if liveness.silent() {
            return self.outbox.due.probe
                || self.guard.due
                || self.outbox.due.asynack
                || self.afinack_ready();
        }
        let held = || self.radio_held();
        (!liveness.paused()
            && (self.tx.asyn_pending() || (self.tx.has_new() && self.window_open()))
            && !held())
            || (self.tx.has_retransmission() && !held())
            || self.paths.has_probe()
            // An unproven acceptor holds its AFINACK (`unproven`), and with confirmed
            // delivery it waits for the application's confirmation of the end: no deadline
            // for it then.
            || self.outbox.due.keepalive
            || self.guard.due
            || self.outbox.due.asynack
            || self.afinack_ready()
    }

    /// A pause or an outage entered here (or anything else that leaves nothing waiting for
    /// the pacer's slot) is said to the pacer at once, so that the send that ends it makes
    /// up no lateness (`Pacer::set_waiting`). Only cleared here, never set: an
    /// acknowledgement handled before this may have reopened a window, and a send that
    /// resumes is no late wake-up. At BER 1e-4 (`aerotp sim --mode reliable --ber 1e-4 --fec
    /// auto --size 10MB --send-rate auto --runs 3`) 6 pauses came between two turns. Not
    /// asked when the pacer already holds that nothing waits.
    fn settle_waiting(&mut self) {
        if self.pacer.waiting() && !self.waits_for_slot() {
            self.pacer.set_waiting(false);
        }
    }

    /// Whether something waits to go at the pacer's slot: the send entry, or feedback or a
    /// repair due by then. What the pacer is told after each turn (`Pacer::set_waiting`).
    pub(super) fn waits_for_slot(&self) -> bool {
        if self.life.phase.ended() {
            return self.outbox.due.rst.is_some() || self.outbox.due.final_ack;
        }
        if self.has_send_due() {
            return true;
        }
        let slot = self.pacer.next_send();
        let by_slot = |d: Option<Duration>| d.is_some_and(|d| d <= slot);
        by_slot(self.rx.feedback_deadline())
            || (!self.watch.liveness.paused()
                && !self.watch.liveness.silent()
                && !self.radio_held()
                && by_slot(self.coding.etx.next_repair_time()))
    }

    /// The feedback entry (not ended): the receiver's feedback deadline, at the pacer's slot.
    fn feedback_entry(&self) -> Option<Duration> {
        self.rx
            .feedback_deadline()
            .map(|f| f.max(self.pacer.next_send()))
    }

    /// As [`Connection::poll_timeout`], except that a send slot at or before `now` is
    /// returned as soon as it is found, without the rest of the table: the connection is due
    /// either way, and `handle_timeout` and `poll_transmit` act on every entry that is due,
    /// not on the one reported. A bulk sender's slot is nearly always due, and the whole
    /// table after each of its datagrams is not needed (callgrind, `engine_loopback`:
    /// 957.4 M → 918.4 M instructions per 100 MB; also trying the feedback entry first cost
    /// more where it was not due than it saved: 944.1 M). The second value says whether the
    /// shortcut was taken.
    pub(crate) fn poll_timeout_by(&self, now: Duration) -> (Option<Duration>, bool) {
        if !self.life.phase.ended() {
            let due = |d: &Duration| *d <= now;
            if let Some(d) = self.send_deadline().filter(due) {
                return (Some(d), true);
            }
        }
        (self.poll_timeout(), false)
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut earliest: Option<Duration> = None;
        self.each_timer(&mut |_, d| earliest = Some(earliest.map_or(d, |e| e.min(d))));
        earliest
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        if self.life.phase.ended() {
            return;
        }
        let mut t = Timers::default();
        self.life_timers(&mut |k, d| t.set(k, d));
        let due = |d: Option<Duration>| d.is_some_and(|d| now >= d);
        if due(t.get(Timer::Idle)) {
            self.finish_with(CloseOutcome::IdleTimeout);
            return;
        }
        if due(t.get(Timer::Close)) {
            self.apply(StateEvent::CloseTo);
            self.finish_with(CloseOutcome::CloseTimeout);
            return;
        }
        if due(t.get(Timer::Keepalive)) {
            self.outbox.due.keepalive = true;
            self.watch.last_keepalive = now;
        }
        if due(t.get(Timer::Hole)) {
            self.rx.on_hole_timeout(now);
        }
        if self.rx.fin_complete() && !self.life.peer_fin.afinack_sent() {
            self.on_peer_fin(now);
        }
        if self.rx.readable() {
            self.push_event(ConnEvent::Readable);
        }
        // `Timer::PathDown`, `Timer::PathProbe`: every time (cheap with one path).
        if due(t.get(Timer::PathDown)) || due(t.get(Timer::PathProbe)) {
            self.check_paths(now);
        }
        // The retention timer (`Timer::Retention`), and the sweep of entries already freed at the
        // front of the send record, which reports no deadline of its own: every time.
        self.tx.expire_retained(now);
        if due(t.get(Timer::Silence)) {
            self.tx.hold_retransmissions();
            self.watch.enter_outage(now, self.cfg.probe_interval);
        }
        // An outage entered just now ends any pause; a pause already on is re-read (`Timer::Pause`
        // is reported only while not paused) and stays on while its deadline has passed.
        let pause = match self.watch.liveness {
            Liveness::Heard { paused: false } => due(t.get(Timer::Pause)),
            Liveness::Heard { paused: true } => self.pause_at().is_some_and(|p| now >= p),
            Liveness::Unheard | Liveness::Silent { .. } => false,
        };
        if let Liveness::Heard { paused } = &mut self.watch.liveness {
            *paused = pause;
        }
        // Re-read too: an outage entered just now sends its first probe at once.
        if let Liveness::Silent { next_probe, wait } = self.watch.liveness {
            if now >= next_probe {
                self.tx.hold_retransmissions();
                self.outbox.due.probe = true;
                self.watch.liveness = Liveness::Silent {
                    next_probe: now + wait,
                    wait: (wait * 2).min(MAX_PROBE_INTERVAL.max(self.cfg.probe_interval)),
                };
            }
        } else {
            self.run_loss_timers(now);
        }
        self.check_finished(now);
        self.settle_waiting();
    }
}

impl Connection {
    /// The retransmission and loss timers (`Timer::Retransmit`, `Timer::Loss`): the sender
    /// checks each transmission against them itself. While paused a timeout resends only the
    /// oldest TPDU (a probe), not the flight. While the radio holds every path neither runs:
    /// what is in flight is the modem's to send, and a pause is no loss (`crate::radio`); the
    /// radio's release runs them (`Connection::radio`).
    pub(super) fn run_loss_timers(&mut self, now: Duration) {
        if self.radio_held() || self.watch.liveness.silent() {
            return;
        }
        let lanes = |i| self.paths.lane_timing(i);
        let t = self.rtt.loss_timing(&lanes);
        let fired = if self.rtt.has_sample() && !self.watch.liveness.paused() {
            self.tx.on_timeout(now, &t)
        } else {
            let lowest = self.rate.discovers();
            self.tx.on_timeout_before_sample(now, &t, lowest)
        };
        if fired > 0 {
            self.rtt.on_timeouts(now);
        }
    }
}

/// Every timer of a connection, by name. `Connection::each_timer` is the one function that
/// lists them with their deadlines; `poll_timeout` reports the earliest, and `handle_timeout`
/// acts on the due ones (the sending ones are acted on by `poll_transmit`, which the driver
/// calls after it), so a deadline reported is one acted on — the contract
/// crates/proto/tests/deadlines.rs checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Nothing heard for the idle timeout: the connection ends (`IdleTimeout`).
    Idle,
    /// CLOSE_TO: our AFIN unacknowledged that long ends the connection (`CloseTimeout`).
    Close,
    /// LISTEN_TO: the linger after the peer's AFIN ends; then the connection finishes.
    Linger,
    /// Something may go at the pacer's next slot (data, a retransmission, a control TPDU, a
    /// PROBE): `poll_transmit`.
    Send,
    /// Feedback (ACK, MACK, NACK, SNACK, report) due, not before the pacer's slot.
    Feedback,
    /// An erasure repair due, not before the pacer's slot.
    Repair,
    /// The erasure strength may be re-chosen, not before the pacer's slot.
    Rechoose,
    /// Lossy modes: the oldest TPDU behind a hole stops waiting for it.
    Hole,
    /// Retransmission timeout of the oldest transmission.
    Retransmit,
    /// Loss detection by time (RACK) of the oldest transmission not yet declared lost.
    Loss,
    /// Nothing heard for `pause_after` with data unacknowledged (counted from the later of
    /// the last TPDU heard and when that data began): new data pauses.
    Pause,
    /// Nothing heard for the silence threshold with data unacknowledged (counted likewise):
    /// an outage.
    Silence,
    /// The next outage PROBE.
    Probe,
    /// The next keep-alive PROBE of an idle connection.
    Keepalive,
    /// Hybrid-nack: the oldest kept TPDU's retention ends.
    Retention,
    /// Several paths: a path's oldest TPDU is so overdue that the path is down.
    PathDown,
    /// Several paths: a down path's next PROBE.
    PathProbe,
}

/// The table filled in: each timer's deadline, if it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Timers {
    at: [Option<Duration>; 17],
}

impl Timers {
    pub(crate) fn set(&mut self, timer: Timer, at: Duration) {
        self.at[timer as usize] = Some(at);
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Duration> {
        self.at[timer as usize]
    }
}

impl std::fmt::Display for Timers {
    /// The running timers, earliest first: `idle=30.5s close=2.1s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 17] = [
            "idle",
            "close",
            "linger",
            "send",
            "feedback",
            "repair",
            "rechoose",
            "hole",
            "retransmit",
            "loss",
            "pause",
            "silence",
            "probe",
            "keepalive",
            "retention",
            "path-down",
            "path-probe",
        ];
        let mut running: Vec<(Duration, &str)> = self
            .at
            .iter()
            .zip(NAMES)
            .filter_map(|(at, name)| at.map(|t| (t, name)))
            .collect();
        running.sort();
        for (i, (t, name)) in running.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={t:?}")?;
        }
        Ok(())
    }
}
