//! The connection's life beyond its halves: the state machine's phase, and the set-up and
//! close handshakes' own state (when it began, when the peer was first heard, whether an
//! acceptor is proven, the RETRYs answered, our AFIN's first sending, the peer's AFIN).

use crate::phase::{PeerFin, Phase};
use crate::state::State;
use std::time::Duration;

#[derive(Debug)]
pub(super) struct Life {
    /// Live in one of the papers' states, or ended.
    pub(super) phase: Phase,
    /// When the connection began: its 32-bit microsecond clock counts from here.
    pub(super) epoch: Duration,
    /// When an initiator first heard from its peer (reported as `Connected` then; also
    /// recognises a restarted peer).
    pub(super) connected_at: Option<Duration>,
    /// An acceptor not yet proven to reach a real peer (docs/security.md): it holds its
    /// AFINACK, so the peer cannot finish — and believe its data delivered — before the
    /// application has the connection.
    pub(super) unproven: bool,
    /// An initiator's clock (µs, as in `timestamp`) when a RETRY last made it send again what
    /// was in flight: RETRYs for TPDUs sent before then are answered already.
    pub(super) retry_resent_at: Option<u32>,
    /// When our AFIN first went.
    pub(super) fin_sent_at: Option<Duration>,
    /// The peer's AFIN, once received, and whether our AFINACK went.
    pub(super) peer_fin: PeerFin,
}

impl Life {
    /// Live in `state` from `now`.
    pub(super) fn new(state: State, now: Duration) -> Life {
        Life {
            phase: Phase::Live { state },
            epoch: now,
            connected_at: None,
            unproven: false,
            retry_resent_at: None,
            fin_sent_at: None,
            peer_fin: PeerFin::Awaited,
        }
    }

    /// The peer was heard at `now`; true the first time.
    pub(super) fn connect(&mut self, now: Duration) -> bool {
        let first = self.connected_at.is_none();
        if first {
            self.connected_at = Some(now);
        }
        first
    }
}
