//! How a connection ended (a leaf: the connection and its phase both name it).

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseOutcome {
    /// Both directions closed; `confirmed` says whether the peer acknowledged everything we sent
    /// (always false for modes without positive acknowledgements, whose AFINACK confirms only
    /// the close).
    Finished { confirmed: bool },
    /// CLOSE_TO expired before the final acknowledgements arrived.
    CloseTimeout,
    /// Nothing was heard from the peer for the idle timeout.
    IdleTimeout,
    /// An accepted connection whose peer never proved that it receives what is sent to its
    /// address within the set-up timeout (a spoofed ASYN, or a peer cut off at set-up).
    SetupTimeout,
    /// The peer sent RST.
    Reset(String),
    /// The application aborted.
    Aborted,
}
