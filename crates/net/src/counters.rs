//! The counters the driver keeps and the exposition shows: socket traffic ([`IoCounters`]) and
//! the connection counters summed over an endpoint's life ([`Totals`]). Plain data, so the
//! driver can keep them without depending on the exposition (`metrics`).

use aerotp_proto::{ConnectionStats, PathRadio};

/// Datagrams and bytes the driver moved through its socket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub datagrams_sent: u64,
    pub bytes_sent: u64,
    pub datagrams_received: u64,
    pub bytes_received: u64,
    pub send_errors: u64,
    pub recv_errors: u64,
}

/// A connection counter: metric name (without `aerotp_` and `_total`), help, and where it is
/// in [`ConnectionStats`].
type ConnCounter = (&'static str, &'static str, fn(&ConnectionStats) -> u64);

/// The connection counters summed over connections, in exposition order.
pub const CONNECTION_COUNTERS: [ConnCounter; 30] = [
    (
        "tpdus_sent",
        "Data TPDUs transmitted, first transmissions and retransmissions.",
        |s| s.sender.tpdus_sent,
    ),
    (
        "retransmissions",
        "Data TPDUs retransmitted (MACK gap, NACK, SNACK, timeout or probe).",
        |s| s.sender.tpdus_retransmitted,
    ),
    (
        "bytes_written",
        "Bytes the application queued for sending.",
        |s| s.sender.bytes_written,
    ),
    (
        "payload_bytes_sent",
        "Application bytes in first transmissions.",
        |s| s.sender.bytes_sent_payload,
    ),
    ("tpdus_acked", "Data TPDUs positively acknowledged.", |s| {
        s.sender.acked_tpdus
    }),
    (
        "nack_entries_received",
        "NACK entries received: TPDUs the peer got corrupted.",
        |s| s.sender.nacks_received,
    ),
    (
        "snack_ranges_received",
        "SNACK ranges received: gaps the peer reported.",
        |s| s.sender.snack_ranges_received,
    ),
    (
        "rto_expirations",
        "TPDUs declared lost by the retransmission timeout.",
        |s| s.sender.timeouts,
    ),
    (
        "probes_sent",
        "Probes sent while the peer was silent (outage).",
        |s| s.sender.probes,
    ),
    (
        "keepalives_sent",
        "PROBEs sent to keep an idle connection alive (keep_alive).",
        |s| s.sender.keepalives,
    ),
    (
        "asyn_copies_sent",
        "Redundant copies of the opening ASYN.",
        |s| s.sender.asyn_copies,
    ),
    (
        "tpdus_received",
        "Distinct data TPDUs accepted (body checked, possibly after correction).",
        |s| s.receiver.tpdus_received,
    ),
    ("tpdus_duplicate", "Data TPDUs received again.", |s| {
        s.receiver.tpdus_duplicate
    }),
    (
        "tpdus_corrected",
        "Data TPDUs whose checks failed and that FEC repaired.",
        |s| s.receiver.tpdus_corrected,
    ),
    (
        "bit_errors_corrected",
        "Bit errors FEC corrected (bits flipped back).",
        |s| s.receiver.bits_corrected,
    ),
    (
        "tpdus_corrupted",
        "Data TPDUs dropped with a body that failed its CRC after decoding.",
        |s| s.receiver.tpdus_corrupted,
    ),
    (
        "tpdus_lost",
        "Data TPDUs skipped for good in lossy modes.",
        |s| s.receiver.tpdus_lost,
    ),
    (
        "tpdus_beyond_window",
        "Data TPDUs refused beyond the receive window.",
        |s| s.receiver.tpdus_beyond_window,
    ),
    (
        "tpdus_dropped_memory",
        "Out-of-order data TPDUs dropped at the reorder buffer's byte bound.",
        |s| s.receiver.tpdus_dropped_memory,
    ),
    ("bytes_delivered", "Bytes the application has read.", |s| {
        s.receiver.bytes_delivered
    }),
    ("macks_sent", "MACKs sent.", |s| s.receiver.macks_sent),
    ("acks_sent", "ACKs sent.", |s| s.receiver.acks_sent),
    ("nacks_sent", "NACKs sent.", |s| s.receiver.nacks_sent),
    ("snacks_sent", "SNACKs sent.", |s| s.receiver.snacks_sent),
    ("reports_sent", "Reception reports (RPT) sent.", |s| {
        s.receiver.reports_sent
    }),
    (
        "connection_datagrams_sent",
        "Datagrams connections sent (data and control, FEC included).",
        |s| s.datagrams_sent,
    ),
    (
        "connection_wire_bytes_sent",
        "Bytes of the datagrams connections sent.",
        |s| s.bytes_sent_wire,
    ),
    (
        "connection_datagrams_received",
        "Datagrams that reached a connection.",
        |s| s.datagrams_received,
    ),
    (
        "connection_wire_bytes_received",
        "Bytes of the datagrams that reached a connection.",
        |s| s.bytes_received_wire,
    ),
    (
        "outages",
        "Times a sender declared its peer silent and switched to probing.",
        |s| s.outages,
    ),
];

/// A kind of radio change (`aerotp_radio_changes_total{kind}`): its label value and where
/// its count is in a path's [`PathRadio`].
type RadioKind = (&'static str, fn(&PathRadio) -> u64);

/// The kinds of radio change the engine counts per path (docs/stats.md), in exposition
/// order: the names of `aerotp_proto::RadioSignal::name`, a rate said and one withdrawn
/// counted together as `rate`.
pub const RADIO_CHANGE_KINDS: [RadioKind; 6] = [
    ("rate", |r| r.rate_changes),
    ("latency", |r| r.latency_changes),
    ("down", |r| r.downs),
    ("up", |r| r.ups),
    ("pause", |r| r.pauses),
    ("restart", |r| r.restarts),
];

/// The connection counters of [`CONNECTION_COUNTERS`], and the radio changes of
/// [`RADIO_CHANGE_KINDS`] over every path, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    counters: [u64; CONNECTION_COUNTERS.len()],
    radio: [u64; RADIO_CHANGE_KINDS.len()],
}

impl Totals {
    pub fn add(&mut self, s: &ConnectionStats) {
        for (t, (_, _, get)) in self.counters.iter_mut().zip(CONNECTION_COUNTERS.iter()) {
            *t = t.saturating_add(get(s));
        }
        for p in &s.paths {
            for (t, (_, get)) in self.radio.iter_mut().zip(RADIO_CHANGE_KINDS.iter()) {
                *t = t.saturating_add(get(&p.radio));
            }
        }
    }

    /// The summed counters, in the order of [`CONNECTION_COUNTERS`].
    pub fn values(&self) -> &[u64] {
        &self.counters
    }

    /// The summed radio changes, in the order of [`RADIO_CHANGE_KINDS`].
    pub fn radio_changes(&self) -> &[u64] {
        &self.radio
    }

    /// The summed counter `name` (a name of [`CONNECTION_COUNTERS`]).
    pub fn get(&self, name: &str) -> Option<u64> {
        CONNECTION_COUNTERS
            .iter()
            .position(|c| c.0 == name)
            .map(|i| self.counters[i])
    }
}
