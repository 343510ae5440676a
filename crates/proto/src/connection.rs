//! One AeroTP connection: the state machine, a sending half, a receiving half, rate pacing,
//! FEC control and timers. The mode's error control (`ErrorControl`, built once) decides what
//! each part does. Each part owns its state and its counters (`Connection`'s fields); the
//! modules below hold what the connection does with them, one job each.

use crate::codec::{self, Quality, Received};
use crate::config::ConnectionConfig;
use crate::control_due::ControlDue;
use crate::endpoint_types::PathAddr;
use crate::erasure::{ErasureRxStats, ErasureSetting, ErasureTxStats};
use crate::error_control::{ErrorControl, Feedback};
use crate::pacer::Pacer;
use crate::paths::{PathStats, Paths};
use crate::phase::{PeerFin, Phase};
use crate::rate::{RateReason, RateState};
use crate::receiver::{Receiver, ReceiverStats};
use crate::reset_guard::{self, ResetGuard, ResetStats};
use crate::rtt::RttEstimator;
use crate::sender::{Sender, SenderStats};
use crate::state::{transition, Action, State, StateEvent};
use aerotp_wire::{Ack, ControlBody, Flags, Header, Mode};
use coding::Coding;
use life::Life;
use outbox::Outbox;
use record::Record;
use std::time::Duration;
use watch::Watch;

mod app;
mod coding;
mod feedback;
mod life;
mod multipath;
mod outbox;
mod probe;
mod radio;
mod rate;
mod record;
mod reset;
mod timers;
mod tpdu;
mod transmit;
mod watch;

/// Whether a TPDU is an outage PROBE: a control TPDU whose only part is an empty NACK
/// (docs/spec.md §4).
pub(crate) fn is_probe(h: &Header, body: &[u8]) -> bool {
    h.flags == Flags::NACK && body == [0, 0]
}

/// Longest interval between outage probes: a returning link is found within this (plus a
/// round trip), and a 30-minute outage costs about 900 probes of some 60 bytes.
const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Acceptor,
}

pub use crate::close_outcome::CloseOutcome;
pub use outbox::ConnEvent;

/// Every counter a connection keeps; see docs/stats.md for their meaning.
///
/// Not split: a public flat counter set mirrored one-to-one in docs/stats.md, the CLI's and
/// simulator's JSON and the Prometheus families (`aerotp_net::counters`); the groups that
/// have an owner are nested already (`sender`, `receiver`, `erasure_tx`, `erasure_rx`,
/// `resets`, `paths`), and the rest are the connection's own wire counters and estimates.
#[derive(Debug, Clone, Default)]
pub struct ConnectionStats {
    pub sender: SenderStats,
    pub receiver: ReceiverStats,
    /// Erasure coding of what this end sends.
    pub erasure_tx: ErasureTxStats,
    /// Erasure decoding of what this end receives.
    pub erasure_rx: ErasureRxStats,
    pub datagrams_sent: u64,
    pub bytes_sent_wire: u64,
    pub datagrams_received: u64,
    pub bytes_received_wire: u64,
    pub control_sent: u64,
    pub rtt: Duration,
    pub srtt: Duration,
    /// Current retransmission timeout.
    pub rto: Duration,
    pub fec_parity: u8,
    pub measured_ber: f64,
    pub peer_reported_ber: f64,
    /// The rate the pacer runs at, b/s on the link.
    pub rate_bps: u64,
    /// Why the rate is what it is (fixed, discovered, capped, starting).
    pub rate_reason: RateReason,
    pub peer_delivered: u64,
    pub outages: u64,
    /// What this end did with the RSTs it received (docs/stats.md).
    pub resets: ResetStats,
    /// One entry per path (docs/stats.md, "Paths").
    pub paths: Vec<PathStats>,
}

/// One connection. Its parts own their state and their counters: the halves (`tx`, `rx`), the
/// round-trip estimator, the paths, the rate and the pacer, how TPDUs are cut and protected
/// (`coding`), what is heard from the peer and the PROBEs sent when nothing is (`watch`), the
/// set-up and close (`life`), the resets (`guard`), what is owed to the peer and the
/// application (`outbox`) and what is recorded for statistics (`record`).
#[derive(Debug)]
pub struct Connection {
    pub role: Role,
    pub local_port: u16,
    pub remote_port: u16,
    pub tag: u8,
    /// This end's identifier of the connection, and the peer's once learned (docs/spec.md §9;
    /// `endpoint::validation`).
    pub(crate) cid: u64,
    pub(crate) peer_cid: Option<u64>,
    /// What the mode's error control does (built once from the mode).
    ec: ErrorControl,
    cfg: ConnectionConfig,
    /// The peer's addresses and what each path does (`remote()` is the first).
    paths: Paths,
    /// The sending rate: fixed (configuration or `set_rate`; the pacer runs at the share of
    /// it the paths that are up carry) or discovered per path under that rate as a cap.
    rate: RateState,
    pacer: Pacer,
    tx: Sender,
    rx: Receiver,
    rtt: RttEstimator,
    /// TPDU size, FEC parity and erasure coding, and the peer's reported bit-error rate.
    coding: Coding,
    /// The peer heard or silent, and the keep-alives and outage probes sent.
    watch: Watch,
    /// The state machine's phase and the set-up and close handshakes.
    life: Life,
    /// Resets a blind attacker cannot forge (`reset`).
    guard: ResetGuard,
    /// Control TPDUs owed to the peer, notifications owed to the application.
    outbox: Outbox,
    /// Wire counters, the latest time given, the send trace.
    record: Record,
}

impl Connection {
    pub fn new(
        role: Role,
        cfg: ConnectionConfig,
        path: PathAddr,
        local_port: u16,
        remote_port: u16,
        tag: u8,
        now: Duration,
    ) -> Connection {
        let ec = ErrorControl::for_mode(cfg.mode);
        // Seeds the erasure code's coefficients and the rate control's probing: the same
        // inputs give the same choices, different connections different ones.
        let key = (u64::from(tag) << 32) | (u64::from(local_port) << 16) | u64::from(remote_port);
        Connection {
            role,
            paths: Paths::new(path, now, RttEstimator::new(cfg.initial_rtt, cfg.min_rto)),
            rate: RateState::new(
                cfg.rate_control,
                cfg.rate_bps,
                cfg.mtu,
                cfg.per_packet_overhead,
                ec.discovers_rate(),
                key,
            ),
            local_port,
            remote_port,
            tag,
            cid: 0,
            peer_cid: None,
            ec,
            pacer: Pacer::new(cfg.rate_bps, cfg.per_packet_overhead, cfg.mtu),
            tx: sender_for(role, ec, &cfg),
            rx: receiver_for(ec, &cfg),
            rtt: RttEstimator::new(cfg.initial_rtt, cfg.min_rto),
            coding: Coding::new(ec, &cfg, key, now),
            watch: Watch::new(now),
            life: Life::new(opening_state(role), now),
            guard: ResetGuard::default(),
            outbox: Outbox::new(ControlDue {
                asynack: role == Role::Acceptor,
                ..ControlDue::default()
            }),
            record: Record::new(now, cfg.trace),
            cfg,
        }
    }

    pub fn mode(&self) -> Mode {
        self.ec.mode
    }

    pub fn state(&self) -> State {
        self.life.phase.state()
    }

    pub fn config(&self) -> &ConnectionConfig {
        &self.cfg
    }

    fn apply(&mut self, ev: StateEvent) -> Option<Action> {
        let Phase::Live { state } = &mut self.life.phase else {
            return None;
        };
        let (next, action) = transition(*state, ev)?;
        tracing::trace!(from = %state, to = %next, event = ?ev, "state");
        *state = next;
        Some(action)
    }

    fn push_event(&mut self, e: ConnEvent) {
        self.outbox.push_event(e);
    }

    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        self.outbox.poll_event()
    }

    pub fn is_closed(&self) -> bool {
        self.life.phase.ended()
    }

    /// Busy, for the link share: more bytes wait unsent than the current rate sends in
    /// `period`, or the send buffer is half full or more. A backlog that outlasts a
    /// recomputation is one that more rate would help; a connection fed in small bursts below
    /// its rate has a few bytes queued at most moments, and counting it busy whenever it is
    /// sampled just after a write would hand it the rate of a saturating one (what it sends
    /// is reserved for it anyway, from its usage). The buffer test is for fast connections:
    /// a send buffer smaller than one period of the rate (the default, 256 KiB at a
    /// 1,500-byte MTU, is 50 ms at 42 Mb/s) could never hold a period's backlog, yet an
    /// application writing faster than the connection sends keeps it near full.
    pub(crate) fn backlog_outlasts(&self, period: std::time::Duration) -> bool {
        let period_bits = self.pacer.rate() as f64 * period.as_secs_f64();
        !self.life.phase.ended()
            && (self.tx.unsent() as f64 * 8.0 > period_bits || self.tx.backlogged())
    }

    /// Bytes this connection has put on the link: its datagrams plus `per_packet_overhead`
    /// (IP and UDP) each, as the pacer counts them. The link share measures usage in these:
    /// without the headers a thousand flows of small messages and acknowledgements used a
    /// tenth more of the link than their reservations said (docs/results/gw.md, "Many flows").
    pub(crate) fn link_bytes_sent(&self) -> u64 {
        self.record.wire.bytes_sent_wire
            + self.record.wire.datagrams_sent * self.cfg.per_packet_overhead as u64
    }

    pub(crate) fn set_class(&mut self, class: crate::TrafficClass) {
        self.cfg.class = class;
    }

    /// The final acknowledgement of the receiving half (for the endpoint to repeat after the
    /// connection is released): `cum`, and `delivered` (a confirmed-delivery peer waits for
    /// it); `window` 0.
    pub fn final_ack(&self) -> Option<Ack> {
        self.rx.fin_complete().then(|| Ack {
            window: 0,
            ..self.rx.final_ack()
        })
    }

    fn finish_with(&mut self, outcome: CloseOutcome) {
        if !self.life.phase.ended() {
            self.life.phase = Phase::Ended {
                outcome: outcome.clone(),
                abort_reason: reset_guard::answer_for(&outcome),
            };
            if matches!(
                outcome,
                CloseOutcome::IdleTimeout | CloseOutcome::CloseTimeout
            ) {
                // Tell the peer, if it still hears us, rather than leave it to its own timeout.
                self.outbox.due.rst = reset_guard::answer_for(&outcome);
            }
            self.push_event(ConnEvent::Closed(outcome));
        }
    }

    /// Every counter, read from the part that keeps it.
    pub fn stats(&self) -> ConnectionStats {
        let (keepalives, probes, outages) = self.watch.counts();
        let mut sender = self.tx.stats().clone();
        sender.keepalives = keepalives;
        sender.probes = probes;
        let mut erasure_rx = self.coding.erx.stats.clone();
        erasure_rx.decoder_bytes = self.coding.erx.memory_bytes() as u64;
        let wire = &self.record.wire;
        ConnectionStats {
            sender,
            receiver: self.rx.stats(),
            erasure_tx: self.coding.etx.stats.clone(),
            erasure_rx,
            datagrams_sent: wire.datagrams_sent,
            bytes_sent_wire: wire.bytes_sent_wire,
            datagrams_received: wire.datagrams_received,
            bytes_received_wire: wire.bytes_received_wire,
            control_sent: wire.control_sent,
            rtt: self.rtt.latest(),
            srtt: self.rtt.smoothed(),
            rto: self.rtt.rto(),
            fec_parity: self.coding.fec.parity(),
            measured_ber: self.rx.measured_ber(),
            peer_reported_ber: self.coding.peer_ber,
            rate_bps: self.pacer.rate(),
            rate_reason: self.rate_reason(),
            peer_delivered: self.tx.peer_delivered(),
            outages,
            resets: self.guard.stats,
            paths: self.path_stats(),
        }
    }

    /// A one-line summary of both halves' state, for diagnostics and bug reports.
    pub fn describe(&self) -> String {
        let phase = match &self.life.phase {
            Phase::Live { state } => state.to_string(),
            Phase::Ended { outcome, .. } => format!("ENDED({outcome:?})"),
        };
        format!(
            "{phase} tx[{}] rx[{}] silent={} rto={:?} timers[{}]",
            self.tx.describe(),
            self.rx.describe(),
            self.watch.liveness.silent(),
            self.rtt.rto(),
            self.timers()
        )
    }

    /// Changes the erasure coding of what this end sends, on the live connection.
    pub fn set_erasure(&mut self, setting: ErasureSetting) {
        self.coding.etx.set_setting(setting);
    }

    /// Changes the sending rate (backpressure from the network layer, or the application).
    /// Shares the endpoint's bound on out-of-order bytes (set by the endpoint at creation).
    pub(crate) fn set_reorder_budget(&mut self, budget: crate::reorder_budget::ReorderBudget) {
        self.rx.set_reorder_budget(budget);
    }

    /// With a fixed rate, the rate; with discovery, the cap.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate.set_cap(rate_bps);
        if !self.rate.discovers() {
            self.pacer.set_rate(rate_bps);
        }
        self.apply_path_rate();
        if self.cfg.return_rate_bps.is_none() {
            self.rx.set_return_rate(rate_bps, self.cfg.feedback_share);
        }
    }

    /// First-send time of each TPDU (TPDU number, time), if tracing.
    pub fn send_trace(&self) -> Option<&[(u64, Duration)]> {
        self.record.send_trace.as_deref()
    }

    /// The delivery trace of the receiving half (TPDU number, time, bytes), if tracing.
    pub fn delivery_trace(&self) -> Option<&[(u64, Duration, u32)]> {
        self.rx.trace()
    }

    // ---- receiving TPDUs ----

    pub(crate) fn set_unproven(&mut self, unproven: bool) {
        self.life.unproven = unproven;
        self.rx.set_unproven(unproven);
    }

    pub(crate) fn is_unproven(&self) -> bool {
        self.life.unproven
    }

    /// Closed unproven at the set-up timeout: nothing more is sent to the peer.
    pub(crate) fn setup_timed_out(&mut self) {
        self.finish_with(CloseOutcome::SetupTimeout);
    }

    /// The peer's identifier, from a CHALLENGE or ECHO of a proven address: the first kept.
    pub(crate) fn learn_peer_cid(&mut self, cid: u64) {
        if cid != 0 && self.peer_cid.is_none() {
            self.peer_cid = Some(cid);
        }
    }

    /// A RETRY (docs/spec.md §9): the listener kept no state for the TPDU sent at `ts_echo`.
    /// Still setting up, we send again what is unacknowledged (the endpoint has echoed the
    /// cookie first, so the listener admits it); a RETRY for a TPDU sent after we heard from
    /// the peer (data, or an outage probe) means it no longer has this connection.
    pub(crate) fn on_retry(&mut self, now: Duration, ts_echo: u32) {
        if self.role != Role::Initiator || self.life.phase.ended() {
            return;
        }
        let now_us = self.now_us(now);
        let age = Duration::from_micros(u64::from(now_us.wrapping_sub(ts_echo)));
        if let Some(connected_at) = self.life.connected_at {
            if age < now.saturating_sub(connected_at) {
                // No RST: the peer has nothing left to reset.
                self.finish_with(CloseOutcome::Reset(
                    "the peer no longer has this connection (it restarted, or dropped it \
                     unproven at its set-up timeout): open a new connection"
                        .into(),
                ));
            }
            return;
        }
        // Once per round of RETRYs: those for TPDUs sent before the last resend are old news.
        let stale = self
            .life
            .retry_resent_at
            .is_some_and(|t| (t.wrapping_sub(ts_echo) as i32) > 0);
        if !stale {
            self.life.retry_resent_at = Some(now_us);
            self.tx.retransmit_all_unacked();
        }
    }

    fn now_us(&self, now: Duration) -> u32 {
        // Low 32 bits of microseconds since the connection began.
        ((now.saturating_sub(self.life.epoch).as_micros() & 0xFFFF_FFFF) as u32)
            .wrapping_add(self.guard.clock_offset)
    }

    pub fn handle(&mut self, now: Duration, r: Received) {
        self.note_peer_timestamp(&r.header);
        if self.life.phase.ended() {
            self.answer_after_end(&r);
            return;
        }
        let resumed = self.on_heard(now, &r);
        let flags = r.header.flags;
        if flags.is_data() {
            self.on_data_tpdu(now, r);
        } else if flags.is_repair() {
            if r.quality != Quality::Corrupted {
                self.rx
                    .set_erasure_wait(self.coding.etx.setting().max_delay);
                let rebuilt = self.coding.erx.on_repair(&r.body);
                self.take_rebuilt(now, rebuilt);
            }
        } else if r.quality != Quality::Corrupted {
            self.on_control(now, &r.header, &r.body);
        }
        if resumed {
            // The link is back: resend whatever the outage swallowed — after this TPDU's
            // acknowledgements, so what it confirms is not resent.
            self.tx.retransmit_all_unacked();
        }
    }

    /// Finished or aborted, not yet released: a TPDU that asks for an answer gets the final
    /// acknowledgement or the RST again.
    fn answer_after_end(&mut self, r: &Received) {
        // Finished: a late data TPDU means the peer missed our final acknowledgement; repeat
        // it (once per TPDU, paced) so the peer can finish too.
        let asks = r.header.flags.is_data() || is_probe(&r.header, &r.body);
        if asks && self.rx.fin_complete() {
            self.outbox.due.final_ack = true;
        }
        // Aborted: the RST may have been lost; say it again (once per TPDU that asks, paced),
        // so the peer stops sending into a closed connection.
        if let (
            true,
            Phase::Ended {
                abort_reason: Some(reason),
                ..
            },
        ) = (asks, &self.life.phase)
        {
            self.outbox.due.rst = Some(reason.clone());
        }
    }

    /// What any TPDU heard while live tells before its content is read: the peer is there
    /// (an outage ends), the gap since the last one, the path it came on, the link's
    /// quality. True if it ended an outage.
    fn on_heard(&mut self, now: Duration, r: &Received) -> bool {
        if let Some(gap) = self.watch.on_heard(now, self.tx.has_outstanding()) {
            self.coding.tpdu.on_gap(gap);
        }
        self.record.note_time(now);
        if self.paths.multi() {
            if is_probe(&r.header, &r.body) {
                // The peer asks whether this path works: the answer goes back on it.
                self.paths.reply_on_rx();
            }
            if r.quality != Quality::Corrupted && !reset_guard::is_reset(r.header.flags) {
                let arrival = (now.as_micros() & 0xFFFF_FFFF) as u32;
                self.paths.on_timestamp(arrival, r.header.timestamp);
            }
        }
        let resumed = self.watch.resume();
        self.record.on_received(r.bits);
        self.paths.on_quality(r.bits, r.quality, r.parity);
        self.rx.on_quality(r.bits, r.quality, r.parity);
        if resumed {
            self.outbox.due.probe = false;
        }
        resumed
    }

    fn on_data_tpdu(&mut self, now: Duration, r: Received) {
        let h = r.header;
        let fin = h.flags.contains(Flags::AFIN);
        if r.quality == Quality::Corrupted {
            self.rx.on_corrupted(now, h.seq, h.timestamp, r.body, fin);
            return;
        }
        if r.body.len() > codec::max_body(self.cfg.mtu, 0) {
            // No sender at this MTU makes such a body: forged or misconfigured. Dropping it
            // keeps the reorder buffer's bound at window × MTU (docs/results/fuzz.md, P1).
            self.rx.on_oversized();
            return;
        }
        let rebuilt = self.coding.erx.on_source(h.seq, h.flags, &r.body);
        let readable_before = self.rx.readable();
        let fin_before = self.rx.fin_complete();
        let body = self.rx.resident(h.seq, r.body, r.shared);
        self.rx.on_data(now, h.seq, h.timestamp, body, fin);
        for b in rebuilt {
            let fin = b.flags.contains(Flags::AFIN);
            self.rx.on_rebuilt(now, b.seq, b.body.into(), fin);
        }
        self.after_data(now, readable_before, fin_before, fin);
    }

    /// TPDUs the erasure decoder rebuilt from a repair.
    fn take_rebuilt(&mut self, now: Duration, rebuilt: Vec<crate::erasure::Rebuilt>) {
        if rebuilt.is_empty() {
            return;
        }
        let readable_before = self.rx.readable();
        let fin_before = self.rx.fin_complete();
        let max = codec::max_body(self.cfg.mtu, 0);
        for b in rebuilt.into_iter().filter(|b| b.body.len() <= max) {
            let fin = b.flags.contains(Flags::AFIN);
            self.rx.on_rebuilt(now, b.seq, b.body.into(), fin);
        }
        self.after_data(now, readable_before, fin_before, false);
    }

    fn after_data(&mut self, now: Duration, readable_before: bool, fin_before: bool, fin: bool) {
        if !fin_before && self.rx.fin_complete() {
            self.on_peer_fin(now);
        } else if fin && self.rx.fin_complete() {
            // A retransmitted AFIN: our AFINACK was lost.
            self.outbox.due.afinack = true;
        }
        if !readable_before && self.rx.readable() {
            self.push_event(ConnEvent::Readable);
        }
    }

    /// Whether an ASYNACK shows that the peer has lost this connection: a listener that
    /// restarted (or released the connection) takes our next data TPDU for the start of a new
    /// connection and answers it with an ASYNACK echoing that TPDU's timestamp. The genuine
    /// ASYNACK echoes a TPDU sent before we first heard from the peer, so an echo younger
    /// than our connection to the peer can only come from a new incarnation. Without this the
    /// peer's new, empty connection would keep ours alive until the idle timeout while
    /// nothing could be delivered.
    fn peer_restarted(&self, now: Duration, h: &Header, c: &ControlBody) -> bool {
        let (Some(connected_at), Some(m)) = (self.life.connected_at, &c.mack) else {
            return false;
        };
        if !h.flags.contains(Flags::ASYN) || m.ts_echo == 0 {
            return false;
        }
        // Age of the echoed TPDU; the 32-bit microsecond clock wraps after 71 minutes, far
        // longer than any datagram lives in the network.
        let age = Duration::from_micros(u64::from(self.now_us(now).wrapping_sub(m.ts_echo)));
        age < now.saturating_sub(connected_at)
    }

    fn on_peer_fin(&mut self, now: Duration) {
        self.apply(StateEvent::AfinRx);
        self.outbox.due.afinack = true;
        // Linger long enough for a peer in an outage to probe once more (its probes back off
        // to MAX_PROBE_INTERVAL) and hear the final acknowledgement.
        let linger = self.cfg.linger.max(MAX_PROBE_INTERVAL * 2 + self.rtt.rto());
        self.life.peer_fin = PeerFin::Received {
            linger_until: now + linger,
            afinack_sent: false,
        };
        // EOF is readable too.
        self.push_event(ConnEvent::Readable);
    }

    fn on_control(&mut self, now: Duration, h: &Header, body: &[u8]) {
        let Ok(c) = ControlBody::parse(h.flags, body) else {
            tracing::debug!("malformed control body dropped");
            return;
        };
        if let Some(reason) = c.reset {
            self.on_reset(now, h, reason);
            return;
        }
        if self.unsent_fin_acked(h) {
            return;
        }
        if self.peer_restarted(now, h, &c) {
            self.outbox.due.rst = Some("connection reset: this end restarted".into());
            self.finish_with(CloseOutcome::Reset(
                "the peer restarted and lost this connection (it answered a TPDU sent after \
                 set-up as if it opened a new connection): open a new connection"
                    .into(),
            ));
            return;
        }
        if self.life.phase.state() == State::AsynSent {
            self.apply(control_event(h, &c));
        }
        if self.role == Role::Initiator && self.life.connect(now) {
            self.push_event(ConnEvent::Connected);
        }
        self.on_feedback(now, &c);
        if let Some(r) = &c.report {
            self.coding.on_report(r);
        }
        if h.flags.contains(Flags::AFIN) && h.flags.contains(Flags::ACK) {
            self.on_afinack();
        }
        self.check_writable();
        self.check_finished(now);
    }

    /// The peer's feedback to the sending half (ACK or MACK, NACK, SNACK), and what it
    /// measures: round trips, each path's latency, the rate.
    fn on_feedback(&mut self, now: Duration, c: &ControlBody) {
        let confirmed_before = self.tx.peer_delivered();
        let echo_rtt = match (&c.mack, &c.ack) {
            (Some(m), _) => self.on_mack(now, m),
            (None, Some(a)) => {
                self.tx.on_ack(a, now, self.rtt.min_rtt());
                None
            }
            (None, None) => None,
        };
        if let Some(n) = &c.nack {
            self.tx.on_nack(&n.seqs, now);
        }
        if self.cfg.confirm_delivery && self.tx.peer_delivered() > confirmed_before {
            self.push_event(ConnEvent::Confirmed);
        }
        if let Some(l) = self.tx.take_ack_latency(now) {
            self.rtt.on_ack_latency(l);
        }
        self.measure_paths(now);
        if let Some(n) = &c.nack {
            if n.seqs.is_empty() && c.mack.is_none() && c.ack.is_none() {
                // An outage probe: the peer wants to hear from us now.
                self.rx.request_feedback();
            }
        }
        if let Some(s) = &c.snack {
            let fresh = self.rtt.min_rtt().unwrap_or(self.rtt.smoothed());
            self.tx.on_snack(&s.ranges, now, fresh);
        }
        self.measure_rate(now, echo_rtt);
    }

    /// AFINACK: the peer has our AFIN (and, in acknowledged modes, everything before it).
    fn on_afinack(&mut self) {
        if self.ec.feedback == Feedback::None {
            self.tx.on_fin_acked(self.rtt.min_rtt());
        }
        if self.tx.fin_sent() && (self.tx.all_acked() || !self.ec.delivers_everything()) {
            self.apply(StateEvent::AfinAckRx);
        }
    }

    fn check_writable(&mut self) {
        if !self.outbox.was_writable && self.tx.writable() > 0 {
            self.outbox.was_writable = true;
            self.push_event(ConnEvent::Writable);
        }
    }

    /// Our half is done when the AFIN is confirmed; the peer's when its AFIN arrived in order.
    fn send_done(&self) -> bool {
        if !self.tx.fin_sent() {
            return false;
        }
        let acked = if self.ec.delivers_everything() {
            self.tx.all_acked()
        } else {
            self.tx.fin_acked()
        };
        acked && !self.awaits_confirmation()
    }

    /// Confirmed delivery: everything is sent (AFIN included) but the peer has not yet
    /// confirmed every byte and the end (`delivered` = bytes written + 1, docs/spec.md §4).
    pub(super) fn awaits_confirmation(&self) -> bool {
        self.cfg.confirm_delivery
            && self.tx.fin_sent()
            && self.tx.peer_delivered() <= self.tx.stats().bytes_written
    }

    fn check_finished(&mut self, now: Duration) {
        if self.life.phase.ended()
            || !self.send_done()
            || !self.rx.fin_complete()
            || self.outbox.due.afinack
        {
            return;
        }
        // Linger for late retransmissions if we were the last to receive an AFIN.
        if let Some(l) = self.life.peer_fin.linger_until() {
            if now < l {
                return;
            }
        }
        let confirmed = self.ec.delivers_everything();
        self.apply(StateEvent::ListenTo);
        self.finish_with(CloseOutcome::Finished { confirmed });
    }
}

/// The state machine's event for a control TPDU (the first one moves an initiator out of
/// ASYN_SENT).
fn control_event(h: &Header, c: &ControlBody) -> StateEvent {
    if h.flags.contains(Flags::ASYN) {
        StateEvent::AsynAckRx
    } else if c.mack.is_some() {
        StateEvent::MackRx
    } else if c.ack.is_some() {
        StateEvent::AckRx
    } else {
        StateEvent::NackRx
    }
}

/// An initiator opens (ASYN sent); an acceptor starts established.
fn opening_state(role: Role) -> State {
    match role {
        Role::Initiator => {
            transition(State::Closed, StateEvent::AppConn).map_or(State::AsynSent, |t| t.0)
        }
        Role::Acceptor => State::Established,
    }
}

/// The sending half: an initiator opens with its ASYN copies.
fn sender_for(role: Role, ec: ErrorControl, cfg: &ConnectionConfig) -> Sender {
    let mut tx = Sender::new(ec, cfg.send_buffer_bytes(), cfg.recv_window, cfg.retention);
    if role == Role::Initiator {
        tx.open(cfg.asyn_copies);
    }
    tx
}

/// The receiving half, reporting its link's quality to the peer, and tracing deliveries if
/// asked.
fn receiver_for(ec: ErrorControl, cfg: &ConnectionConfig) -> Receiver {
    let mut rx = Receiver::new(ec, cfg);
    rx.want_reports();
    if cfg.trace {
        rx.record_trace();
    }
    rx
}
