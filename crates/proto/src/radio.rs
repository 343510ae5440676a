//! What a radio says of the link toward a peer (DLEP, RFC 8175 and RFC 8651), as the engine
//! takes it: the runtime maps each DLEP destination to the peer address its paths reach and
//! passes these to `Endpoint::radio` (docs/dlep.md, "What the engine does with it").

use std::time::Duration;

/// One thing a radio said of the link toward a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RadioSignal {
    /// Current Data Rate (Transmit), b/s: the path's rate is capped by it at once; with a
    /// discovered rate it is also the starting point, a step up is probed at once and
    /// discovery keeps guarding the queue under it.
    Rate(u64),
    /// The radio no longer says a rate: the path's rate is the rate control's alone again.
    RateUnknown,
    /// The radio's latency to the destination (one way): before a round-trip sample, the
    /// path's timers start from twice it rather than from the configured initial guess.
    Latency(Duration),
    /// Destination Down, or the DLEP session ended: nothing goes on the path until the radio
    /// says it is up. With other paths up, the path goes down at once (its TPDUs in flight
    /// resent on them); the last path up is held instead, and the connection's outage rules
    /// (silence, probes) apply once its peer falls silent.
    Down,
    /// Destination Up: the path is probed at once (the answer brings it up) and released.
    Up,
    /// RFC 8651 Pause: no new data, repair or retransmission on the path until `Restart`. What
    /// is in flight is still the modem's to send: no loss is counted for the pause, and the
    /// rate model takes the pause's samples as limited by the sender, not the link.
    Pause,
    /// RFC 8651 Restart.
    Restart,
}

impl RadioSignal {
    /// A short name for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            RadioSignal::Rate(_) => "rate",
            RadioSignal::RateUnknown => "rate_unknown",
            RadioSignal::Latency(_) => "latency",
            RadioSignal::Down => "down",
            RadioSignal::Up => "up",
            RadioSignal::Pause => "pause",
            RadioSignal::Restart => "restart",
        }
    }
}
