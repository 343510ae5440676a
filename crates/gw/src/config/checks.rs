//! Checks of the gateway keys that [`FileConfig::settings`] does not parse itself:
//! destinations and allow-list entries (`host:port`), weights, the window and the store (the
//! rate's are `rate.rs`'s). Every error names the key (the flag is the key with `--` and `-`), the
//! value and what is accepted.

use std::net::SocketAddr;

use anyhow::{bail, Result};

use super::{size, FileConfig};

/// Longest destination a flow's first frame carries (`frame.rs`, its text limit).
const MAX_DEST: usize = 1024;

/// A destination as the egress will dial it: `host:port` or `[v6]:port`, a port 1-65535 and a
/// host of IP-literal or DNS-name characters, at most [`MAX_DEST`] bytes (what a
/// flow's first frame carries). Not resolved: the name is resolved at the egress, whose DNS
/// may differ from ours. The error names the key, the value and the accepted form.
pub(crate) fn check_host_port(key: &str, s: &str) -> Result<()> {
    let form = "give host:port or [IPv6]:port with a port 1-65535, e.g. 10.0.0.5:8080, \
                telemetry.example:9000 or [2001:db8::5]:80";
    let bad = |why: &str| anyhow::anyhow!("{key} '{s}': {why}; {form}");
    if s.is_empty() {
        return Err(bad("empty"));
    }
    if s.len() > MAX_DEST {
        return Err(bad(&format!("longer than {} bytes", MAX_DEST)));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return if a.port() == 0 {
            Err(bad("the port is not 1-65535"))
        } else {
            Ok(())
        };
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(bad("no port"));
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(bad("the port is not 1-65535")),
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !name_ok {
        return Err(bad("the host is neither an IP address nor a DNS name"));
    }
    Ok(())
}

/// Two flows whose listeners cannot both bind: the same protocol and port (not 0, which is
/// any free port) on the same address, or on an address and the wildcard that covers it
/// (`0.0.0.0:P` takes `127.0.0.1:P` too; `[::]:P` takes both families). Found when the
/// configuration is read, naming both flows, rather than as a bare "Address already in use"
/// from the second bind.
impl FileConfig {
    pub(super) fn check_listen_ports(routes: &[super::Route]) -> Result<()> {
        let key = |r: &super::Route| match r.kind {
            super::FlowKind::Tcp => "tcp_listen",
            super::FlowKind::Udp => "udp_listen",
        };
        for (i, a) in routes.iter().enumerate() {
            for (j, b) in routes.iter().enumerate().skip(i + 1) {
                let (la, lb) = (a.local, b.local);
                let covers = la.ip() == lb.ip()
                    || la.ip().is_unspecified() && (la.is_ipv6() || lb.is_ipv4())
                    || lb.ip().is_unspecified() && (lb.is_ipv6() || la.is_ipv4());
                if a.kind == b.kind && la.port() != 0 && la.port() == lb.port() && covers {
                    bail!(
                    "[[flow]] {} ({} {la}) and [[flow]] {} ({} {lb}) both listen on {} port {}: \
                     one of them could not bind it; give each flow its own port (or one flow \
                     per address, none of them a wildcard such as 0.0.0.0)",
                    i + 1,
                    key(a),
                    j + 1,
                    key(b),
                    a.kind.name(),
                    la.port()
                );
                }
            }
        }
        Ok(())
    }
}

impl FileConfig {
    /// The checks of the keys [`FileConfig::settings`] does not parse itself: destinations,
    /// allow-list entries, weights, the window and the store. Every
    /// error names the key (the flag is the key with `--` and `-`), the value and what is
    /// accepted, so a gateway never starts with a setting it cannot honour.
    pub(super) fn check_inputs(&self, mtu: usize) -> Result<()> {
        for (key, v) in [
            ("tcp_connect", &self.tcp_connect),
            ("udp_connect", &self.udp_connect),
        ] {
            if let Some(v) = v {
                check_host_port(key, v)?;
            }
        }
        for f in &self.flows {
            if let Some(d) = &f.dest {
                check_host_port("dest", d)?;
            }
        }
        for a in &self.allow {
            check_host_port("allow", a)?;
        }
        if let Some(w) = self.weights {
            if w.iter().any(|&x| !(1..=1000).contains(&x)) {
                bail!("weights {w:?}: give three weights of 1 to 1000 (control, telemetry, bulk)");
            }
        }
        if let Some(w) = &self.window {
            let n = size("window", w)?;
            if n < mtu as u64 || n > 1 << 30 {
                bail!("window {w}: give at least one mtu ({mtu} bytes) and at most 1GiB");
            }
        }
        if let Some(c) = &self.store_capacity {
            let n = size("store_capacity", c)?;
            if n < 64 << 10 {
                bail!("store_capacity {c}: give at least 64KiB (e.g. 256MB)");
            }
        }
        if let Some(p) = &self.store {
            if p.as_os_str().is_empty() {
                bail!("store: empty path; give the directory that holds the custody store");
            }
            if p.exists() && !p.is_dir() {
                bail!(
                    "store {}: not a directory; give a directory (created if missing)",
                    p.display()
                );
            }
            // The gateway creates the store (and missing parents) later: the nearest existing
            // ancestor must take a file, or custody would fail only once a flow needs it.
            let dir = p
                .ancestors()
                .find(|a| !a.as_os_str().is_empty() && a.exists())
                .unwrap_or(std::path::Path::new("."));
            // Unique per check, not only per process: the checks of two configs can run at once
            // (threads of one test binary, say) and must not find each other's probe.
            static PROBE_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let seq = PROBE_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let probe = dir.join(format!(".aerotp-store-probe-{}-{seq}", std::process::id()));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
            {
                Ok(_) => {
                    let _ = std::fs::remove_file(&probe);
                }
                Err(e) => bail!(
                    "store {}: cannot write in {} ({e}); give a directory this user can write",
                    p.display(),
                    dir.display()
                ),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::FlowSpec;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn destinations_and_allow_entries_must_be_host_and_port() {
        for ok in [
            "10.0.0.5:8080",
            "[::1]:80",
            "telemetry.example:9000",
            "a-b.c:1",
        ] {
            check_host_port("dest", ok).unwrap();
        }
        for (bad, why) in [
            ("", "empty"),
            ("10.0.0.5", "no port"),
            ("10.0.0.5:0", "port"),
            ("10.0.0.5:70000", "port"),
            ("host:http", "port"),
            (":80", "host"),
            ("bad host:80", "host"),
            ("-x.example:80", "host"),
            ("a..b:80", "host"),
        ] {
            let e = check_host_port("allow", bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("allow '{bad}'")) && e.contains(why),
                "{e}"
            );
            assert!(e.contains("host:port"), "{e}");
        }
        let long = format!("{}:80", "a".repeat(2000));
        assert!(check_host_port("dest", &long).is_err());
    }

    #[test]
    fn bad_keys_are_refused_naming_them() {
        let base = || FileConfig {
            peer: Some("127.0.0.1:9000".into()),
            ..Default::default()
        };
        let cases: Vec<(FileConfig, &str)> = vec![
            (
                FileConfig {
                    mtu: Some(0),
                    ..base()
                },
                "mtu 0",
            ),
            (
                FileConfig {
                    rate: Some("0".into()),
                    ..base()
                },
                "rate",
            ),
            (
                FileConfig {
                    rate: Some("1000gbit".into()),
                    ..base()
                },
                "rate",
            ),
            (
                FileConfig {
                    window: Some("10".into()),
                    ..base()
                },
                "window",
            ),
            (
                FileConfig {
                    window: Some("0".into()),
                    ..base()
                },
                "window",
            ),
            (
                FileConfig {
                    store_capacity: Some("1kB".into()),
                    ..base()
                },
                "store_capacity",
            ),
            (
                FileConfig {
                    weights: Some([0, 1, 1]),
                    ..base()
                },
                "weights",
            ),
            (
                FileConfig {
                    idle_timeout: Some("0s".into()),
                    ..base()
                },
                "idle_timeout",
            ),
            (
                FileConfig {
                    idle_timeout: Some("-1s".into()),
                    ..base()
                },
                "idle_timeout",
            ),
            (
                FileConfig {
                    resume_timeout: Some("99999h".into()),
                    ..base()
                },
                "resume_timeout",
            ),
            (
                FileConfig {
                    tcp_connect: Some("nowhere".into()),
                    ..base()
                },
                "tcp_connect",
            ),
            (
                FileConfig {
                    allow: vec!["*".into()],
                    ..base()
                },
                "allow",
            ),
            (
                FileConfig {
                    store: Some(PathBuf::new()),
                    ..base()
                },
                "store",
            ),
            (
                FileConfig {
                    store: Some("Cargo.toml".into()),
                    ..base()
                },
                "store",
            ),
            (
                FileConfig {
                    flows: vec![FlowSpec {
                        tcp_listen: Some("127.0.0.1:0".into()),
                        dest: Some("garbage".into()),
                        ..Default::default()
                    }],
                    ..base()
                },
                "dest",
            ),
        ];
        for (c, key) in cases {
            let e = format!("{:#}", c.settings().expect_err(key));
            assert!(e.contains(key), "{key}: {e}");
        }
        base().settings().unwrap();
    }
}
