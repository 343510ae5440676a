//! Configuration of one direction of a link, with validation and serde support.
//!
//! In config files (TOML/JSON) durations are strings in the CLI form (`"10ms"`, `"1.5s"`)
//! and the rate is either a number of bit/s or a CLI string (`"5mbit"`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LinkError;

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
        }
    }
}

/// Gilbert–Elliott two-state loss model, advanced once per packet put on the air.
///
/// In state Good a packet is lost with probability `loss_good`, in state Bad with
/// `loss_bad`; after that decision the state moves Good→Bad with probability `p_gb` and
/// Bad→Good with `p_bg`. The link starts in Good. Stationary mean loss:
/// `(p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)`; mean burst (Bad sojourn)
/// length `1 / p_bg` packets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    /// Probability of moving from Good to Bad after a packet.
    pub p_gb: f64,
    /// Probability of moving from Bad to Good after a packet.
    pub p_bg: f64,
    /// Loss probability in the Bad state (default 1).
    #[serde(default = "one")]
    pub loss_bad: f64,
    /// Loss probability in the Good state (default 0).
    #[serde(default)]
    pub loss_good: f64,
}

fn one() -> f64 {
    1.0
}

impl GilbertElliott {
    /// Stationary mean loss probability of the chain.
    pub fn mean_loss(&self) -> f64 {
        (self.p_bg * self.loss_good + self.p_gb * self.loss_bad) / (self.p_gb + self.p_bg)
    }
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
            probability("burst.p_gb", ge.p_gb, true)?;
            probability("burst.p_bg", ge.p_bg, true)?;
            probability("burst.loss_bad", ge.loss_bad, true)?;
            probability("burst.loss_good", ge.loss_good, true)?;
            if ge.p_gb + ge.p_bg == 0.0 {
                return Err(LinkError::config(
                    "burst",
                    "has p_gb = p_bg = 0; the chain would never move, set at least one > 0",
                ));
            }
        }
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

/// Serde for `Duration` as the CLI string form (`"10ms"`).
pub mod serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises as `format_duration`.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::parse::format_duration(*d))
    }

    /// Deserialises with `parse_duration`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        crate::parse::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// Serde for a rate: a number of bit/s, or a CLI string (`"5mbit"`).
pub mod serde_rate {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Rate {
        Bps(u64),
        Text(String),
    }

    /// Serialises as a number of bit/s.
    pub fn serialize<S: Serializer>(r: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*r)
    }

    /// Accepts a number of bit/s or a string for `parse_rate`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Rate::deserialize(d)? {
            Rate::Bps(v) => Ok(v),
            Rate::Text(s) => crate::parse::parse_rate(&s).map_err(serde::de::Error::custom),
        }
    }
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
        assert!(bad(&|c| c.burst = Some(GilbertElliott {
            p_gb: 0.0,
            p_bg: 0.0,
            loss_bad: 1.0,
            loss_good: 0.0
        }))
        .contains("burst"));
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
            burst: Some(GilbertElliott {
                p_gb: 0.01,
                p_bg: 0.2,
                loss_bad: 0.9,
                loss_good: 0.0,
            }),
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
