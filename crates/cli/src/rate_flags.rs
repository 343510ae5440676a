//! `--rate auto|R` and `--max-rate R`: a fixed rate, or one AeroTP discovers under a cap
//! (docs/rate.md).

use crate::common::rate_arg;

/// A sending rate on the command line: a fixed rate, or `auto` (discovered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateArg {
    Auto,
    Fixed(u64),
}

/// The cap of a discovered rate when no `--max-rate` is given: above any radio link, so the
/// link alone sets the rate.
pub const AUTO_RATE_CAP: u64 = 10_000_000_000;

/// `--rate`: `auto` or a rate of at least 1000 b/s.
pub fn rate_or_auto_arg(s: &str) -> Result<RateArg, String> {
    if s == "auto" {
        return Ok(RateArg::Auto);
    }
    rate_arg(s)
        .map(RateArg::Fixed)
        .map_err(|e| format!("{e}, or auto to discover the link's rate"))
}

/// Sets `cfg`'s rate from `--rate` and `--max-rate`: fixed, or discovered under the cap.
/// A mode that cannot discover (no selective acknowledgements) sends at the cap, so it must
/// be given one.
pub fn apply_rate(
    cfg: &mut aerotp_proto::ConnectionConfig,
    rate: RateArg,
    max_rate: Option<u64>,
) -> anyhow::Result<()> {
    let selective = aerotp_proto::ErrorControl::for_mode(cfg.mode).feedback
        == aerotp_proto::Feedback::Selective;
    if rate == RateArg::Auto && max_rate.is_none() && !selective {
        anyhow::bail!(
            "--rate auto: mode {} has no selective acknowledgements to discover the rate \
             from (reliable and hybrid-nack-mack have); give --rate R, or --max-rate R to \
             send at R",
            cfg.mode
        );
    }
    (cfg.rate_control, cfg.rate_bps) = match (rate, max_rate) {
        (RateArg::Fixed(r), None) => (aerotp_proto::RateControl::Fixed, r),
        (RateArg::Auto, cap) => (
            aerotp_proto::RateControl::Discover,
            cap.unwrap_or(AUTO_RATE_CAP),
        ),
        (RateArg::Fixed(_), Some(cap)) => (aerotp_proto::RateControl::Discover, cap),
    };
    Ok(())
}
