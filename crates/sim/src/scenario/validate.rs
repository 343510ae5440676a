//! The check of a whole scenario, every field, saying what is wrong.

use aerotp_proto::Mode;

use super::error::SimError;
use super::mode::SimMode;
use super::model::{datagram_parity, Scenario, Striping, IP_UDP_OVERHEAD};
use crate::workload::Workload;

impl Scenario {
    /// Checks every field and says what is wrong.
    pub fn validate(&self) -> Result<(), SimError> {
        self.network
            .validate()
            .map_err(|(key, problem)| SimError::Network(format!("`{key}` {problem}")))?;
        if self.rate_bps == 0 {
            return Err(SimError::Setting {
                key: "send_rate".into(),
                value: "0".into(),
                problem: "the sending rate must be at least 1 bit/s".into(),
            });
        }
        if self.size == 0 {
            return Err(SimError::Size);
        }
        if self.cap.is_zero() {
            return Err(SimError::Cap);
        }
        if self.mtu <= IP_UDP_OVERHEAD && self.mode == SimMode::Udp {
            return Err(SimError::Config(format!("MTU {} is too small", self.mtu)));
        }
        self.validate_radio()?;
        self.workload.validate()?;
        self.validate_workload_and_erasure()?;
        self.validate_engine_and_links()
    }

    /// A radio that follows the trace needs a connection mode, and one link or the
    /// engine's striping.
    fn validate_radio(&self) -> Result<(), SimError> {
        if self.radio_follows_trace
            && (self.network.paths.len() > 1 && self.striping != Striping::Engine
                || matches!(self.mode, SimMode::Udp | SimMode::Aero(Mode::Datagram)))
        {
            return Err(SimError::Setting {
                key: "radio".into(),
                value: "trace".into(),
                problem: "a radio speaks to an AeroTP connection's paths: it needs a \
                          connection mode, and one link or the engine's striping"
                    .into(),
            });
        }
        Ok(())
    }

    /// A workload other than bulk needs a connection; the erasure setting must suit the
    /// mode.
    fn validate_workload_and_erasure(&self) -> Result<(), SimError> {
        if self.workload != Workload::Bulk
            && matches!(self.mode, SimMode::Udp | SimMode::Aero(Mode::Datagram))
        {
            return Err(SimError::Setting {
                key: "workload".into(),
                value: self.workload.to_string(),
                problem: format!(
                    "needs a connection; mode {} sends the bulk file only",
                    self.mode
                ),
            });
        }
        if let SimMode::Aero(m) = self.mode {
            self.erasure
                .resolve(aerotp_proto::ErrorControl::for_mode(m).erasure)
                .map_err(|e| SimError::Config(e.to_string()))?;
            if m == Mode::Datagram && self.erasure.mode == Some(aerotp_proto::ErasureMode::Auto) {
                return Err(SimError::Setting {
                    key: "erasure".into(),
                    value: "auto".into(),
                    problem: "datagram mode sends no receiver reports to adapt to; give a \
                              fixed ratio such as 1.25, or use quasi-reliable"
                        .into(),
                });
            }
        }
        Ok(())
    }

    /// The engine's configuration, every hop of every path, the number of paths, and room
    /// for data in a datagram.
    fn validate_engine_and_links(&self) -> Result<(), SimError> {
        self.connection_config()
            .validate()
            .map_err(|e| SimError::Config(e.to_string()))?;
        for i in 0..self.network.paths.len() {
            for fwd in [true, false] {
                for h in self.hops(i, fwd, 0) {
                    h.validate().map_err(|e| SimError::Config(e.to_string()))?;
                }
            }
        }
        if self.network.paths.len() > aerotp_proto::MAX_PATHS {
            return Err(SimError::Network(format!(
                "{} paths; a connection keeps at most {} (aerotp_proto::MAX_PATHS)",
                self.network.paths.len(),
                aerotp_proto::MAX_PATHS
            )));
        }
        if self.mode == SimMode::Aero(Mode::Datagram) {
            let p = datagram_parity(self);
            if aerotp_proto::max_body(self.mtu, p) == 0 {
                return Err(SimError::Config(format!(
                    "MTU {} leaves no room for data with this FEC",
                    self.mtu
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aerotp_link::LinkConfig;

    use super::*;

    #[test]
    fn validation_rejects_bad_values() {
        let ok = Scenario::default();
        assert!(ok.validate().is_ok());
        let link = |f: &dyn Fn(&mut LinkConfig)| ok.clone().with_links(f);
        for (bad, needle) in [
            (link(&|l| l.ber = 1.0), "path[0].forward.ber"),
            (link(&|l| l.ber = -0.1), "path[0].forward.ber"),
            (link(&|l| l.loss = 1.5), "path[0].forward.loss"),
            (
                Scenario {
                    size: 0,
                    ..ok.clone()
                },
                "size",
            ),
            (
                Scenario {
                    mack: 0,
                    ..ok.clone()
                },
                "MACK",
            ),
            (
                Scenario {
                    mtu: 50,
                    ..ok.clone()
                },
                "MTU",
            ),
            (
                Scenario {
                    cap: Duration::ZERO,
                    ..ok.clone()
                },
                "cap",
            ),
            (
                Scenario {
                    rate_bps: 0,
                    ..ok.clone()
                },
                "send_rate",
            ),
            (
                Scenario {
                    mode: SimMode::Udp,
                    workload: Workload::default_messages(),
                    ..ok.clone()
                },
                "needs a connection",
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }
}
