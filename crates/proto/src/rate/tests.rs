//! The rate control against a modelled bottleneck: a drop-tail queue of `queue` bytes
//! drained at a rate that may step, a one-way delay each way, random loss after the queue
//! (corruption), an acknowledgement per TPDU. Virtual time; deterministic (a fixed-seed
//! generator for the losses).

use super::*;
use std::collections::VecDeque;

const MSS: usize = 1400;
const MS: Duration = Duration::from_millis(1);

struct Link {
    /// (from, rate in b/s of bodies): the bottleneck's rate steps.
    steps: Vec<(Duration, f64)>,
    delay: Duration,
    loss: f64,
    queue: u64,
}

#[derive(Default)]
struct Outcome {
    delivered: u64,
    /// Pacing rate (b/s of bodies) at each millisecond.
    pacing: Vec<f64>,
    /// The path's estimate at each millisecond.
    estimate: Vec<f64>,
    /// Queueing delay of each TPDU that got through the queue.
    queue_delays: Vec<Duration>,
    dropped_by_queue: u64,
    /// Every 100 ms: time, pacing, the path's view (for failure messages).
    trace: String,
}

impl Outcome {
    fn p99_queue(&self) -> Duration {
        let mut d = self.queue_delays.clone();
        d.sort();
        d.get(d.len() * 99 / 100).copied().unwrap_or_default()
    }
}

impl Link {
    fn rate_at(&self, t: Duration) -> f64 {
        self.steps
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .map_or(self.steps[0].1, |s| s.1)
    }

    /// A bulk sender under `RateState` for `secs` seconds, capped at 1 Gb/s: its pacing and
    /// what got through.
    fn run(&self, secs: u64) -> Outcome {
        self.run_capped(secs, 1_000_000_000)
    }

    /// As `run`, under a cap of `cap` b/s.
    fn run_capped(&self, secs: u64, cap: u64) -> Outcome {
        let mut rate = RateState::new(RateControl::Discover, cap, MSS + 28, 28, true, 7);
        // Bodies only: the conversion is 1 (the test's link carries bodies).
        rate.link_per_body = 1.0;
        let mut sampler = DeliverySampler::default();
        let mut out = Outcome::default();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut random = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        // Queue: (snapshot, enqueued at); the link is busy until `free`.
        let mut queue: VecDeque<(SendSnapshot, Duration)> = VecDeque::new();
        let mut queued_bytes = 0u64;
        let mut free = Duration::ZERO;
        // Acknowledgements on their way back: (arrival, snapshot, delivered?).
        let mut acks: VecDeque<(Duration, SendSnapshot, bool)> = VecDeque::new();
        let mut next_send = Duration::ZERO;
        // 100 µs, or 4 µs past 100 Mb/s: at 1 Gb/s a TPDU takes 11 µs, and the first
        // flight's ten are 112 µs end to end, which a 100 µs clock cannot time. (A divisor
        // of 1 ms either way: the figures are kept every millisecond.)
        let step = if self.steps.iter().any(|s| s.1 > 100e6) {
            Duration::from_micros(4)
        } else {
            Duration::from_micros(100)
        };
        let end = Duration::from_secs(secs);
        let mut now = Duration::ZERO;
        while now < end {
            // The bottleneck serves its queue.
            while let Some(&(snap, at)) = queue.front() {
                let start = free.max(at);
                let done = start + Duration::from_secs_f64(MSS as f64 * 8.0 / self.rate_at(start));
                if done > now {
                    break;
                }
                queue.pop_front();
                queued_bytes -= MSS as u64;
                free = done;
                out.queue_delays.push(start - at);
                let arrived = random() >= self.loss;
                acks.push_back((done + self.delay * 2, snap, arrived));
            }
            // Feedback.
            let mut fed = false;
            while acks.front().is_some_and(|a| a.0 <= now) {
                let (_, snap, arrived) = acks.pop_front().unwrap();
                if arrived {
                    out.delivered += MSS as u64;
                    sampler.on_acked(now, MSS, &snap, true);
                } else {
                    sampler.on_lost(MSS);
                }
                sampler.leave_flight(MSS);
                fed = true;
            }
            if fed {
                let (sample, acked) = sampler.take();
                rate.on_feedback(now, 0, sample, acked, &sampler, None);
            }
            // The sender: paced, within the window.
            let (bps, _) = rate.pacing(|_| true);
            let window = rate.window(0).unwrap();
            while next_send <= now && sampler.in_flight() < window {
                let snap = sampler.on_sent(now, MSS);
                if queued_bytes + MSS as u64 <= self.queue {
                    queue.push_back((snap, now));
                    queued_bytes += MSS as u64;
                } else {
                    out.dropped_by_queue += 1;
                    acks.push_back((now + self.delay * 2 + 20 * MS, snap, false));
                }
                next_send = next_send.max(now.saturating_sub(step))
                    + Duration::from_secs_f64(MSS as f64 * 8.0 / bps as f64);
            }
            if now.as_micros().is_multiple_of(1000) {
                out.pacing.push(bps as f64);
                out.estimate.push(rate.path(0).estimate_bps as f64);
            }
            if now.as_micros().is_multiple_of(100_000) {
                let p = rate.path(0);
                out.trace += &format!(
                    "{:>6} ms pacing {:>9} est {:>9} {:?} rtt {:?} loss {:.3} q {}\n",
                    now.as_millis(),
                    bps,
                    p.estimate_bps,
                    p.phase,
                    p.min_rtt,
                    p.random_loss,
                    queued_bytes
                );
            }
            now += step;
        }
        out
    }
}

fn link(rate: f64, loss: f64) -> Link {
    Link {
        steps: vec![(Duration::ZERO, rate)],
        delay: 10 * MS,
        loss,
        queue: 150_000,
    }
}

#[test]
fn a_clean_link_is_filled_and_its_queue_stays_short() {
    let l = link(5e6, 0.0);
    let o = l.run(10);
    let share = o.delivered as f64 * 8.0 / (5e6 * 10.0);
    assert!(share > 0.95, "delivered {share:.3} of the link");
    assert!(o.p99_queue() < 40 * MS, "queue p99 {:?}", o.p99_queue());
}

#[test]
fn random_loss_is_not_read_as_congestion() {
    for loss in [0.1, 0.3] {
        let l = link(5e6, loss);
        let o = l.run(10);
        // After the first second the estimate never falls under 90 % of the link (at 30 %
        // loss it fell to 0.84 before samples counted what the link carried, `loss`).
        let low = o.estimate[1000..].iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            low >= 0.90 * 5e6,
            "loss {loss}: the estimate fell to {low:.0}\n{}",
            o.trace
        );
        let share = o.delivered as f64 * 8.0 / (5e6 * (1.0 - loss) * 10.0);
        assert!(share > 0.95, "loss {loss}: {share:.3} of the ceiling");
    }
}

#[test]
fn the_first_round_trips_find_the_bottleneck() {
    // Issue 37's range, 9.6 kb/s to 1 Gb/s, under `send`'s cap of 10 Gb/s. The estimate, not
    // the pacing: the first flight is paced at the cap, so "pacing at 90 % of the link" holds
    // from the first millisecond and says nothing (as this test once asked).
    for rate in [9.6e3, 64e3, 1e6, 5e6, 50e6, 1e9] {
        let l = link(rate, 0.0);
        // 90 % within 3 round trips (20 ms each) or 20 TPDUs' time, whichever is longer,
        // plus the train's own round trip.
        let tpdu_ms = MSS as f64 * 8.0 / rate * 1000.0;
        let rtt = 20.0 + tpdu_ms;
        let by_ms = (4.0 * rtt).max(20.0 * tpdu_ms) as usize;
        let o = l.run_capped(by_ms as u64 / 1000 + 2, crate::DEFAULT_RATE_CAP_BPS);
        let reached = o
            .estimate
            .iter()
            .position(|&e| e >= 0.9 * rate)
            .unwrap_or(usize::MAX);
        assert!(
            reached <= by_ms,
            "{rate}: the estimate at 90 % after {reached} ms, allowed {by_ms}\n{}",
            o.trace
        );
        // And it stays there after the first second (the wording: a start that
        // overfills the queue may cut once, as at 1 Gb/s, to 0.67 of the link at 205 ms):
        // the estimate is the link's, not the first flight's burst.
        let from = reached.max(1000);
        let after = o.estimate[from..].iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            after >= 0.9 * rate,
            "{rate}: the estimate fell to {after:.0} after {from} ms\n{}",
            o.trace
        );
    }
}

#[test]
fn a_step_down_is_followed_within_round_trips_and_a_step_up_found() {
    let l = Link {
        steps: vec![
            (Duration::ZERO, 5e6),
            (Duration::from_secs(4), 1e6),
            (Duration::from_secs(8), 2.5e6),
            (Duration::from_secs(12), 5e6),
        ],
        delay: 10 * MS,
        loss: 0.0,
        queue: 150_000,
    };
    let o = l.run(16);
    // Within 300 ms of the step down the pacing is at most 1.3 × the new rate.
    let after_down = o.pacing[4300..8000].iter().cloned().fold(0.0, f64::max);
    assert!(
        after_down <= 1.3e6 * 1.25,
        "after the step down: {after_down:.0}\n{}",
        o.trace
    );
    // Within 1.5 s of each step up the pacing reaches 90 % of the new rate.
    assert!(o.pacing[9500..12000].iter().any(|&p| p >= 0.9 * 2.5e6));
    assert!(o.pacing[13500..16000].iter().any(|&p| p >= 0.9 * 5e6));
    // Capacity: 4 s × 5 + 4 × 1 + 4 × 2.5 + 4 × 5 Mb/s.
    let capacity = (4.0 * 5e6 + 4.0 * 1e6 + 4.0 * 2.5e6 + 4.0 * 5e6) / 8.0;
    let share = o.delivered as f64 / capacity;
    assert!(share > 0.93, "{share:.3} of the trace's capacity");
    assert!(o.p99_queue() < 100 * MS, "queue p99 {:?}", o.p99_queue());
}

#[test]
fn a_fixed_rate_is_the_rate_whatever_the_feedback() {
    let mut r = RateState::new(RateControl::Fixed, 2_000_000, 1500, 28, true, 0);
    assert_eq!(r.pacing(|_| true), (2_000_000, RateReason::Fixed));
    assert_eq!(r.window(0), None);
    r.set_cap(3_000_000);
    assert_eq!(r.pacing(|_| true), (3_000_000, RateReason::Fixed));
}

#[test]
fn a_mode_without_acknowledgements_paces_at_the_cap() {
    let r = RateState::new(RateControl::Discover, 2_000_000, 1500, 28, false, 0);
    assert!(!r.discovers());
    assert_eq!(r.pacing(|_| true), (2_000_000, RateReason::Fixed));
}

#[test]
fn lying_feedback_cannot_raise_the_rate_past_the_cap() {
    let mut r = RateState::new(RateControl::Discover, 2_000_000, 1500, 28, true, 0);
    let mut s = DeliverySampler::default();
    // A peer that acknowledges a huge amount at once, again and again.
    for i in 0..1000u64 {
        let now = Duration::from_micros(i * 10);
        let snap = s.on_sent(now, 1400);
        s.on_acked(now + Duration::from_micros(1), 1400, &snap, true);
        let (sample, acked) = s.take();
        r.on_feedback(now, 0, sample, acked, &s, None);
    }
    let (bps, reason) = r.pacing(|_| true);
    assert_eq!((bps, reason), (2_000_000, RateReason::Capped));
}

/// A 2.4 kb/s satellite channel, 650 ms each way: the first flight (ten TPDUs at the cap) is
/// 47 s of queue on its own. Growth must stop in the first flight's round, when that queue
/// has stood a round trip, and the minimum round trip must not age out behind the queue:
/// with BBR's 10 s it rose with the queue round trip after round trip, and the estimate never
/// met a standing queue (the engine then resent into a queue of 80 s and never finished).
#[test]
fn a_satellite_channel_is_found_without_doubling_into_the_first_flights_queue() {
    let l = Link {
        steps: vec![(Duration::ZERO, 2400.0)],
        delay: 650 * MS,
        loss: 0.0,
        queue: 150_000,
    };
    let secs = 400;
    let o = l.run(secs);
    let share = o.delivered as f64 * 8.0 / (2400.0 * secs as f64);
    let est = *o.estimate.last().unwrap();
    let p99 = o.p99_queue();
    eprintln!("2.4 kb/s: share {share:.3}, estimate {est:.0}, queue p99 {p99:?}");
    assert!(share > 0.9, "delivered {share:.3} of the link\n{}", o.trace);
    assert!(
        (0.9 * 2400.0..=1.15 * 2400.0).contains(&est),
        "estimate {est:.0}\n{}",
        o.trace
    );
    // Past the first flight's own queue, the queue is that of a TPDU or two.
    let late: Vec<Duration> = o.queue_delays[o.queue_delays.len() / 2..].to_vec();
    let worst = late.iter().max().copied().unwrap_or_default();
    assert!(
        worst < Duration::from_secs(20),
        "queue {worst:?} in the second half\n{}",
        o.trace
    );
}

/// A path whose acknowledgements for a long while cover only retransmissions (after an
/// outage) has no round trip of its own samples (Karn): the echoed timestamps stand in once
/// the drought has lasted `DROUGHT_RTTS` minimum round trips, so a standing queue still
/// shows. Fed the same without echoes, the model keeps its estimate into the queue.
#[test]
fn in_a_drought_of_first_transmissions_the_echoes_show_the_queue() {
    let feed = |echo: Option<Duration>| {
        let mut m = model::RateModel::new(MSS, 1);
        let rate = 100_000.0;
        let mut delivered = 0u64;
        let sample = |now: Duration, delivered: u64, rtt: Option<Duration>| RateSample {
            rate,
            carried_rate: rate,
            delivered: MSS as u64,
            lost: 0,
            rtt,
            prior_delivered: delivered.saturating_sub(100_000),
            app_limited: false,
            sent_at: now.saturating_sub(Duration::from_secs(1)),
        };
        let totals = |delivered: u64| model::Totals {
            delivered,
            lost: 0,
            in_flight: 100_000,
        };
        // 60 s at the rate with a 1 s round trip and no queue: growth, drain, cruise.
        let mut now = Duration::ZERO;
        while now < Duration::from_secs(60) {
            now += Duration::from_millis(14);
            delivered += MSS as u64;
            let s = sample(now, delivered, Some(Duration::from_secs(1)));
            m.on_feedback(now, Some(s), MSS as u64, totals(delivered), None);
        }
        let before = m.bandwidth().unwrap();
        // Then 30 s of acknowledged retransmissions, delivered at half the rate, the echoes
        // saying the round trip stands at 10 s.
        while now < Duration::from_secs(90) {
            now += Duration::from_millis(28);
            delivered += MSS as u64;
            let mut s = sample(now, delivered, None);
            s.rate = rate / 2.0;
            m.on_feedback(now, Some(s), MSS as u64, totals(delivered), echo);
        }
        (before, m.bandwidth().unwrap())
    };
    let (before, with_echo) = feed(Some(Duration::from_secs(10)));
    assert!(before > 90_000.0, "{before}");
    assert!(with_echo < 0.6 * before, "echoes: {with_echo} of {before}");
    let (_, without) = feed(None);
    assert!(
        without > 0.9 * before,
        "no delay signal: {without} of {before}"
    );
}
