//! Gateway settings: command-line flags for the simple case, a TOML file (same keys) for many
//! flows (docs/gw/gateway.toml).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use aerotp_net::Mode;
use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::frame::Class;
use crate::sched::Policy;

/// One mapping of a local TCP or UDP port to the remote side.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Ingress: accept TCP connections here.
    pub tcp_listen: Option<String>,
    /// Ingress: receive UDP datagrams here.
    pub udp_listen: Option<String>,
    /// Destination `host:port` at the egress (empty: the egress's `tcp_connect`/`udp_connect`).
    pub dest: Option<String>,
    /// near-reliable (default for TCP), reliable, datagram (default for UDP), quasi-reliable,
    /// unreliable.
    pub mode: Option<String>,
    /// control, telemetry, bulk (default).
    pub class: Option<String>,
    /// FEC setting (off, auto, N words, pN parity bytes).
    pub fec: Option<String>,
}

/// Everything a gateway reads from its TOML file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub peer: Option<String>,
    pub bind: Option<String>,
    pub listen: Option<String>,
    pub tcp_connect: Option<String>,
    pub udp_connect: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    pub allow_any: Option<bool>,
    pub rate: Option<String>,
    pub mtu: Option<usize>,
    pub store: Option<PathBuf>,
    pub store_capacity: Option<String>,
    pub window: Option<String>,
    pub metrics: Option<String>,
    pub priority: Option<String>,
    pub weights: Option<[u32; 3]>,
    pub idle_timeout: Option<String>,
    pub resume_timeout: Option<String>,
    /// FEC of what this gateway sends when a flow does not say: at the egress, the answers
    /// and downloads it carries back (the ingress chooses per flow for its own direction).
    pub fec: Option<String>,
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSpec>,
}

impl FileConfig {
    pub fn load(path: &std::path::Path) -> Result<FileConfig> {
        let s = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&s).with_context(|| format!("bad gateway config {}", path.display()))
    }

    /// Flags win over the file: fills what `self` lacks from `other`.
    pub fn merge(mut self, other: FileConfig) -> FileConfig {
        macro_rules! take {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = other.$f; } )* };
        }
        take!(
            peer,
            bind,
            listen,
            tcp_connect,
            udp_connect,
            allow_any,
            rate,
            mtu,
            store,
            store_capacity,
            window,
            metrics,
            priority,
            weights,
            idle_timeout,
            resume_timeout,
            fec
        );
        self.allow.extend(other.allow);
        self.flows.extend(other.flows);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowKind {
    Tcp,
    Udp,
}

/// A validated flow mapping.
#[derive(Debug, Clone)]
pub struct Route {
    pub kind: FlowKind,
    pub local: SocketAddr,
    pub dest: String,
    pub mode: Mode,
    pub class: Class,
    pub fec: aerotp_net::FecSetting,
}

/// Validated settings of either role.
#[derive(Debug, Clone)]
pub struct Settings {
    pub peer: Option<SocketAddr>,
    pub bind: SocketAddr,
    pub listen: Option<SocketAddr>,
    pub tcp_connect: Option<String>,
    pub udp_connect: Option<String>,
    pub allow: Vec<String>,
    pub allow_any: bool,
    pub rate: u64,
    pub mtu: usize,
    pub store: Option<PathBuf>,
    pub store_capacity: u64,
    pub window: u64,
    pub metrics: Option<SocketAddr>,
    pub policy: Policy,
    pub idle_timeout: Duration,
    pub resume_timeout: Duration,
    pub routes: Vec<Route>,
    /// FEC of the egress's sending direction (`fec` without a flow), off by default.
    pub fec: aerotp_net::FecSetting,
}

/// A size setting by the workspace's one rule ([`aerotp_link::parse_size`]); the error names
/// the key.
fn size(key: &str, s: &str) -> Result<u64> {
    aerotp_link::parse_size(s).map_err(|e| anyhow::anyhow!("{key}: {e}"))
}

fn addr(s: &str, what: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .with_context(|| format!("{what}: cannot resolve '{s}'"))?
        .next()
        .with_context(|| format!("{what}: '{s}' has no address"))
}

fn dur(s: &Option<String>, default: Duration) -> Result<Duration> {
    match s {
        None => Ok(default),
        Some(s) => aerotp_link::parse_duration(s).map_err(|e| anyhow::anyhow!("{e}")),
    }
}

impl FileConfig {
    pub fn settings(&self) -> Result<Settings> {
        let rate = match &self.rate {
            Some(r) => aerotp_link::parse_rate(r).map_err(|e| anyhow::anyhow!("rate: {e}"))?,
            None => 5_000_000,
        };
        if rate < 1000 {
            bail!("rate {rate} b/s too low");
        }
        let policy = match self.priority.as_deref().unwrap_or("weighted") {
            "weighted" => Policy::Weighted {
                weights: self.weights.unwrap_or([8, 4, 1]),
            },
            "strict" => Policy::Strict { floor: 0.02 },
            p => bail!("priority '{p}': give strict or weighted"),
        };
        let fec = match &self.fec {
            Some(s) => aerotp_net::FecSetting::parse(s).context("fec (--fec or the `fec` key)")?,
            None => aerotp_net::FecSetting::Off,
        };
        let mut routes = Vec::new();
        for f in &self.flows {
            let (kind, local) = match (&f.tcp_listen, &f.udp_listen) {
                (Some(t), None) => (FlowKind::Tcp, addr(t, "tcp_listen")?),
                (None, Some(u)) => (FlowKind::Udp, addr(u, "udp_listen")?),
                _ => bail!("each [[flow]] needs exactly one of tcp_listen, udp_listen"),
            };
            let mode: Mode = match &f.mode {
                Some(m) => m.parse().map_err(|e: String| anyhow::anyhow!("{e}"))?,
                None if kind == FlowKind::Tcp => Mode::NearReliable,
                None => Mode::Datagram,
            };
            let ok = match kind {
                FlowKind::Tcp => matches!(mode, Mode::NearReliable | Mode::Reliable),
                FlowKind::Udp => matches!(
                    mode,
                    Mode::Datagram | Mode::QuasiReliable | Mode::Unreliable
                ),
            };
            if !ok {
                bail!(
                    "mode {mode} is not offered for {kind:?} flows (TCP: near-reliable, reliable; \
                     UDP: datagram, quasi-reliable, unreliable): change the flow's mode"
                );
            }
            let class: Class = match &f.class {
                Some(c) => c.parse().map_err(|e: String| anyhow::anyhow!("{e}"))?,
                None => Class::Bulk,
            };
            let fec = match &f.fec {
                Some(s) => aerotp_net::FecSetting::parse(s)?,
                None if self.fec.is_some() => fec,
                None if mode == Mode::QuasiReliable => aerotp_net::FecSetting::Auto,
                None => aerotp_net::FecSetting::Off,
            };
            routes.push(Route {
                kind,
                local,
                dest: f.dest.clone().unwrap_or_default(),
                mode,
                class,
                fec,
            });
        }
        Ok(Settings {
            peer: self.peer.as_deref().map(|p| addr(p, "peer")).transpose()?,
            bind: addr(self.bind.as_deref().unwrap_or("0.0.0.0:0"), "bind")?,
            listen: self
                .listen
                .as_deref()
                .map(|p| addr(p, "listen"))
                .transpose()?,
            tcp_connect: self.tcp_connect.clone(),
            udp_connect: self.udp_connect.clone(),
            allow: self.allow.clone(),
            allow_any: self.allow_any.unwrap_or(false),
            rate,
            mtu: self.mtu.unwrap_or(1400),
            store: self.store.clone(),
            store_capacity: size(
                "store_capacity",
                self.store_capacity.as_deref().unwrap_or("256MB"),
            )?,
            window: size("window", self.window.as_deref().unwrap_or("256KiB"))?,
            metrics: self
                .metrics
                .as_deref()
                .map(|p| addr(p, "metrics"))
                .transpose()?,
            policy,
            idle_timeout: dur(&self.idle_timeout, Duration::from_secs(30))?,
            resume_timeout: dur(&self.resume_timeout, Duration::from_secs(3600))?,
            routes,
            fec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_net::FecSetting;

    fn flow(udp: bool, mode: Option<&str>, fec: Option<&str>) -> FlowSpec {
        let local = Some("127.0.0.1:0".to_string());
        FlowSpec {
            tcp_listen: if udp { None } else { local.clone() },
            udp_listen: if udp { local } else { None },
            mode: mode.map(String::from),
            fec: fec.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn fec_per_flow_then_gateway_then_mode_default() {
        let cfg = FileConfig {
            flows: vec![
                flow(false, None, None),
                flow(false, Some("reliable"), Some("p16")),
                flow(true, Some("quasi-reliable"), None),
            ],
            ..Default::default()
        };
        let s = cfg.settings().unwrap();
        let fecs: Vec<FecSetting> = s.routes.iter().map(|r| r.fec).collect();
        assert_eq!(
            fecs,
            [FecSetting::Off, FecSetting::Parity(16), FecSetting::Auto]
        );
        assert_eq!(s.fec, FecSetting::Off);

        let cfg = FileConfig {
            fec: Some("auto".into()),
            ..cfg
        };
        let s = cfg.settings().unwrap();
        let fecs: Vec<FecSetting> = s.routes.iter().map(|r| r.fec).collect();
        assert_eq!(
            fecs,
            [FecSetting::Auto, FecSetting::Parity(16), FecSetting::Auto]
        );
        assert_eq!(s.fec, FecSetting::Auto);
    }

    #[test]
    fn flags_win_over_the_file_and_bad_values_say_which_key() {
        let flags = FileConfig {
            fec: Some("p8".into()),
            ..Default::default()
        };
        let file = FileConfig {
            fec: Some("auto".into()),
            rate: Some("2mbit".into()),
            ..Default::default()
        };
        let s = flags.merge(file).settings().unwrap();
        assert_eq!((s.fec, s.rate), (FecSetting::Parity(8), 2_000_000));

        let bad = FileConfig {
            fec: Some("lots".into()),
            ..Default::default()
        };
        let e = format!("{:#}", bad.settings().unwrap_err());
        assert!(e.contains("fec"), "{e}");
        let bad = FileConfig {
            flows: vec![FlowSpec {
                tcp_listen: Some("127.0.0.1:0".into()),
                mode: Some("quasi-reliable".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let e = format!("{:#}", bad.settings().unwrap_err());
        assert!(e.contains("not offered for Tcp flows"), "{e}");
    }

    #[test]
    fn sizes_follow_the_shared_rule_and_errors_name_the_key() {
        let c = FileConfig {
            store_capacity: Some("1mb".into()),
            window: Some("64KiB".into()),
            ..Default::default()
        };
        let s = c.settings().unwrap();
        assert_eq!((s.store_capacity, s.window), (1_000_000, 65_536));
        for (key, bad) in [
            ("store_capacity", "0"),
            ("window", "1.5B"),
            ("window", "8Mbit"),
        ] {
            let mut c = FileConfig::default();
            if key == "window" {
                c.window = Some(bad.into());
            } else {
                c.store_capacity = Some(bad.into());
            }
            let e = format!("{:#}", c.settings().unwrap_err());
            assert!(e.contains(key) && e.contains(bad), "{e}");
        }
    }
}
