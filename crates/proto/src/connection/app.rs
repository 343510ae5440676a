//! The application's side of a connection: writing, reading, confirming, closing.

use super::Connection;
use crate::phase::Phase;
use crate::receiver::Delivered;
use crate::state::StateEvent;
use crate::CloseOutcome;
use std::time::Duration;

impl Connection {
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.life.phase.ended() {
            return 0;
        }
        let n = self.tx.write(data);
        if n < data.len() {
            self.outbox.was_writable = false;
        }
        n
    }

    /// As [`Connection::write`], without copying (see [`crate::Endpoint::write_shared`]).
    pub fn write_shared(&mut self, data: &mut bytes::Bytes) -> usize {
        if self.life.phase.ended() {
            return 0;
        }
        let n = self.tx.write_shared(data);
        if !data.is_empty() {
            self.outbox.was_writable = false;
        }
        n
    }

    pub fn writable(&self) -> usize {
        if self.life.phase.ended() {
            0
        } else {
            self.tx.writable()
        }
    }

    /// Reads delivered data into `buf`. The second value says whether the read moved the
    /// connection's deadline (`poll_timeout`): a read changes no timer's input except that it
    /// asks for feedback at once when it reopens the window noticeably
    /// (`Receiver::feedback_asked`). The endpoint's timer table relies on it (a read that
    /// moved nothing is not a touch) and checks it in debug builds (`Schedule::next_deadline`).
    pub fn read(&mut self, buf: &mut [u8]) -> (usize, bool) {
        let asked = self.rx.feedback_asked();
        let n = self.rx.read(buf);
        (n, self.rx.feedback_asked() != asked)
    }

    /// As [`Connection::read`], one delivered chunk whole.
    pub fn read_chunk(&mut self) -> (Option<Delivered>, bool) {
        let asked = self.rx.feedback_asked();
        let d = self.rx.read_chunk();
        (d, self.rx.feedback_asked() != asked)
    }

    pub fn at_eof(&self) -> bool {
        self.rx.at_eof()
    }

    pub fn ready_bytes(&self) -> usize {
        self.rx.ready_bytes()
    }

    /// Confirmed delivery: see `Endpoint::confirm`.
    pub fn confirm(&mut self, now: Duration, upto: u64, end: bool) -> u64 {
        self.rx.confirm(now, upto, end)
    }

    pub fn peer_delivered(&self) -> u64 {
        self.tx.peer_delivered()
    }

    /// The peer's AFIN arrived in order and our AFINACK went out: the peer has nothing more
    /// to wait for from us, unless that AFINACK is lost.
    pub fn close_answered(&self) -> bool {
        !self.life.phase.ended()
            && self.rx.fin_complete()
            && !self.outbox.due.afinack
            && self.life.peer_fin.afinack_sent()
    }

    /// Both halves are done and only the linger is left: our data and AFIN are acknowledged
    /// (confirmed, with confirmed delivery) and the peer's close answered. The connection will
    /// finish as `Finished` when the linger ends, unless something arrives; the linger only
    /// answers a peer whose AFINACK was lost, so an application may stop waiting here.
    pub fn lingering(&self) -> bool {
        self.close_answered() && self.send_done()
    }

    /// No more data from this side: the AFIN follows the queued data.
    pub fn close(&mut self) {
        if !self.tx.fin_requested() {
            self.tx.finish();
            self.apply(StateEvent::AppClose);
        }
    }

    pub fn abort(&mut self, reason: &str) {
        if !self.life.phase.ended() {
            self.outbox.due.rst = Some(reason.to_owned());
            self.finish_with(CloseOutcome::Aborted);
            if let Phase::Ended { abort_reason, .. } = &mut self.life.phase {
                *abort_reason = Some(reason.to_owned());
            }
        }
    }
}
