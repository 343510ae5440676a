//! The connection configuration of a receiving end, shared by `recv`, the loopback bench and
//! the demo.

use std::time::Duration;

use aerotp_net::ConnectionConfig;

/// A receiving end's connection configuration (`recv`, the loopback bench, the demo): its
/// answers' rate, MACK aggregation and silence bound; the engine's defaults otherwise.
pub fn listener_config(
    rate: u64,
    mack: Option<u16>,
    idle_timeout: Duration,
) -> anyhow::Result<ConnectionConfig> {
    let mut cfg = ConnectionConfig {
        rate_bps: rate,
        idle_timeout,
        linger: crate::send_cmd::LINGER,
        ..Default::default()
    };
    if let Some(m) = mack {
        cfg.mack_count = m;
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(cfg)
}
