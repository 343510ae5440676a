//! The erasure-coding flags shared by `sim` and `send` (docs/fec.md, "Erasure coding in the
//! engine").

use aerotp_proto::{ErasureChoice, ErasureMode};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ErasureArgs {
    /// Erasure coding across TPDUs (repair TPDUs that rebuild lost ones without a round
    /// trip): off, auto (strength from the loss the receiver reports), or a fixed ratio of
    /// wire TPDUs to data TPDUs such as 1.25. Default: auto in every mode but datagram; the
    /// retransmitting modes repair only on paths with a round trip of 200 ms or more.
    /// Datagram mode repairs only at a fixed ratio (it has no receiver reports) and is off
    /// unless one is given.
    #[arg(long, value_name = "off|auto|RATIO", value_parser = erasure_arg)]
    pub erasure: Option<ErasureMode>,
    /// Longest a lost TPDU may wait for the repairs that rebuild it (sets the repair
    /// window), e.g. 500ms. Default: 500ms.
    #[arg(long, value_name = "DURATION", value_parser = delay_arg)]
    pub max_delay: Option<Duration>,
    /// Residual loss of data TPDUs `auto` aims below, e.g. 1e-4. Default: 1e-5 in
    /// quasi-reliable, 1e-3 in unreliable and the retransmitting modes.
    #[arg(long, value_name = "RATE", value_parser = target_arg)]
    pub erasure_target: Option<f64>,
}

impl ErasureArgs {
    pub fn choice(&self) -> ErasureChoice {
        ErasureChoice {
            mode: self.erasure,
            max_delay: self.max_delay,
            target_residual: self.erasure_target,
        }
    }
}

fn erasure_arg(s: &str) -> Result<ErasureMode, String> {
    ErasureMode::parse(s).map_err(|e| e.to_string())
}

fn delay_arg(s: &str) -> Result<Duration, String> {
    let d = aerotp_link::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(1) || d > Duration::from_secs(60) {
        return Err(format!(
            "'{s}' is out of range: give 1ms to 60s, e.g. 500ms"
        ));
    }
    Ok(d)
}

fn target_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1.0 => Ok(t),
        _ => Err(format!(
            "'{s}' is not a residual loss rate between 0 and 1 (exclusive), e.g. 1e-4"
        )),
    }
}
