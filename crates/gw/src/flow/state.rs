//! The state of a flow that both roles use, under the flow's state lock (`super::Locked`).
//! Its fields are the flow module's own; everyone else reads them through the getters and
//! moves them through the named methods below (the custody range only through the flow's
//! custody methods, `super::range`).

use aerotp_net::Connection;

use super::range::Range;

/// The mutable state of a flow that both roles use.
#[derive(Debug)]
pub struct FlowState {
    /// The custody range (`base..end`, `fin`) and its budget charge, moved only by the flow's
    /// custody methods ([`Range`]).
    pub(super) range: Range,
    /// The peer has shut its TCP write half after all our bytes.
    pub(super) peer_fin: bool,
    /// Bytes of the peer's direction written to our TCP socket.
    pub(super) in_delivered: u64,
    /// The peer's FIN was received and our TCP write half shut.
    pub(super) in_fin: bool,
    /// The flow is aborted; the reason, and whether the peer still has to be told.
    pub(super) reset: Option<(String, bool)>,
    /// Bytes sent on the AeroTP connections (including resends after a resume).
    pub(super) bytes_sent: u64,
    pub(super) resumes: u64,
    /// The connection of the current session (aborted on take-over), if any.
    pub(super) conn: Option<Connection>,
    /// The task reading our TCP socket into custody (aborted on reset).
    pub(super) reader_task: Option<tokio::task::JoinHandle<()>>,
}

impl FlowState {
    /// A new flow's state, holding `range`.
    pub(super) fn new(range: Range) -> FlowState {
        FlowState {
            range,
            peer_fin: false,
            in_delivered: 0,
            in_fin: false,
            reset: None,
            bytes_sent: 0,
            resumes: 0,
            conn: None,
            reader_task: None,
        }
    }

    /// The custody range.
    pub fn range(&self) -> &Range {
        &self.range
    }
    /// Confirmed by the peer (custody released below it).
    pub fn base(&self) -> u64 {
        self.range.base()
    }
    /// Read from our TCP side.
    pub fn end(&self) -> u64 {
        self.range.end()
    }
    /// Our TCP side reached EOF (`end` is final).
    pub fn fin(&self) -> bool {
        self.range.fin()
    }
    /// The peer has shut its TCP write half after all our bytes.
    pub fn peer_fin(&self) -> bool {
        self.peer_fin
    }
    /// Bytes of the peer's direction written to our TCP socket.
    pub fn in_delivered(&self) -> u64 {
        self.in_delivered
    }
    /// The peer's FIN was received and our TCP write half shut.
    pub fn in_fin(&self) -> bool {
        self.in_fin
    }
    /// The flow is aborted: the reason, and whether the peer still has to be told.
    pub fn reset(&self) -> Option<&(String, bool)> {
        self.reset.as_ref()
    }
    /// Bytes sent on the AeroTP connections (including resends after a resume).
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }
    /// Sessions resumed on a new connection.
    pub fn resumes(&self) -> u64 {
        self.resumes
    }
    /// The connection of the current session, if one runs.
    pub fn conn(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// The TCP writer wrote `n` more of the peer's bytes to our socket; returns all written.
    pub(crate) fn wrote(&mut self, n: u64) -> u64 {
        self.in_delivered += n;
        self.in_delivered
    }
    /// The TCP writer shut our write half after the peer's FIN.
    pub(crate) fn wrote_fin(&mut self) {
        self.in_fin = true;
    }
    /// Egress, a flow restored from its record: `written` bytes (and the FIN if `fin`) are
    /// already the destination's.
    pub(crate) fn restore_written(&mut self, written: u64, fin: bool) {
        self.in_delivered = written;
        self.in_fin = fin;
    }
    /// The session sent `n` custody bytes on the connection.
    pub(crate) fn sent(&mut self, n: u64) {
        self.bytes_sent += n;
    }
    /// A session resumed the flow on a new connection.
    pub(crate) fn resumed(&mut self) {
        self.resumes += 1;
    }
    /// The session running on `conn` is the flow's.
    pub(crate) fn set_conn(&mut self, conn: Connection) {
        self.conn = Some(conn);
    }
}
