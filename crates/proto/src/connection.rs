//! One AeroTP connection: the state machine, a sending half, a receiving half, rate pacing,
//! FEC control and timers. The mode's error control (`ErrorControl`, built once) decides what
//! each part does.

use crate::codec::{self, Quality, Received};
use crate::config::ConnectionConfig;
use crate::control_due::ControlDue;
use crate::endpoint_types::PathAddr;
use crate::erasure::{ErasureRx, ErasureRxStats, ErasureSetting, ErasureTx, ErasureTxStats};
use crate::error_control::{ErrorControl, Feedback};
use crate::fec_control::FecControl;
use crate::liveness::Liveness;
use crate::pacer::Pacer;
use crate::paths::{PathStats, Paths};
use crate::phase::{PeerFin, Phase};
use crate::rate::{RateReason, RateState};
use crate::receiver::{Receiver, ReceiverStats};
use crate::reset_guard::{self, ResetGuard, ResetStats};
use crate::rtt::RttEstimator;
use crate::sender::{Sender, SenderStats};
use crate::state::{transition, Action, State, StateEvent};
use crate::tpdu_size::TpduSizer;
use aerotp_wire::{Ack, ControlBody, Flags, Header, Mode};
use std::collections::VecDeque;
use std::time::Duration;

mod app;
mod feedback;
mod multipath;
mod radio;
mod rate;
mod reset;
mod timers;
mod tpdu;
mod transmit;

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

/// Notifications for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEvent {
    Connected,
    Readable,
    Writable,
    /// Confirmed delivery: the peer confirmed more of what we sent (`peer_delivered` grew).
    Confirmed,
    Closed(CloseOutcome),
}

/// Every counter a connection keeps; see docs/stats.md for their meaning.
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

#[derive(Debug)]
pub struct Connection {
    pub role: Role,
    /// Live in one of the papers' states, or ended.
    phase: Phase,
    /// The peer's addresses and what each path does (`remote()` is the first).
    paths: Paths,
    /// The sending rate: fixed (configuration or `set_rate`; the pacer runs at the share of
    /// it the paths that are up carry) or discovered per path under that rate as a cap.
    rate: RateState,
    /// The latest time the connection was given (for statistics that need the time).
    clock: Duration,
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
    pacer: Pacer,
    tx: Sender,
    rx: Receiver,
    rtt: RttEstimator,
    fec: FecControl,
    /// Erasure coding across TPDUs: repairs for what we send, decoding of what we receive.
    etx: ErasureTx,
    erx: ErasureRx,
    epoch: Duration,
    last_heard: Duration,
    /// Whether the peer has been heard, and whether it is silent (an outage) or new data is
    /// paused on a suspected one.
    liveness: Liveness,
    /// The longest recent gap between TPDUs heard while data was unacknowledged (decaying):
    /// how long silence is normal on this connection, so an outage is suspected sooner than
    /// 1.5 RTOs where feedback comes often (`timers::pause_at`).
    heard_gap: Duration,
    /// How many gaps `heard_gap` has seen; it is trusted from `GAP_SAMPLES` on.
    heard_gaps: u32,
    /// When the last keep-alive was queued: the next waits `keep_alive` after it too.
    last_keepalive: Duration,
    /// When our AFIN first went.
    fin_sent_at: Option<Duration>,
    /// The peer's AFIN, once received, and whether our AFINACK went.
    peer_fin: PeerFin,
    /// Control TPDUs waiting to go.
    due: ControlDue,
    /// An acceptor not yet proven to reach a real peer (docs/security.md): it holds its
    /// AFINACK, so the peer cannot finish — and believe its data delivered — before the
    /// application has the connection.
    unproven: bool,
    /// An initiator's clock (µs, as in `timestamp`) when a RETRY last made it send again what
    /// was in flight: RETRYs for TPDUs sent before then are answered already.
    retry_resent_at: Option<u32>,
    events: VecDeque<ConnEvent>,
    was_writable: bool,
    /// When an initiator first heard from its peer (reported as `Connected` then; also
    /// recognises a restarted peer).
    connected_at: Option<Duration>,
    peer_ber: f64,
    /// First-send time of each TPDU when tracing: (TPDU number, time).
    pub send_trace: Option<Vec<(u64, Duration)>>,
    /// Resets a blind attacker cannot forge (`reset`).
    guard: ResetGuard,
    stats_wire: ConnectionStats,
    /// The outages seen and the size new TPDUs are cut at (`crate::tpdu_size`).
    tpdu: TpduSizer,
}

const EVENT_LIMIT: usize = 64;

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
        let initial_window = cfg.recv_window;
        let state = match role {
            Role::Initiator => {
                transition(State::Closed, StateEvent::AppConn).map_or(State::AsynSent, |t| t.0)
            }
            Role::Acceptor => State::Established,
        };
        let mut rx = Receiver::new(ec, &cfg);
        rx.want_reports();
        let erasure: ErasureSetting = cfg.erasure.unwrap_or(ec.erasure);
        // The modes that repair from their first TPDU record sources from the start; in the
        // others a hole waits for repairs (up to the delay bound) once the first repair shows
        // the peer sends them (a peer without repair must not delay every hole).
        let eager = ec.repairs_from_start && !erasure.is_off();
        if cfg.trace {
            rx.record_trace();
        }
        let mut tx = Sender::new(ec, cfg.send_buffer_bytes(), initial_window, cfg.retention);
        if role == Role::Initiator {
            tx.open(cfg.asyn_copies);
        }
        // The coefficients' seed: the same inputs give the same repairs, different
        // connections different ones.
        let key = (u64::from(tag) << 32) | (u64::from(local_port) << 16) | u64::from(remote_port);
        Connection {
            role,
            phase: Phase::Live { state },
            paths: Paths::new(path, now, RttEstimator::new(cfg.initial_rtt, cfg.min_rto)),
            rate: RateState::new(
                cfg.rate_control,
                cfg.rate_bps,
                cfg.mtu,
                cfg.per_packet_overhead,
                ec.discovers_rate(),
                u64::from(tag) << 32 | u64::from(local_port) << 16 | u64::from(remote_port),
            ),
            clock: now,
            local_port,
            remote_port,
            tag,
            cid: 0,
            peer_cid: None,
            ec,
            pacer: Pacer::new(cfg.rate_bps, cfg.per_packet_overhead, cfg.mtu),
            tx,
            rx,
            rtt: RttEstimator::new(cfg.initial_rtt, cfg.min_rto),
            fec: FecControl::new(
                cfg.fec,
                ec.auto_fec,
                cfg.mtu,
                cfg.per_packet_overhead,
                cfg.fec_target_loss,
                cfg.fec_initial_ber,
            ),
            etx: ErasureTx::new(erasure, cfg.mtu, key),
            erx: ErasureRx::new(cfg.mtu, erasure.max_window, eager),
            epoch: now,
            last_heard: now,
            liveness: Liveness::Unheard,
            heard_gap: Duration::ZERO,
            heard_gaps: 0,
            last_keepalive: Duration::ZERO,
            fin_sent_at: None,
            peer_fin: PeerFin::Awaited,
            due: ControlDue {
                asynack: role == Role::Acceptor,
                ..ControlDue::default()
            },
            unproven: false,
            retry_resent_at: None,
            events: VecDeque::new(),
            was_writable: true,
            connected_at: None,
            peer_ber: 0.0,
            send_trace: if cfg.trace { Some(Vec::new()) } else { None },
            guard: ResetGuard::default(),
            stats_wire: ConnectionStats::default(),
            tpdu: TpduSizer::new(now),
            cfg,
        }
    }

    pub fn mode(&self) -> Mode {
        self.ec.mode
    }

    pub fn state(&self) -> State {
        self.phase.state()
    }

    pub fn config(&self) -> &ConnectionConfig {
        &self.cfg
    }

    fn apply(&mut self, ev: StateEvent) -> Option<Action> {
        let Phase::Live { state } = &mut self.phase else {
            return None;
        };
        let (next, action) = transition(*state, ev)?;
        tracing::trace!(from = %state, to = %next, event = ?ev, "state");
        *state = next;
        Some(action)
    }

    fn push_event(&mut self, e: ConnEvent) {
        if self.events.len() < EVENT_LIMIT && !self.events.contains(&e) {
            self.events.push_back(e);
        }
    }

    pub fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }

    pub fn is_closed(&self) -> bool {
        self.phase.ended()
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
        !self.phase.ended() && (self.tx.unsent() as f64 * 8.0 > period_bits || self.tx.backlogged())
    }

    /// Bytes this connection has put on the link: its datagrams plus `per_packet_overhead`
    /// (IP and UDP) each, as the pacer counts them. The link share measures usage in these:
    /// without the headers a thousand flows of small messages and acknowledgements used a
    /// tenth more of the link than their reservations said (docs/results/gw.md, "Many flows").
    pub(crate) fn link_bytes_sent(&self) -> u64 {
        self.stats_wire.bytes_sent_wire
            + self.stats_wire.datagrams_sent * self.cfg.per_packet_overhead as u64
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
        if !self.phase.ended() {
            self.phase = Phase::Ended {
                outcome: outcome.clone(),
                abort_reason: reset_guard::answer_for(&outcome),
            };
            if matches!(
                outcome,
                CloseOutcome::IdleTimeout | CloseOutcome::CloseTimeout
            ) {
                // Tell the peer, if it still hears us, rather than leave it to its own timeout.
                self.due.rst = reset_guard::answer_for(&outcome);
            }
            self.push_event(ConnEvent::Closed(outcome));
        }
    }

    pub fn stats(&self) -> ConnectionStats {
        let mut s = self.stats_wire.clone();
        s.sender = self.tx.stats.clone();
        s.receiver = self.rx.stats();
        s.erasure_tx = self.etx.stats.clone();
        s.erasure_rx = self.erx.stats.clone();
        s.erasure_rx.decoder_bytes = self.erx.memory_bytes() as u64;
        s.rtt = self.rtt.latest();
        s.srtt = self.rtt.smoothed();
        s.rto = self.rtt.rto();
        s.fec_parity = self.fec.parity();
        s.measured_ber = self.rx.measured_ber();
        s.peer_reported_ber = self.peer_ber;
        s.rate_bps = self.pacer.rate();
        s.rate_reason = self.rate_reason();
        s.peer_delivered = self.tx.peer_delivered();
        s.paths = self.path_stats();
        s.resets = self.guard.stats;
        s
    }

    /// A one-line summary of both halves' state, for diagnostics and bug reports.
    pub fn describe(&self) -> String {
        let phase = match &self.phase {
            Phase::Live { state } => state.to_string(),
            Phase::Ended { outcome, .. } => format!("ENDED({outcome:?})"),
        };
        format!(
            "{phase} tx[{}] rx[{}] silent={} rto={:?} timers[{}]",
            self.tx.describe(),
            self.rx.describe(),
            self.liveness.silent(),
            self.rtt.rto(),
            self.timers()
        )
    }

    /// Changes the erasure coding of what this end sends, on the live connection.
    pub fn set_erasure(&mut self, setting: ErasureSetting) {
        self.etx.set_setting(setting);
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

    /// The delivery trace of the receiving half (TPDU number, time, bytes), if tracing.
    pub fn delivery_trace(&self) -> Option<&[(u64, Duration, u32)]> {
        self.rx.trace()
    }

    // ---- receiving TPDUs ----

    pub(crate) fn set_unproven(&mut self, unproven: bool) {
        self.unproven = unproven;
        self.rx.set_unproven(unproven);
    }

    pub(crate) fn is_unproven(&self) -> bool {
        self.unproven
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
        if self.role != Role::Initiator || self.phase.ended() {
            return;
        }
        let now_us = self.now_us(now);
        let age = Duration::from_micros(u64::from(now_us.wrapping_sub(ts_echo)));
        if let Some(connected_at) = self.connected_at {
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
            .retry_resent_at
            .is_some_and(|t| (t.wrapping_sub(ts_echo) as i32) > 0);
        if !stale {
            self.retry_resent_at = Some(now_us);
            self.tx.retransmit_all_unacked();
        }
    }

    fn now_us(&self, now: Duration) -> u32 {
        // Low 32 bits of microseconds since the connection began.
        ((now.saturating_sub(self.epoch).as_micros() & 0xFFFF_FFFF) as u32)
            .wrapping_add(self.guard.clock_offset)
    }

    pub fn handle(&mut self, now: Duration, r: Received) {
        self.note_peer_timestamp(&r.header);
        if self.phase.ended() {
            // Finished, not yet released: a late data TPDU means the peer missed our final
            // acknowledgement; repeat it (once per TPDU, paced) so the peer can finish too.
            let asks = r.header.flags.is_data() || is_probe(&r.header, &r.body);
            if asks && self.rx.fin_complete() {
                self.due.final_ack = true;
            }
            // Aborted, not yet released: the RST may have been lost; say it again (once per
            // TPDU that asks, paced), so the peer stops sending into a closed connection.
            if let (
                true,
                Phase::Ended {
                    abort_reason: Some(reason),
                    ..
                },
            ) = (asks, &self.phase)
            {
                self.due.rst = Some(reason.clone());
            }
            return;
        }
        if self.liveness.heard() && self.tx.has_outstanding() {
            let gap = now.saturating_sub(self.last_heard);
            self.heard_gap = if gap > self.heard_gap {
                gap
            } else {
                (self.heard_gap * 7 + gap) / 8
            };
            self.heard_gaps = self.heard_gaps.saturating_add(1);
            self.tpdu.on_gap(gap);
        }
        self.last_heard = now;
        self.clock = self.clock.max(now);
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
        // Anything heard ends an outage (or its suspicion).
        let resumed = self.liveness.silent();
        self.liveness = Liveness::Heard { paused: false };
        self.stats_wire.datagrams_received += 1;
        self.stats_wire.bytes_received_wire += (r.bits / 8) as u64;
        self.paths.on_quality(r.bits, r.quality, r.parity);
        self.rx.on_quality(r.bits, r.quality, r.parity);
        if resumed {
            self.due.probe = false;
        }
        let flags = r.header.flags;
        if flags.is_data() {
            self.on_data_tpdu(now, r);
        } else if flags.is_repair() {
            if r.quality != Quality::Corrupted {
                self.rx.set_erasure_wait(self.etx.setting().max_delay);
                let rebuilt = self.erx.on_repair(&r.body);
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
        let rebuilt = self.erx.on_source(h.seq, h.flags, &r.body);
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
            self.due.afinack = true;
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
        let (Some(connected_at), Some(m)) = (self.connected_at, &c.mack) else {
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
        self.due.afinack = true;
        // Linger long enough for a peer in an outage to probe once more (its probes back off
        // to MAX_PROBE_INTERVAL) and hear the final acknowledgement.
        let linger = self.cfg.linger.max(MAX_PROBE_INTERVAL * 2 + self.rtt.rto());
        self.peer_fin = PeerFin::Received {
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
        let ev = if h.flags.contains(Flags::ASYN) {
            StateEvent::AsynAckRx
        } else if c.mack.is_some() {
            StateEvent::MackRx
        } else if c.ack.is_some() {
            StateEvent::AckRx
        } else {
            StateEvent::NackRx
        };
        if self.peer_restarted(now, h, &c) {
            self.due.rst = Some("connection reset: this end restarted".into());
            self.finish_with(CloseOutcome::Reset(
                "the peer restarted and lost this connection (it answered a TPDU sent after \
                 set-up as if it opened a new connection): open a new connection"
                    .into(),
            ));
            return;
        }
        if self.phase.state() == State::AsynSent {
            self.apply(ev);
        }
        if self.connected_at.is_none() && self.role == Role::Initiator {
            self.connected_at = Some(now);
            self.push_event(ConnEvent::Connected);
        }
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
        if let Some(r) = &c.report {
            self.peer_ber = f64::from(r.ber_ppb) * 1e-9;
            self.fec.on_report(r);
            self.etx.on_report(r);
        }
        if h.flags.contains(Flags::AFIN) && h.flags.contains(Flags::ACK) {
            // AFINACK: the peer has our AFIN (and, in acknowledged modes, everything before it).
            if self.ec.feedback == Feedback::None {
                self.tx.on_fin_acked(self.rtt.min_rtt());
            }
            if self.tx.fin_sent() && (self.tx.all_acked() || !self.ec.delivers_everything()) {
                self.apply(StateEvent::AfinAckRx);
            }
        }
        self.check_writable();
        self.check_finished(now);
    }

    fn check_writable(&mut self) {
        if !self.was_writable && self.tx.writable() > 0 {
            self.was_writable = true;
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
            && self.tx.peer_delivered() <= self.tx.stats.bytes_written
    }

    fn check_finished(&mut self, now: Duration) {
        if self.phase.ended() || !self.send_done() || !self.rx.fin_complete() || self.due.afinack {
            return;
        }
        // Linger for late retransmissions if we were the last to receive an AFIN.
        if let Some(l) = self.peer_fin.linger_until() {
            if now < l {
                return;
            }
        }
        let confirmed = self.ec.delivers_everything();
        self.apply(StateEvent::ListenTo);
        self.finish_with(CloseOutcome::Finished { confirmed });
    }
}
