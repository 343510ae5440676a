//! What both roles share and every module may use: the [`Role`], AeroTP ports, buffer bounds. A leaf module (it imports
//! nothing from the crate), so the flows, the policer and the context can all use it
//! without an import cycle.

use std::fmt;
use std::time::Duration;

/// AeroTP port of TCP flows (one connection per flow).
pub const TCP_PORT: u16 = 1;
/// AeroTP port of UDP flows in datagram mode (no connection).
pub const UDP_PORT: u16 = 2;
/// AeroTP port of UDP flows carried in quasi-reliable / unreliable connections.
pub const UDP_STREAM_PORT: u16 = 3;
/// AeroTP send buffer of every flow connection (bytes the engine queues or has in flight).
/// Small enough that confirmations are not stuck behind seconds of queued data.
pub const SEND_BUFFER: usize = 1 << 20;
/// Egress: per-flow window of the egress → ingress direction held in memory.
pub const REVERSE_WINDOW: u64 = 4 << 20;
/// Egress: completed flows remembered (a resume after a lost final confirmation).
pub const COMPLETED_KEPT: usize = 4096;
/// Longest wait for the other gateway's answer to a flow's first bytes.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Ingress: longest a new TCP flow waits for its source's first bytes before it opens its
/// AeroTP connection, so that the open record, a short request and its FIN share one ASYN.
pub const OPEN_WAIT: Duration = Duration::from_millis(10);
/// Longest wait for a destination's TCP connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest UDP payload (IPv4: 65 535 − 20 − 8).
pub const MAX_UDP: usize = 65_507;

/// Which side of the air link a gateway is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Takes flows from local applications and opens AeroTP connections to the egress.
    Ingress,
    /// Accepts AeroTP connections and connects them to their destinations.
    Egress,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Ingress => "ingress",
            Role::Egress => "egress",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
