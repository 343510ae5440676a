//! Open-loop rate pacing: each datagram occupies the sender for its size over the rate. No
//! window, no slow start: AeroTP sends at the rate the network layer allocates.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Pacer {
    rate_bps: u64,
    overhead: usize,
    /// Earliest time the next datagram may leave.
    next: Duration,
    /// How far behind real time the schedule may fall before credit is forfeited: a small burst
    /// allowance so timer granularity does not cost rate.
    burst: Duration,
}

impl Pacer {
    pub fn new(rate_bps: u64, per_packet_overhead: usize, mtu: usize) -> Pacer {
        let mut p = Pacer {
            rate_bps,
            overhead: per_packet_overhead,
            next: Duration::ZERO,
            burst: Duration::ZERO,
        };
        // Two full datagrams, at least 1 ms.
        p.burst = p.serialisation(2 * mtu).max(Duration::from_millis(1));
        p
    }

    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps.max(1);
    }

    pub fn rate(&self) -> u64 {
        self.rate_bps
    }

    fn serialisation(&self, bytes: usize) -> Duration {
        let bits = (bytes + self.overhead) as u128 * 8;
        Duration::from_nanos(
            u64::try_from(bits * 1_000_000_000 / u128::from(self.rate_bps.max(1)))
                .unwrap_or(u64::MAX),
        )
    }

    pub fn ready(&self, now: Duration) -> bool {
        now >= self.next
    }

    /// When the next datagram may leave.
    pub fn next_send(&self) -> Duration {
        self.next
    }

    /// Accounts a datagram of `bytes` sent at `now`.
    pub fn on_sent(&mut self, now: Duration, bytes: usize) {
        let start = self.next.max(now.saturating_sub(self.burst));
        self.next = start + self.serialisation(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_at_the_configured_rate() {
        // 1472 + 28 = 1500 bytes at 5 Mb/s = 2.4 ms each.
        let mut p = Pacer::new(5_000_000, 28, 1500);
        let mut now = Duration::ZERO;
        let mut sent = 0;
        while now < Duration::from_secs(1) {
            if p.ready(now) {
                p.on_sent(now, 1472);
                sent += 1;
            } else {
                now = p.next_send();
            }
        }
        // 1 s / 2.4 ms = 416.7, plus the burst allowance at the start.
        assert!((416..=419).contains(&sent), "{sent}");
    }

    #[test]
    fn idle_time_is_not_banked_beyond_the_burst() {
        let mut p = Pacer::new(1_000_000, 0, 1000);
        p.on_sent(Duration::ZERO, 1000);
        let later = Duration::from_secs(10);
        assert!(p.ready(later));
        let mut n = 0;
        while p.ready(later) {
            p.on_sent(later, 1000);
            n += 1;
        }
        assert!(n <= 3, "{n}");
    }
}
