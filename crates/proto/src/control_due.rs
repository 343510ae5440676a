//! The control TPDUs a connection has waiting to go, in one place (`Connection::poll_transmit`
//! sends them in this order, before any data).

/// Control TPDUs waiting to go.
#[derive(Debug, Default)]
pub(crate) struct ControlDue {
    /// An RST with this reason (the application aborted, or a peer that restarted is told).
    pub rst: Option<String>,
    /// The final acknowledgement again, after the close: a late TPDU showed the peer missed it.
    pub final_ack: bool,
    /// The ASYNACK (an acceptor's answer to the ASYN), merged into the first feedback.
    pub asynack: bool,
    /// The AFINACK; it goes once `Connection::afinack_ready` allows.
    pub afinack: bool,
    /// A keep-alive PROBE (an idle, established connection).
    pub keepalive: bool,
    /// An outage PROBE (the peer is silent).
    pub probe: bool,
}
