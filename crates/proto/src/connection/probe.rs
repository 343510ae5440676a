//! The PROBEs a connection sends: the keep-alive of an idle connection, the outage probe while
//! the peer is silent, and a down path's probe. Each is the same empty NACK (docs/spec.md §4),
//! which the peer answers with its feedback; the keep-alives and outage probes are counted
//! here, as they go (`Watch`).

use super::Connection;
use aerotp_wire::{ControlBody, Flags};
use std::time::Duration;

impl Connection {
    /// The PROBE due, if any. While the peer is silent it is the only thing that may go:
    /// `Some(false)` then if no outage probe is due (never data into a dead link).
    pub(super) fn poll_probe(
        &mut self,
        now: Duration,
        out: &mut Vec<u8>,
        start: usize,
    ) -> Option<bool> {
        let silent = self.watch.liveness.silent();
        if std::mem::take(&mut self.outbox.due.keepalive) && !silent {
            self.watch.keepalive_sent();
            return Some(self.emit_probe(now, out, start, None));
        }
        if silent {
            if !std::mem::take(&mut self.outbox.due.probe) {
                return Some(false);
            }
            // An outage probe: a header's worth of bytes. With several paths, each is tried
            // in turn.
            self.watch.probe_sent();
            let path = self.paths.outage_probe();
            return Some(self.emit_probe(now, out, start, Some(path)));
        }
        // A down path's probe (docs/spec.md §9), on that path; the peer answers on the path
        // it came from.
        let path = self.paths.take_probe()?;
        Some(self.emit_probe(now, out, start, Some(path)))
    }

    /// An empty NACK, on `path` or else on the path for control.
    fn emit_probe(
        &mut self,
        now: Duration,
        out: &mut Vec<u8>,
        start: usize,
        path: Option<u8>,
    ) -> bool {
        let body = ControlBody {
            nack: Some(aerotp_wire::Nack::default()),
            ..Default::default()
        };
        self.emit_control(now, Flags::empty(), &body, out, start, path)
    }
}
