//! Delivery-rate sampling for one path, the way BBR measures it (Cheng et al.,
//! draft-cheng-iccrg-delivery-rate-estimation): each transmission carries a snapshot of how
//! much the path had delivered when it left, and its acknowledgement yields the rate at which
//! data was delivered between the two — over the longer of the send and the acknowledgement
//! intervals, so neither a burst of sends nor a burst of acknowledgements inflates it.
//!
//! What AeroTP adds for its links: a TPDU that arrived corrupted (the peer NACKed it) was
//! carried by the link and counts as delivered; losses are counted apart, so the model can
//! tell the link's rate from the rate that survived corruption. The first flight, sent before
//! anything was delivered, is measured by the dispersion of its acknowledgements (a packet
//! train): the first round trip already gives the bottleneck's rate.

use std::time::Duration;

/// What the path had delivered when a transmission left (kept with the TPDU's record).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SendSnapshot {
    /// Bytes the path had delivered.
    pub delivered: u64,
    /// When `delivered` last grew; `None` in the first flight (nothing delivered yet).
    pub delivered_at: Option<Duration>,
    /// Send time of the transmission whose acknowledgement last grew `delivered`: the start of
    /// this transmission's send interval.
    pub first_sent_at: Duration,
    pub sent_at: Duration,
    /// Bytes the path had lost.
    pub lost: u64,
    /// Sent while the application had nothing more to send: its rate says little of the link.
    pub app_limited: bool,
    /// The path's bytes sent, this transmission included (its end in the path's send order).
    pub sent_end: u64,
    /// The end, in the path's send order, of the latest-sent transmission delivered when
    /// this one left.
    pub delivered_end: u64,
}

/// One delivery-rate measurement, from the latest-sent transmission an acknowledgement
/// covered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSample {
    /// Bytes per second that arrived at the peer (corrupted ones included).
    pub rate: f64,
    /// Bytes per second the path carried over the same interval, counting every byte sent
    /// between the latest-sent transmission delivered when this one left and this one,
    /// delivered or lost: what the bottleneck sent on if its losses came after it
    /// (corruption, fading), without the noise of which ones were lost.
    pub carried_rate: f64,
    /// Bytes delivered and lost over the sample's interval.
    pub delivered: u64,
    pub lost: u64,
    /// Send-to-acknowledgement time of that transmission (its first and only one), with
    /// queueing: the delay signal. `None` for a retransmission (Karn).
    pub rtt: Option<Duration>,
    /// What the path had delivered when that transmission left (round counting).
    pub prior_delivered: u64,
    pub app_limited: bool,
    /// When that transmission left.
    pub sent_at: Duration,
}

/// The per-path counters and the pending sample.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeliverySampler {
    /// Bytes of the transmissions still in flight: the sender adds each as it leaves and
    /// takes it off (`leave_flight`) when it is acknowledged or queued to go again, whatever
    /// queued it (a loss, an outage, a RETRY): its records are the one account of what is
    /// out, so nothing the losses do not count can hold the window shut.
    in_flight: u64,
    delivered: u64,
    delivered_at: Option<Duration>,
    first_sent_at: Duration,
    lost: u64,
    /// Samples of transmissions sent before `delivered` reaches this are app-limited.
    app_limited_until: u64,
    /// The first acknowledgement's time and what it delivered: the first flight's samples
    /// measure from there (its dispersion).
    first_ack: Option<(Duration, u64)>,
    /// The sample of the latest-sent transmission acknowledged since last taken.
    pending: Option<RateSample>,
    pending_lost_from: u64,
    /// Bytes acknowledged since last taken (how much one feedback TPDU covers).
    acked_since_taken: u64,
    /// Bytes sent on the path.
    sent: u64,
    /// The end, in send order, of the latest-sent transmission delivered.
    delivered_end: u64,
}

impl DeliverySampler {
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Bytes sent and neither acknowledged nor queued to go again.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// A transmission of `bytes` is no longer in flight.
    pub fn leave_flight(&mut self, bytes: usize) {
        self.in_flight = self.in_flight.saturating_sub(bytes as u64);
    }

    /// A transmission of `bytes` leaves at `now`: its snapshot.
    pub fn on_sent(&mut self, now: Duration, bytes: usize) -> SendSnapshot {
        if self.in_flight() == 0 {
            // Nothing outstanding: the send interval starts now, not at the last ack.
            self.first_sent_at = now;
            if self.delivered_at.is_some() {
                self.delivered_at = Some(now);
            }
        }
        self.in_flight += bytes as u64;
        self.sent += bytes as u64;
        SendSnapshot {
            sent_end: self.sent,
            delivered_end: self.delivered_end,
            delivered: self.delivered,
            delivered_at: self.delivered_at,
            first_sent_at: self.first_sent_at,
            sent_at: now,
            lost: self.lost,
            app_limited: self.app_limited_until > self.delivered,
        }
    }

    /// The sender had nothing to send while the pacer allowed it: what is in flight now
    /// measures the application, not the link.
    pub fn on_app_limited(&mut self) {
        self.app_limited_until = (self.delivered + self.in_flight()).max(1);
    }

    /// The transmission `snap` of `bytes` was acknowledged at `now` (`only`: it was the
    /// TPDU's only transmission, so `now - sent_at` is a round-trip sample).
    pub fn on_acked(&mut self, now: Duration, bytes: usize, snap: &SendSnapshot, only: bool) {
        self.deliver(now, bytes, snap);
        self.acked_since_taken += bytes as u64;
        let rtt = only.then(|| now.saturating_sub(snap.sent_at));
        let Some((rate, interval)) = self.rate_since(now, snap) else {
            return;
        };
        let carried_rate = match snap.delivered_at {
            Some(_) => snap.sent_end.saturating_sub(snap.delivered_end) as f64 / interval,
            None => rate,
        };
        let sample = RateSample {
            rate,
            carried_rate,
            delivered: self.delivered - snap.delivered,
            lost: self.lost.saturating_sub(snap.lost),
            rtt,
            prior_delivered: snap.delivered,
            app_limited: snap.app_limited,
            sent_at: snap.sent_at,
        };
        // The latest-sent transmission covered gives the freshest sample (BBR's choice).
        if self.pending.is_none_or(|p| snap.sent_at >= p.sent_at) {
            self.pending = Some(sample);
            self.pending_lost_from = snap.lost;
        }
    }

    /// The transmission `snap` of `bytes` arrived corrupted (the peer said so): the link
    /// carried it, so it counts as delivered, but gives no sample of its own.
    pub fn on_corrupted(&mut self, now: Duration, bytes: usize, snap: &SendSnapshot) {
        self.deliver(now, bytes, snap);
    }

    /// A transmission of `bytes` was declared lost.
    pub fn on_lost(&mut self, bytes: usize) {
        self.lost += bytes as u64;
    }

    /// A loss counted by `on_lost` was in fact a corrupted arrival (counted delivered).
    pub fn forgive_loss(&mut self, bytes: usize) {
        self.lost = self.lost.saturating_sub(bytes as u64);
    }

    /// The sample gathered since the last call, and how many bytes were acknowledged since.
    pub fn take(&mut self) -> (Option<RateSample>, u64) {
        let lost_from = self.pending_lost_from;
        let lost_now = self.lost;
        (
            self.pending.take().map(|mut s| {
                s.lost = lost_now.saturating_sub(lost_from);
                s
            }),
            std::mem::take(&mut self.acked_since_taken),
        )
    }

    fn deliver(&mut self, now: Duration, bytes: usize, snap: &SendSnapshot) {
        self.delivered += bytes as u64;
        self.delivered_at = Some(now);
        self.first_sent_at = self.first_sent_at.max(snap.sent_at);
        self.delivered_end = self.delivered_end.max(snap.sent_end);
        if self.first_ack.is_none() {
            self.first_ack = Some((now, self.delivered));
        }
        if self.app_limited_until <= self.delivered {
            self.app_limited_until = 0;
        }
    }

    /// Bytes per second delivered between `snap` and `now`, and the interval (s), if it is
    /// measurable.
    fn rate_since(&self, now: Duration, snap: &SendSnapshot) -> Option<(f64, f64)> {
        let (from_delivered, ack_interval) = match snap.delivered_at {
            Some(at) => (snap.delivered, now.saturating_sub(at)),
            None => {
                // First flight: the dispersion of its acknowledgements from the first one.
                let (at, delivered) = self.first_ack?;
                (delivered, now.saturating_sub(at))
            }
        };
        let send_interval = match snap.delivered_at {
            Some(_) => snap.sent_at.saturating_sub(snap.first_sent_at),
            None => Duration::ZERO,
        };
        let interval = ack_interval.max(send_interval);
        let bytes = self.delivered.saturating_sub(from_delivered);
        if interval.is_zero() || bytes == 0 {
            return None;
        }
        let secs = interval.as_secs_f64();
        Some((bytes as f64 / secs, secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A bottleneck of `rate` bytes/s behind a `rtt` round trip, fed `n` TPDUs of `len`
    /// bytes sent `gap` apart: every acknowledgement is one TPDU (the peer acks each).
    fn run(rate: f64, rtt: Duration, gap: Duration, n: usize, len: usize) -> Vec<RateSample> {
        let mut s = DeliverySampler::default();
        let mut snaps = Vec::new();
        let mut free = Duration::ZERO;
        let mut samples = Vec::new();
        let mut acks = Vec::new();
        for i in 0..n {
            let at = gap * i as u32;
            // Acks that came back before this send are processed first.
            while let Some(&(t, j)) = acks.first() {
                if t > at {
                    break;
                }
                acks.remove(0);
                s.on_acked(t, len, &snaps[j], true);
                if let (Some(x), _) = s.take() {
                    samples.push(x);
                }
            }
            snaps.push(s.on_sent(at, len));
            let start = free.max(at);
            free = start + Duration::from_secs_f64(len as f64 / rate);
            acks.push((free + rtt, i));
        }
        for (t, j) in acks {
            s.on_acked(t, len, &snaps[j], true);
            if let (Some(x), _) = s.take() {
                samples.push(x);
            }
        }
        samples
    }

    #[test]
    fn a_burst_into_a_bottleneck_measures_the_bottleneck() {
        // 10 TPDUs at once into 625 kB/s (5 Mb/s): the first flight's dispersion says 625 kB/s.
        let samples = run(625_000.0, 20 * MS, Duration::ZERO, 10, 1500);
        let last = samples.last().unwrap();
        assert!((last.rate / 625_000.0 - 1.0).abs() < 0.01, "{}", last.rate);
    }

    #[test]
    fn sending_below_the_bottleneck_measures_the_send_rate() {
        // One 1500-byte TPDU every 4 ms = 375 kB/s into a 625 kB/s link.
        let samples = run(625_000.0, 20 * MS, 4 * MS, 200, 1500);
        let tail = &samples[samples.len() / 2..];
        for x in tail {
            assert!((x.rate / 375_000.0 - 1.0).abs() < 0.05, "{}", x.rate);
            assert_eq!(x.rtt.map(|r| r >= 20 * MS), Some(true));
        }
    }

    #[test]
    fn sending_above_the_bottleneck_measures_the_bottleneck() {
        let samples = run(625_000.0, 20 * MS, MS, 300, 1500);
        let tail = &samples[samples.len() / 2..];
        for x in tail {
            assert!((x.rate / 625_000.0 - 1.0).abs() < 0.05, "{}", x.rate);
        }
    }

    /// A full 625 kB/s bottleneck whose link loses 30 % after it (a fixed pattern, three in
    /// ten): what arrived varies with which were lost, what was carried does not.
    #[test]
    fn at_heavy_random_loss_the_carried_rate_measures_the_bottleneck() {
        let (rate, len) = (625_000.0, 1500);
        let mut s = DeliverySampler::default();
        let mut snaps = Vec::new();
        let mut acks = std::collections::VecDeque::new();
        let (mut carried, mut arrived) = (Vec::new(), Vec::new());
        for i in 0..600u32 {
            // Sent at 2 ms; the bottleneck spaces them 2.4 ms apart, so a queue stands.
            let at = 2 * MS * i;
            while let Some(&(t, j)) = acks.front() {
                if t > at {
                    break;
                }
                acks.pop_front();
                s.on_acked(t, len, &snaps[j], true);
                if let (Some(x), _) = s.take() {
                    if j > 100 {
                        carried.push(x.carried_rate / rate);
                        arrived.push(x.rate / rate);
                    }
                }
            }
            snaps.push(s.on_sent(at, len));
            let departs = Duration::from_secs_f64(f64::from(i + 1) * len as f64 / rate);
            if !matches!(i % 10, 2 | 5 | 8) {
                acks.push_back((departs + 20 * MS, i as usize));
            }
        }
        for c in &carried {
            assert!((c - 1.0).abs() < 0.05, "carried {c}");
        }
        let spread = |v: &[f64]| {
            v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
        };
        assert!(spread(&arrived) > 4.0 * spread(&carried), "{arrived:?}");
    }

    #[test]
    fn corrupted_arrivals_count_as_delivered_and_losses_apart() {
        let mut s = DeliverySampler::default();
        let a = s.on_sent(Duration::ZERO, 1000);
        let b = s.on_sent(MS, 1000);
        let c = s.on_sent(2 * MS, 1000);
        assert_eq!(s.in_flight(), 3000);
        s.on_corrupted(10 * MS, 1000, &a);
        s.leave_flight(1000);
        s.on_lost(1000);
        s.leave_flight(1000);
        s.on_acked(12 * MS, 1000, &c, true);
        s.leave_flight(1000);
        assert_eq!(s.delivered(), 2000);
        assert_eq!(s.lost(), 1000);
        assert_eq!(s.in_flight(), 0);
        let (x, acked) = s.take();
        let x = x.unwrap();
        assert_eq!(acked, 1000);
        assert_eq!(x.rtt, Some(10 * MS));
        // From the first delivery (a, at 10 ms) to c's ack: 1000 bytes in 2 ms.
        assert!((x.rate - 500_000.0).abs() < 1.0, "{}", x.rate);
        let _ = b;
    }

    #[test]
    fn app_limited_marks_the_samples_until_what_was_in_flight_is_delivered() {
        let mut s = DeliverySampler::default();
        let a = s.on_sent(Duration::ZERO, 1000);
        s.on_app_limited();
        let b = s.on_sent(MS, 1000);
        assert!(b.app_limited && !a.app_limited);
        s.on_acked(10 * MS, 1000, &a, true);
        s.on_acked(11 * MS, 1000, &b, true);
        let c = s.on_sent(12 * MS, 1000);
        assert!(!c.app_limited);
    }

    #[test]
    fn a_retransmission_gives_no_round_trip() {
        let mut s = DeliverySampler::default();
        let a = s.on_sent(Duration::ZERO, 1000);
        s.on_acked(10 * MS, 1000, &a, false);
        let b = s.on_sent(11 * MS, 1000);
        s.on_acked(21 * MS, 1000, &b, false);
        let (x, _) = s.take();
        assert_eq!(x.unwrap().rtt, None);
    }
}
