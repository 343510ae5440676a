//! Where a connection is in its life — live in one of the papers' states, or ended and kept
//! until the endpoint releases it — and the peer's AFIN as this end received it. Each is one
//! value carrying its data, in place of the flags it replaced (`state` beside `closed` and
//! `abort_reason`; `linger_until` beside `afinack_sent`).

use crate::close_outcome::CloseOutcome;
use crate::state::State;
use std::time::Duration;

#[derive(Debug)]
pub(crate) enum Phase {
    /// Open or closing, in the papers' state `state` (`crate::state::transition` moves it).
    Live { state: State },
    /// Finished, timed out, reset or aborted. Nothing more is sent but, to a late TPDU, the
    /// final acknowledgement again, or the RST with `abort_reason` when this end aborted,
    /// until the endpoint releases the connection.
    Ended {
        outcome: CloseOutcome,
        abort_reason: Option<String>,
    },
}

impl Phase {
    /// The papers' state: `Closed` once ended.
    pub(crate) fn state(&self) -> State {
        match self {
            Phase::Live { state } => *state,
            Phase::Ended { .. } => State::Closed,
        }
    }

    pub(crate) fn ended(&self) -> bool {
        matches!(self, Phase::Ended { .. })
    }
}

/// The peer's AFIN as this end received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerFin {
    /// Not yet arrived in order.
    Awaited,
    /// Arrived in order (everything before it received or skipped). The connection lingers
    /// until `linger_until` for late retransmissions; `afinack_sent` once the AFINACK went.
    Received {
        linger_until: Duration,
        afinack_sent: bool,
    },
}

impl PeerFin {
    pub(crate) fn afinack_sent(self) -> bool {
        matches!(
            self,
            PeerFin::Received {
                afinack_sent: true,
                ..
            }
        )
    }

    /// The end of the linger, once the AFIN arrived.
    pub(crate) fn linger_until(self) -> Option<Duration> {
        match self {
            PeerFin::Received { linger_until, .. } => Some(linger_until),
            PeerFin::Awaited => None,
        }
    }
}
