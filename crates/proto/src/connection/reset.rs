//! Resets a blind attacker cannot forge cheaply, and ends that tell their peer (docs/spec.md
//! §4 "RST", docs/security.md). With a key the endpoint has authenticated every TPDU and a RST
//! is taken as it comes. Without one (RFC 5961 §3, fitted to AeroTP's numbering):
//!
//! - a RST whose TPDU number cannot be the peer's next one (below a TPDU already heard from it,
//!   or beyond the receive window above it) is ignored;
//! - a RST is *exact* when its `timestamp` echoes a TPDU this end sent that asked for it: the
//!   latest challenge, or, while setting up and before anything was heard, one of the set-up
//!   TPDUs (a listener's stateless refusal). This end's 32-bit clock starts at a random offset
//!   per connection, so a blind attacker must guess 32 bits (on top of ports and `tag`);
//! - any other RST is answered with a challenge (an outage PROBE, at most one per
//!   `CHALLENGE_INTERVAL`): a peer that did reset answers it with a RST echoing it, a live peer
//!   with its feedback, and the connection goes on.
//!
//! An end that ends for any reason but a finished close (abort, reset, a timeout, a forged
//! AFIN found out) answers the peer's TPDUs with a RST that echoes them, so the peer closes
//! within a round trip or two instead of at its idle timeout.

use super::{Connection, Role};
use crate::close_outcome::CloseOutcome;
use crate::reset_guard::CHALLENGE_INTERVAL;
use aerotp_wire::{ControlBody, Flags, Header};
use std::time::Duration;

impl Connection {
    /// Set by the endpoint when it creates the connection.
    pub(crate) fn guard_resets(&mut self, authenticated: bool, clock_offset: u32) {
        self.guard.authenticated = authenticated;
        self.guard.clock_offset = clock_offset;
    }

    /// Every TPDU heard (live or ended): a RST echoes the latest.
    pub(super) fn note_peer_timestamp(&mut self, h: &Header) {
        if !crate::reset_guard::is_reset(h.flags) {
            self.guard.peer_ts = h.timestamp;
        }
    }

    /// A RST from the peer with reason `reason`.
    pub(super) fn on_reset(&mut self, now: Duration, h: &Header, reason: String) {
        if self.guard.authenticated {
            self.guard.stats.accepted += 1;
            self.finish_with(CloseOutcome::Reset(reason));
            return;
        }
        if !self.rx.could_be_next(h.seq) {
            self.guard.stats.ignored += 1;
            return;
        }
        if self.echoes_ours(now, h.timestamp) {
            self.guard.stats.accepted += 1;
            self.finish_with(CloseOutcome::Reset(format!(
                "{reason} (reset by the peer; no key: its RST echoed this end's TPDU)"
            )));
            return;
        }
        self.guard.stats.challenged += 1;
        if self
            .guard
            .challenge
            .is_none_or(|(_, at)| now >= at + CHALLENGE_INTERVAL)
        {
            self.guard.due = true;
        }
    }

    /// Whether `echo` (a RST's `timestamp`) is that of a TPDU of ours that asked for it.
    fn echoes_ours(&self, now: Duration, echo: u32) -> bool {
        if self.guard.challenge.is_some_and(|(ts, _)| ts == echo) {
            return true;
        }
        // Setting up, nothing heard yet: a listener's stateless refusal echoes one of the
        // set-up TPDUs, all stamped since the connection began.
        let setting_up = self.role == Role::Initiator && self.life.connected_at.is_none();
        let since_start = now.saturating_sub(self.life.epoch).as_micros();
        setting_up && u128::from(self.now_us(now).wrapping_sub(echo)) <= since_start
    }

    /// The challenge, if one is due: an outage PROBE (answered by a live peer with its
    /// feedback, by one that reset with a RST echoing it).
    pub(super) fn poll_challenge(
        &mut self,
        now: Duration,
        out: &mut Vec<u8>,
        start: usize,
    ) -> Option<bool> {
        if !std::mem::take(&mut self.guard.due) || self.life.phase.ended() {
            return None;
        }
        let body = ControlBody {
            nack: Some(aerotp_wire::Nack::default()),
            ..Default::default()
        };
        // The stamp `emit_control` puts on it.
        self.guard.challenge = Some((self.now_us(now).max(1), now));
        self.guard.stats.challenges_sent += 1;
        Some(self.emit_control(now, Flags::empty(), &body, out, start, None))
    }

    /// An AFINACK for an AFIN this end never sent (no key): the peer's receiving half took a
    /// forged AFIN and ended early. Both ends stop, this one telling the peer why. True if so.
    pub(super) fn unsent_fin_acked(&mut self, h: &Header) -> bool {
        let afinack = h.flags.contains(Flags::AFIN) && h.flags.contains(Flags::ACK);
        if self.guard.authenticated || !afinack || self.tx.fin_sent() {
            return false;
        }
        self.guard.stats.forged_fins += 1;
        let why = "the peer acknowledged an AFIN this end never sent: a forged AFIN (no key) \
                   ended its receiving half early, so the transfer is incomplete";
        self.finish_with(CloseOutcome::Reset(why.into()));
        if let crate::phase::Phase::Ended { abort_reason, .. } = &mut self.life.phase {
            *abort_reason = Some(why.into());
        }
        self.outbox.due.rst = Some(why.into());
        true
    }
}

impl Connection {
    /// Ended otherwise than by a finished close: the endpoint's tombstone answers with a RST
    /// once the connection is released.
    pub(crate) fn answers_with_reset(&self) -> bool {
        matches!(
            self.life.phase,
            crate::phase::Phase::Ended {
                abort_reason: Some(_),
                ..
            }
        )
    }
}
