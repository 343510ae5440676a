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
    /// allowance so timer granularity does not cost rate. Two full datagrams' time at the
    /// rate in force (at least 1 ms), so it follows the rate.
    burst: Duration,
    /// Two full datagrams, bytes: what `burst` is the time of.
    burst_bytes: usize,
}

impl Pacer {
    pub fn new(rate_bps: u64, per_packet_overhead: usize, mtu: usize) -> Pacer {
        let mut p = Pacer {
            rate_bps,
            overhead: per_packet_overhead,
            next: Duration::ZERO,
            burst: Duration::ZERO,
            burst_bytes: 2 * mtu,
        };
        p.set_rate(rate_bps);
        p
    }

    /// Paces at `rate_bps` from now on. The burst allowance follows: kept at what the first
    /// rate gave, a discovering sender (which starts at its cap, 10 Gb/s for `send`) kept
    /// 1 ms at every rate after, less than one datagram's time at 5 Mb/s, and on a loaded
    /// machine whose timers wake late it sent 10 % under the rate it paced at (the lab's
    /// 5 Mb/s link: 4.1 Mb/s of goodput where a fixed 4.9 Mb/s got 4.7).
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps.max(1);
        self.burst = self
            .serialisation(self.burst_bytes)
            .max(Duration::from_millis(1));
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

    /// A sender that starts at its cap and is re-paced at 5 Mb/s, whose every wake-up comes
    /// 1.5 ms late (a loaded machine): the allowance is two datagrams at 5 Mb/s, so it
    /// still sends at 5 Mb/s. With the 1 ms the 10 Gb/s start gave, it sent at 0.76 of it.
    #[test]
    fn late_wake_ups_cost_no_rate_after_a_change_of_rate() {
        let mut p = Pacer::new(10_000_000_000, 0, 1000);
        p.set_rate(5_000_000);
        let late = Duration::from_micros(1500);
        let (mut now, mut sent) = (Duration::ZERO, 0u64);
        for _ in 0..2000 {
            now = p.next_send().max(now) + late;
            while p.ready(now) {
                p.on_sent(now, 1000);
                sent += 1;
            }
        }
        let rate = (sent * 8000) as f64 / now.as_secs_f64();
        assert!(rate > 0.99 * 5e6, "{rate:.0} b/s");
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
