//! The erasure-coding setting of a connection: off, adaptive, or a fixed ratio, with the
//! residual-loss target and the delay bound the adaptive choice works to.

use crate::config_error::ConfigError;
use std::time::Duration;

/// How much repair a sender adds across TPDUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErasureMode {
    /// No repair TPDUs.
    Off,
    /// Repair chosen from the loss rate and burst length the receiver reports, to meet the
    /// residual-loss target within the delay bound at the least overhead (none on a clean link).
    Auto,
    /// A fixed ratio of wire TPDUs to data TPDUs (1.25: one repair per four data TPDUs).
    Ratio(f64),
}

impl ErasureMode {
    /// Parses `off`, `auto` or a ratio such as `1.25` (wire TPDUs per data TPDU, 1 < r <= 4).
    pub fn parse(s: &str) -> Result<ErasureMode, ConfigError> {
        let bad = || ConfigError::Erasure(s.to_owned());
        match s {
            "off" | "none" => Ok(ErasureMode::Off),
            "auto" => Ok(ErasureMode::Auto),
            _ => {
                let r: f64 = s.parse().map_err(|_| bad())?;
                if !(r > 1.0 && r <= 4.0) {
                    return Err(bad());
                }
                Ok(ErasureMode::Ratio(r))
            }
        }
    }
}

/// What a user chose of the erasure setting (flags, config keys); the rest comes from the
/// mode's default, resolved once the mode is known.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ErasureChoice {
    pub mode: Option<ErasureMode>,
    pub max_delay: Option<Duration>,
    pub target_residual: Option<f64>,
}

impl ErasureChoice {
    /// These choices applied over `default` (the mode's: `ErrorControl::for_mode(mode).erasure`);
    /// `None` when nothing was chosen (the engine then uses the mode's default, also for an
    /// acceptor whose mode the peer picks).
    pub fn resolve(&self, default: ErasureSetting) -> Result<Option<ErasureSetting>, ConfigError> {
        if *self == ErasureChoice::default() {
            return Ok(None);
        }
        let mut s = default;
        if let Some(m) = self.mode {
            s.mode = m;
        }
        if let Some(d) = self.max_delay {
            s.max_delay = d;
        }
        if let Some(t) = self.target_residual {
            s.target_residual = t;
        }
        s.validate()?;
        Ok(Some(s))
    }
}

/// Erasure coding of one direction of a connection (each end sets its own sending side).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErasureSetting {
    pub mode: ErasureMode,
    /// Residual loss of data TPDUs to stay below (auto).
    pub target_residual: f64,
    /// Longest a lost TPDU may wait for the repairs that rebuild it (`--max-delay`).
    pub max_delay: Duration,
    /// Most wire TPDUs per data TPDU the auto choice may spend.
    pub max_ratio: f64,
    /// Loss rate assumed before the first receiver report (auto).
    pub initial_loss: f64,
    /// Auto adds repair only once the smoothed round trip is at least this long: on a short
    /// path a retransmission costs little more time than a repair would and far less
    /// bandwidth. Zero in the modes that never retransmit.
    pub min_rtt: Duration,
    /// Most data TPDUs one repair covers (the encoding window; bounds the receiver's memory:
    /// about this many TPDUs per connection).
    pub max_window: usize,
}

impl ErasureSetting {
    /// Off.
    pub const OFF: ErasureSetting = ErasureSetting {
        mode: ErasureMode::Off,
        target_residual: 1e-4,
        max_delay: Duration::from_millis(500),
        max_ratio: 1.5,
        initial_loss: 0.0,
        min_rtt: Duration::ZERO,
        max_window: 512,
    };

    /// Parses `off`, `auto` or a ratio such as `1.25` (wire TPDUs per data TPDU, 1 < r <= 4);
    /// the other fields keep `self`'s values.
    pub fn parse(&self, s: &str) -> Result<ErasureSetting, ConfigError> {
        Ok(ErasureSetting {
            mode: ErasureMode::parse(s)?,
            ..*self
        })
    }

    /// Checks every field; the error names it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let t = self.target_residual;
        if !(t > 0.0 && t < 1.0) {
            return Err(ConfigError::ErasureTarget(t));
        }
        if self.max_delay < Duration::from_millis(1) || self.max_delay > Duration::from_secs(60) {
            return Err(ConfigError::ErasureDelay(self.max_delay));
        }
        if !(self.max_ratio >= 1.0 && self.max_ratio <= 4.0) {
            return Err(ConfigError::ErasureRatio(self.max_ratio));
        }
        if let ErasureMode::Ratio(r) = self.mode {
            if !(r > 1.0 && r <= 4.0) {
                return Err(ConfigError::ErasureRatio(r));
            }
        }
        if !(0.0..0.5).contains(&self.initial_loss) {
            return Err(ConfigError::ErasureInitialLoss(self.initial_loss));
        }
        if !(2..=4096).contains(&self.max_window) {
            return Err(ConfigError::ErasureWindow(self.max_window));
        }
        Ok(())
    }

    pub fn is_off(&self) -> bool {
        self.mode == ErasureMode::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An automatic setting unlike `OFF` in every field the tests read.
    fn auto_setting() -> ErasureSetting {
        ErasureSetting {
            mode: ErasureMode::Auto,
            target_residual: 1e-5,
            initial_loss: 0.01,
            ..ErasureSetting::OFF
        }
    }

    #[test]
    fn parse_accepts_off_auto_and_ratios_and_names_bad_values() {
        let d = auto_setting();
        assert_eq!(d.parse("off").unwrap().mode, ErasureMode::Off);
        assert_eq!(d.parse("auto").unwrap().mode, ErasureMode::Auto);
        assert_eq!(d.parse("1.25").unwrap().mode, ErasureMode::Ratio(1.25));
        assert_eq!(d.parse("1.25").unwrap().target_residual, 1e-5);
        for bad in ["", "1", "0.5", "5", "NaN", "inf", "-2", "x"] {
            let e = d.parse(bad).unwrap_err().to_string();
            assert!(e.contains("erasure"), "{bad}: {e}");
        }
    }

    #[test]
    fn validate_names_each_field() {
        let ok = auto_setting();
        assert!(ok.validate().is_ok());
        let cases = [
            (
                ErasureSetting {
                    target_residual: 0.0,
                    ..ok
                },
                "target",
            ),
            (
                ErasureSetting {
                    target_residual: f64::NAN,
                    ..ok
                },
                "target",
            ),
            (
                ErasureSetting {
                    max_delay: Duration::ZERO,
                    ..ok
                },
                "max-delay",
            ),
            (
                ErasureSetting {
                    max_ratio: 0.9,
                    ..ok
                },
                "ratio",
            ),
            (
                ErasureSetting {
                    initial_loss: 0.7,
                    ..ok
                },
                "initial loss",
            ),
            (
                ErasureSetting {
                    max_window: 1,
                    ..ok
                },
                "window",
            ),
        ];
        for (s, word) in cases {
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(word), "{e} should name {word}");
        }
    }

    #[test]
    fn choices_apply_over_the_mode_default_and_are_validated() {
        assert_eq!(
            ErasureChoice::default().resolve(auto_setting()).unwrap(),
            None
        );
        let c = ErasureChoice {
            max_delay: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let s = c.resolve(auto_setting()).unwrap().unwrap();
        assert_eq!(s.max_delay, Duration::from_secs(1));
        assert_eq!(s.mode, ErasureMode::Auto);
        assert_eq!(s.target_residual, 1e-5);
        let bad = ErasureChoice {
            target_residual: Some(2.0),
            ..Default::default()
        };
        assert!(bad.resolve(auto_setting()).is_err());
    }
}
