//! Connection and endpoint settings, with validation that says what is wrong.

use crate::bounds::{MAX_MTU, MIN_MTU};
pub use crate::config_error::ConfigError;
use crate::erasure::ErasureSetting;
use crate::error_control::ErrorControl;
use crate::rate::MIN_RATE_BPS;
use aerotp_wire::Mode;
use std::time::Duration;

/// How strong the per-TPDU forward error correction is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FecSetting {
    /// No parity.
    Off,
    /// Fixed Reed–Solomon parity bytes per codeword (`p` in docs/spec.md §3).
    Parity(u8),
    /// The papers' scale: `N` 32-bit words per MTU-sized TPDU (0–256).
    Words(u16),
    /// Least redundancy for the bit-error rate the receiver reports.
    Auto,
}

impl FecSetting {
    /// Parses `off`, `auto`, `N` (papers' words per TPDU) or `pN` (parity bytes per codeword).
    pub fn parse(s: &str) -> Result<FecSetting, ConfigError> {
        let bad = || ConfigError::Fec(s.to_owned());
        match s {
            "off" | "none" => Ok(FecSetting::Off),
            "auto" => Ok(FecSetting::Auto),
            _ => {
                if let Some(p) = s.strip_prefix('p') {
                    let p: u8 = p.parse().map_err(|_| bad())?;
                    if p > 128 {
                        return Err(bad());
                    }
                    Ok(if p == 0 {
                        FecSetting::Off
                    } else {
                        FecSetting::Parity(p)
                    })
                } else {
                    let w: u16 = s.parse().map_err(|_| bad())?;
                    if w > 256 {
                        return Err(bad());
                    }
                    Ok(if w == 0 {
                        FecSetting::Off
                    } else {
                        FecSetting::Words(w)
                    })
                }
            }
        }
    }
}

/// Bytes of IPv4 and UDP headers around each datagram: what a datagram costs on the link
/// beyond its own bytes (the default `per_packet_overhead`).
pub const IP_UDP_OVERHEAD: usize = 28;

/// The default send buffer, in TPDUs at the connection's MTU (`ConnectionConfig::send_buffer`):
/// about 256 KiB at 1,500 bytes, 1.5 MiB at 9,000. Measured on loopback, the CPU per GB is
/// lowest there at both sizes: a fixed 256 KiB starved the runtime's send turns at 9,000
/// bytes (14.5 against 19.3 Gb/s), a fixed 4 MiB left what was written to fall out of the
/// cache at 1,500 (docs/results/loopback.md, "A send buffer that fits the cache").
pub const SEND_BUFFER_TPDUS: usize = 175;

/// Settings of one connection (both halves). The initiator's mode wins; an acceptor takes its
/// rate and buffers from the listener's config.
///
/// Not split: the engine's public configuration, whose fields its users set by name with
/// `..ConnectionConfig::default()` (48 files of this workspace, in proto, net, sim, pair,
/// gw, labbench, the CLI and fuzz-corpus); grouping them would change every such literal and
/// the API users write against.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    pub mode: Mode,
    /// Sending rate in bits per second, counting `per_packet_overhead` per TPDU: the rate
    /// itself (`RateControl::Fixed`) or the cap of the discovered one (`Discover`).
    pub rate_bps: u64,
    /// Whether `rate_bps` is the rate or the cap of a rate discovered from the
    /// acknowledgements (`crate::rate`). Default fixed, as the papers.
    pub rate_control: crate::rate::RateControl,
    /// Largest datagram (TPDU with its FEC parity), bytes.
    pub mtu: usize,
    /// Bytes below AeroTP counted by the pacer per datagram (IPv4 + UDP = 28).
    pub per_packet_overhead: usize,
    pub fec: FecSetting,
    /// Target residual TPDU loss for `FecSetting::Auto` in FEC-only modes.
    pub fec_target_loss: f64,
    /// Bit-error rate assumed by `FecSetting::Auto` until the first receiver report.
    pub fec_initial_ber: f64,
    /// TPDUs acknowledged per MACK (1–365).
    pub mack_count: u16,
    /// Longest a receiver holds an acknowledgement once the feedback budget allows one;
    /// `None` = 1 ms (aggregation then comes from the budget, `feedback_share`).
    pub ack_delay: Option<Duration>,
    /// Largest share of the return link's rate the receiver's feedback (MACK, ACK, NACK,
    /// SNACK, reports) may take, over any stretch of time longer than a few feedback TPDUs.
    pub feedback_share: f64,
    /// Rate of the return link, bits per second, if it differs from `rate_bps` (a thin return
    /// channel): the feedback budget is `feedback_share` of it. `None`: `rate_bps`.
    pub return_rate_bps: Option<u64>,
    /// Bytes the application may queue unsent before `write` pushes back; `None` (the
    /// default): [`SEND_BUFFER_TPDUS`] TPDUs at the connection's MTU (256 KiB at 1500 bytes).
    /// What was sent and awaits acknowledgement is held apart from it, bounded by the
    /// window, so this only has to cover the time until the application is woken to write
    /// again: a little more than two of the runtime's send turns. Larger only delays what is
    /// written and, measured, costs CPU; smaller starves a turn (docs/results/loopback.md, "A
    /// send buffer that fits the cache").
    pub send_buffer: Option<usize>,
    /// TPDUs a receiver buffers beyond the next in-order one (flow-control window).
    pub recv_window: u32,
    /// Round-trip time assumed before the first measurement.
    pub initial_rtt: Duration,
    /// Lower bound of the retransmission timeout.
    pub min_rto: Duration,
    /// Interval between probes while the peer is silent (outage): resumption within about this.
    pub probe_interval: Duration,
    /// Without anything from the peer for this long, the connection is dropped.
    pub idle_timeout: Duration,
    /// With nothing heard from the peer for this long, an established connection sends a
    /// PROBE (docs/spec.md §4), which a peer in an acknowledged mode answers with feedback:
    /// an idle connection then outlives `idle_timeout` while its peer lives (a gateway's idle
    /// TCP flows). `None` (the default): a connection with nothing to send ends after
    /// `idle_timeout` of silence. Must be shorter than `idle_timeout`.
    pub keep_alive: Option<Duration>,
    /// Confirmed delivery (docs/spec.md §4, "Confirmed delivery"): what this end acknowledges
    /// as `delivered` is what the application has confirmed delivered onward
    /// (`Endpoint::confirm`: written to a TCP socket, a file synced), not what it has read,
    /// and the AFINACK waits until the application has confirmed the end of the stream; as a
    /// sender, this end's half is done only when the peer has confirmed every byte and the
    /// end. A gateway's TCP flows use it so that an acknowledgement means "at the
    /// destination". Needs a mode that acknowledges (reliable, near-reliable,
    /// hybrid-nack-mack), at both ends.
    pub confirm_delivery: bool,
    /// CLOSE_TO: after AFIN, the longest a sender waits for the final acknowledgements.
    pub close_timeout: Duration,
    /// LISTEN_TO: how long a receiver lingers in AFIN_RCVD for late retransmissions.
    pub linger: Duration,
    /// Lossy modes: minimum wait before skipping a missing TPDU.
    pub min_hole_timeout: Duration,
    /// Most bytes this connection holds for its application: TPDUs out of order and data
    /// delivered but not yet read, each body plus 64 bytes (the endpoint's
    /// `max_reorder_bytes` bounds all connections together, and `max_unproven_bytes` those
    /// whose peers are unproven); a TPDU beyond it is dropped and counted
    /// (`tpdus_dropped_memory`), and the retransmitting modes recover it. Default 32 MiB: a
    /// 16,384-TPDU window of full 1500-byte TPDUs needs 24 MiB.
    pub reorder_bytes: usize,
    /// Near-reliable: a cumulative ACK after this many TPDUs. 16 (was 64): the sender tells an
    /// outage from a pause between ACKs by their beat, so at 5 Mb/s a 30-minute outage costs
    /// under 1 % of a 10 MB transfer (64 gave 1.4 %), for about 43 kB of ACKs per 10 MB.
    pub ack_every: u32,
    /// Unreliable mode: drop TPDUs whose payload CRC fails (else deliver them as they are).
    pub crc_check: bool,
    /// Hybrid-nack: how long the sender keeps a TPDU for a possible NACK.
    pub retention: Duration,
    /// Copies of a short, empty ASYN sent back to back before the data (0: the ASYN rides on
    /// the first data TPDU, as in the papers). Redundancy keeps set-up at one propagation delay
    /// under loss; each copy costs a header (52 bytes with IPv4/UDP).
    pub asyn_copies: u8,
    /// Erasure coding across TPDUs for what this end sends (docs/fec.md); `None`: the
    /// default of the connection's mode (`ErrorControl::for_mode(mode).erasure`), which for an acceptor
    /// is the mode the initiator chose.
    pub erasure: Option<ErasureSetting>,
    /// Record a per-TPDU trace (first send, delivery) for delay measurements; bounded.
    pub trace: bool,
    /// What the connection carries, for sharing the endpoint's link among its connections
    /// (`EndpointConfig::link_share`; without one the class changes nothing). Local: not
    /// sent to the peer. Default bulk.
    pub class: crate::TrafficClass,
    /// A listener on a link with no return path (a one-way downlink): a new peer's connection
    /// is proven from its first TPDU and no CHALLENGE is sent, since nothing could answer it
    /// (docs/security.md, "One-way links"). Otherwise such a connection stays unproven: held
    /// within the endpoint's `max_unproven_bytes`, unread by `aerotp_net` readers, and dropped
    /// at the set-up timeout. It gives up address validation: without a key anyone who can reach the port
    /// opens connections that hold memory to the endpoint's bounds, and with one a recording
    /// of an earlier transfer is taken again after a restart. Read by listeners only.
    pub accept_unproven: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            mode: Mode::Reliable,
            rate_bps: 5_000_000,
            rate_control: crate::rate::RateControl::Fixed,
            mtu: 1500,
            per_packet_overhead: IP_UDP_OVERHEAD,
            fec: FecSetting::Off,
            fec_target_loss: 1e-4,
            fec_initial_ber: 1e-4,
            mack_count: 32,
            ack_delay: None,
            feedback_share: 0.1,
            return_rate_bps: None,
            send_buffer: None,
            recv_window: 16_384,
            initial_rtt: Duration::from_millis(100),
            min_rto: Duration::from_millis(20),
            probe_interval: Duration::from_millis(250),
            idle_timeout: Duration::from_secs(40 * 60),
            keep_alive: None,
            confirm_delivery: false,
            close_timeout: Duration::from_secs(10),
            linger: Duration::from_secs(2),
            min_hole_timeout: Duration::from_millis(30),
            reorder_bytes: 32 << 20,
            ack_every: 16,
            crc_check: true,
            retention: Duration::from_secs(2),
            asyn_copies: 3,
            erasure: None,
            trace: false,
            class: crate::TrafficClass::Bulk,
            accept_unproven: false,
        }
    }
}

impl ConnectionConfig {
    /// The send buffer in force, bytes: `send_buffer`, or [`SEND_BUFFER_TPDUS`] at the MTU.
    pub fn send_buffer_bytes(&self) -> usize {
        self.send_buffer
            .unwrap_or(SEND_BUFFER_TPDUS.saturating_mul(self.mtu))
    }

    pub fn with_mode(mode: Mode) -> Self {
        let mut c = ConnectionConfig {
            mode,
            ..Default::default()
        };
        if ErrorControl::for_mode(mode).fec_auto_by_default {
            c.fec = FecSetting::Auto;
        }
        c
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rate_bps < MIN_RATE_BPS {
            return Err(ConfigError::Rate(self.rate_bps));
        }
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if !(1..=365).contains(&self.mack_count) {
            return Err(ConfigError::Mack(self.mack_count));
        }
        if !(self.fec_target_loss > 0.0 && self.fec_target_loss < 1.0) {
            return Err(ConfigError::Target(self.fec_target_loss));
        }
        if !(0.0..0.5).contains(&self.fec_initial_ber) {
            return Err(ConfigError::InitialBer(self.fec_initial_ber));
        }
        if self.recv_window < 16 || self.recv_window > 1 << 20 {
            return Err(ConfigError::Window(self.recv_window));
        }
        if self.send_buffer.is_some_and(|b| b < self.mtu) {
            return Err(ConfigError::SendBuffer(self.send_buffer_bytes()));
        }
        if self.asyn_copies > 16 {
            return Err(ConfigError::AsynCopies(self.asyn_copies));
        }
        if !(self.feedback_share > 0.0 && self.feedback_share <= 1.0) {
            return Err(ConfigError::FeedbackShare(self.feedback_share));
        }
        if let Some(r) = self.return_rate_bps.filter(|&r| r < MIN_RATE_BPS) {
            return Err(ConfigError::ReturnRate(r));
        }
        if self.ack_every == 0 {
            return Err(ConfigError::AckEvery);
        }
        if self.probe_interval.is_zero() || self.min_rto.is_zero() {
            return Err(ConfigError::ZeroTimer);
        }
        if let Some(k) = self
            .keep_alive
            .filter(|k| k.is_zero() || *k >= self.idle_timeout)
        {
            return Err(ConfigError::KeepAlive(k, self.idle_timeout));
        }
        if self.confirm_delivery && !ErrorControl::for_mode(self.mode).delivers_everything() {
            return Err(ConfigError::ConfirmDelivery(self.mode));
        }
        if let Some(e) = &self.erasure {
            e.validate()?;
        }
        Ok(())
    }
}

/// Endpoint-wide settings.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Most connections at once; further ASYNs are refused with RST.
    pub max_connections: usize,
    /// Most events queued for the application before the oldest readiness events are merged.
    pub max_events: usize,
    /// Most datagram-mode messages queued for the application.
    pub max_datagrams: usize,
    /// Pre-shared-key authentication of every TPDU (docs/security.md); `None`: off.
    pub auth: Option<crate::auth::AuthConfig>,
    /// Most bytes all connections hold together for their applications, out of order and
    /// delivered but unread (each is also bounded by its `reorder_bytes`): the endpoint's
    /// bound on receive memory (docs/security.md). Default 192 MiB.
    pub max_reorder_bytes: usize,
    /// Most of `max_reorder_bytes` that the connections whose peers are not yet proven hold
    /// together: what spoofed or never-proven peers can take, and room for real peers' first
    /// flights while they wait one round trip for the proof (docs/security.md). Default
    /// 32 MiB (`DEFAULT_ENDPOINT_UNPROVEN_BYTES`).
    pub max_unproven_bytes: usize,
    /// How long an accepted connection may stay half-open — not yet proven to reach a real
    /// peer at its address (docs/security.md) — before it is dropped. Default 30 s: set-up
    /// takes a round trip plus a re-challenge or two on a lossy link; a spoofed ASYN holds its
    /// slot no longer than this.
    pub setup_timeout: Duration,
    /// Most half-open connections at once; beyond this a listener keeps no state for new
    /// peers and answers them with a RETRY (their echo of its cookie admits them). 0: always
    /// RETRY. Default 128.
    pub max_half_open: usize,
    /// One link shared by all connections by traffic class (`crate::link_share`): the
    /// endpoint re-paces its connections every 50 ms of the caller's time and counts
    /// datagram-mode traffic against the link. `None` (default): each connection keeps the
    /// rate its own configuration gives it.
    pub link_share: Option<crate::LinkShareConfig>,
    /// Most datagram-mode routes with erasure repair kept on each side (sending and receiving
    /// counted apart); beyond it the least recently used is forgotten. A receiving route holds
    /// up to a decoder's worst case for `datagram_repair_mtu` (about 1.8 MB at 1500 bytes), so
    /// the default 32 bounds them at about 58 MB. Default 32.
    pub max_repair_routes: usize,
    /// Largest datagram a receiving route's decoder is sized for; a longer source is
    /// delivered but not protected. Set it to the senders' MTU. Default 1500.
    pub datagram_repair_mtu: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            max_connections: 1024,
            max_events: 4096,
            max_datagrams: 4096,
            auth: None,
            max_reorder_bytes: crate::reorder_budget::DEFAULT_ENDPOINT_REORDER_BYTES,
            max_unproven_bytes: crate::reorder_budget::DEFAULT_ENDPOINT_UNPROVEN_BYTES,
            setup_timeout: Duration::from_secs(30),
            max_half_open: 128,
            link_share: None,
            max_repair_routes: 32,
            datagram_repair_mtu: 1500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fec_setting_parses_and_rejects() {
        assert_eq!(FecSetting::parse("auto").unwrap(), FecSetting::Auto);
        assert_eq!(FecSetting::parse("off").unwrap(), FecSetting::Off);
        assert_eq!(FecSetting::parse("0").unwrap(), FecSetting::Off);
        assert_eq!(FecSetting::parse("96").unwrap(), FecSetting::Words(96));
        assert_eq!(FecSetting::parse("p8").unwrap(), FecSetting::Parity(8));
        for bad in ["257", "-1", "p200", "x", "", "p"] {
            assert!(FecSetting::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_catches_bad_values() {
        assert!(ConnectionConfig::default().validate().is_ok());
        let bad = [
            ConnectionConfig {
                rate_bps: 10,
                ..Default::default()
            },
            ConnectionConfig {
                mtu: 50,
                ..Default::default()
            },
            ConnectionConfig {
                mack_count: 0,
                ..Default::default()
            },
            ConnectionConfig {
                mack_count: 366,
                ..Default::default()
            },
            ConnectionConfig {
                fec_target_loss: 0.0,
                ..Default::default()
            },
            ConnectionConfig {
                recv_window: 1,
                ..Default::default()
            },
            ConnectionConfig {
                send_buffer: Some(10),
                ..Default::default()
            },
            ConnectionConfig {
                fec_initial_ber: 0.7,
                ..Default::default()
            },
            ConnectionConfig {
                fec_initial_ber: f64::NAN,
                ..Default::default()
            },
            ConnectionConfig {
                asyn_copies: 17,
                ..Default::default()
            },
            ConnectionConfig {
                ack_every: 0,
                ..Default::default()
            },
            ConnectionConfig {
                feedback_share: 0.0,
                ..Default::default()
            },
            ConnectionConfig {
                feedback_share: -0.1,
                ..Default::default()
            },
            ConnectionConfig {
                feedback_share: 1.5,
                ..Default::default()
            },
            ConnectionConfig {
                feedback_share: f64::NAN,
                ..Default::default()
            },
            ConnectionConfig {
                return_rate_bps: Some(999),
                ..Default::default()
            },
            ConnectionConfig {
                probe_interval: std::time::Duration::ZERO,
                ..Default::default()
            },
        ];
        assert!(matches!(
            ConnectionConfig {
                return_rate_bps: Some(999),
                ..Default::default()
            }
            .validate(),
            Err(ConfigError::ReturnRate(999))
        ));
        assert!(matches!(
            ConnectionConfig {
                feedback_share: f64::NAN,
                ..Default::default()
            }
            .validate(),
            Err(ConfigError::FeedbackShare(_))
        ));
        for c in bad {
            let err = c.validate().expect_err("bad config accepted");
            // Every message says what to give instead.
            assert!(!err.to_string().is_empty());
        }
        assert_eq!(
            ConnectionConfig {
                asyn_copies: 17,
                ..Default::default()
            }
            .validate(),
            Err(ConfigError::AsynCopies(17))
        );
        assert!(ConnectionConfig {
            asyn_copies: 0,
            ..Default::default()
        }
        .validate()
        .is_ok());
    }
}
