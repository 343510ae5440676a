//! The erasure-coding setting of a connection: off, adaptive, or a fixed ratio, with the
//! residual-loss target and the delay bound the adaptive choice works to.

use crate::config_error::ConfigError;
use aerotp_wire::Mode;
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
    /// The setting for `mode` with these choices applied; `None` when nothing was chosen (the
    /// engine then uses the mode's default, also for an acceptor whose mode the peer picks).
    pub fn resolve(&self, mode: Mode) -> Result<Option<ErasureSetting>, ConfigError> {
        if *self == ErasureChoice::default() {
            return Ok(None);
        }
        let mut s = ErasureSetting::for_mode(mode);
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

    /// The default of each mode (docs/fec.md, "Erasure coding in the engine"):
    /// * `quasi-reliable`: auto, residual 1e-5 (a whole file with no feedback), 1 % loss
    ///   assumed until the first report;
    /// * `unreliable`: auto, residual 1e-3, nothing assumed;
    /// * the retransmitting modes: auto, residual 1e-3 (retransmission recovers the rest),
    ///   active on paths with a round trip of 200 ms or more;
    /// * `datagram`: off (no connection; the gateway sets it per route).
    pub fn for_mode(mode: Mode) -> ErasureSetting {
        let auto = ErasureSetting {
            mode: ErasureMode::Auto,
            ..ErasureSetting::OFF
        };
        match mode {
            Mode::QuasiReliable => ErasureSetting {
                target_residual: 1e-5,
                initial_loss: 0.01,
                ..auto
            },
            Mode::Unreliable => ErasureSetting {
                target_residual: 1e-3,
                ..auto
            },
            Mode::Reliable | Mode::NearReliable | Mode::HybridNack | Mode::HybridNackMack => {
                ErasureSetting {
                    target_residual: 1e-3,
                    min_rtt: Duration::from_millis(200),
                    max_ratio: 1.25,
                    ..auto
                }
            }
            Mode::Datagram => ErasureSetting::OFF,
        }
    }

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

    #[test]
    fn parse_accepts_off_auto_and_ratios_and_names_bad_values() {
        let d = ErasureSetting::for_mode(Mode::QuasiReliable);
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
        let ok = ErasureSetting::for_mode(Mode::Reliable);
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
            ErasureChoice::default().resolve(Mode::Reliable).unwrap(),
            None
        );
        let c = ErasureChoice {
            max_delay: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let s = c.resolve(Mode::QuasiReliable).unwrap().unwrap();
        assert_eq!(s.max_delay, Duration::from_secs(1));
        assert_eq!(s.mode, ErasureMode::Auto);
        assert_eq!(s.target_residual, 1e-5);
        let bad = ErasureChoice {
            target_residual: Some(2.0),
            ..Default::default()
        };
        assert!(bad.resolve(Mode::Reliable).is_err());
    }

    #[test]
    fn every_mode_has_a_valid_default() {
        for m in 0..=6 {
            let mode = Mode::from_u8(m).unwrap();
            ErasureSetting::for_mode(mode).validate().unwrap();
        }
        assert!(ErasureSetting::for_mode(Mode::Datagram).is_off());
    }
}
