//! Names of the trace format (docs/qlog.md is the reference; a change there changes these).

/// qlog version of the header record.
pub const QLOG_VERSION: &str = "0.4";
/// The private event schema every event name belongs to.
pub const SCHEMA_URI: &str = "urn:aerotp:qlog:events:1";
/// JSON-SEQ record separator (RFC 7464).
pub const RS: u8 = 0x1E;

/// A datagram an endpoint handed to its socket (or the simulator's link).
pub const TPDU_SENT: &str = "aerotp:tpdu_sent";
/// A datagram that reached an endpoint (after the link: possibly damaged).
pub const TPDU_RECEIVED: &str = "aerotp:tpdu_received";
/// RTT sample, smoothed RTT, timeout, pacing rate: written when one changes.
pub const METRICS_UPDATED: &str = "aerotp:metrics_updated";
/// The sender declared TPDUs lost (retransmissions queued, timeouts) or the receiver gave up
/// holes (lossy modes).
pub const LOSS_DETECTED: &str = "aerotp:loss_detected";
/// TPDUs repaired at the receiver: bit errors corrected by the per-TPDU FEC, lost TPDUs
/// rebuilt from repair TPDUs.
pub const TPDUS_RECOVERED: &str = "aerotp:tpdus_recovered";
/// Per-TPDU FEC strength (parity bytes per codeword) changed.
pub const FEC_UPDATED: &str = "aerotp:fec_strength_updated";
/// The connection's state machine moved.
pub const STATE_UPDATED: &str = "aerotp:connection_state_updated";
/// The connection suspected an outage (the peer went silent).
pub const OUTAGE: &str = "aerotp:outage_detected";
/// A radio (DLEP) changed what it says of a path: a rate, a latency, down, up, pause,
/// restart; with the rate in force once the engine applied it.
pub const RADIO_UPDATED: &str = "aerotp:radio_updated";
/// The writer reached its byte bound: later events were not written.
pub const TRUNCATED: &str = "aerotp:trace_truncated";
