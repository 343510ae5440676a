//! `--rate auto|R` and `--max-rate R` (`sim`: `--send-rate`): a fixed rate, or one AeroTP
//! discovers under a cap (docs/rate.md).

use crate::common::rate_arg;
use aerotp_proto::{ErrorControl, Mode, RateControl, DEFAULT_RATE_CAP_BPS};

/// A sending rate on the command line: a fixed rate, or `auto` (discovered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateArg {
    Auto,
    Fixed(u64),
}

/// `--rate`: `auto` or a rate of at least 1000 b/s.
pub fn rate_or_auto_arg(s: &str) -> Result<RateArg, String> {
    if s == "auto" {
        return Ok(RateArg::Auto);
    }
    rate_arg(s)
        .map(RateArg::Fixed)
        .map_err(|e| format!("{e}, or auto to discover the link's rate"))
}

/// What a command does when neither `--rate` nor `--max-rate` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDefault {
    /// This fixed rate (the simulator: the scenario's links, the papers' set-up).
    // Only the development commands ask for it: the field build has none of them.
    #[cfg_attr(not(feature = "dev"), allow(dead_code))]
    Fixed(u64),
    /// Discover the rate in the modes that can (reliable, hybrid-nack-mack); the others,
    /// which have nothing to measure from, send at this fixed rate (`send`: 5 Mb/s).
    Discover { otherwise: u64 },
}

/// The rate control and rate (or cap) that `rate_flag` (`--rate` or `--send-rate`, `None`
/// if not given) and `--max-rate` ask for, `default` saying what neither given means. A mode
/// that cannot discover sends at the cap, so it must be given one; a fixed rate and a cap
/// together are refused rather than one silently ignored.
pub fn resolve_rate(
    mode: Mode,
    flag: &str,
    rate: Option<RateArg>,
    max_rate: Option<u64>,
    default: RateDefault,
) -> anyhow::Result<(RateControl, u64)> {
    match (rate, max_rate) {
        (None, None) => Ok(match default {
            RateDefault::Fixed(r) => (RateControl::Fixed, r),
            RateDefault::Discover { .. } if ErrorControl::for_mode(mode).discovers_rate() => {
                (RateControl::Discover, DEFAULT_RATE_CAP_BPS)
            }
            RateDefault::Discover { otherwise } => (RateControl::Fixed, otherwise),
        }),
        (Some(RateArg::Fixed(r)), None) => Ok((RateControl::Fixed, r)),
        (Some(RateArg::Fixed(_)), Some(_)) => anyhow::bail!(
            "{flag} R fixes the rate and --max-rate R caps a discovered one: give one of them \
             (or {flag} auto --max-rate R)"
        ),
        (Some(RateArg::Auto), None) if !ErrorControl::for_mode(mode).discovers_rate() => {
            anyhow::bail!(
                "{flag} auto: mode {mode} has no selective acknowledgements to discover the \
                 rate from (reliable and hybrid-nack-mack have); give {flag} R, or \
                 --max-rate R to send at R"
            )
        }
        (_, cap) => Ok((RateControl::Discover, cap.unwrap_or(DEFAULT_RATE_CAP_BPS))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_bad_ones_say_what_to_give() {
        assert_eq!(rate_or_auto_arg("auto"), Ok(RateArg::Auto));
        assert_eq!(rate_or_auto_arg("5mbit"), Ok(RateArg::Fixed(5_000_000)));
        for bad in ["fast", "10", "", "-5mbit", "AUTO"] {
            let e = rate_or_auto_arg(bad).expect_err(bad);
            assert!(e.contains("auto"), "{bad}: {e}");
        }
    }

    #[test]
    fn fixed_discovered_capped_and_refused() {
        let r = |mode, rate, max| {
            resolve_rate(mode, "--rate", rate, max, RateDefault::Fixed(5_000_000))
        };
        let fixed = Some(RateArg::Fixed(2_000_000));
        let auto = Some(RateArg::Auto);
        assert_eq!(
            r(Mode::Reliable, None, None).unwrap(),
            (RateControl::Fixed, 5_000_000)
        );
        assert_eq!(
            r(Mode::Reliable, fixed, None).unwrap(),
            (RateControl::Fixed, 2_000_000)
        );
        assert_eq!(
            r(Mode::Reliable, auto, None).unwrap(),
            (RateControl::Discover, DEFAULT_RATE_CAP_BPS)
        );
        assert_eq!(
            r(Mode::HybridNackMack, None, Some(3_000_000)).unwrap(),
            (RateControl::Discover, 3_000_000)
        );
        // A mode that cannot discover sends at the cap it is given, and needs one.
        assert_eq!(
            r(Mode::NearReliable, auto, Some(3_000_000)).unwrap(),
            (RateControl::Discover, 3_000_000)
        );
        let e = r(Mode::NearReliable, auto, None).unwrap_err().to_string();
        assert!(
            e.contains("near-reliable") && e.contains("--max-rate"),
            "{e}"
        );
        let e = r(Mode::QuasiReliable, auto, None).unwrap_err().to_string();
        assert!(e.contains("--rate R"), "{e}");
        // A fixed rate and a cap: refused, neither ignored.
        let e = r(Mode::Reliable, fixed, Some(3_000_000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("give one of them"), "{e}");
    }

    #[test]
    fn send_discovers_by_default_where_the_mode_can() {
        let d = RateDefault::Discover {
            otherwise: 5_000_000,
        };
        for (mode, want) in [
            (
                Mode::Reliable,
                (RateControl::Discover, DEFAULT_RATE_CAP_BPS),
            ),
            (
                Mode::HybridNackMack,
                (RateControl::Discover, DEFAULT_RATE_CAP_BPS),
            ),
            (Mode::NearReliable, (RateControl::Fixed, 5_000_000)),
            (Mode::QuasiReliable, (RateControl::Fixed, 5_000_000)),
            (Mode::Unreliable, (RateControl::Fixed, 5_000_000)),
        ] {
            assert_eq!(
                resolve_rate(mode, "--rate", None, None, d).unwrap(),
                want,
                "{mode}"
            );
        }
        // Given flags mean what they say whatever the default.
        let fixed = Some(RateArg::Fixed(2_000_000));
        assert_eq!(
            resolve_rate(Mode::Reliable, "--rate", fixed, None, d).unwrap(),
            (RateControl::Fixed, 2_000_000)
        );
    }
}
