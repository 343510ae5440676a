//! What the sender records of each TPDU, what it hands out to send, and its counters.

use aerotp_wire::Flags;
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::Duration;

/// One TPDU kept for retransmission. Its body shares the buffer the application's bytes were
/// written into with the copy handed out for sending (no payload copy per TPDU).
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub body: Bytes,
    pub flags: Flags,
    pub first_sent: Duration,
    pub last_sent: Duration,
    pub sends: u32,
    /// Index of its latest transmission.
    pub tx: u64,
    /// Path of its latest transmission.
    pub path: u8,
    pub acked: bool,
    pub queued: bool,
    /// What its path had delivered when its latest transmission left (`crate::rate`).
    pub snap: crate::rate::SendSnapshot,
    /// Its latest transmission counts in its path's bytes in flight (`crate::rate`): from
    /// when it leaves until it is acknowledged or queued to go again.
    pub in_flight: bool,
}

/// A TPDU ready to go out.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub seq: u64,
    pub flags: Flags,
    /// The body, unless the sender keeps it for retransmission: then `None`, and
    /// `Sender::body_of` lends it (no reference count taken and given back per TPDU).
    pub body: Option<Bytes>,
    pub len: usize,
    pub retransmission: bool,
    /// The path it goes on (0 with one path).
    pub path: u8,
}

#[derive(Debug, Clone, Default)]
pub struct SenderStats {
    pub bytes_written: u64,
    pub tpdus_sent: u64,
    pub tpdus_retransmitted: u64,
    pub bytes_sent_payload: u64,
    pub acked_tpdus: u64,
    pub nacks_received: u64,
    pub snack_ranges_received: u64,
    pub timeouts: u64,
    /// Outage PROBEs sent while the peer was silent. This and `keepalives` are the
    /// connection's PROBEs, counted where they are sent (`connection::probe`) and filled in
    /// by `Connection::stats`: the sender itself sends no PROBE.
    pub probes: u64,
    /// PROBEs sent to keep an idle connection alive (`ConnectionConfig::keep_alive`).
    pub keepalives: u64,
    /// Redundant copies of the opening ASYN.
    pub asyn_copies: u64,
}

/// Whether transmission `tx` of TPDU `seq` is its latest and the TPDU still unacknowledged
/// (`entries[i]` is TPDU `base + i`).
pub(crate) fn current(entries: &VecDeque<Option<Sent>>, base: u64, seq: u64, tx: u64) -> bool {
    let Some(idx) = seq.checked_sub(base) else {
        return false;
    };
    matches!(entries.get(idx as usize), Some(Some(s)) if !s.acked && s.tx == tx)
}
