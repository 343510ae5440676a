//! Configuration of one direction of a link, with validation and serde support.
//!
//! In config files (TOML/JSON) durations are strings in the CLI form (`"10ms"`, `"1.5s"`)
//! and the rate is either a number of bit/s or a CLI string (`"5mbit"`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LinkError;
use crate::parse::{serde_duration, serde_opt_duration, serde_rate};
use crate::trace::Trace;

/// One direction of a link. A bidirectional link is two `Link`s, possibly with different
/// configs (asymmetric return link). See `docs/link-model.md` for the exact semantics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Transmission rate in bit/s (> 0).
    #[serde(with = "serde_rate")]
    pub rate_bps: u64,
    /// Bytes added to every packet for serialisation time only (framing, and the IP/UDP
    /// headers the packet does not carry). Not counted in queue bytes, not subject to flips.
    pub per_packet_overhead: u32,
    /// Constant propagation delay added after serialisation.
    #[serde(with = "serde_duration")]
    pub delay: Duration,
    /// Extra delay drawn uniformly in `[0, jitter]` per packet.
    #[serde(with = "serde_duration")]
    pub jitter: Duration,
    /// If false (default), jitter never reorders: a packet never arrives before the one
    /// sent before it. If true, jittered packets may overtake each other.
    pub allow_reorder: bool,
    /// Drop-tail limit of the transmit queue in packet bytes (packet waiting plus the one
    /// being serialised). Default 150 000 = 100 packets of 1500 B.
    pub queue_bytes: u64,
    /// Drop-tail limit of the transmit queue in packets. Default 1000.
    pub queue_packets: u32,
    /// Safety bound on packets accepted but not yet returned by `recv` (propagating, or
    /// arrived and not collected by the driver). Beyond it offered packets are dropped and
    /// counted in `dropped_in_flight_limit`. Default 65 536, far above the bandwidth-delay
    /// products of interest (5 Mb/s × 1 s ≈ 417 packets of 1500 B).
    pub max_in_flight: u32,
    /// Bit error rate applied independently to every bit of the packet and of the virtual
    /// header; `0 <= ber < 1`.
    pub ber: f64,
    /// Size in bytes of a virtual header preceding the packet (e.g. 28 for the IPv4+UDP
    /// headers that a simulator packet or a relayed UDP payload does not contain). Bit
    /// flips are drawn over `protected_prefix + len` bytes; a flip landing in the virtual
    /// header drops the packet (as a kernel drops a packet with a corrupt header).
    pub protected_prefix: u32,
    /// Independent random packet loss probability, `0 <= loss <= 1`.
    pub loss: f64,
    /// Optional bursty loss (Gilbert–Elliott), applied in addition to `loss`.
    pub burst: Option<GilbertElliott>,
    /// Scheduled outages relative to the link's epoch (time zero of the `now` axis).
    pub outages: Vec<Outage>,
    /// Optional periodic outages.
    pub periodic_outage: Option<PeriodicOutage>,
    /// Probability that a delivered packet is delivered twice (same arrival time).
    pub duplicate: f64,
    /// Optional random outages: exponential up-times, uniform down-times (a satellite call
    /// that drops and is redialled).
    pub random_outage: Option<RandomOutage>,
    /// Optional time-varying rate, delay, BER and loss, replayed from a CSV trace.
    pub trace: Option<Trace>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: 5_000_000,
            per_packet_overhead: 0,
            delay: Duration::from_millis(10),
            jitter: Duration::ZERO,
            allow_reorder: false,
            queue_bytes: 150_000,
            queue_packets: 1000,
            max_in_flight: 65_536,
            ber: 0.0,
            protected_prefix: 0,
            loss: 0.0,
            burst: None,
            outages: Vec::new(),
            periodic_outage: None,
            duplicate: 0.0,
            random_outage: None,
            trace: None,
        }
    }
}

/// Gilbert–Elliott two-state channel: a Good and a Bad state, each with its own packet loss
/// probability and (optionally) its own bit-error rate.
///
/// How long the chain stays in a state is given in one of three forms (exactly one):
/// * per-packet transition probabilities `p_gb`, `p_bg` (the chain advances once per packet
///   put on the air; mean Bad sojourn `1 / p_bg` packets);
/// * mean sojourns in packets, `good_packets`, `bad_packets` (the same chain, with
///   `p_gb = 1 / good_packets`, `p_bg = 1 / bad_packets`);
/// * mean sojourns in time, `good_time`, `bad_time` (a continuous-time chain: sojourns are
///   exponential with these means, and a packet sees the state at its transmission start).
///
/// The link starts in Good. In state Good a packet is lost with probability `loss_good` and
/// its bits flip at `ber_good`; in Bad with `loss_bad` and `ber_bad`. A per-state BER that is
/// not given is the link's `ber`. See `docs/link-model.md`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    /// Probability of moving from Good to Bad after a packet (per-packet form).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub p_gb: f64,
    /// Probability of moving from Bad to Good after a packet (per-packet form).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub p_bg: f64,
    /// Mean number of packets in Good (packet form, ≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_packets: Option<f64>,
    /// Mean number of packets in Bad (packet form, ≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_packets: Option<f64>,
    /// Mean time in Good (time form, > 0).
    #[serde(
        default,
        with = "serde_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub good_time: Option<Duration>,
    /// Mean time in Bad (time form, > 0).
    #[serde(
        default,
        with = "serde_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub bad_time: Option<Duration>,
    /// Loss probability in the Bad state (default 1).
    #[serde(default = "one")]
    pub loss_bad: f64,
    /// Loss probability in the Good state (default 0).
    #[serde(default)]
    pub loss_good: f64,
    /// Bit-error rate in the Bad state (default: the link's `ber`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ber_bad: Option<f64>,
    /// Bit-error rate in the Good state (default: the link's `ber`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ber_good: Option<f64>,
}

fn one() -> f64 {
    1.0
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// How the Gilbert–Elliott chain moves between states, resolved from the three forms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sojourn {
    /// Per packet: probability of leaving Good, probability of leaving Bad.
    PerPacket { p_gb: f64, p_bg: f64 },
    /// In time: exponential sojourns with these means.
    Timed { good: Duration, bad: Duration },
}

impl GilbertElliott {
    /// A per-packet chain that is lost with `loss_bad` in Bad and never in Good, no
    /// per-state BER (the link's BER applies in both states).
    pub fn per_packet(p_gb: f64, p_bg: f64, loss_bad: f64) -> GilbertElliott {
        GilbertElliott {
            p_gb,
            p_bg,
            good_packets: None,
            bad_packets: None,
            good_time: None,
            bad_time: None,
            loss_bad,
            loss_good: 0.0,
            ber_bad: None,
            ber_good: None,
        }
    }

    /// A time-based chain (mean sojourns `good`, `bad`), lost with `loss_bad` in Bad.
    pub fn timed(good: Duration, bad: Duration, loss_bad: f64) -> GilbertElliott {
        GilbertElliott {
            good_time: Some(good),
            bad_time: Some(bad),
            ..GilbertElliott::per_packet(0.0, 0.0, loss_bad)
        }
    }

    /// The sojourn form in force. Call after `LinkConfig::validate` (which checks that
    /// exactly one form is given).
    pub fn sojourn(&self) -> Sojourn {
        match (
            self.good_time,
            self.bad_time,
            self.good_packets,
            self.bad_packets,
        ) {
            (Some(good), Some(bad), _, _) => Sojourn::Timed { good, bad },
            (_, _, Some(g), Some(b)) => Sojourn::PerPacket {
                p_gb: 1.0 / g,
                p_bg: 1.0 / b,
            },
            _ => Sojourn::PerPacket {
                p_gb: self.p_gb,
                p_bg: self.p_bg,
            },
        }
    }

    /// Stationary probability of the Bad state (per packet for the packet forms, per unit
    /// of time for the time form).
    pub fn bad_share(&self) -> f64 {
        match self.sojourn() {
            Sojourn::PerPacket { p_gb, p_bg } => p_gb / (p_gb + p_bg),
            Sojourn::Timed { good, bad } => {
                bad.as_secs_f64() / (good.as_secs_f64() + bad.as_secs_f64())
            }
        }
    }

    /// Stationary mean loss probability of the chain.
    pub fn mean_loss(&self) -> f64 {
        let b = self.bad_share();
        (1.0 - b) * self.loss_good + b * self.loss_bad
    }
}

/// Random outages: the link is up for an exponentially distributed time with mean `mean_up`,
/// then down for a time drawn uniformly in `[down_min, down_max]`, then up again, and so on
/// from the link's epoch (which starts up). A satellite call that drops and is redialled.
///
/// The schedule is drawn from its own random stream: from `seed` when given (two directions,
/// or two links, with the same `seed` drop together), otherwise from the link's seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomOutage {
    /// Mean up-time (> 0).
    #[serde(with = "serde_duration")]
    pub mean_up: Duration,
    /// Shortest down-time (> 0).
    #[serde(with = "serde_duration")]
    pub down_min: Duration,
    /// Longest down-time (≥ down_min).
    #[serde(with = "serde_duration")]
    pub down_max: Duration,
    /// Seed of the schedule (default: derived from the link's seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// A scheduled outage: the link is down during `[start, start + duration)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outage {
    /// Start, relative to the link's epoch.
    #[serde(with = "serde_duration")]
    pub start: Duration,
    /// Length (> 0).
    #[serde(with = "serde_duration")]
    pub duration: Duration,
}

/// Periodic outages: down during `[offset + k*period, offset + k*period + duration)` for
/// every k ≥ 0 (e.g. a call dropped every 3 min for 45 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodicOutage {
    /// Time between the starts of two outages (> duration).
    #[serde(with = "serde_duration")]
    pub period: Duration,
    /// Length of each outage (> 0).
    #[serde(with = "serde_duration")]
    pub duration: Duration,
    /// Start of the first outage, relative to the link's epoch.
    #[serde(default, with = "serde_duration")]
    pub offset: Duration,
}

/// Shortest mean sojourn of a time-form burst chain, and shortest up- or down-time of random
/// outages: those processes are generated one period at a time.
const MIN_PERIOD: Duration = Duration::from_micros(1);

fn probability(field: &'static str, p: f64, allow_one: bool) -> Result<(), LinkError> {
    let ok = p.is_finite() && p >= 0.0 && if allow_one { p <= 1.0 } else { p < 1.0 };
    if ok {
        Ok(())
    } else if allow_one {
        Err(LinkError::config(
            field,
            format!("is {p}; it must be a probability in [0, 1]"),
        ))
    } else {
        Err(LinkError::config(
            field,
            format!("is {p}; it must be in [0, 1) (e.g. 1e-5)"),
        ))
    }
}

impl LinkConfig {
    /// Checks every field; the error names the field, its value and the accepted range.
    pub fn validate(&self) -> Result<(), LinkError> {
        if self.rate_bps == 0 {
            return Err(LinkError::config(
                "rate_bps",
                "is 0; the rate must be at least 1 bit/s",
            ));
        }
        if self.queue_bytes == 0 {
            return Err(LinkError::config(
                "queue_bytes",
                "is 0; the queue must hold at least one packet (e.g. 150000)",
            ));
        }
        if self.queue_packets == 0 {
            return Err(LinkError::config(
                "queue_packets",
                "is 0; the queue must hold at least one packet (e.g. 1000)",
            ));
        }
        if self.max_in_flight == 0 {
            return Err(LinkError::config(
                "max_in_flight",
                "is 0; it must be at least 1",
            ));
        }
        probability("ber", self.ber, false)?;
        probability("loss", self.loss, true)?;
        probability("duplicate", self.duplicate, true)?;
        if let Some(ge) = &self.burst {
            validate_burst(ge)?;
        }
        if let Some(r) = &self.random_outage {
            validate_random_outage(r)?;
        }
        if let Some(t) = &self.trace {
            t.validate()?;
        }
        self.validate_scheduled_outages()
    }

    /// Outages at given times and periodic ones: each of positive length and ending within
    /// the clock's range; a periodic one shorter than its period.
    fn validate_scheduled_outages(&self) -> Result<(), LinkError> {
        for o in &self.outages {
            if o.duration.is_zero() {
                return Err(LinkError::config(
                    "outages",
                    "contains an outage of zero duration",
                ));
            }
            if o.start.checked_add(o.duration).is_none() {
                return Err(LinkError::config(
                    "outages",
                    "contains an outage ending past the end of time",
                ));
            }
        }
        if let Some(p) = &self.periodic_outage {
            if p.duration.is_zero() || p.duration >= p.period {
                return Err(LinkError::config(
                    "periodic_outage",
                    format!(
                        "has duration {:?} and period {:?}; need 0 < duration < period",
                        p.duration, p.period
                    ),
                ));
            }
            if p.offset.checked_add(p.period).is_none() {
                return Err(LinkError::config("periodic_outage", "offset is too large"));
            }
        }
        Ok(())
    }
}

/// Random outages: a positive mean up time and a down range `0 < down_min <= down_max`, none
/// under 1 us.
fn validate_random_outage(r: &RandomOutage) -> Result<(), LinkError> {
    if r.mean_up.is_zero() {
        return Err(LinkError::config(
            "random_outage.mean_up",
            "is 0; give the mean time the link stays up, e.g. \"3min\"",
        ));
    }
    // The schedule is generated period by period: sub-microsecond periods would
    // make a long run cost billions of draws, and are not a link property anyway.
    if r.mean_up < MIN_PERIOD {
        return Err(LinkError::config(
            "random_outage.mean_up",
            format!(
                "is {:?}; it must be at least 1us (e.g. \"3min\")",
                r.mean_up
            ),
        ));
    }
    if !r.down_min.is_zero() && r.down_min < MIN_PERIOD {
        return Err(LinkError::config(
            "random_outage.down_min",
            format!(
                "is {:?}; it must be at least 1us (e.g. \"45s\")",
                r.down_min
            ),
        ));
    }
    if r.down_min.is_zero() || r.down_max < r.down_min {
        return Err(LinkError::config(
            "random_outage.down_min",
            format!(
                "and down_max are {:?} and {:?}; need 0 < down_min <= down_max (e.g. \"45s\" and \"50s\")",
                r.down_min, r.down_max
            ),
        ));
    }
    Ok(())
}

/// A Gilbert-Elliott burst model: probabilities in range and exactly one way of giving the
/// sojourns in each state (per-packet transition probabilities, mean packets or mean time).
fn validate_burst(ge: &GilbertElliott) -> Result<(), LinkError> {
    probability("burst.loss_bad", ge.loss_bad, true)?;
    probability("burst.loss_good", ge.loss_good, true)?;
    if let Some(b) = ge.ber_bad {
        probability("burst.ber_bad", b, false)?;
    }
    if let Some(b) = ge.ber_good {
        probability("burst.ber_good", b, false)?;
    }
    let per_packet = ge.p_gb != 0.0 || ge.p_bg != 0.0;
    let packets = ge.good_packets.is_some() || ge.bad_packets.is_some();
    let timed = ge.good_time.is_some() || ge.bad_time.is_some();
    let forms = [per_packet, packets, timed].iter().filter(|&&f| f).count();
    if forms != 1 {
        return Err(LinkError::config(
            "burst",
            "needs exactly one way of giving sojourns: p_gb and p_bg (per packet), \
             good_packets and bad_packets (mean packets), or good_time and bad_time (mean time)",
        ));
    }
    if per_packet {
        probability("burst.p_gb", ge.p_gb, true)?;
        probability("burst.p_bg", ge.p_bg, true)?;
        if ge.p_gb + ge.p_bg == 0.0 {
            return Err(LinkError::config(
                "burst",
                "has p_gb = p_bg = 0; the chain would never move, set at least one > 0",
            ));
        }
    }
    if packets {
        validate_mean_packets(ge)?;
    }
    if timed {
        validate_mean_times(ge)?;
    }
    Ok(())
}

/// Sojourns as mean packets: both given, each at least one packet.
fn validate_mean_packets(ge: &GilbertElliott) -> Result<(), LinkError> {
    for (field, v) in [
        ("burst.good_packets", ge.good_packets),
        ("burst.bad_packets", ge.bad_packets),
    ] {
        match v {
            Some(n) if n.is_finite() && n >= 1.0 => {}
            Some(n) => {
                return Err(LinkError::config(
                    field,
                    format!("is {n}; a mean sojourn in packets must be at least 1"),
                ))
            }
            None => {
                return Err(LinkError::config(
                    field,
                    "is missing; give good_packets and bad_packets together",
                ))
            }
        }
    }
    Ok(())
}

/// Sojourns as mean times: both given, each at least 1 us.
fn validate_mean_times(ge: &GilbertElliott) -> Result<(), LinkError> {
    for (field, v) in [
        ("burst.good_time", ge.good_time),
        ("burst.bad_time", ge.bad_time),
    ] {
        match v {
            Some(d) if d >= MIN_PERIOD => {}
            Some(d) if !d.is_zero() => {
                return Err(LinkError::config(
                    field,
                    format!(
                        "is {d:?}; a mean sojourn must be at least 1us (e.g. \"2s\", \"50ms\")"
                    ),
                ))
            }
            Some(_) => {
                return Err(LinkError::config(
                    field,
                    "is 0; a mean sojourn must be positive (e.g. \"2s\", \"50ms\")",
                ))
            }
            None => {
                return Err(LinkError::config(
                    field,
                    "is missing; give good_time and bad_time together",
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_as_documented() {
        let c = LinkConfig::default();
        c.validate().unwrap();
        assert_eq!(c.rate_bps, 5_000_000);
        assert_eq!(c.delay, Duration::from_millis(10));
        assert_eq!(c.ber, 0.0);
    }

    #[test]
    fn validate_names_the_field() {
        let bad = |f: &dyn Fn(&mut LinkConfig)| {
            let mut c = LinkConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.rate_bps = 0).contains("rate_bps"));
        assert!(bad(&|c| c.ber = 1.0).contains("`ber`"));
        assert!(bad(&|c| c.ber = -1e-5).contains("`ber`"));
        assert!(bad(&|c| c.ber = f64::NAN).contains("`ber`"));
        assert!(bad(&|c| c.loss = 1.5).contains("`loss`"));
        assert!(bad(&|c| c.queue_bytes = 0).contains("queue_bytes"));
        assert!(bad(&|c| c.queue_packets = 0).contains("queue_packets"));
        assert!(bad(&|c| c.duplicate = 2.0).contains("duplicate"));
        assert!(
            bad(&|c| c.burst = Some(GilbertElliott::per_packet(0.0, 0.0, 1.0))).contains("burst")
        );
        assert!(bad(&|c| c.periodic_outage = Some(PeriodicOutage {
            period: Duration::from_secs(1),
            duration: Duration::from_secs(1),
            offset: Duration::ZERO
        }))
        .contains("period"));
        assert!(bad(&|c| c.outages.push(Outage {
            start: Duration::from_secs(1),
            duration: Duration::ZERO
        }))
        .contains("zero duration"));
        // loss = 1 is legal (a dead link), ber = 1 is not.
        let c = LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        };
        c.validate().unwrap();
    }

    #[test]
    fn serde_round_trip_with_human_units() {
        let c = LinkConfig {
            jitter: Duration::from_micros(2400),
            outages: vec![Outage {
                start: Duration::from_secs(2),
                duration: Duration::from_millis(1500),
            }],
            burst: Some(GilbertElliott::per_packet(0.01, 0.2, 0.9)),
            ..LinkConfig::default()
        };
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"delay\":\"10ms\""), "{json}");
        assert!(json.contains("\"jitter\":\"2400us\""), "{json}");
        let back: LinkConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let partial: LinkConfig =
            serde_json::from_str(r#"{"rate_bps":"2.4kbit","delay":"1.5s"}"#).unwrap();
        assert_eq!(partial.rate_bps, 2400);
        assert_eq!(partial.delay, Duration::from_millis(1500));
        let err = serde_json::from_str::<LinkConfig>(r#"{"delay":"10"}"#).unwrap_err();
        assert!(err.to_string().contains("missing unit"), "{err}");
        let err = serde_json::from_str::<LinkConfig>(r#"{"rate":"10"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}
