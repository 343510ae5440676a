//! What a transfer is and what it measured: the protocols, the request, the outcome.

use std::time::{Duration, Instant};

use aerotp_net::{ConnectionConfig, FecSetting, Mode};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;

/// Stream block size (divides 1 MB).
pub const STREAM_BLOCK: usize = 500;
/// UDP datagram payload: a 1500-byte IP packet.
pub const UDP_BLOCK: usize = 1472;

/// Kernel TCP congestion control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    Cubic,
    Reno,
    Bbr,
}

impl Cc {
    pub fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Reno => "reno",
            Cc::Bbr => "bbr",
        }
    }
}

/// A protocol under test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Proto {
    Tcp(Cc),
    /// Kernel MPTCP with this congestion control on its subflows.
    Mptcp(Cc),
    Quic,
    Udp,
    Aero(Mode, FecSetting),
}

impl Proto {
    pub fn name(&self) -> String {
        match self {
            Proto::Tcp(cc) => format!("tcp-{}", cc.name()),
            Proto::Mptcp(cc) => format!("mptcp-{}", cc.name()),
            Proto::Quic => "quic".into(),
            Proto::Udp => "udp".into(),
            Proto::Aero(m, _) => format!("aerotp-{m}"),
        }
    }

    /// Parses `tcp-cubic`, `tcp-reno`, `tcp-bbr`, `mptcp-cubic`, `mptcp-reno`, `mptcp-bbr`,
    /// `quic`, `udp`, `aerotp-<mode>` (with the
    /// mode's default FEC, `auto` for the FEC modes).
    pub fn parse(s: &str) -> Result<Proto> {
        Ok(match s {
            "tcp-cubic" => Proto::Tcp(Cc::Cubic),
            "tcp-reno" => Proto::Tcp(Cc::Reno),
            "tcp-bbr" => Proto::Tcp(Cc::Bbr),
            "mptcp-cubic" => Proto::Mptcp(Cc::Cubic),
            "mptcp-reno" => Proto::Mptcp(Cc::Reno),
            "mptcp-bbr" => Proto::Mptcp(Cc::Bbr),
            "quic" => Proto::Quic,
            "udp" => Proto::Udp,
            other => {
                let Some(m) = other.strip_prefix("aerotp-") else {
                    bail!("unknown protocol {other:?} (tcp-cubic, tcp-reno, tcp-bbr, mptcp-cubic, mptcp-reno, mptcp-bbr, quic, udp, aerotp-<mode>)")
                };
                let mode: Mode = m.parse().map_err(|e: String| anyhow!(e))?;
                if mode == Mode::Datagram {
                    bail!("aerotp-datagram carries messages, not a stream");
                }
                Proto::Aero(mode, ConnectionConfig::with_mode(mode).fec)
            }
        })
    }

    /// Whether every byte must arrive (the receiver checks SHA-256 of the stream).
    pub fn is_stream_reliable(&self) -> bool {
        match self {
            Proto::Tcp(_) | Proto::Mptcp(_) | Proto::Quic => true,
            Proto::Udp => false,
            Proto::Aero(m, _) => matches!(
                m,
                Mode::Reliable | Mode::NearReliable | Mode::HybridNackMack
            ),
        }
    }

    pub(super) fn block(&self) -> usize {
        match self {
            Proto::Udp => UDP_BLOCK,
            _ => STREAM_BLOCK,
        }
    }
}

/// What to transfer and how.
#[derive(Debug, Clone)]
pub struct Spec {
    pub size: u64,
    /// Link rate (AeroTP and UDP pace at it).
    pub rate_bps: u64,
    /// Longest a transfer may take (from the sender's start).
    pub cap: Duration,
    /// UDP port of the receiver (ground).
    pub port: u16,
    /// Keep per-block arrival times (rate timelines).
    pub timeline: bool,
    /// AeroTP only: the ground's addresses on the lab's other paths. The sender adds each as
    /// a path of its connection (docs/spec.md §9); both ends bind the wildcard address, so
    /// each path's datagrams leave by the interface its subnet routes to.
    pub extra_paths: Vec<std::net::IpAddr>,
}

/// Engine counters of an AeroTP transfer, for diagnosis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AeroStats {
    pub outcome: String,
    pub guarantee_met: bool,
    pub tpdus_sent: u64,
    pub tpdus_retransmitted: u64,
    pub timeouts: u64,
    pub probes: u64,
    pub nacks_received: u64,
    pub fec_parity: u8,
    pub measured_ber: f64,
    pub rx_corrected: u64,
    pub rx_corrupted: u64,
    pub srtt_ms: f64,
    pub outages: u64,
}

/// One transfer's measurements.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub protocol: String,
    pub size: u64,
    /// Distinct intact payload bytes at the receiver.
    pub delivered: u64,
    pub complete: bool,
    /// SHA-256 of the received stream equals the sender's (stream protocols).
    pub sha_ok: bool,
    /// Sender start (before connecting).
    pub start: Instant,
    pub first_arrival: Option<Instant>,
    /// Arrival of the last new intact block.
    pub last_new: Option<Instant>,
    /// When the receiver saw the end (EOF, idle, error or the cap).
    pub end: Instant,
    pub mean_delay_s: Option<f64>,
    pub error: Option<String>,
    pub aero: Option<AeroStats>,
    pub arrivals: Vec<(Instant, u32)>,
}

impl Outcome {
    /// delivered × 8 / (last byte − sender start).
    pub fn goodput_bps(&self) -> f64 {
        match self.last_new {
            Some(t) if self.delivered > 0 => {
                let d = t.saturating_duration_since(self.start).as_secs_f64();
                if d > 0.0 {
                    self.delivered as f64 * 8.0 / d
                } else {
                    0.0
                }
            }
            _ => 0.0,
        }
    }
    pub fn elapsed_s(&self) -> f64 {
        self.end.saturating_duration_since(self.start).as_secs_f64()
    }
}
