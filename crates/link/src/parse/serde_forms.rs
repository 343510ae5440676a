//! Serde adapters that read and write config files in the CLI's human forms (`"10ms"`,
//! `"5mbit"`), through the parsers and formatters of [`super::units`].

/// Serde for `Option<Duration>` as the CLI string form.
pub mod serde_opt_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises `Some` as `format_duration`, `None` as nothing.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&crate::parse::units::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    /// Deserialises with `parse_duration`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s = String::deserialize(d)?;
        crate::parse::units::parse_duration(&s)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// Serde for `Duration` as the CLI string form (`"10ms"`).
pub mod serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises as `format_duration`.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::parse::units::format_duration(*d))
    }

    /// Deserialises with `parse_duration`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        crate::parse::units::parse_duration(&s).map_err(serde::de::Error::custom)
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
            Rate::Text(s) => crate::parse::units::parse_rate(&s).map_err(serde::de::Error::custom),
        }
    }
}
