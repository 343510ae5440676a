//! What a connection and the gateway's flow it feeds need of each other: the flow behind
//! [`Carrier`] (aerotp-gw's `Flow`), the connection behind [`UserSink`].

/// A source TCP connection terminated here: where the gateway's flow writes the bytes of the
/// reverse direction (destination → source), and how it tells the connection of its state.
pub trait UserSink: Send + Sync + std::fmt::Debug {
    /// Queues as much of `d` as the connection's send buffer has room for (0: full, wait on
    /// [`UserSink::room`]).
    fn push(&self, d: &[u8]) -> usize;
    /// Notified when the send buffer has room again (or the connection ended).
    fn room(&self) -> &tokio::sync::Notify;
    /// The reverse direction is over: a FIN after the queued bytes.
    fn finish(&self);
    /// The flow is aborted: a RST to the source.
    fn reset(&self);
    /// The flow's AeroTP connection is up (the egress answered): the source's held SYN is
    /// answered.
    fn up(&self);
}

/// The gateway's flow a connection feeds (aerotp-gw's `Flow`): what the connection needs of
/// it.
pub trait Carrier: Send + Sync + std::fmt::Debug {
    /// Takes the source's next bytes into custody, as many as the flow has room for; returns
    /// how many (the rest is not acknowledged to the source, which sends it again).
    fn take_source(&self, data: &[u8]) -> usize;
    /// The source's FIN, after every byte it sent.
    fn source_fin(&self);
    /// The offset the egress confirmed written to the destination, and whether it confirmed
    /// the destination's end (read together).
    fn confirmed(&self) -> (u64, bool);
    /// Whether the flow was reset.
    fn is_reset(&self) -> bool;
    /// Aborts the flow; the peer is told if `tell_peer`.
    fn reset(&self, reason: String, tell_peer: bool);
    /// A receiver of the flow's change notifications (confirmations, resets).
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;
}
