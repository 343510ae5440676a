//! What one simulated transfer looks like: mode, link, file, topology; with validation.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use aerotp_link::{LinkConfig, Path};
use aerotp_proto::{ConnectionConfig, FecSetting, Mode};
use serde::Serialize;

/// Bytes of IPv4 + UDP header below every datagram: serialisation time on every link, and a
/// bit flip there drops the packet (as a kernel would).
pub const IP_UDP_OVERHEAD: usize = 28;

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
        matches!(self, SimMode::Aero(m) if m.is_fully_reliable())
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

/// Why a scenario cannot run.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    Mode(String),
    Topology(String),
    Ber(f64),
    Loss(f64),
    Size,
    Runs,
    Cap,
    Config(String),
    Parse(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Mode(m) => write!(
                f,
                "unknown mode '{m}': give one of reliable, near-reliable, quasi-reliable, hybrid-nack, hybrid-nack-mack, unreliable, datagram, udp"
            ),
            SimError::Topology(t) => write!(f, "unknown topology '{t}': give two-node or papers"),
            SimError::Ber(b) => write!(f, "BER {b} is out of range: give a value in [0, 1)"),
            SimError::Loss(l) => write!(f, "loss {l} is out of range: give a probability in [0, 1]"),
            SimError::Size => write!(f, "size must be at least 1 byte (e.g. 1MB, 500kB, 4096)"),
            SimError::Runs => write!(f, "runs must be at least 1"),
            SimError::Cap => write!(f, "the time cap must be positive"),
            SimError::Config(e) => write!(f, "{e}"),
            SimError::Parse(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Parses a byte size: a number with an optional decimal (kB, MB, GB) or binary (KiB, MiB,
/// GiB) unit, or B. `1MB` = 1 000 000 bytes.
pub fn parse_size(input: &str) -> Result<usize, SimError> {
    let s = input.trim();
    let bad = |why: &str| {
        SimError::Parse(format!(
            "cannot parse size {input:?}: {why} (give e.g. 1MB, 500kB, 1MiB, 4096)"
        ))
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| bad("no number"))?;
    let mult: f64 = match unit.trim() {
        "" | "B" | "b" => 1.0,
        "kB" | "KB" | "k" | "K" => 1e3,
        "MB" | "M" => 1e6,
        "GB" | "G" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad("unknown unit")),
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes.fract() != 0.0 || bytes > 1e12 {
        return Err(bad("not a whole number of bytes"));
    }
    let bytes = bytes as usize;
    if bytes == 0 {
        return Err(SimError::Size);
    }
    Ok(bytes)
}

/// One transfer: a file of `size` bytes from the sender's application to the receiver's.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub mode: SimMode,
    /// Bit-error rate of the impaired link, both directions.
    pub ber: f64,
    /// Random packet loss of the impaired link, both directions.
    pub loss: f64,
    /// Rate of the impaired link, and the AeroTP sending rate.
    pub rate_bps: u64,
    /// One-way propagation delay of the impaired link.
    pub delay: Duration,
    pub size: usize,
    /// Largest datagram (UDP payload) in bytes.
    pub mtu: usize,
    /// FEC strength; `None` = the mode's default (auto for the FEC modes, off otherwise).
    pub fec: Option<FecSetting>,
    /// ACKs per MACK.
    pub mack: u16,
    pub topology: Topology,
    /// Virtual-time cap of a run; a run that reaches it is incomplete.
    pub cap: Duration,
    /// Keep the cumulative delivery timeline (bytes delivered over time) in the result.
    pub timeline: bool,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            mode: SimMode::Aero(Mode::Reliable),
            ber: 0.0,
            loss: 0.0,
            rate_bps: 5_000_000,
            delay: Duration::from_millis(10),
            size: 1_000_000,
            mtu: 1500,
            fec: None,
            mack: 32,
            topology: Topology::Papers,
            cap: Duration::from_secs(600),
            timeline: false,
        }
    }
}

impl Scenario {
    /// The FEC setting in force (the mode's default when none was given).
    pub fn fec_setting(&self) -> FecSetting {
        match (self.fec, self.mode) {
            (Some(f), _) => f,
            (None, SimMode::Aero(m)) if m.fec_by_default() => FecSetting::Auto,
            _ => FecSetting::Off,
        }
    }

    /// The engine settings of both ends (AeroTP modes).
    pub fn connection_config(&self) -> ConnectionConfig {
        let mode = match self.mode {
            SimMode::Aero(m) => m,
            SimMode::Udp => Mode::Datagram,
        };
        ConnectionConfig {
            rate_bps: self.rate_bps,
            mtu: self.mtu,
            per_packet_overhead: IP_UDP_OVERHEAD,
            fec: self.fec_setting(),
            mack_count: self.mack,
            trace: true,
            ..ConnectionConfig::with_mode(mode)
        }
    }

    /// The impaired link's config (one direction; the other is the same).
    pub fn impaired_link(&self) -> LinkConfig {
        LinkConfig {
            rate_bps: self.rate_bps,
            delay: self.delay,
            ber: self.ber,
            loss: self.loss,
            per_packet_overhead: IP_UDP_OVERHEAD as u32,
            protected_prefix: IP_UDP_OVERHEAD as u32,
            ..LinkConfig::default()
        }
    }

    /// Hop configs of one direction, first hop nearest to that direction's sender.
    pub fn hops(&self) -> Vec<LinkConfig> {
        let lossy = self.impaired_link();
        match self.topology {
            Topology::TwoNode => vec![lossy],
            Topology::Papers => Path::papers_hops(lossy)
                .into_iter()
                .map(|mut h| {
                    h.per_packet_overhead = IP_UDP_OVERHEAD as u32;
                    h.protected_prefix = IP_UDP_OVERHEAD as u32;
                    h
                })
                .collect(),
        }
    }

    /// Checks every field and says what is wrong.
    pub fn validate(&self) -> Result<(), SimError> {
        if !(0.0..1.0).contains(&self.ber) {
            return Err(SimError::Ber(self.ber));
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(SimError::Loss(self.loss));
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
        self.connection_config()
            .validate()
            .map_err(|e| SimError::Config(e.to_string()))?;
        for h in self.hops() {
            h.validate().map_err(|e| SimError::Config(e.to_string()))?;
        }
        if self.mode == SimMode::Aero(Mode::Datagram) {
            let p = crate::run::datagram_parity(self);
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
    use super::*;

    #[test]
    fn sizes_parse_decimal_and_binary() {
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("500kB").unwrap(), 500_000);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_500_000);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        for bad in ["0", "0MB", "", "MB", "1XB", "-1", "0.5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn modes_and_topologies_parse() {
        for m in SimMode::all() {
            assert_eq!(m.name().parse::<SimMode>().unwrap(), m);
        }
        assert!("tcp".parse::<SimMode>().is_err());
        assert_eq!("two-node".parse::<Topology>().unwrap(), Topology::TwoNode);
        assert!("ring".parse::<Topology>().is_err());
    }

    #[test]
    fn validation_rejects_bad_values() {
        let ok = Scenario::default();
        assert!(ok.validate().is_ok());
        for bad in [
            Scenario {
                ber: 1.0,
                ..ok.clone()
            },
            Scenario {
                ber: -0.1,
                ..ok.clone()
            },
            Scenario {
                loss: 1.5,
                ..ok.clone()
            },
            Scenario {
                size: 0,
                ..ok.clone()
            },
            Scenario {
                mack: 0,
                ..ok.clone()
            },
            Scenario {
                mtu: 50,
                ..ok.clone()
            },
            Scenario {
                cap: Duration::ZERO,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fec_defaults_follow_the_mode() {
        let s = |m| Scenario {
            mode: m,
            ..Scenario::default()
        };
        assert_eq!(
            s(SimMode::Aero(Mode::QuasiReliable)).fec_setting(),
            FecSetting::Auto
        );
        assert_eq!(
            s(SimMode::Aero(Mode::Reliable)).fec_setting(),
            FecSetting::Off
        );
        assert_eq!(s(SimMode::Udp).fec_setting(), FecSetting::Off);
    }
}
