//! The handshake of a user-space TCP connection (docs/gateway.md §TCP reliable, "The
//! handshake"): the source's SYN is held until the flow's AeroTP connection is up (one air
//! round trip), so the source's first RTT sample, its handshake's, is the air's and not a
//! local answer's (which BBR keeps as its minimum RTT for 10 s, capping its window, and
//! which fires every source's timer before the first confirmation); a flow that fails
//! first is a RST to the source's SYN. Bounded by the hold (`super::super::SYN_HOLD`):
//! then the SYN is answered anyway and the flow goes on opening.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Conn, Phase, Pool, Segment, Tcb, Wire, RTO_INIT, RTO_MAX};
use crate::packet::{self, Out, ACK, SYN};

impl Conn {
    /// A connection for the source's SYN `s`, answered with our SYN-ACK once the flow's
    /// AeroTP connection is up ([`Conn::up`]), or after `hold` at the most: the source's
    /// first RTT sample, its handshake's, is then the air's and not a local answer's.
    /// Out-of-order bytes are kept up to the window, and within `pool`.
    pub fn hold(
        s: &Segment<'_>,
        iss: u32,
        window: u64,
        tun: Arc<dyn Wire>,
        (mtu, pool): (usize, Arc<Pool>),
        hold: Duration,
    ) -> Conn {
        let c = Conn::from_syn(s, iss, window, tun, mtu, pool);
        {
            let mut t = c.lock();
            t.phase = Phase::SynHeld;
            t.deadline = Some(Instant::now() + hold);
        }
        c
    }

    /// The flow's AeroTP connection is up: a held SYN is answered now.
    pub fn up(&self) {
        let mut t = self.lock();
        if t.phase == Phase::SynHeld {
            t.answer_syn(&*self.tun, Instant::now());
        }
    }
}

impl Tcb {
    pub(super) fn send_syn_ack(&self, tun: &dyn Wire) {
        let o = Out {
            src: self.t.dst,
            dst: self.t.src,
            seq: self.iss,
            ack: self.irs.wrapping_add(1),
            flags: SYN | ACK,
            window: self.window.min(u64::from(u16::MAX)) as u16,
            syn_opts: Some((
                self.our_mss,
                (self.our_shift > 0).then_some(self.our_shift),
                self.sack_ok,
            )),
            sack: Vec::new(),
            ts: self.stamps.as_ref().map(|st| (st.now(), st.echo(0))),
            payload: &[],
        };
        tun.send(&packet::build(&o));
    }

    /// Answers the held SYN (at once, or at the hold's deadline).
    fn answer_syn(&mut self, tun: &dyn Wire, now: Instant) {
        self.phase = Phase::SynRcvd;
        self.send_syn_ack(tun);
        self.rto = RTO_INIT;
        self.deadline = Some(now + RTO_INIT);
    }

    /// The source reset the connection: so is its flow (if it has one yet).
    pub(super) fn source_reset(&mut self, room: &Notify) {
        if let Some(f) = &self.flow {
            f.reset("the source reset its TCP connection".into(), true);
        }
        self.phase = Phase::Closed;
        room.notify_waiters();
    }

    /// The handshake's timers: a held SYN answered at its deadline (the flow goes on
    /// opening), our SYN-ACK resent, the connection given up after 5.
    pub(super) fn pump_handshake(&mut self, tun: &dyn Wire, now: Instant) -> Option<Instant> {
        let due = self.deadline.unwrap_or(now);
        if now < due {
            return Some(due);
        }
        if self.phase == Phase::SynHeld {
            tracing::debug!(src = %self.t.src, dest = %self.t.dst,
                "user-space TCP: the flow's connection not up within the hold; SYN answered");
            self.answer_syn(tun, now);
            return self.deadline;
        }
        self.timeouts += 1;
        if self.timeouts > 5 {
            if let Some(f) = &self.flow {
                f.reset("the source never completed its handshake".into(), true);
            }
            self.phase = Phase::Closed;
            return None;
        }
        self.send_syn_ack(tun);
        self.rto = (self.rto * 2).min(RTO_MAX);
        self.deadline = Some(now + self.rto);
        self.deadline
    }
}
