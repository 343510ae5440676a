//! The rate model of one path: how fast the path's bottleneck delivers, discovered from the
//! acknowledgements, blind to corruption and random loss, guarded by delay.
//!
//! It follows BBRv1 (Linux `tcp_bbr.c`): a windowed maximum of the delivery rate is the
//! bottleneck's rate, a windowed minimum of the round trip its propagation delay, and the
//! sender paces at a gain times the rate: fast growth at the start, a drain of the queue that
//! growth built, then a cruise that probes 25 % above the estimate for one round trip in
//! eight and drains below it for the next. Where it departs from BBRv1, for AeroTP's links
//! (docs/rate.md has the comparison with PCC Vivace, Copa and Sprout that led here):
//!
//! - **Loss is not congestion.** BBRv1's rate samples count only what arrived, so at a loss
//!   rate `p` it paces at `(1 - p)` of the link and, past ~20 % loss, its 1.25 probe no
//!   longer makes up for it. Here a sample is scaled by `1 / (1 - p)`, `p` being the loss
//!   measured over round trips that built no queue and were not probing: the departure rate
//!   of the bottleneck. A TPDU the peer reports corrupted arrived, and counts as delivered.
//! - **Delay says the link is full.** A round trip whose smallest sample stands more than a
//!   threshold above the path's minimum had a standing queue. If the rate delivered in such a
//!   round is under nine tenths of the estimate, the link has slowed (a modem stepped down, a
//!   TDMA allocation shrank): the estimate drops to what was delivered at once, and the queue
//!   is drained — within about two round trips instead of BBRv1's ten.
//! - **A link that speeds up is found fast.** A probe that finds a fifth more rate goes back
//!   to the start-up growth (doubling per round trip) instead of 25 % per eight round trips.
//! - **The first flight is a packet train**: its acknowledgements' dispersion gives the
//!   bottleneck's rate one round trip after the start (see `sampler`).

use super::filter::{WindowedMax, WindowedMin};
use super::loss::{RandomLoss, MAX_RANDOM_LOSS};
use super::sampler::RateSample;
use std::time::Duration;

/// TPDUs in the first flight, before any acknowledgement: its acknowledgements' dispersion
/// measures the bottleneck (a packet train). Ten, as TCP's initial window (RFC 6928): long
/// enough to measure, short enough that on a 9.6 kb/s link it is the "20 datagrams'
/// serialisation" the first estimate may take.
pub const TRAIN_TPDUS: u64 = 10;

/// Round trips the bottleneck-rate maximum is kept: two cruise cycles (BBR keeps 10, a
/// little more than one; at 30 % loss a cycle without a clean probe let it fall to the
/// drain phase's rate).
const BW_WINDOW_ROUNDS: u64 = 16;
/// How long a minimum round trip is trusted (BBR's 10 s), and at least this many of it: on a
/// 2.4 kb/s link one round trip is 6 s or more (a TPDU's serialisation is 5 s), and with 10 s
/// the minimum aged out behind the first flight's queue and rose with it, round trip after
/// round trip, so that queue never showed (60 kB took 426 s, 33 needless resends).
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
const MIN_RTT_WINDOW_RTTS: u32 = 16;
/// Pacing gain while growing: the rate doubles per round trip.
const STARTUP_GAIN: f64 = 2.0;
/// Growth below this factor per round trip is a plateau.
const PLATEAU_GROWTH: f64 = 1.25;
/// Round trips on a plateau before growth stops.
const PLATEAU_ROUNDS: u32 = 2;
/// Pacing gain while draining a queue the model built.
const DRAIN_GAIN: f64 = 0.5;
/// The cruise's gains, one round trip each: probe, drain what the probe queued, hold.
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// A probe that finds this much more rate goes back to growing.
const REGROW: f64 = 1.2;
/// A queue that stands a round trip while less than this share of the estimate is
/// delivered says the link slowed (a sample's noise at 30 % loss stays above it).
const STEP_DOWN: f64 = 0.8;
/// A queue that stands `QUEUE_RTTS_LIMIT` round trips at close to the estimate: the
/// estimate is cut to this share of what was delivered.
const LINGER_CUT: f64 = 0.95;
/// Minimum round trips a queue may stand, at a rate close to the estimate, before the
/// estimate is cut to nine tenths of what was delivered (a probe's queue lasts one).
const QUEUE_RTTS_LIMIT: u32 = 3;
/// Smallest queueing delay taken for a standing queue (timer and scheduling noise).
const MIN_QUEUE_THRESHOLD: Duration = Duration::from_millis(5);
/// Most of the round trip's quarter taken for what a probe queues. Each connection judging a
/// shared queue by its own round trip was unfair to the short ones: a 640 ms connection
/// took 160 ms of queue for its probe's and kept it standing, and the 60 ms ones, whose
/// threshold was 15 ms, stepped down under it (four connections on one 5 Mb/s bottleneck,
/// round trips 60 to 640 ms: Jain 0.30; with the quarter at most 25 ms, 0.78; 12 ms gave
/// 0.80 but leaves less room for a link's own jitter; `crates/proto/tests/fairness.rs`).
const MAX_PROBE_QUEUE: Duration = Duration::from_millis(25);

/// Random loss of the link from which a sample counts what the path carried rather than
/// what arrived (`RateSample::carried_rate`).
const CARRIED_LOSS: f64 = 0.05;

/// Minimum round trips without a first transmission's round-trip sample after which the
/// echoed timestamps stand in as the delay signal (`RateModel::delay_sample`): a cruise
/// cycle's length, so ordinary loss recovery does not change what the samples say.
const DROUGHT_RTTS: u32 = 8;

/// TPDUs a probe sends beyond the estimate, at least: less cannot show in a sample. (Two made
/// the probes on a 1 Mb/s link twice as long, their queue p99 96 ms, and the estimate at 30 %
/// loss noisier.)
const PROBE_TPDUS: u64 = 1;
/// Longest a probe lasts when the link is so slow that `PROBE_TPDUS` would take longer.
const MAX_PROBE_TIME: Duration = Duration::from_secs(2);

/// Where the model is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatePhase {
    /// No sample yet: the first flight is out, its acknowledgements awaited.
    Train,
    /// Growing: doubling per round trip until the rate stops rising or a queue stands.
    Growth,
    /// Draining the queue growth or a step down left.
    Drain,
    /// Pacing at the estimate, probing above it for one round trip in eight.
    Cruise,
}

/// Totals of the path's sender at a feedback (`sampler::DeliverySampler`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    pub delivered: u64,
    pub lost: u64,
    pub in_flight: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct RateModel {
    /// Bytes of a full TPDU's body (the unit of the bounds).
    mss: u64,
    phase: RatePhase,
    /// Bottleneck departure rate, bytes/s of TPDU bodies, over the last rounds.
    bw: WindowedMax,
    /// Smallest round trip over `MIN_RTT_WINDOW`, µs.
    min_rtt: WindowedMin,
    /// Bytes acknowledged by one feedback TPDU, largest over the last rounds: how bursty the
    /// acknowledgements are (the window must cover it).
    aggregation: WindowedMax,
    round: u64,
    /// A round ends when a transmission sent after it began is acknowledged.
    round_end_delivered: u64,
    /// Totals when the round began.
    round_start: Totals,
    /// Since when every round-trip sample stood above the minimum by more than the queue
    /// threshold, and the largest rate delivered since.
    queue_since: Option<Duration>,
    queue_max_bw: f64,
    /// The gain went above 1 during this round or the previous one (its losses may be ours).
    round_probed: bool,
    prev_round_probed: bool,
    /// Random (non-congestive) loss.
    loss: RandomLoss,
    full_bw: f64,
    plateau_rounds: u32,
    cycle_index: usize,
    cycle_since: Duration,
    /// The estimate when the current probe began.
    bw_at_probe: f64,
    /// When the last round-trip sample of a first transmission came (Karn's).
    last_rtt_at: Option<Duration>,
    /// The model reached its cruise once: the start (growth and its drain) is over.
    cruised: bool,
}

impl RateModel {
    /// A model for a path that carries TPDU bodies of up to `mss` bytes; `seed` places the
    /// cruise's probe (different connections probe at different times).
    pub fn new(mss: usize, seed: u64) -> RateModel {
        RateModel {
            mss: mss.max(1) as u64,
            phase: RatePhase::Train,
            bw: WindowedMax::new(BW_WINDOW_ROUNDS),
            min_rtt: WindowedMin::new(MIN_RTT_WINDOW.as_micros() as u64),
            aggregation: WindowedMax::new(BW_WINDOW_ROUNDS),
            round: 0,
            round_end_delivered: 0,
            round_start: Totals::default(),
            queue_since: None,
            queue_max_bw: 0.0,
            last_rtt_at: None,
            cruised: false,
            round_probed: true,
            prev_round_probed: true,
            loss: RandomLoss::default(),
            full_bw: 0.0,
            plateau_rounds: 0,
            cycle_index: 2 + (seed % 6) as usize,
            cycle_since: Duration::ZERO,
            bw_at_probe: 0.0,
        }
    }

    pub fn phase(&self) -> RatePhase {
        self.phase
    }

    /// The bottleneck's estimated rate, bytes/s of TPDU bodies; `None` before a sample.
    pub fn bandwidth(&self) -> Option<f64> {
        self.bw.get()
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
            .get()
            .map(|us| Duration::from_micros(us as u64))
    }

    /// The loss fraction taken for random (not caused by a queue).
    pub fn random_loss(&self) -> f64 {
        self.loss.share()
    }

    /// The pacing gain in force.
    pub fn gain(&self) -> f64 {
        match self.phase {
            RatePhase::Train => 1.0,
            RatePhase::Growth => STARTUP_GAIN,
            RatePhase::Drain => DRAIN_GAIN,
            RatePhase::Cruise => CYCLE[self.cycle_index],
        }
    }

    /// The rate to pace at, bytes/s of TPDU bodies; `None` before the first sample.
    pub fn pacing_rate(&self) -> Option<f64> {
        Some(self.bw.get()? * self.gain())
    }

    /// Most bytes of TPDU bodies in flight: before a sample the first flight (`TRAIN_TPDUS`),
    /// then twice the bandwidth-delay product plus the acknowledgements' burstiness (BBR's
    /// window: it stops a sender whose acknowledgements stopped from pacing into the void).
    pub fn window(&self) -> u64 {
        let (Some(bw), Some(rtt)) = (self.bw.get(), self.min_rtt()) else {
            return TRAIN_TPDUS * self.mss;
        };
        let bdp = bw * rtt.as_secs_f64();
        let gain = if self.phase == RatePhase::Growth {
            STARTUP_GAIN + 0.5
        } else {
            2.0
        };
        let burst = self.aggregation.get().unwrap_or(0.0) * 2.0;
        // TPDUs lost at random stay in flight until an acknowledgement shows them lost.
        let unseen_losses = 1.0 / (1.0 - self.loss.link_share());
        (((gain * bdp + burst) * unseen_losses) as u64).max(4 * self.mss)
    }

    /// Something outside says the path may carry more now (its radio stepped up): grow
    /// again from the estimate at once rather than wait for the cruise's next probe. Before
    /// the first sample, and while growing, nothing changes.
    pub fn probe_now(&mut self, now: Duration) {
        if matches!(self.phase, RatePhase::Drain | RatePhase::Cruise) {
            self.phase = RatePhase::Growth;
            self.full_bw = self.bw.get().unwrap_or(0.0);
            self.plateau_rounds = 0;
            self.round_probed = true;
            self.cycle_since = now;
        }
    }

    /// Queueing delay taken for a standing queue: at least `MIN_QUEUE_THRESHOLD`, two and a
    /// half TPDU times at the estimate (one TPDU queued behind another is no standing queue
    /// on a slow link), and a quarter of the round trip (what one probe queues) up to
    /// `MAX_PROBE_QUEUE`.
    fn queue_threshold(&self) -> Duration {
        let rtt = self.min_rtt().unwrap_or_default();
        let tpdu = self
            .bw
            .get()
            .filter(|&b| b > 0.0)
            .map_or(Duration::ZERO, |b| {
                Duration::from_secs_f64((2.5 * self.mss as f64 / b).min(60.0))
            });
        MIN_QUEUE_THRESHOLD
            .max(tpdu)
            .max((rtt / 4).min(MAX_PROBE_QUEUE))
    }

    /// Feedback arrived: its sample (if it gave one), the bytes it acknowledged, the path's
    /// totals after it and the round trip of the TPDU whose timestamp the peer echoed.
    ///
    /// The sample's own round trip exists only for a TPDU's first transmission (Karn); the
    /// echoed timestamp names the copy that arrived, so it measures retransmissions too, and
    /// stands in when the sample has none. After an Iridium call drop every TPDU the
    /// acknowledgements covered for minutes was a retransmission: the model had no delay
    /// signal, paced 1.3 x the link at growth's gain for 200 s, and the queue grew to a
    /// 300 s round trip (2.4 kb/s, 1.8 s jitter, call drops 45-50 s).
    pub fn on_feedback(
        &mut self,
        now: Duration,
        sample: Option<RateSample>,
        acked: u64,
        t: Totals,
        echo_rtt: Option<Duration>,
    ) {
        if acked > 0 {
            self.aggregation.update(self.round, acked as f64);
        }
        let Some(s) = sample else {
            self.advance_cycle(now, t);
            return;
        };
        let rtt = self.delay_sample(now, s.rtt, echo_rtt);
        if let Some(rtt) = s.rtt {
            self.loss.on_rtt(rtt);
            self.min_rtt
                .update(now.as_micros() as u64, rtt.as_micros() as f64);
            let window =
                MIN_RTT_WINDOW.max(self.min_rtt().unwrap_or_default() * MIN_RTT_WINDOW_RTTS);
            self.min_rtt.set_window(window.as_micros() as u64);
        }
        let bw = self.departure_rate(&s);
        if s.prior_delivered >= self.round_end_delivered {
            self.end_round(t);
        }
        if !s.app_limited || self.bw.get().is_none_or(|b| bw > b) {
            self.bw.update(self.round, bw);
        }
        if self.phase == RatePhase::Train {
            self.phase = RatePhase::Growth;
            self.full_bw = bw;
            self.round_probed = true;
        }
        if let Some(rtt) = rtt {
            self.watch_queue(now, rtt, bw);
        }
        self.advance_cycle(now, t);
    }

    /// The round trip that feeds the delay signal: the sample's own (a first transmission's,
    /// Karn), or the echoed timestamp's once no such sample came for `DROUGHT_RTTS` minimum
    /// round trips (every TPDU acknowledged was a retransmission). Only then: taking every
    /// echo beside the samples changed how four connections with round trips 60-640 ms share
    /// one queue (Jain 0.918 to 0.824; with a drought of one round trip 0.732;
    /// `crates/proto/tests/fairness.rs`).
    fn delay_sample(
        &mut self,
        now: Duration,
        own: Option<Duration>,
        echo: Option<Duration>,
    ) -> Option<Duration> {
        if own.is_some() {
            self.last_rtt_at = Some(now);
            return own;
        }
        let drought = match (self.last_rtt_at, self.min_rtt()) {
            (Some(at), Some(min)) => now.saturating_sub(at) > min * DROUGHT_RTTS,
            _ => false,
        };
        echo.filter(|_| drought)
    }

    /// The link loses so much at random (`CARRIED_LOSS` or more, measured where no queue
    /// stood) that which TPDUs it lost is noise to the samples and to the delay signal.
    fn high_random_loss(&self) -> bool {
        self.loss.link_share() >= CARRIED_LOSS
    }

    /// The rate at which the bottleneck sent on what it was given: with no queue standing,
    /// what arrived plus what was lost over the sample (the link carried the lost TPDUs too:
    /// corruption and fading strike after the queue), as long as the loss is one the link
    /// could cause; with a queue, whose losses may be its drops, what arrived scaled by the
    /// random loss measured when none stood. Counting the sample's own losses keeps their
    /// noise out: at 10 % loss a round trip's arrivals vary by ±7 %, and the maximum of
    /// scaled samples stood 10 % above the link.
    fn departure_rate(&self, s: &RateSample) -> f64 {
        if self.high_random_loss() && s.rtt.is_some() {
            let link_loss = self.loss.link_share();
            // The link loses so much at random that which TPDUs it lost is the noise: count
            // what it carried instead, up to what a loss a little above the link's could
            // explain (more is a queue's drops).
            let q = (link_loss * 1.25 + 0.05).min(MAX_RANDOM_LOSS);
            return s.carried_rate.min(s.rate / (1.0 - q));
        }
        let queued = match (s.rtt, self.min_rtt()) {
            (Some(rtt), Some(min)) => rtt > min + self.queue_threshold(),
            _ => self.queue_since.is_some(),
        };
        let total = s.delivered + s.lost;
        if !queued && s.delivered > 0 && (s.lost as f64) <= MAX_RANDOM_LOSS * total as f64 {
            s.rate * total as f64 / s.delivered as f64
        } else {
            s.rate / (1.0 - self.loss.share())
        }
    }

    /// The delay signal: a queue that stands is one this sender built (the link is full), and
    /// one that stands while less than the estimate is delivered says the link slowed.
    fn watch_queue(&mut self, now: Duration, rtt: Duration, bw: f64) {
        let Some(min) = self.min_rtt() else { return };
        let threshold = self.queue_threshold();
        if rtt <= min + threshold {
            self.queue_since = None;
            if self.phase == RatePhase::Drain && rtt <= min + threshold / 2 {
                self.enter_cruise(now);
            }
            return;
        }
        let since = *self.queue_since.get_or_insert(now);
        if since == now {
            self.queue_max_bw = 0.0;
        }
        self.queue_max_bw = self.queue_max_bw.max(bw);
        let stood = now.saturating_sub(since);
        let est = self.bw.get().unwrap_or(0.0);
        match self.phase {
            RatePhase::Train => {}
            RatePhase::Growth => {
                // Growth filled the link: the queue is the growth's own. Also in the first
                // flight's round: a queue that stands a whole round trip then means the
                // first flight alone overfilled the path, so its dispersion measured the
                // bottleneck and doubling only adds queue (2.4 kb/s, 650 ms each way: 60 kB
                // took 364 s waiting for a second round behind that queue, 276 s so).
                if stood >= min {
                    self.phase = RatePhase::Drain;
                }
            }
            RatePhase::Drain | RatePhase::Cruise => {
                // Where the link loses much at random, a few round trips of bad luck look
                // like a slower link: the evidence must stand twice as long.
                let high_loss = self.high_random_loss();
                let rtts = if high_loss { 4 } else { 2 };
                let slowed = stood >= min * rtts && self.queue_max_bw < est * STEP_DOWN;
                let lingering = stood >= min * QUEUE_RTTS_LIMIT + threshold;
                if slowed || lingering {
                    // The link carries less than the estimate: believe what it delivered.
                    let to = if slowed {
                        self.queue_max_bw
                    } else if high_loss {
                        // A few samples' maximum is noise at such loss: trim the estimate.
                        est * LINGER_CUT
                    } else {
                        self.queue_max_bw.min(est) * LINGER_CUT
                    };
                    self.bw.reset(self.round, to);
                    self.queue_since = None;
                    self.phase = RatePhase::Drain;
                }
            }
        }
    }

    fn end_round(&mut self, t: Totals) {
        if self.phase == RatePhase::Growth {
            let bw = self.bw.get().unwrap_or(0.0);
            if bw >= self.full_bw * PLATEAU_GROWTH {
                self.full_bw = bw;
                self.plateau_rounds = 0;
            } else {
                self.plateau_rounds += 1;
            }
            if self.plateau_rounds >= PLATEAU_ROUNDS {
                self.phase = RatePhase::Drain;
            }
        }
        self.measure_loss(t);
        self.round += 1;
        self.round_end_delivered = t.delivered;
        self.round_start = t;
        self.prev_round_probed = self.round_probed;
        self.round_probed = self.gain() > 1.0;
    }

    /// The loss of the rounds that neither queued nor probed, once they carried enough:
    /// what the link loses whatever the rate (corruption beyond the FEC, fading), not what a
    /// queue dropped (`loss`).
    fn measure_loss(&mut self, t: Totals) {
        let clean = self.queue_since.is_none() && !self.round_probed && !self.prev_round_probed;
        let threshold = self.queue_threshold();
        self.loss.end_round(
            t.delivered.saturating_sub(self.round_start.delivered),
            t.lost.saturating_sub(self.round_start.lost),
            clean,
            threshold,
            self.mss,
        );
    }

    fn enter_cruise(&mut self, now: Duration) {
        self.phase = RatePhase::Cruise;
        self.cruised = true;
        self.cycle_since = now;
        // Start on a hold phase: the drain just emptied the queue.
        if CYCLE[self.cycle_index] != 1.0 {
            self.cycle_index = 2;
        }
    }

    /// Moves the cruise to its next phase after a round trip (the drain phase ends early
    /// once what is in flight fits the bandwidth-delay product); leaves the drain once
    /// what is in flight fits it.
    fn advance_cycle(&mut self, now: Duration, t: Totals) {
        let (Some(bw), Some(rtt)) = (self.bw.get(), self.min_rtt()) else {
            return;
        };
        // What is in flight once the queue is gone: the bandwidth-delay product, plus the
        // TPDUs lost at random that no acknowledgement has shown lost yet.
        let bdp = (bw * rtt.as_secs_f64() / (1.0 - self.loss.link_share())) as u64;
        match self.phase {
            RatePhase::Drain if t.in_flight <= bdp => self.enter_cruise(now),
            RatePhase::Cruise => {
                let elapsed = now.saturating_sub(self.cycle_since);
                let gain = CYCLE[self.cycle_index];
                // A probe lasts a round trip, and at least as long as it takes to send
                // `PROBE_TPDUS` TPDU more than the estimate: on a slow link one round trip at
                // 1.25 carries less than one TPDU more, which no sample can show, and after a
                // step down to 1 Mb/s the estimate crept back up by 5 % a second (rate steps
                // 5 -> 1 -> 2.5 -> 5 Mb/s: 1.079 x the ideal time; 1.038 with this).
                let len = if gain > 1.0 {
                    let extra = Duration::from_secs_f64(
                        (PROBE_TPDUS * self.mss) as f64 / ((gain - 1.0) * bw),
                    );
                    rtt.max(extra.min(MAX_PROBE_TIME))
                } else {
                    rtt
                };
                let done = elapsed >= len && (gain != 0.75 || t.in_flight <= bdp)
                    || (gain == 0.75 && t.in_flight <= bdp && elapsed >= rtt / 2);
                if !done {
                    return;
                }
                if gain > 1.0 && bw >= self.bw_at_probe * REGROW && self.bw_at_probe > 0.0 {
                    // The probe found much more: grow again instead of 25 % per cycle.
                    self.phase = RatePhase::Growth;
                    self.full_bw = bw;
                    self.plateau_rounds = 0;
                    return;
                }
                self.cycle_index = (self.cycle_index + 1) % CYCLE.len();
                self.cycle_since = now;
                if CYCLE[self.cycle_index] > 1.0 {
                    self.bw_at_probe = bw;
                    self.round_probed = true;
                }
            }
            _ => {}
        }
    }
}
