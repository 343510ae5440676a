//! The `rate` key as a file gives it: text (`"5mbit"`, the flag's forms) or a TOML integer
//! (bits per second, `rate = 5000000`), both kept as the flag's text so one parser
//! (`aerotp_link::parse_rate`) checks every source the same way.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

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
