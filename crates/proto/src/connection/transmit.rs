//! The sending side of a connection: what goes out next (reset, final acknowledgement,
//! feedback, ASYNACK, AFINACK, outage probe, repair, data) and how a TPDU is framed and paced.

use super::{Connection, Role};
use crate::codec;
use crate::liveness::Liveness;
use crate::phase::PeerFin;
use aerotp_wire::{ControlBody, Flags, Header};
use std::time::Duration;

impl Connection {
    /// The erasure coder's repair wait now, into the sender. Loss detection by time is live
    /// when `handle_timeout` runs it (`Timer::Loss`: a round-trip sample, not paused): then
    /// the losses a shorter wait makes due are declared at once.
    fn apply_repair_wait(&mut self, now: Duration) {
        let live = self.rtt.has_sample() && !self.watch.liveness.paused();
        let wait = self.coding.etx.repair_wait(self.rtt.smoothed());
        let lanes = |i| self.paths.lane_timing(i);
        let detect = live.then(|| self.rtt.loss_timing(&lanes));
        self.tx.set_repair_wait(wait, now, detect.as_ref());
    }

    fn header(&self, now: Duration, flags: Flags, seq: u64, parity: u8) -> Header {
        Header {
            mode: self.ec.mode,
            flags,
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq: seq as u32,
            timestamp: self.now_us(now).max(1),
            fec: parity,
            tag: self.tag,
            len: 0,
        }
    }

    fn max_body(&self) -> usize {
        codec::max_body(self.cfg.mtu, self.coding.fec.parity())
            .saturating_sub(self.coding.etx.body_reserve())
    }

    /// Parity for a body of `len` bytes: the current choice, reduced if it would exceed the
    /// MTU (a TPDU cut for a weaker code is resent under a stronger one).
    fn parity_for(&self, len: usize) -> u8 {
        let mut p = self.coding.fec.parity();
        while p > 0 && codec::datagram_len(len, p).is_none_or(|l| l > self.cfg.mtu) {
            p -= 1;
        }
        p
    }

    /// Writes the next datagram into `out` if the pacer allows and something is due.
    pub fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> bool {
        let sent = self.next_datagram(now, out);
        if !sent {
            self.settle_pause(now);
        }
        // Said after every turn, before the events that may reopen a window or end a pause:
        // the pacer makes up a late wake-up's lost time only if something was waiting for
        // its slot (`Pacer::set_waiting`), never a pause's.
        let waiting = self.waits_for_slot();
        self.pacer.set_waiting(waiting);
        sent
    }

    /// What sending did may move the suspected-outage pause into the past: a transmission
    /// counts toward the share of TPDUs resent, and a connection that is no longer lossy
    /// pauses after a shorter silence (`pause_after`). `handle_timeout` ran before it, so the
    /// pause is entered here, where the driver's last `poll_transmit` of a turn sees it, or it
    /// would be a deadline reported in the past that nothing acts on (the deadline property
    /// test found it after a radio's pause: a burst of new data after retransmissions).
    fn settle_pause(&mut self, now: Duration) {
        if self.watch.liveness == (Liveness::Heard { paused: false })
            && self.pause_at().is_some_and(|p| now >= p)
        {
            self.watch.liveness = Liveness::Heard { paused: true };
        }
    }

    /// The next datagram, in order of precedence: a control TPDU owed to the peer, a PROBE,
    /// a repair, data.
    fn next_datagram(&mut self, now: Duration, out: &mut Vec<u8>) -> bool {
        if !self.pacer.ready(now) {
            return false;
        }
        self.record.note_time(now);
        let start = out.len();
        if let Some(sent) = self.poll_control(now, out, start) {
            return sent;
        }
        if let Some(sent) = self.poll_probe(now, out, start) {
            return sent;
        }
        if self.radio_held() {
            // The radio holds every path that is up (RFC 8651 Pause, destination down):
            // nothing but control goes (`crate::radio`).
            return false;
        }
        if self.watch.liveness.paused() && !self.tx.has_retransmission() {
            // Suspected outage: no new data or repairs until the peer is heard or the probes
            // start (a timeout's single retransmission still goes).
            return false;
        }
        self.coding
            .etx
            .update(now, self.rtt.smoothed(), self.pacer.rate(), self.cfg.mtu);
        self.apply_repair_wait(now);
        if self.tx.has_retransmission() {
            self.tx.drop_answered_retransmissions();
        }
        if let Some(sent) = self.poll_repair(now, out, start) {
            return sent;
        }
        if !self.tx.has_retransmission() && !self.tx.asyn_pending() && !self.window_open() {
            // Discovery's window is full: new data waits for acknowledgements.
            return false;
        }
        self.send_data(now, out, start)
    }

    /// The control TPDU owed to the peer, if any, in order: RST, challenge, (once ended) the
    /// final acknowledgement, feedback, ASYNACK, AFINACK. `Some(false)`: ended with nothing
    /// owed, or the TPDU could not be framed.
    fn poll_control(&mut self, now: Duration, out: &mut Vec<u8>, start: usize) -> Option<bool> {
        if let Some(reason) = self.outbox.due.rst.take() {
            let body = ControlBody {
                reset: Some(reason),
                ..Default::default()
            };
            return Some(self.emit_control(now, Flags::empty(), &body, out, start, None));
        }
        if let Some(sent) = self.poll_challenge(now, out, start) {
            return Some(sent);
        }
        if self.life.phase.ended() {
            if !std::mem::take(&mut self.outbox.due.final_ack) {
                return Some(false);
            }
            let body = ControlBody {
                ack: Some(self.rx.final_ack()),
                ..Default::default()
            };
            return Some(self.emit_control(now, Flags::AFIN, &body, out, start, None));
        }
        if let Some(mut body) = self.rx.poll_feedback(now) {
            let mut extra = Flags::empty();
            if self.outbox.due.asynack {
                self.outbox.due.asynack = false;
                extra = Flags::ASYN;
                if body.mack.is_none() {
                    body.mack = Some(self.asynack_mack(now));
                    body.ack = None;
                }
            }
            return Some(self.emit_control(now, extra, &body, out, start, None));
        }
        if self.outbox.due.asynack {
            self.outbox.due.asynack = false;
            let body = ControlBody {
                mack: Some(self.asynack_mack(now)),
                ..Default::default()
            };
            return Some(self.emit_control(now, Flags::ASYN, &body, out, start, None));
        }
        self.afinack_ready()
            .then(|| self.send_afinack(now, out, start))
    }

    /// The AFINACK: the final acknowledgement, with a report; the connection may finish
    /// once it is out.
    fn send_afinack(&mut self, now: Duration, out: &mut Vec<u8>, start: usize) -> bool {
        self.outbox.due.afinack = false;
        if let PeerFin::Received { afinack_sent, .. } = &mut self.life.peer_fin {
            *afinack_sent = true;
        }
        let body = ControlBody {
            ack: Some(self.rx.final_ack()),
            report: Some(self.rx.report()),
            ..Default::default()
        };
        self.rx.sent_final_ack();
        let sent = self.emit_control(now, Flags::AFIN, &body, out, start, None);
        self.check_finished(now);
        sent
    }

    /// A repair, when no retransmission or ASYN copy waits and one is due: spread between
    /// the data, or the tail's when no new data can go now.
    fn poll_repair(&mut self, now: Duration, out: &mut Vec<u8>, start: usize) -> Option<bool> {
        if self.tx.has_retransmission() || self.tx.asyn_pending() {
            return None;
        }
        // Idle: no new data can go now (none waits, or discovery's window holds it): the
        // tail's repairs are due, since no data follows soon to carry the flush.
        let idle = !self.tx.has_new() || !self.window_open();
        let body = self.coding.etx.poll_repair(now, idle)?;
        // On another path than the latest data it protects, where there is one.
        let path = self.paths.pick(Some(self.paths.last_data()));
        self.paths.set_tx(path, false);
        Some(self.emit_repair(now, &body, out, start))
    }

    /// The next data TPDU: a retransmission, an ASYN copy or new data, cut to the size the
    /// link suits.
    fn send_data(&mut self, now: Duration, out: &mut Vec<u8>, start: usize) -> bool {
        let max_body = self.max_body();
        let max_body = self.new_tpdu_body(now, max_body);
        let asyn = self.role == Role::Initiator;
        let paths = &mut self.paths;
        let Some(o) = self
            .tx
            .next_outgoing(now, max_body, asyn, &mut |lost_on| paths.pick(lost_on))
        else {
            if self.tx.unsent() == 0 {
                self.note_app_limited();
            }
            return false;
        };
        self.paths.set_tx(o.path, true);
        let Some(body) = self.tx.body_of(&o) else {
            return false;
        };
        if !o.retransmission {
            self.coding.etx.on_data_sent(now, o.seq, o.flags, body);
        }
        if o.flags.contains(Flags::AFIN) && self.life.fin_sent_at.is_none() {
            self.life.fin_sent_at = Some(now);
        }
        if !o.retransmission {
            self.record.on_first_send(o.seq, now);
        }
        let parity = self.parity_for(o.len);
        let h = self.header(now, o.flags, o.seq, parity);
        if codec::encode(h, body, out).is_err() {
            out.truncate(start);
            return false;
        }
        self.account(now, out.len() - start, false);
        self.check_writable();
        true
    }

    /// The ASYNACK's MACK. It echoes the ASYN's timestamp, so the initiator has a round-trip
    /// sample (and a timeout fitted to the path, not the 3 × `initial_rtt` guess) from the
    /// moment it is connected: a first data TPDU lost with its gap MACK is then repaired in
    /// about one timeout of the real path.
    fn asynack_mack(&self, now: Duration) -> aerotp_wire::Mack {
        let (ts_echo, ack_delay) = self.rx.echo(now);
        aerotp_wire::Mack {
            ack: self.rx.final_ack(),
            ts_echo,
            ack_delay,
            max_delay: self.rx.max_delay_ms(),
            entries: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// A control TPDU, on `path` or else on the path for control (`Paths::control`).
    pub(super) fn emit_control(
        &mut self,
        now: Duration,
        extra: Flags,
        body: &ControlBody,
        out: &mut Vec<u8>,
        start: usize,
        path: Option<u8>,
    ) -> bool {
        let path = path.unwrap_or_else(|| self.paths.control(now));
        self.paths.set_tx(path, false);
        // Serialised once, straight into the datagram.
        let len = body.len();
        let parity = self.parity_for(len);
        let mut h = self.header(now, body.flags() | extra, self.tx.next_seq(), parity);
        if body.reset.is_some() {
            // A RST echoes the TPDU it answers (docs/spec.md §4).
            h.timestamp = self.guard.peer_ts;
        }
        if codec::encode_with(h, len, out, |out| body.emit(out)).is_err() {
            out.truncate(start);
            return false;
        }
        self.account(now, out.len() - start, true);
        true
    }

    /// A repair TPDU (docs/spec.md §7): numbered like a control TPDU, under the per-TPDU FEC.
    fn emit_repair(&mut self, now: Duration, body: &[u8], out: &mut Vec<u8>, start: usize) -> bool {
        let parity = self.parity_for(body.len());
        let h = self.header(now, Flags::REPAIR, self.tx.next_seq(), parity);
        if codec::encode(h, body, out).is_err() {
            out.truncate(start);
            return false;
        }
        self.account(now, out.len() - start, false);
        true
    }

    fn account(&mut self, now: Duration, len: usize, control: bool) {
        self.pacer.on_sent(now, len);
        self.paths.on_sent(len);
        self.record.on_sent(len, control);
    }
}
