//! What one run measured ([`RunResult`]) and the bookkeeping every driver shares: the empty
//! result, the figures derived at the end, how the sender's connection ended.

use std::collections::HashMap;
use std::time::Duration;

use aerotp_link::DelayHistogram;
use aerotp_proto::{CloseOutcome, ConnectionHandle, Endpoint};

use super::path_watch::PathRun;
use serde::Serialize;

/// What one run measured. Times are seconds of virtual time since the connect call (t = 0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub seed: u64,
    /// All bytes delivered in order and intact (and, for the fully reliable modes, the
    /// sender's close confirmed), before the cap.
    pub complete: bool,
    /// Bytes the receiving application got.
    pub delivered_bytes: u64,
    /// delivered × 8 / (last delivery − first send); 0 if nothing was delivered.
    pub goodput_bps: f64,
    /// Mean one-way application-to-application delay per TPDU (datagram for udp/datagram):
    /// in-order delivery time − first transmission time. None if nothing was delivered.
    pub mean_delay_s: Option<f64>,
    /// Bytes on the wire in both directions (datagrams + 28 B IPv4/UDP each) − delivered.
    pub overhead_bytes: i64,
    /// Bytes on the wire in both directions (datagrams + 28 B IPv4/UDP each).
    pub wire_bytes: u64,
    /// From the connect call until the receiver accepted the connection (udp/datagram: until
    /// the first datagram arrived). None if it never happened.
    pub setup_delay_s: Option<f64>,
    /// Virtual time at which the run ended (both ends closed, or the cap).
    pub elapsed_s: f64,
    /// Time of the last delivery to the receiving application.
    pub last_delivery_s: Option<f64>,
    /// Time of the first datagram sent (goodput runs from here to the last delivery).
    pub first_send_s: Option<f64>,
    /// Datagrams the sender sent (data and control).
    pub datagrams_sent: u64,
    /// TPDUs the sender retransmitted (the engine's `tpdus_retransmitted`).
    pub retransmissions: u64,
    /// Retransmissions of a TPDU an earlier copy of which (sent before this retransmission)
    /// arrived intact at the receiver (CRC good as received or after FEC), whenever it
    /// arrived: retransmissions that were not needed.
    pub spurious_retransmissions: u64,
    /// Bytes on the wire sender → receiver (datagrams + 28 B each), all paths.
    pub wire_bytes_forward: u64,
    /// Bytes on the wire receiver → sender (datagrams + 28 B each), all paths.
    pub wire_bytes_reverse: u64,
    /// Per message of a non-bulk workload, in message order: delivery of its last byte −
    /// the time the application wrote it (request-response: the response's last byte − the
    /// request's write). Messages not delivered are absent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_delays: Vec<f64>,
    /// TPDUs whose bit errors FEC corrected at the receiver.
    pub tpdus_corrected: u64,
    /// TPDUs the receiver gave up on (lossy modes) or datagrams lost (udp/datagram).
    pub tpdus_lost: u64,
    /// Data TPDUs the link lost or corrupted beyond correction, before any repair.
    pub wire_lost: u64,
    /// Of those, rebuilt by erasure decoding.
    pub tpdus_rebuilt: u64,
    /// Repair TPDUs the sender sent.
    pub repairs_sent: u64,
    /// Data TPDUs the sender sent for the first time (no retransmissions, no ASYN copies).
    pub data_tpdus: u64,
    /// Longest one-way delay of a data TPDU (first send to in-order delivery), seconds.
    pub max_delay_s: Option<f64>,
    /// FEC parity bytes per codeword in use at the end of the run (0 = none).
    pub fec_parity: u8,
    /// How the sender's connection ended ("" for udp/datagram or if it did not).
    pub sender_close: String,
    /// Cumulative bytes delivered over time, (seconds, bytes), if the scenario asked for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(f64, u64)>,
    /// Queueing delay at the bottleneck hop of every forward path, pooled over the paths
    /// (serialised as `{n, p50, p99, max, mean}`, seconds), and the same for the reverse paths.
    pub queue_delay_forward: DelayHistogram,
    pub queue_delay_reverse: DelayHistogram,
    /// Packets refused by a full drop-tail queue (any hop), forward and reverse.
    pub queue_drops_forward: u64,
    pub queue_drops_reverse: u64,
    /// With several paths used by the engine: each path's outages against the sender's down
    /// declarations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathRun>,
}

pub(super) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

pub(super) fn close_name(o: &CloseOutcome) -> String {
    match o {
        CloseOutcome::Finished { confirmed: true } => "finished-confirmed".into(),
        CloseOutcome::Finished { confirmed: false } => "finished".into(),
        CloseOutcome::CloseTimeout => "close-timeout".into(),
        CloseOutcome::IdleTimeout => "idle-timeout".into(),
        CloseOutcome::SetupTimeout => "setup-timeout".into(),
        CloseOutcome::Reset(r) => format!("reset: {r}"),
        CloseOutcome::Aborted => "aborted".into(),
    }
}

pub(super) fn result_base(seed: u64) -> RunResult {
    RunResult {
        seed,
        complete: false,
        delivered_bytes: 0,
        goodput_bps: 0.0,
        mean_delay_s: None,
        overhead_bytes: 0,
        wire_bytes: 0,
        setup_delay_s: None,
        elapsed_s: 0.0,
        last_delivery_s: None,
        first_send_s: None,
        datagrams_sent: 0,
        retransmissions: 0,
        spurious_retransmissions: 0,
        wire_bytes_forward: 0,
        wire_bytes_reverse: 0,
        message_delays: Vec::new(),
        tpdus_corrected: 0,
        tpdus_lost: 0,
        wire_lost: 0,
        tpdus_rebuilt: 0,
        repairs_sent: 0,
        data_tpdus: 0,
        max_delay_s: None,
        fec_parity: 0,
        sender_close: String::new(),
        timeline: Vec::new(),
        queue_delay_forward: DelayHistogram::new(),
        queue_delay_reverse: DelayHistogram::new(),
        queue_drops_forward: 0,
        queue_drops_reverse: 0,
        paths: Vec::new(),
    }
}

pub(super) fn finish_common(
    r: &mut RunResult,
    first_send: Option<Duration>,
    last_delivery: Option<Duration>,
) {
    r.wire_bytes = r.wire_bytes_forward + r.wire_bytes_reverse;
    r.overhead_bytes = r.wire_bytes as i64 - r.delivered_bytes as i64;
    r.last_delivery_s = last_delivery.map(secs);
    r.first_send_s = first_send.map(secs);
    if let (Some(f), Some(l)) = (first_send, last_delivery) {
        if l > f && r.delivered_bytes > 0 {
            r.goodput_bps = r.delivered_bytes as f64 * 8.0 / secs(l - f);
        }
    }
}

/// Fills what the two engines counted of a connection: the sender's retransmissions, parity,
/// repairs and new data TPDUs from `a`'s connection `ch`; the receiver's corrections and
/// losses from `b`'s connection `rx` (if accepted), and the one-way delay per TPDU (first
/// send joined with in-order delivery by TPDU number). Returns the number of TPDUs the mean
/// delay is over.
pub(super) fn engine_figures(
    r: &mut RunResult,
    a: &Endpoint,
    ch: ConnectionHandle,
    b: &Endpoint,
    rx: Option<ConnectionHandle>,
) -> u64 {
    if let Some(st) = a.stats(ch) {
        r.retransmissions = st.sender.tpdus_retransmitted;
        r.fec_parity = st.fec_parity;
        r.repairs_sent = st.erasure_tx.repairs_sent;
        r.data_tpdus = st.sender.tpdus_sent
            - st.sender.tpdus_retransmitted.min(st.sender.tpdus_sent)
            - st.sender.asyn_copies.min(st.sender.tpdus_sent);
    }
    let Some(h) = rx else {
        return 0;
    };
    if let Some(st) = b.stats(h) {
        r.tpdus_corrected = st.receiver.tpdus_corrected;
        r.tpdus_lost = st.receiver.tpdus_lost;
        r.wire_lost = st.receiver.wire_lost;
        r.tpdus_rebuilt = st.receiver.tpdus_rebuilt;
    }
    // One-way delay per TPDU: join first-send times and in-order delivery times.
    let sent: HashMap<u64, Duration> = a
        .send_trace(ch)
        .map(|t| t.iter().copied().collect())
        .unwrap_or_default();
    let (mut sum, mut n, mut max) = (0.0, 0u64, 0.0f64);
    if let Some(trace) = b.delivery_trace(h) {
        for &(seq, at, bytes) in trace {
            if bytes == 0 {
                continue;
            }
            if let Some(&t0) = sent.get(&seq) {
                let d = secs(at.saturating_sub(t0));
                sum += d;
                max = max.max(d);
                n += 1;
            }
        }
        if n > 0 {
            r.mean_delay_s = Some(sum / n as f64);
            r.max_delay_s = Some(max);
        }
    }
    n
}
