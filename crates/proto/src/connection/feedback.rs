//! The peer's acknowledgements as the connection takes them: a MACK's echoed timestamp to
//! the round-trip estimator, its acknowledgements and entries to the sender.

use super::Connection;
use std::time::Duration;

impl Connection {
    /// A MACK's round trip (from its echoed timestamp), acknowledgements and entries; returns
    /// that round trip when it is a sample.
    pub(super) fn on_mack(&mut self, now: Duration, m: &aerotp_wire::Mack) -> Option<Duration> {
        let mut echo_rtt = None;
        self.rtt
            .on_peer_max_delay(Duration::from_millis(u64::from(m.max_delay)));
        let echo_us = self.now_us(now).wrapping_sub(m.ts_echo);
        let delay = Duration::from_micros(u64::from(m.ack_delay) * 100);
        let rtt = Duration::from_micros(u64::from(echo_us)).saturating_sub(delay);
        // A saturated delay (the echoed TPDU was held 6.55 s or more: the answer to a
        // keep-alive or outage probe on a connection idle that long) says nothing of the
        // path: the sample would be the idle time. Such samples took a 10 ms link's
        // smoothed RTT to 14 s and its retransmissions to tens of seconds.
        let saturated = m.ack_delay == u16::MAX;
        if rtt < Duration::from_secs(600) && m.ts_echo != 0 && !saturated {
            let rtt = rtt.max(Duration::from_micros(1));
            self.rtt.on_sample(rtt);
            echo_rtt = Some(rtt);
        }
        let lanes = |i| self.paths.lane_timing(i);
        let t = self.rtt.loss_timing(&lanes);
        self.tx.on_ack(&m.ack, now, t.min_rtt);
        self.tx.on_mack_entries(&m.entries, &m.ranges, now, &t);
        echo_rtt
    }
}
