//! The gateway's rate (issue 37; docs/gateway.md §Rate): `rate = R` fixed (the papers' open
//! loop, for a dedicated allocation), `max_rate = R` a cap under which the flows that can
//! discover their rate do, or neither (or `rate = "auto"`): discovered under
//! [`DEFAULT_CAP_BPS`]. Keys as a file gives them: text (`"5mbit"`, the flags' forms) or a
//! TOML integer (bits per second, `rate = 5000000`), both kept as the flag's text so one
//! parser (`aerotp_link::parse_rate`) checks every source the same way.

use std::fmt;

use anyhow::{bail, Result};
use serde::de::{self, Deserializer, Visitor};

use super::FileConfig;
pub use aerotp_proto::RateControl;

/// The cap, and so the most the link share divides, when neither `rate` nor `max_rate` is
/// given: 5 Mb/s, the gateways' fixed rate before discovery and what `send` paces the modes
/// that cannot discover at. A cap is needed, not the engine's 10 Gb/s: the link share
/// divides what the reliable flows discovered, but with none of them to discover (near-
/// reliable, quasi-reliable, unreliable and datagram flows have no selective
/// acknowledgements to discover from) it divides the cap, and those flows are paced at their
/// share of it (docs/gateway.md §Rate). A link faster than that needs `max_rate`.
pub const DEFAULT_CAP_BPS: u64 = 5_000_000;

/// The engine's lowest pacing rate, b/s.
const MIN_RATE: u64 = aerotp_proto::MIN_RATE_BPS;
/// Highest rate or cap accepted: far above any air link; beyond it a rate is a typo.
const MAX_RATE: u64 = 100_000_000_000;

impl FileConfig {
    /// `rate` and `max_rate`, resolved: whether the rate is fixed or discovered, and the
    /// fixed rate or the cap. A fixed rate and a cap together are refused rather than one of
    /// them silently ignored.
    pub(super) fn rate_setting(&self) -> Result<(RateControl, u64)> {
        let parse = |key: &str, v: &str| -> Result<u64> {
            let r = aerotp_link::parse_rate(v).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
            if r < MIN_RATE {
                bail!(
                    "{key} {v}: {r} b/s is below the lowest the engine paces at, {MIN_RATE} b/s (1kbit)"
                );
            }
            if r > MAX_RATE {
                bail!("{key} {v}: {r} b/s: give at most 100gbit");
            }
            Ok(r)
        };
        let cap = match self.max_rate.as_deref() {
            Some("auto") => bail!(
                "max_rate auto: max_rate is a cap, e.g. max_rate = \"4.8mbit\"; for a rate \
                 discovered under the default cap of 5 Mb/s give neither rate nor max_rate"
            ),
            Some(m) => Some(parse("max_rate", m)?),
            None => None,
        };
        match (self.rate.as_deref(), cap) {
            (None | Some("auto"), cap) => {
                Ok((RateControl::Discover, cap.unwrap_or(DEFAULT_CAP_BPS)))
            }
            (Some(r), None) => Ok((RateControl::Fixed, parse("rate", r)?)),
            (Some(r), Some(_)) => bail!(
                "rate {r} fixes the rate and max_rate caps a discovered one: give one of them \
                 (--rate or `rate`, --max-rate or `max_rate`), or rate = \"auto\" (--rate \
                 auto) with max_rate to override a file's fixed rate"
            ),
        }
    }
}

/// What a rate key accepts, for serde's error messages.
const FORMS: &str = "a rate: text such as \"5mbit\" or \"2.4kbit\", or an integer of bits per \
                     second such as 5000000";

struct RateText;

impl Visitor<'_> for RateText {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(FORMS)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        match u64::try_from(v) {
            Ok(v) => Ok(v.to_string()),
            Err(_) => Err(E::custom(format!("{v} is negative; give {FORMS}"))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        // TOML's 5e6 is a float: a whole number of bits per second is taken as such.
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= u64::MAX as f64 {
            Ok((v as u64).to_string())
        } else {
            Err(E::custom(format!(
                "{v} is not a whole number of bits per second; give {FORMS}"
            )))
        }
    }
}

/// `#[serde(deserialize_with)]` of an optional rate key: text or an integer, as text.
pub(super) fn rate_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    d.deserialize_any(RateText).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(rate: Option<&str>, max_rate: Option<&str>) -> Result<(RateControl, u64)> {
        let s = FileConfig {
            rate: rate.map(String::from),
            max_rate: max_rate.map(String::from),
            ..FileConfig::default()
        }
        .settings()?;
        Ok((s.link.rate_control, s.link.rate))
    }

    #[test]
    fn a_rate_is_fixed_or_discovered_under_a_cap_never_both() {
        let discover = |cap| (RateControl::Discover, cap);
        assert_eq!(resolve(None, None).unwrap(), discover(DEFAULT_CAP_BPS));
        assert_eq!(
            resolve(Some("auto"), None).unwrap(),
            discover(DEFAULT_CAP_BPS)
        );
        assert_eq!(resolve(None, Some("8mbit")).unwrap(), discover(8_000_000));
        assert_eq!(
            resolve(Some("auto"), Some("2mbit")).unwrap(),
            discover(2_000_000)
        );
        assert_eq!(
            resolve(Some("4.8mbit"), None).unwrap(),
            (RateControl::Fixed, 4_800_000)
        );
        // From a file: integers too.
        let c: FileConfig = toml::from_str("max_rate = 8000000\n").unwrap();
        let s = c.settings().unwrap();
        assert_eq!((s.link.rate_control, s.link.rate), discover(8_000_000));
        for (rate, max, want) in [
            (Some("2mbit"), Some("5mbit"), "give one of them"),
            (None, Some("auto"), "max_rate auto: max_rate is a cap"),
            (None, Some("500"), "max_rate 500: 500 b/s is below"),
            (None, Some("1000gbit"), "max_rate 1000gbit"),
            (Some("1000gbit"), None, "rate 1000gbit"),
            (Some("fast"), None, "rate"),
        ] {
            let e = format!("{:#}", resolve(rate, max).unwrap_err());
            assert!(e.contains(want), "{rate:?} {max:?}: {e}");
        }
        // A flag's cap over a file's fixed rate: refused, saying how to override it...
        let file = FileConfig {
            rate: Some("4.8mbit".into()),
            ..FileConfig::default()
        };
        let flags = FileConfig {
            max_rate: Some("8mbit".into()),
            ..FileConfig::default()
        };
        let e = format!(
            "{:#}",
            flags.clone().merge(file.clone()).settings().unwrap_err()
        );
        assert!(
            e.contains("rate = \"auto\" (--rate auto) with max_rate"),
            "{e}"
        );
        // ...which --rate auto does.
        let flags = FileConfig {
            rate: Some("auto".into()),
            ..flags
        };
        let s = flags.merge(file).settings().unwrap();
        assert_eq!((s.link.rate_control, s.link.rate), discover(8_000_000));
    }
}
