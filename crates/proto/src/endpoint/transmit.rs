//! The endpoint's next datagram: queued control answers first, then the connections whose
//! deadline has come, by the timer table's fair queue (`schedule`).

use std::time::Duration;

use super::{Endpoint, Transmit};
use crate::ConnectionHandle;

impl Endpoint {
    /// Appends the next datagram to send to `out` and says where it goes and how long it is:
    /// it is `out[out.len() - len..]`. What `out` held before is left alone, so a runtime can
    /// hand in its send train (GSO) and the datagram is encoded where it leaves from. On
    /// `None` `out` is unchanged.
    pub fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> Option<Transmit> {
        let start = out.len();
        if let Some((to, class, d)) = self.outbox.pop_outgoing() {
            out.extend_from_slice(&d);
            // Not counted against the link's pacing: datagram-mode traffic is held to its
            // class's rate by its sender (`datagram_rate`) and reserved in the share; counted
            // here, an 8 Mb/s flood of bulk datagrams policed to the link's rate pushed the
            // link's free time ahead of every connection and starved the control class.
            return Some(Transmit {
                remote: to.remote,
                local: to.local,
                len: d.len(),
                class,
            });
        }
        // With a link share, the endpoint paces the link as a whole, and the next datagram
        // goes to the highest class that has one (`Endpoint::occupy_link`).
        if self.share.as_ref().is_some_and(|s| s.link_free() > now) {
            return None;
        }
        if let Some(t) = self.send_again_alone(now, out) {
            return Some(t);
        }
        // Only a connection whose deadline has come can have something to send (the
        // `poll_timeout` contract), so only those are asked, round robin.
        self.schedule.refresh(&self.conns, now);
        loop {
            let conns = &mut self.conns;
            let by_class = self.share.is_some();
            let h = self.schedule.send_round_robin(now, by_class, |h| {
                let sent = conns.get_mut(&h).is_some_and(|c| c.poll_transmit(now, out));
                sent.then(|| out.len() - start)
            })?;
            match self.transmitted(now, h, out, start) {
                Some(t) => return Some(t),
                None => self.schedule.refresh(&self.conns, now),
            }
        }
    }

    /// The endpoint's only connection, which sent the last datagram, asked again at once: the
    /// fair queue of one would ask it and none other, and a connection whose deadline has not
    /// come sends nothing (the `poll_timeout` contract, checked here in debug builds), so
    /// this skips only the timer table's recomputation and the queue's sort. A bulk sender
    /// is asked some 700,000 times per GB: `aerotp bench loopback --size 1GB` took 0.501
    /// against 0.517 CPU s/GB with it (6 interleaved runs, docs/results/loopback.md). Not
    /// with a link share (it paces the link by class). `None`: ask the table.
    fn send_again_alone(&mut self, now: Duration, out: &mut Vec<u8>) -> Option<Transmit> {
        if self.share.is_some() {
            return None;
        }
        let h = self.schedule.sole_sender()?;
        let start = out.len();
        let c = self.conns.get_mut(&h)?;
        #[cfg(debug_assertions)]
        let due = c.poll_timeout_by(now).0.is_some_and(|d| d <= now);
        if !c.poll_transmit(now, out) {
            return None;
        }
        #[cfg(debug_assertions)]
        debug_assert!(due, "{h:?} sent at {now:?} before its deadline");
        self.schedule.sent_alone(h, out.len() - start);
        self.transmitted(now, h, out, start)
    }

    /// What follows a datagram that connection `h` appended to `out` from `start`: sealed
    /// with the endpoint's key if it has one, counted against the link's share, and
    /// addressed. `None` if it could not be sealed (then it is taken back out).
    fn transmitted(
        &mut self,
        now: Duration,
        h: ConnectionHandle,
        out: &mut Vec<u8>,
        start: usize,
    ) -> Option<Transmit> {
        let c = &self.conns[&h];
        if let Some(a) = &mut self.auth {
            // The connection cut its TPDU for the MTU less the envelope.
            let mtu = c.config().mtu + aerotp_wire::AUTH_OVERHEAD;
            if !a.seal(out, start, mtu, c.transmit_path().remote) {
                // Cannot happen for a TPDU a connection cut (it left room for the envelope);
                // if it did, it is a loss the mode repairs.
                out.truncate(start);
                return None;
            }
        }
        let to = c.transmit_path();
        let class = c.config().class;
        let len = out.len() - start;
        self.occupy_link(now, len);
        Some(Transmit {
            remote: to.remote,
            local: to.local,
            len,
            class: Some(class),
        })
    }
}
