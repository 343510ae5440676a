//! What the connection records for its statistics: the datagrams it sent and received, the
//! latest time it was given, and the first-send trace of its TPDUs when tracing.

use std::time::Duration;

#[derive(Debug)]
pub(super) struct Record {
    /// The latest time the connection was given (for statistics that need the time).
    pub(super) clock: Duration,
    pub(super) wire: WireCounters,
    /// First-send time of each TPDU when tracing: (TPDU number, time).
    pub(super) send_trace: Option<Vec<(u64, Duration)>>,
}

/// Every datagram of the connection, as `ConnectionStats` reports them.
#[derive(Debug, Default)]
pub(super) struct WireCounters {
    pub(super) datagrams_sent: u64,
    pub(super) bytes_sent_wire: u64,
    pub(super) datagrams_received: u64,
    pub(super) bytes_received_wire: u64,
    pub(super) control_sent: u64,
}

impl Record {
    pub(super) fn new(now: Duration, trace: bool) -> Record {
        Record {
            clock: now,
            wire: WireCounters::default(),
            send_trace: trace.then(Vec::new),
        }
    }

    /// The connection was given `now`.
    pub(super) fn note_time(&mut self, now: Duration) {
        self.clock = self.clock.max(now);
    }

    /// A datagram of `len` bytes went (`control`: a control TPDU).
    pub(super) fn on_sent(&mut self, len: usize, control: bool) {
        self.wire.datagrams_sent += 1;
        self.wire.bytes_sent_wire += len as u64;
        if control {
            self.wire.control_sent += 1;
        }
    }

    /// A datagram of `bits` arrived.
    pub(super) fn on_received(&mut self, bits: usize) {
        self.wire.datagrams_received += 1;
        self.wire.bytes_received_wire += (bits / 8) as u64;
    }

    /// TPDU `seq` went for the first time at `now` (recorded when tracing, up to the limit).
    pub(super) fn on_first_send(&mut self, seq: u64, now: Duration) {
        if let Some(t) = self
            .send_trace
            .as_mut()
            .filter(|t| t.len() < crate::receiver::TRACE_LIMIT)
        {
            t.push((seq, now));
        }
    }
}
