use std::fmt;
use std::str::FromStr;

/// The transfer mode of a TPDU: which error-control parts the connection composes (the engine
/// decides what each mode does in one table: `aerotp_proto::ErrorControl::for_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Selective-repeat ARQ with MACK aggregation: every byte delivered, in order.
    Reliable = 0,
    /// ARQ driven by SNACKs and NACKs with sparse cumulative ACKs (custody at a gateway).
    NearReliable = 1,
    /// FEC only, no acknowledgements: statistical reliability.
    QuasiReliable = 2,
    /// FEC plus a NACK for TPDUs that arrived but could not be corrected.
    HybridNack = 3,
    /// FEC, NACK, MACK and retransmission timeout: full reliability.
    HybridNackMack = 4,
    /// Sequence numbers and ordering only, no correction.
    Unreliable = 5,
    /// No connection state at all.
    Datagram = 6,
}

impl Mode {
    pub const ALL: [Mode; 7] = [
        Mode::Reliable,
        Mode::NearReliable,
        Mode::QuasiReliable,
        Mode::HybridNack,
        Mode::HybridNackMack,
        Mode::Unreliable,
        Mode::Datagram,
    ];

    pub fn from_u8(v: u8) -> Option<Mode> {
        Mode::ALL.get(usize::from(v)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Reliable => "reliable",
            Mode::NearReliable => "near-reliable",
            Mode::QuasiReliable => "quasi-reliable",
            Mode::HybridNack => "hybrid-nack",
            Mode::HybridNackMack => "hybrid-nack-mack",
            Mode::Unreliable => "unreliable",
            Mode::Datagram => "datagram",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown transfer mode '{s}'; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_explained() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>().unwrap(), m);
            assert_eq!(Mode::from_u8(m as u8), Some(m));
        }
        assert!(Mode::from_u8(7).is_none());
        let err = "fast".parse::<Mode>().unwrap_err();
        assert!(err.contains("hybrid-nack-mack"), "{err}");
    }
}
