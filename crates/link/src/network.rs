//! A scenario file: the network between two ends as one or more paths, each with its own
//! forward and (optional) reverse link. One file serves every driver: `aerotp sim`,
//! `aerotp link` and `aerotp lab` all take `--scenario FILE`.
//!
//! ```toml
//! # Two radios: a fast line-of-sight link and a thin satellite channel.
//! [[path]]
//! name = "los"
//! forward = { rate_bps = "5mbit", delay = "10ms", ber = 1e-5 }
//! reverse = { rate_bps = "256kbit", delay = "10ms" }
//!
//! [[path]]
//! name = "satcom"
//! forward = { rate_bps = "2.4kbit", delay = "1.5s" }
//! random_outage = { mean_up = "3min", down_min = "45s", down_max = "50s" }  # both ways
//! ```
//!
//! The keys of `forward` and `reverse` are [`LinkConfig`]'s; `reverse` defaults to a copy of
//! `forward`. A path-level `random_outage` drops both directions together (one schedule);
//! one inside `forward` or `reverse` drops that direction only. `per_packet_overhead` and
//! `protected_prefix` are set by each driver (the packets they carry differ) and refused
//! here. Errors name the file, the key and what is accepted.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{LinkConfig, RandomOutage};
use crate::error::LinkError;

/// Most paths a scenario may have.
pub const MAX_PATHS: usize = 16;

/// One path: a forward (sender → receiver) and a reverse link.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    /// A name for reports (default `path0`, `path1`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Sender → receiver (in the lab: air → ground; in the relay: client → server).
    #[serde(default)]
    pub forward: LinkConfig,
    /// Receiver → sender; `None` = the same as `forward`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<LinkConfig>,
    /// Random outages of both directions at once (one schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_outage: Option<RandomOutage>,
}

impl PathSpec {
    /// A path with these two directions.
    pub fn new(forward: LinkConfig, reverse: Option<LinkConfig>) -> PathSpec {
        PathSpec {
            name: None,
            forward,
            reverse,
            random_outage: None,
        }
    }

    /// The forward link as a driver builds it: the path-level random outage applied with
    /// the schedule seed `outage_seed` (unless the outage gives its own).
    pub fn forward_config(&self, outage_seed: u64) -> LinkConfig {
        self.apply_shared_outage(self.forward.clone(), outage_seed)
    }

    /// The reverse link as a driver builds it (a copy of `forward` when not given), with the
    /// path-level random outage on the same schedule as the forward link's.
    pub fn reverse_config(&self, outage_seed: u64) -> LinkConfig {
        let rev = self.reverse.clone().unwrap_or_else(|| self.forward.clone());
        self.apply_shared_outage(rev, outage_seed)
    }

    fn apply_shared_outage(&self, mut c: LinkConfig, outage_seed: u64) -> LinkConfig {
        if let Some(mut r) = self.random_outage {
            r.seed = Some(r.seed.unwrap_or(outage_seed));
            c.random_outage = Some(r);
        }
        c
    }

    /// The path's name in reports.
    pub fn display_name(&self, index: usize) -> String {
        self.name.clone().unwrap_or_else(|| format!("path{index}"))
    }
}

/// The network of a scenario: one or more paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Free text for reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The paths (`[[path]]` in TOML), at least one.
    #[serde(rename = "path")]
    pub paths: Vec<PathSpec>,
}

impl Default for Network {
    fn default() -> Self {
        Network::single(LinkConfig::default(), None)
    }
}

/// A scenario file that cannot be used: which file, which key, what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    /// The file (or `<flags>` when the network came from the command line).
    pub file: PathBuf,
    /// The key, e.g. `path[1].forward.ber` (empty when the file as a whole is wrong).
    pub key: String,
    /// What is wrong and what is accepted.
    pub problem: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "scenario {}: {}", self.file.display(), self.problem)
        } else {
            write!(
                f,
                "scenario {}: `{}` {}",
                self.file.display(),
                self.key,
                self.problem
            )
        }
    }
}

impl std::error::Error for ScenarioError {}

impl Network {
    /// One path with these directions.
    pub fn single(forward: LinkConfig, reverse: Option<LinkConfig>) -> Network {
        Network {
            description: None,
            paths: vec![PathSpec::new(forward, reverse)],
        }
    }

    /// Reads and checks a scenario file; traces are read relative to the file's folder.
    pub fn load(path: &Path) -> Result<Network, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: path.to_path_buf(),
            key: String::new(),
            problem: format!("cannot be read: {e}"),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Network::from_toml_str(&text, path, dir)
    }

    /// Parses and checks TOML text; `origin` names the file in errors, `base_dir` is where
    /// relative trace files are looked for.
    pub fn from_toml_str(
        text: &str,
        origin: &Path,
        base_dir: &Path,
    ) -> Result<Network, ScenarioError> {
        let err = |key: String, problem: String| ScenarioError {
            file: origin.to_path_buf(),
            key,
            problem,
        };
        let mut net: Network = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            err(
                String::new(),
                match line {
                    Some(l) => format!("line {l}: {msg}"),
                    None => msg,
                },
            )
        })?;
        for (i, p) in net.paths.iter_mut().enumerate() {
            for (dir, c) in [
                ("forward", Some(&mut p.forward)),
                ("reverse", p.reverse.as_mut()),
            ] {
                let Some(c) = c else { continue };
                if let Some(t) = &mut c.trace {
                    t.load(base_dir)
                        .map_err(|e| err(format!("path[{i}].{dir}.trace"), e.to_string()))?;
                }
            }
        }
        net.validate().map_err(|(key, problem)| err(key, problem))?;
        Ok(net)
    }

    /// Checks every path; the error is (key, problem).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.paths.is_empty() {
            return Err((
                "path".into(),
                "is empty; a scenario needs at least one [[path]] with a forward link".into(),
            ));
        }
        if self.paths.len() > MAX_PATHS {
            return Err((
                "path".into(),
                format!(
                    "has {} entries; at most {MAX_PATHS} paths are supported",
                    self.paths.len()
                ),
            ));
        }
        let defaults = LinkConfig::default();
        for (i, p) in self.paths.iter().enumerate() {
            for (dir, c) in [
                ("forward", Some(&p.forward)),
                ("reverse", p.reverse.as_ref()),
            ] {
                let Some(c) = c else { continue };
                let key = |field: &str| format!("path[{i}].{dir}.{field}");
                if c.per_packet_overhead != defaults.per_packet_overhead {
                    return Err((
                        key("per_packet_overhead"),
                        "is set by the driver (28 B of IPv4/UDP for sim and link, the real headers in the lab); remove it".into(),
                    ));
                }
                if c.protected_prefix != defaults.protected_prefix {
                    return Err((
                        key("protected_prefix"),
                        "is set by the driver (28 B of IPv4/UDP for sim and link, 0 in the lab where packets carry their headers); remove it".into(),
                    ));
                }
                c.validate().map_err(|e| match e {
                    LinkError::InvalidConfig { field, problem } => (key(field), problem),
                    other => (format!("path[{i}].{dir}"), other.to_string()),
                })?;
            }
            if let Some(r) = &p.random_outage {
                let c = LinkConfig {
                    random_outage: Some(*r),
                    ..LinkConfig::default()
                };
                c.validate().map_err(|e| match e {
                    LinkError::InvalidConfig { field, problem } => {
                        (format!("path[{i}].{field}"), problem)
                    }
                    other => (format!("path[{i}].random_outage"), other.to_string()),
                })?;
            }
        }
        Ok(())
    }

    /// The TOML text of this network (traces by file name).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot serialise: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(text: &str) -> Result<Network, ScenarioError> {
        Network::from_toml_str(text, Path::new("s.toml"), Path::new("."))
    }

    #[test]
    fn two_paths_with_reverse_and_shared_outage() {
        let n = parse(
            r#"
            description = "two radios"
            [[path]]
            name = "los"
            forward = { rate_bps = "5mbit", delay = "10ms", ber = 1e-5 }
            reverse = { rate_bps = "256kbit" }
            [[path]]
            random_outage = { mean_up = "3min", down_min = "45s", down_max = "50s" }
            [path.forward]
            rate_bps = 2400
            delay = "1.5s"
            jitter = "100ms"
            allow_reorder = true
            [path.forward.burst]
            good_time = "2s"
            bad_time = "50ms"
            ber_bad = 1e-3
            loss_bad = 0.0
            "#,
        )
        .unwrap();
        assert_eq!(n.paths.len(), 2);
        assert_eq!(n.paths[0].reverse_config(7).rate_bps, 256_000);
        assert_eq!(
            n.paths[1].reverse_config(7).delay,
            Duration::from_millis(1500)
        );
        let f = n.paths[1].forward_config(7);
        let r = n.paths[1].reverse_config(7);
        assert_eq!(f.random_outage.unwrap().seed, Some(7));
        assert_eq!(f.random_outage, r.random_outage);
        assert_eq!(n.paths[1].display_name(1), "path1");
        let back = parse(&n.to_toml()).unwrap();
        assert_eq!(back, n);
    }

    #[test]
    fn errors_name_file_key_and_range() {
        for (text, key, needle) in [
            ("", "", "path"),
            ("[[path]]\nforward = { ber = 2 }\n", "path[0].forward.ber", "[0, 1)"),
            ("[[path]]\nforward = { rate_bps = 0 }\n", "path[0].forward.rate_bps", "at least 1"),
            ("[[path]]\nforward = {}\nreverse = { loss = 1.5 }\n", "path[0].reverse.loss", "[0, 1]"),
            ("[[path]]\nforward = { speed = 3 }\n", "", "unknown field"),
            ("[[path]]\nforward = { delay = \"10\" }\n", "", "missing unit"),
            ("[[path]]\nforward = { protected_prefix = 28 }\n", "path[0].forward.protected_prefix", "driver"),
            ("[[path]]\nforward = { burst = { p_gb = 0.1, p_bg = 0.1, good_time = \"1s\", bad_time = \"1s\" } }\n", "path[0].forward.burst", "exactly one"),
            ("[[path]]\nrandom_outage = { mean_up = \"0s\", down_min = \"1s\", down_max = \"2s\" }\n", "path[0].random_outage.mean_up", "mean"),
            ("[[path]]\nforward = { trace = \"/nonexistent/t.csv\" }\n", "path[0].forward.trace", "cannot be read"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            let s = e.to_string();
            assert!(s.contains("s.toml") && s.contains(needle), "{text}: {s}");
        }
    }

    #[test]
    fn traces_load_relative_to_the_file() {
        let dir = std::env::temp_dir().join(format!("aerotp-net-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.csv"), "time_s,rate_bps\n0,1000000\n5,2000000\n").unwrap();
        std::fs::write(
            dir.join("s.toml"),
            "[[path]]\nforward = { trace = { file = \"t.csv\", repeat = true } }\n",
        )
        .unwrap();
        let n = Network::load(&dir.join("s.toml")).unwrap();
        let t = n.paths[0].forward.trace.as_ref().unwrap();
        assert!(t.repeat);
        assert_eq!(t.rows.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
