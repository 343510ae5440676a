//! The connection's sending rate: fixed (the papers' open loop, for a dedicated allocation)
//! or discovered per path from the acknowledgements (`model`), capped by the configured rate,
//! a radio's word or the endpoint's link share. The pacer runs at what this says.

use crate::codec;
use std::time::Duration;

mod filter;
mod loss;
mod model;
mod sampler;

use model::{RateModel, Totals};
pub use model::{RatePhase, TRAIN_TPDUS};
pub use sampler::RateSample;
pub(crate) use sampler::{DeliverySampler, SendSnapshot};

/// The cap of a discovered rate when the user gives none: above any radio link, so the link
/// alone sets the rate.
pub const DEFAULT_RATE_CAP_BPS: u64 = 10_000_000_000;

/// The engine's lowest pacing rate, b/s (`ConnectionConfig::validate` accepts nothing lower).
pub const MIN_RATE_BPS: u64 = 1000;

/// How the sending rate is chosen (`ConnectionConfig::rate_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateControl {
    /// Pace at `rate_bps`, whatever the link does (the papers' open loop).
    #[default]
    Fixed,
    /// Discover each path's rate; `rate_bps` is the cap. Only modes with selective
    /// acknowledgements (reliable, hybrid-nack-mack) can measure what each TPDU delivered;
    /// the others pace at the cap (near-reliable's sparse cumulative ACKs stall at the first
    /// hole, and measured nothing but the hole: at 10 % loss it fell to 41 % of the link).
    Discover,
}

/// Why the rate in force is what it is (statistics, logs, summaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateReason {
    /// The configured rate (`RateControl::Fixed`, or a mode that cannot measure).
    #[default]
    Fixed,
    /// Discovered from the acknowledgements.
    Discovered,
    /// The discovered rate is above the cap: the cap.
    Capped,
    /// Not measured yet: the first flight goes at the cap.
    Starting,
    /// A radio's word (DLEP Current Data Rate) is what limits: below the cap and the
    /// discovered rate, or the starting point before a measurement.
    Radio,
}

impl RateReason {
    pub fn name(self) -> &'static str {
        match self {
            RateReason::Fixed => "fixed",
            RateReason::Discovered => "discovered",
            RateReason::Capped => "capped",
            RateReason::Starting => "starting",
            RateReason::Radio => "radio",
        }
    }
}

/// What the rate control says of one path (`PathStats::rate`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathRate {
    /// The bottleneck's estimated rate, b/s on the link (0 before a sample).
    pub estimate_bps: u64,
    /// What the path is paced at, b/s on the link.
    pub pacing_bps: u64,
    pub min_rtt: Duration,
    /// Loss fraction taken for random (corruption, fading), not congestion.
    pub random_loss: f64,
    pub phase: Option<RatePhase>,
    /// What the path's radio says it carries now (DLEP Current Data Rate), b/s.
    pub radio_bps: Option<u64>,
}

/// The rate control of one connection.
#[derive(Debug, Clone)]
pub(crate) struct RateState {
    control: RateControl,
    /// `rate_bps`: the fixed rate, or the cap.
    cap_bps: u64,
    /// Link bytes per TPDU-body byte sent (headers, parity, repairs, feedback, IP and UDP):
    /// converts the models' body rates to the pacer's link rate.
    link_per_body: f64,
    /// Totals at the last measurement of `link_per_body`.
    link_mark: u64,
    body_mark: u64,
    mss: usize,
    seed: u64,
    models: Vec<RateModel>,
    /// Per path, what its radio says it carries now, b/s: a cap on the path's rate that
    /// applies at once, and the starting point before a measurement.
    radio: Vec<Option<u64>>,
}

impl RateState {
    /// `acknowledged`: whether the mode has selective acknowledgements to measure from;
    /// `overhead`: bytes below AeroTP per datagram (IP and UDP).
    pub fn new(
        control: RateControl,
        rate_bps: u64,
        mtu: usize,
        overhead: usize,
        acknowledged: bool,
        seed: u64,
    ) -> RateState {
        let control = if acknowledged {
            control
        } else {
            RateControl::Fixed
        };
        let mss = codec::max_body(mtu, 0);
        RateState {
            control,
            cap_bps: rate_bps,
            link_per_body: (mtu + overhead) as f64 / mss.max(1) as f64,
            link_mark: 0,
            body_mark: 0,
            mss,
            seed,
            models: vec![RateModel::new(mss, seed)],
            radio: Vec::new(),
        }
    }

    pub fn discovers(&self) -> bool {
        self.control == RateControl::Discover
    }

    pub fn cap(&self) -> u64 {
        self.cap_bps
    }

    pub fn set_cap(&mut self, rate_bps: u64) {
        self.cap_bps = rate_bps.max(MIN_RATE_BPS);
    }

    /// Path `path`'s radio says it carries `rate_bps` now (`None`: it no longer says). A step
    /// down holds at once (the rate is capped by it); with discovery, a step up sends the
    /// model probing for the new rate at once instead of at its next cruise probe.
    pub fn set_radio_rate(&mut self, now: Duration, path: usize, rate_bps: Option<u64>) {
        if self.radio.len() <= path {
            self.radio.resize(path + 1, None);
        }
        let rate_bps = rate_bps.map(|r| r.max(MIN_RATE_BPS));
        let before = std::mem::replace(&mut self.radio[path], rate_bps);
        let stepped_up = match (before, rate_bps) {
            (Some(b), Some(r)) => r > b,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if self.discovers() && stepped_up {
            self.model(path).probe_now(now);
        }
    }

    /// What path `path`'s radio says it carries, b/s.
    pub fn radio_rate(&self, path: usize) -> Option<u64> {
        self.radio.get(path).copied().flatten()
    }

    /// With a fixed rate, what the radios of the paths `up` says are up carry together,
    /// when every one of them has said: the pacer never runs above it.
    pub fn radio_total(&self, up: impl Fn(usize) -> bool) -> Option<u64> {
        let mut sum = 0u64;
        let mut any = false;
        for i in (0..self.models.len().max(self.radio.len())).filter(|&i| up(i)) {
            sum = sum.saturating_add(self.radio_rate(i)?);
            any = true;
        }
        any.then_some(sum)
    }

    fn model(&mut self, path: usize) -> &mut RateModel {
        while self.models.len() <= path {
            let seed = self.seed.wrapping_add(self.models.len() as u64);
            self.models.push(RateModel::new(self.mss, seed));
        }
        &mut self.models[path]
    }

    /// Feedback for `path`: its sample, the bytes it acknowledged, the sender's totals and
    /// the round trip of the TPDU whose timestamp the peer echoed, if it is this path's.
    pub fn on_feedback(
        &mut self,
        now: Duration,
        path: usize,
        sample: Option<RateSample>,
        acked: u64,
        sampler: &DeliverySampler,
        echo_rtt: Option<Duration>,
    ) {
        if !self.discovers() {
            return;
        }
        let t = Totals {
            delivered: sampler.delivered(),
            lost: sampler.lost(),
            in_flight: sampler.in_flight(),
        };
        self.model(path)
            .on_feedback(now, sample, acked, t, echo_rtt);
    }

    /// The connection's totals of link bytes (everything it sent, with IP and UDP headers)
    /// and TPDU-body bytes of data transmissions: once enough body went since the last
    /// measurement, their ratio moves the conversion a quarter of the way.
    pub fn on_link_totals(&mut self, link_total: u64, body_total: u64) {
        let link = link_total.saturating_sub(self.link_mark);
        let body = body_total.saturating_sub(self.body_mark);
        if body < 16 * self.mss as u64 {
            return;
        }
        (self.link_mark, self.body_mark) = (link_total, body_total);
        let r = (link as f64 / body as f64).clamp(1.0, 4.0);
        self.link_per_body += 0.25 * (r - self.link_per_body);
    }

    /// A body rate (bytes/s) as a rate on the link (b/s).
    fn link_bps(&self, body_rate: f64) -> f64 {
        body_rate * 8.0 * self.link_per_body
    }

    /// The rate of `path` on the link, b/s, before the cap: the model's, under the radio's
    /// word; the radio's before a sample; `None` before either.
    fn path_bps(&self, path: usize) -> Option<f64> {
        let model = self
            .models
            .get(path)
            .and_then(RateModel::pacing_rate)
            .map(|r| self.link_bps(r));
        let radio = self.radio_rate(path).map(|r| r as f64);
        match (model, radio) {
            (Some(m), Some(r)) => Some(m.min(r)),
            (m, r) => m.or(r),
        }
    }

    /// Whether the radio's word is what sets `path`'s rate now.
    fn radio_limits(&self, path: usize) -> bool {
        let Some(radio) = self.radio_rate(path) else {
            return false;
        };
        self.models
            .get(path)
            .and_then(RateModel::pacing_rate)
            .is_none_or(|m| self.link_bps(m) >= radio as f64)
    }

    /// The rate to pace at over the paths `up` says are up, b/s, and why.
    pub fn pacing(&self, up: impl Fn(usize) -> bool) -> (u64, RateReason) {
        let paths = self.models.len().max(self.radio.len());
        if !self.discovers() {
            return match self.radio_total(&up) {
                Some(r) if r < self.cap_bps => (r.max(MIN_RATE_BPS), RateReason::Radio),
                _ => (self.cap_bps, RateReason::Fixed),
            };
        }
        let mut sum = 0.0;
        let mut measured = false;
        let mut radio = false;
        for i in (0..paths).filter(|&i| up(i)) {
            match self.path_bps(i) {
                Some(r) => {
                    sum += r;
                    measured = true;
                    radio |= self.radio_limits(i);
                }
                None => return (self.cap_bps, RateReason::Starting),
            }
        }
        if !measured {
            return (self.cap_bps, RateReason::Starting);
        }
        if sum >= self.cap_bps as f64 {
            (self.cap_bps, RateReason::Capped)
        } else if radio {
            ((sum as u64).max(MIN_RATE_BPS), RateReason::Radio)
        } else {
            ((sum as u64).max(MIN_RATE_BPS), RateReason::Discovered)
        }
    }

    /// Share of the up paths' rate that `path` carries (path weights); `None` until every
    /// up path has an estimate.
    pub fn share(&self, path: usize, up: impl Fn(usize) -> bool) -> Option<f64> {
        let total: f64 = (0..self.models.len().max(self.radio.len()))
            .filter(|&i| up(i))
            .map(|i| self.path_bps(i))
            .sum::<Option<f64>>()?;
        (total > 0.0).then(|| self.path_bps(path).unwrap_or(0.0) / total)
    }

    /// Most body bytes `path` may have in flight (discovery only).
    pub fn window(&self, path: usize) -> Option<u64> {
        if !self.discovers() {
            return None;
        }
        Some(
            self.models
                .get(path)
                .map_or(TRAIN_TPDUS * self.mss as u64, RateModel::window),
        )
    }

    pub fn path(&self, path: usize) -> PathRate {
        let radio_bps = self.radio_rate(path);
        let Some(m) = self.models.get(path).filter(|_| self.discovers()) else {
            let rate = radio_bps.map_or(self.cap_bps, |r| r.min(self.cap_bps));
            return PathRate {
                estimate_bps: rate,
                pacing_bps: rate,
                radio_bps,
                ..PathRate::default()
            };
        };
        PathRate {
            estimate_bps: m.bandwidth().map_or(0, |b| self.link_bps(b) as u64),
            pacing_bps: self
                .path_bps(path)
                .map_or(self.cap_bps, |r| (r as u64).min(self.cap_bps)),
            min_rtt: m.min_rtt().unwrap_or_default(),
            random_loss: m.random_loss(),
            phase: Some(m.phase()),
            radio_bps,
        }
    }
}

#[cfg(test)]
mod tests;
