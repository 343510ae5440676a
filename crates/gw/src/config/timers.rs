//! The gateway's timers and admission limits: `idle_timeout`, `resume_timeout`,
//! `setup_timeout`, `max_half_open` and `max_connections`, checked.

use std::time::Duration;

use anyhow::{bail, Result};

use super::{FileConfig, Timeouts, DEFAULT_MAX_CONNECTIONS};

impl FileConfig {
    /// `max_half_open` and `max_connections`, each in range and the first within the second.
    pub(super) fn admission(&self) -> Result<(usize, usize)> {
        let conns = match self.max_connections {
            None => DEFAULT_MAX_CONNECTIONS,
            Some(n) if (1..=65_536).contains(&n) => n,
            Some(n) => bail!("max_connections {n}: give 1 to 65536"),
        };
        let half = match self.max_half_open {
            None => 128.min(conns),
            Some(n) if n <= conns => n,
            Some(n) => bail!("max_half_open {n}: give 0 to {conns} (max_connections)"),
        };
        Ok((half, conns))
    }

    /// How long a flow's connection may hear nothing before it is broken; its keep-alive
    /// probes after a third of it (`Ctx::conn_config`), so at least 1 s.
    fn idle_timeout(&self) -> Result<Duration> {
        let d = dur("idle_timeout", &self.idle_timeout, Duration::from_secs(30))?;
        if d < Duration::from_secs(1) {
            bail!("idle_timeout {d:?}: give at least 1s (keep-alives go after a third of it), e.g. 30s");
        }
        Ok(d)
    }

    pub(super) fn setup_timeout(&self) -> Result<Duration> {
        let d = dur(
            "setup_timeout",
            &self.setup_timeout,
            Duration::from_secs(30),
        )?;
        if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
            bail!("setup_timeout '{d:?}': give 1s to 10min, e.g. 30s");
        }
        Ok(d)
    }

    /// `idle_timeout` and `resume_timeout` (default 1 h), checked in that order.
    pub(super) fn timeouts(&self) -> Result<Timeouts> {
        Ok(Timeouts {
            idle: self.idle_timeout()?,
            resume: dur(
                "resume_timeout",
                &self.resume_timeout,
                Duration::from_secs(3600),
            )?,
        })
    }
}

/// A timer setting: above zero and at most 30 days (beyond it a timer is a typo, and deadline
/// arithmetic on `Instant`s must never overflow); the error names the key.
fn dur(key: &str, s: &Option<String>, default: Duration) -> Result<Duration> {
    const MAX: Duration = Duration::from_secs(30 * 24 * 3600);
    let Some(s) = s else {
        return Ok(default);
    };
    let d = aerotp_link::parse_duration(s).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
    if d.is_zero() || d > MAX {
        bail!("{key} '{s}': give a duration above 0 and at most 720h, e.g. 30s or 1h");
    }
    Ok(d)
}
