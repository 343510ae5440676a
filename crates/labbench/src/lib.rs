//! Side-by-side benchmarks in the TUN lab (`aerotp-lab`): kernel TCP (cubic, reno, bbr), QUIC
//! (quinn), plain UDP and AeroTP (`aerotp-net`) over the same emulated link, real kernels, real
//! sockets. Three benches:
//!
//! * [`lossy`]: goodput, delivered bytes and one-way delay against the bit-error rate;
//! * [`setup`]: connection set-up to the first data byte at the receiver against packet loss;
//! * [`outage`]: a transfer across a long outage: bytes lost, survival, time back to full rate.
//!
//! Every transfer runs in a fresh lab (no queue carries over); for one point and run, every
//! protocol gets a lab with the same seed, so the same impairment draws as far as the traffic
//! lets them be the same. Sender in the air namespace, receiver in the ground namespace, each a
//! thread with its own single-threaded tokio runtime; both share the process clock, which
//! timestamps carried in the data use for one-way delays.

pub mod lossy;
pub mod multipath;
pub mod outage;
pub mod payload;
pub mod setup;
pub mod transfer;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aerotp_lab::{Lab, LabConfig, LinkConfig};
use anyhow::Result;

pub use transfer::{Cc, Outcome, Proto, Spec};

/// Fresh lab: the same link config both ways (rate, delay, BER, loss, outages), `seed`.
pub fn lab(link: &LinkConfig, seed: u64) -> Result<Lab> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Lab::start(LabConfig {
        forward: link.clone(),
        reverse: link.clone(),
        seed,
        name: Some(format!("lb{n}")),
    })
}

/// A link of `rate_bps`, one-way `delay`, the lab's default queue (100 × 1500 B).
pub fn link(rate_bps: u64, delay: Duration) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay,
        ..LinkConfig::default()
    }
}

/// Mean, median and 95th percentile of `v` (NaN if empty).
pub fn summary(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let q = |p: f64| {
        // Nearest rank.
        let k = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
        s[k - 1]
    };
    (mean, q(0.5), q(0.95))
}

/// The protocols of the `lossy` bench, in table order.
pub fn default_protocols() -> Vec<Proto> {
    [
        "tcp-cubic",
        "tcp-reno",
        "tcp-bbr",
        "quic",
        "udp",
        "aerotp-reliable",
        "aerotp-near-reliable",
        "aerotp-hybrid-nack-mack",
        "aerotp-quasi-reliable",
    ]
    .iter()
    .map(|s| Proto::parse(s).expect("known protocol"))
    .collect()
}

/// Shell-style rendering of the command line (for reports).
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$*?".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        let (mean, med, p95) = summary(&v);
        assert!((mean - 10.5).abs() < 1e-12);
        assert_eq!(med, 10.0);
        assert_eq!(p95, 19.0);
        assert!(summary(&[]).0.is_nan());
    }

    #[test]
    fn protocol_names_round_trip() {
        for p in default_protocols() {
            assert_eq!(Proto::parse(&p.name()).unwrap().name(), p.name());
        }
        assert!(Proto::parse("aerotp-datagram").is_err());
        assert!(Proto::parse("tcp-vegas").is_err());
    }
}
