//! What one simulated transfer looks like: mode, network, file, topology, and the engine
//! and link settings derived from it.

use std::time::Duration;

use aerotp_link::{LinkConfig, Network, Path};
use aerotp_proto::{ConnectionConfig, ErasureChoice, FecSetting, Mode, RateControl};

use super::mode::{SimMode, Topology};
use crate::workload::Workload;

/// Bytes of IPv4 + UDP header below every datagram: serialisation time on every link, and a
/// bit flip there drops the packet (as a kernel would).
pub const IP_UDP_OVERHEAD: usize = 28;

/// One simulated transfer: the network (one or more paths, each with its forward and reverse
/// link), the engine's settings and what the applications do.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub mode: SimMode,
    /// The impaired link(s): path i's forward (sender → receiver) and reverse links. The
    /// driver adds the 28 B IPv4/UDP overhead and protected prefix, and the LAN hops of the
    /// `papers` topology, around each.
    pub network: Network,
    /// AeroTP's sending rate (and UDP's pacing rate), bit/s; with `rate_control` discover,
    /// the cap of the discovered rate.
    pub rate_bps: u64,
    /// Whether AeroTP paces at `rate_bps` (fixed, the papers' open loop) or discovers its
    /// rate under it (`send_rate = "auto"`, `max_rate`).
    pub rate_control: RateControl,
    /// Bytes of the bulk file (the `bulk` workload).
    pub size: usize,
    /// Largest datagram (UDP payload) in bytes.
    pub mtu: usize,
    /// FEC strength; `None` = the mode's default (auto in every mode but unreliable and datagram).
    pub fec: Option<FecSetting>,
    /// Erasure coding across TPDUs (what the sender chose; the rest is the mode's default).
    pub erasure: ErasureChoice,
    /// ACKs per MACK.
    pub mack: u16,
    pub topology: Topology,
    /// Virtual-time cap of a run; a run that reaches it is incomplete.
    pub cap: Duration,
    /// Keep the cumulative delivery timeline (bytes delivered over time) in the result.
    pub timeline: bool,
    /// What the applications write and when.
    pub workload: Workload,
    /// With several paths: who spreads the datagrams over them.
    pub striping: Striping,
    /// A radio beside the sender says each forward link's rate as its trace changes it, as
    /// a DLEP modem would (`RadioSignal::Rate`, docs/dlep.md). Off by default.
    pub radio_follows_trace: bool,
}

/// Who spreads a connection's datagrams over several paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Striping {
    /// The engine: one path per peer address, the rate shared by what each path delivers,
    /// paths declared down and probed (docs/spec.md §9).
    #[default]
    Engine,
    /// Below an engine that sees one path, in proportion to the paths' rates, as Linux
    /// `teql` stripes a link (seed 003's set-up; the baseline of docs/results/multipath.md).
    Below,
}

impl Default for Scenario {
    /// The papers' link: 5 Mb/s, 10 ms, no impairment, both ways; 1 MB bulk, reliable.
    fn default() -> Self {
        Scenario {
            mode: SimMode::Aero(Mode::Reliable),
            network: Network::single(
                LinkConfig {
                    rate_bps: 5_000_000,
                    delay: Duration::from_millis(10),
                    ..LinkConfig::default()
                },
                None,
            ),
            rate_bps: 5_000_000,
            rate_control: RateControl::Fixed,
            size: 1_000_000,
            mtu: 1500,
            fec: None,
            erasure: ErasureChoice::default(),
            mack: 32,
            topology: Topology::Papers,
            cap: Duration::from_secs(600),
            timeline: false,
            workload: Workload::Bulk,
            striping: Striping::Engine,
            radio_follows_trace: false,
        }
    }
}

impl Scenario {
    /// Path 0's forward link: what the summary reports as the link (JSON keys ber, loss,
    /// delay_s).
    pub fn link0(&self) -> &LinkConfig {
        &self.network.paths[0].forward
    }

    /// BER of path 0's forward link.
    pub fn ber(&self) -> f64 {
        self.link0().ber
    }

    /// Random loss of path 0's forward link.
    pub fn loss(&self) -> f64 {
        self.link0().loss
    }

    /// Propagation delay of path 0's forward link.
    pub fn delay(&self) -> Duration {
        self.link0().delay
    }

    /// Applies `f` to both directions of every path (a reverse that follows the forward
    /// link stays following it).
    pub fn with_links(mut self, f: impl Fn(&mut LinkConfig)) -> Scenario {
        for p in &mut self.network.paths {
            f(&mut p.forward);
            if let Some(r) = &mut p.reverse {
                f(r);
            }
        }
        self
    }

    /// Sets the rate of every link and the sending rate (what `--rate` means).
    pub fn with_rate(self, rate_bps: u64) -> Scenario {
        let mut s = self.with_links(|l| l.rate_bps = rate_bps);
        s.rate_bps = rate_bps;
        s
    }

    /// Sum of the paths' forward link rates (the sending rate a scenario file implies).
    pub fn forward_rate_sum(&self) -> u64 {
        self.network
            .paths
            .iter()
            .map(|p| p.forward.rate_bps)
            .fold(0u64, u64::saturating_add)
    }

    /// The FEC setting in force (the mode's default when none was given).
    pub fn fec_setting(&self) -> FecSetting {
        match (self.fec, self.mode) {
            (Some(f), _) => f,
            (None, SimMode::Aero(m))
                if aerotp_proto::ErrorControl::for_mode(m).fec_auto_by_default =>
            {
                FecSetting::Auto
            }
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
            rate_control: self.rate_control,
            mtu: self.mtu,
            per_packet_overhead: IP_UDP_OVERHEAD,
            fec: self.fec_setting(),
            mack_count: self.mack,
            // Validated with the scenario (`Scenario::validate`).
            erasure: self
                .erasure
                .resolve(aerotp_proto::ErrorControl::for_mode(mode).erasure)
                .unwrap_or(None),
            trace: true,
            ..ConnectionConfig::with_mode(mode)
        }
    }

    /// The receiver's listener: the sender's settings, its feedback budget a share of what
    /// the return links carry, and, where no return link carries anything (every path's
    /// reverse loss 1: a one-way downlink), peers taken unproven, as a receiver configured
    /// for such a link does (`ConnectionConfig::accept_unproven`; nothing could answer its
    /// CHALLENGE).
    pub fn listen_config(&self) -> ConnectionConfig {
        let paths = &self.network.paths;
        let reverse_rate: u64 = paths.iter().map(|p| p.reverse_config(0).rate_bps).sum();
        ConnectionConfig {
            return_rate_bps: Some(reverse_rate.max(1000)),
            accept_unproven: paths.iter().all(|p| p.reverse_config(0).loss >= 1.0),
            ..self.connection_config()
        }
    }

    /// The simulator's form of one impaired link: the 28 B IPv4/UDP overhead and prefix.
    fn impaired(mut c: LinkConfig) -> LinkConfig {
        c.per_packet_overhead = IP_UDP_OVERHEAD as u32;
        c.protected_prefix = IP_UDP_OVERHEAD as u32;
        c
    }

    /// Hop configs of path `i`'s forward (`forward = true`) or reverse direction, first hop
    /// nearest to that direction's sender; `outage_seed` is the path-level random outage's
    /// schedule seed.
    pub fn hops(&self, i: usize, forward: bool, outage_seed: u64) -> Vec<LinkConfig> {
        let p = &self.network.paths[i];
        let lossy = Scenario::impaired(if forward {
            p.forward_config(outage_seed)
        } else {
            p.reverse_config(outage_seed)
        });
        match self.topology {
            Topology::TwoNode => vec![lossy],
            Topology::Papers => Path::papers_hops(lossy)
                .into_iter()
                .map(Scenario::impaired)
                .collect(),
        }
    }
}

/// Parity per codeword for datagram mode (no feedback, so `auto` means the strength for the
/// engine's initial BER assumption).
pub fn datagram_parity(s: &Scenario) -> u8 {
    aerotp_proto::datagram_parity(s.fec_setting(), s.mtu, &s.connection_config())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            FecSetting::Auto
        );
        assert_eq!(
            s(SimMode::Aero(Mode::Unreliable)).fec_setting(),
            FecSetting::Off
        );
        assert_eq!(s(SimMode::Udp).fec_setting(), FecSetting::Off);
    }
}
