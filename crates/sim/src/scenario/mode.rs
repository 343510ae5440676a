//! What carries the file ([`SimMode`]) and the shape of the network ([`Topology`]).

use std::fmt;
use std::str::FromStr;

use aerotp_proto::Mode;
use serde::Serialize;

use super::error::SimError;

/// What carries the file: one of the AeroTP modes, or plain UDP as the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimMode {
    Aero(Mode),
    /// Plain UDP: datagrams of the MTU paced at the link rate, no CRC, no FEC; a corrupted
    /// datagram is dropped (its UDP checksum would fail).
    Udp,
}

impl SimMode {
    pub fn name(self) -> &'static str {
        match self {
            SimMode::Aero(m) => m.name(),
            SimMode::Udp => "udp",
        }
    }

    /// Every mode the simulator knows, AeroTP's first.
    pub fn all() -> Vec<SimMode> {
        Mode::ALL
            .iter()
            .map(|&m| SimMode::Aero(m))
            .chain([SimMode::Udp])
            .collect()
    }

    /// Whether a run is complete only once the sender's close has been confirmed.
    pub fn is_fully_reliable(self) -> bool {
        match self {
            SimMode::Aero(m) => aerotp_proto::ErrorControl::for_mode(m).delivers_everything(),
            _ => false,
        }
    }
}

impl fmt::Display for SimMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SimMode {
    type Err = SimError;
    fn from_str(s: &str) -> Result<SimMode, SimError> {
        SimMode::all()
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| SimError::Mode(s.to_owned()))
    }
}

/// The network between the two applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Sender and receiver joined by one impaired link each way.
    TwoNode,
    /// 10 Gb/s LAN – impaired link – 10 Gb/s LAN each way (`aerotp_link::Path::papers`).
    Papers,
}

impl Topology {
    pub fn name(self) -> &'static str {
        match self {
            Topology::TwoNode => "two-node",
            Topology::Papers => "papers",
        }
    }
}

impl FromStr for Topology {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Topology, SimError> {
        match s {
            "two-node" => Ok(Topology::TwoNode),
            "papers" => Ok(Topology::Papers),
            _ => Err(SimError::Topology(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_topologies_parse() {
        for m in SimMode::all() {
            assert_eq!(m.name().parse::<SimMode>().unwrap(), m);
        }
        assert!("tcp".parse::<SimMode>().is_err());
        assert_eq!("two-node".parse::<Topology>().unwrap(), Topology::TwoNode);
        assert!("ring".parse::<Topology>().is_err());
    }
}
