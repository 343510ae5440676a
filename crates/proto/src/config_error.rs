//! What can be wrong with a connection's settings; every variant names the setting, the value
//! and what is accepted.

use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("authentication: {0}")]
    Auth(#[from] crate::auth::AuthError),
    #[error("rate {0} b/s is too low: give at least {min} b/s (e.g. 5mbit)", min = crate::rate::MIN_RATE_BPS)]
    Rate(u64),
    #[error("link share: {0}")]
    LinkShare(String),
    #[error("MTU {0} is out of range: give {min} to {max} bytes", min = crate::bounds::MIN_MTU, max = crate::bounds::MAX_MTU)]
    Mtu(usize),
    #[error("MACK aggregation {0} is out of range: give 1 to 365 ACKs per MACK")]
    Mack(u16),
    #[error("FEC setting '{0}' is not valid: give off, auto, a word count 0-256 (papers' scale), or pN with N parity bytes per codeword (0-128)")]
    Fec(String),
    #[error("FEC target loss {0} must be between 0 and 1 (exclusive)")]
    Target(f64),
    #[error("initial BER {0} must be in [0, 0.5)")]
    InitialBer(f64),
    #[error("receive window {0} TPDUs is out of range: give 16 to 1048576")]
    Window(u32),
    #[error("send buffer {0} bytes is smaller than one MTU")]
    SendBuffer(usize),
    #[error("{0} ASYN copies is too many: give 0 to 16")]
    AsynCopies(u8),
    #[error("return-link rate {0} b/s is too low: give at least {min} b/s (e.g. 10kbit), or leave it unset to use the connection's rate", min = crate::rate::MIN_RATE_BPS)]
    ReturnRate(u64),
    #[error("feedback share {0} is out of range: give a fraction of the return link in (0, 1], e.g. 0.1")]
    FeedbackShare(f64),
    #[error("erasure setting '{0}' is not valid: give off, auto, or a ratio of wire TPDUs to data TPDUs in (1, 4], e.g. 1.25")]
    Erasure(String),
    #[error("erasure target residual loss {0} must be between 0 and 1 (exclusive), e.g. 1e-4")]
    ErasureTarget(f64),
    #[error("erasure max-delay {0:?} is out of range: give 1 ms to 60 s, e.g. 500ms")]
    ErasureDelay(Duration),
    #[error("erasure ratio {0} is out of range: give 1 to 4 wire TPDUs per data TPDU")]
    ErasureRatio(f64),
    #[error("erasure initial loss {0} must be in [0, 0.5)")]
    ErasureInitialLoss(f64),
    #[error("erasure window {0} is out of range: give 2 to 4096 TPDUs")]
    ErasureWindow(usize),
    #[error("ack_every must be at least 1")]
    AckEvery,
    #[error("timers must be non-zero")]
    ZeroTimer,
    #[error("keep_alive {0:?} must be above zero and shorter than idle_timeout {1:?}")]
    KeepAlive(std::time::Duration, std::time::Duration),
    #[error(
        "confirm_delivery needs a mode that acknowledges (reliable, near-reliable, \
         hybrid-nack-mack), not {0}"
    )]
    ConfirmDelivery(aerotp_wire::Mode),
}
