//! Named settings: THE place plans and flags set a scenario key (engine, application and
//! link keys in every form).

use aerotp_link::LinkConfig;
use aerotp_proto::FecSetting;

use super::error::SimError;
use super::model::Scenario;
use super::values::{parse_size, text, value_text};

/// The engine and application keys `Scenario::set` takes besides the link keys.
pub const ENGINE_KEYS: &str = "mode, size, mtu, fec, mack, topology, cap, send_rate (a rate, or auto: discovered), max_rate (discovered under this cap), rate (every link's rate_bps and send_rate), workload, workload.KEY";

/// The forms a link key takes in `Scenario::set`.
pub const LINK_KEY_FORMS: &str = "K (both directions of every path), forward.K, reverse.K, path[i].K, path[i].forward.K, path[i].reverse.K, where K is a link config key (rate_bps, delay, jitter, allow_reorder, ber, loss, duplicate, queue_bytes, queue_packets, max_in_flight, burst, burst.good_time, outages, periodic_outage, random_outage.mean_up, trace, ...)";

/// Which direction(s) a link key applies to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dir {
    Both,
    Forward,
    Reverse,
}

impl Scenario {
    /// Applies one named setting: THE place plans and flags set a scenario key.
    ///
    /// Engine/application keys: see [`ENGINE_KEYS`]. Link keys: any [`LinkConfig`] key,
    /// nested ones with dots (`burst.good_time`), in the forms of [`LINK_KEY_FORMS`]. A link
    /// key is applied by a serde round trip of the link config through `toml::Value`, so
    /// every key the link model knows works with its own parsing (units, `"5mbit"`,
    /// `"10ms"`). The value's form is checked here; a range the link refuses for this very
    /// key is reported here too; checks that couple keys (burst sojourn pairs, down_min ≤
    /// down_max) wait for [`Scenario::validate`], so keys can be set in any order.
    pub fn set(&mut self, key: &str, value: &toml::Value) -> Result<(), SimError> {
        let err = |problem: String| SimError::Setting {
            key: key.to_owned(),
            value: value_text(value),
            problem,
        };
        match key {
            "mode" => {
                self.mode = text(value)
                    .parse()
                    .map_err(|e: SimError| err(e.to_string()))?
            }
            "size" => self.size = parse_size(&text(value)).map_err(|e| err(e.to_string()))?,
            "mtu" => {
                self.mtu = text(value)
                    .parse()
                    .map_err(|_| err("is not a whole number of bytes (e.g. 1500)".into()))?
            }
            "fec" => {
                self.fec = Some(FecSetting::parse(&text(value)).map_err(|e| err(e.to_string()))?)
            }
            "erasure" => {
                self.erasure.mode = Some(
                    aerotp_proto::ErasureMode::parse(&text(value))
                        .map_err(|e| err(e.to_string()))?,
                )
            }
            "max_delay" => {
                self.erasure.max_delay = Some(
                    aerotp_link::parse_duration(&text(value)).map_err(|e| err(e.to_string()))?,
                )
            }
            "erasure_target" => {
                let t: f64 = text(value)
                    .parse()
                    .map_err(|_| err("is not a residual loss rate (e.g. 1e-4)".into()))?;
                if !(t > 0.0 && t < 1.0) {
                    return Err(err("must be between 0 and 1 (exclusive), e.g. 1e-4".into()));
                }
                self.erasure.target_residual = Some(t);
            }
            "mack" => {
                self.mack = text(value)
                    .parse()
                    .map_err(|_| err("is not a MACK count (1-365)".into()))?
            }
            "topology" => {
                self.topology = text(value)
                    .parse()
                    .map_err(|e: SimError| err(e.to_string()))?
            }
            "cap" => {
                self.cap =
                    aerotp_link::parse_duration(&text(value)).map_err(|e| err(e.to_string()))?
            }
            "send_rate" if text(value) == "auto" => {
                self.rate_control = aerotp_proto::RateControl::Discover;
                self.rate_bps = aerotp_proto::DEFAULT_RATE_CAP_BPS;
            }
            // Parsed before anything is set: a bad value leaves the scenario as it was.
            "send_rate" | "max_rate" => {
                let r = aerotp_link::parse_rate(&text(value)).map_err(|e| err(e.to_string()))?;
                self.rate_control = if key == "max_rate" {
                    aerotp_proto::RateControl::Discover
                } else {
                    aerotp_proto::RateControl::Fixed
                };
                self.rate_bps = r;
            }
            "rate" => {
                let r = aerotp_link::parse_rate(&text(value)).map_err(|e| err(e.to_string()))?;
                *self = std::mem::take(self).with_rate(r);
            }
            k if k == "workload" || k.starts_with("workload.") => {
                self.workload.set(&k["workload".len()..], value)?
            }
            _ => self.set_link_key(key, value)?,
        }
        Ok(())
    }

    /// `[path[i].][forward.|reverse.]K`
    fn set_link_key(&mut self, key: &str, value: &toml::Value) -> Result<(), SimError> {
        let link_key = LinkKey::parse(key, value, self.network.paths.len())?;
        let indices: Vec<usize> = match link_key.path {
            Some(i) => vec![i],
            None => (0..self.network.paths.len()).collect(),
        };
        for i in indices {
            let p = &mut self.network.paths[i];
            // A reverse link that follows the forward one must be materialised before one
            // direction alone changes.
            if link_key.dir != Dir::Both && p.reverse.is_none() {
                p.reverse = Some(p.forward.clone());
            }
            let targets: Vec<&mut LinkConfig> = match link_key.dir {
                Dir::Both => std::iter::once(&mut p.forward)
                    .chain(p.reverse.as_mut())
                    .collect(),
                Dir::Forward => vec![&mut p.forward],
                Dir::Reverse => p.reverse.as_mut().into_iter().collect(),
            };
            for c in targets {
                *c = with_link_key(c, &link_key.segments, value).map_err(|problem| {
                    if problem.starts_with("unknown field") {
                        unknown_key(key, value, problem)
                    } else {
                        SimError::Setting {
                            key: key.to_owned(),
                            value: value_text(value),
                            problem,
                        }
                    }
                })?;
            }
        }
        Ok(())
    }
}

/// A link key taken apart: the path it names (none: every path), the direction(s) and the
/// (nested) key of the link config.
struct LinkKey<'k> {
    path: Option<usize>,
    dir: Dir,
    segments: Vec<&'k str>,
}

impl<'k> LinkKey<'k> {
    /// `key` (set to `value`) for a network of `paths` paths.
    fn parse(key: &'k str, value: &toml::Value, paths: usize) -> Result<LinkKey<'k>, SimError> {
        let unknown = |why: String| unknown_key(key, value, why);
        let mut rest = key;
        let mut path: Option<usize> = None;
        if let Some(r) = rest.strip_prefix("path[") {
            let (i, r) = r
                .split_once("].")
                .ok_or_else(|| unknown("is not a known setting".into()))?;
            let i: usize = i
                .parse()
                .map_err(|_| unknown(format!("path index `{i}` is not a number")))?;
            if i >= paths {
                return Err(SimError::Setting {
                    key: key.to_owned(),
                    value: value_text(value),
                    problem: format!(
                        "names path {i}, but the network has {} path(s) (path[0] to path[{}])",
                        paths,
                        paths - 1
                    ),
                });
            }
            path = Some(i);
            rest = r;
        }
        let (dir, field) = if let Some(f) = rest.strip_prefix("forward.") {
            (Dir::Forward, f)
        } else if let Some(f) = rest.strip_prefix("reverse.") {
            (Dir::Reverse, f)
        } else {
            (Dir::Both, rest)
        };
        let segments: Vec<&str> = field.split('.').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Err(unknown("has an empty part".into()));
        }
        if matches!(segments[0], "per_packet_overhead" | "protected_prefix") {
            return Err(SimError::Setting {
                key: key.to_owned(),
                value: value_text(value),
                problem: "is set by the simulator (28 B of IPv4/UDP on every link)".into(),
            });
        }
        Ok(LinkKey {
            path,
            dir,
            segments,
        })
    }
}

/// The error of a key that is not known (`why`), with the keys accepted.
fn unknown_key(key: &str, value: &toml::Value, why: String) -> SimError {
    SimError::Setting {
        key: key.to_owned(),
        value: value_text(value),
        problem: format!("{why}; accepted: {ENGINE_KEYS}; link keys {LINK_KEY_FORMS}"),
    }
}

/// `c` with the (nested) key `segments` set to `value`, by a round trip through
/// `toml::Value`; Err is the problem (serde's message, or the link's own check of this key).
fn with_link_key(
    c: &LinkConfig,
    segments: &[&str],
    value: &toml::Value,
) -> Result<LinkConfig, String> {
    let mut root = toml::Value::try_from(c).map_err(|e| e.to_string())?;
    let mut table = root.as_table_mut().ok_or("link config is not a table")?;
    // A nested key whose table the link does not have yet (e.g. `random_outage.mean_up` on a
    // link without random outages): the others of that table may be required.
    let created = segments.len() > 1 && !table.contains_key(segments[0]);
    for seg in &segments[..segments.len() - 1] {
        let entry = table
            .entry(seg.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("`{seg}` is not a table here"))?;
    }
    table.insert(segments[segments.len() - 1].to_string(), value.clone());
    let mut out: LinkConfig = root.try_into().map_err(|e: toml::de::Error| {
        if created {
            format!(
                "{}; this link has no `{}` yet: set `{}` to a whole table first (e.g. random_outage = {{ mean_up = \"3min\", down_min = \"45s\", down_max = \"50s\" }})",
                e.message(),
                segments[0],
                segments[0]
            )
        } else {
            e.message().to_owned()
        }
    })?;
    // A trace serialises as its file name only: keep the rows already read unless the trace
    // itself is what changes, in which case read the new file (relative to the working
    // directory, as `--trace` does).
    if segments[0] == "trace" {
        if let Some(t) = &mut out.trace {
            t.load(std::path::Path::new("."))
                .map_err(|e| e.to_string())?;
        }
    } else {
        out.trace = c.trace.clone();
    }
    // The link's own check, reported now only when it is about this very key (checks that
    // couple keys wait for Scenario::validate so keys can be set in any order).
    if let Err(aerotp_link::LinkError::InvalidConfig { field, problem }) = out.validate() {
        if field == segments.join(".") {
            return Err(problem);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aerotp_proto::Mode;

    use super::*;
    use crate::scenario::{SimMode, Topology};

    fn v(s: &str) -> toml::Value {
        toml::Value::String(s.to_owned())
    }

    fn two_paths() -> Scenario {
        let mut s = Scenario::default();
        s.network.paths.push(s.network.paths[0].clone());
        s
    }

    #[test]
    fn send_rate_auto_and_max_rate_keys() {
        let mut s = Scenario::default();
        s.set("send_rate", &v("auto")).unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (
                aerotp_proto::RateControl::Discover,
                aerotp_proto::DEFAULT_RATE_CAP_BPS
            )
        );
        s.set("max_rate", &v("3mbit")).unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (aerotp_proto::RateControl::Discover, 3_000_000)
        );
        s.set("send_rate", &v("2mbit")).unwrap();
        assert_eq!(
            (s.rate_control, s.rate_bps),
            (aerotp_proto::RateControl::Fixed, 2_000_000)
        );
        // Bad values: an error naming the key, and the scenario as it was.
        for (k, bad) in [
            ("send_rate", "fast"),
            ("max_rate", "auto"),
            ("max_rate", ""),
        ] {
            let e = s.set(k, &v(bad)).expect_err(bad);
            assert!(e.to_string().contains(k), "{k} = {bad}: {e}");
            assert_eq!(
                (s.rate_control, s.rate_bps),
                (aerotp_proto::RateControl::Fixed, 2_000_000)
            );
        }
    }

    #[test]
    fn set_engine_keys() {
        let mut s = Scenario::default();
        s.set("mode", &v("hybrid-nack-mack")).unwrap();
        s.set("size", &v("2MB")).unwrap();
        s.set("mtu", &toml::Value::Integer(1200)).unwrap();
        s.set("fec", &v("p16")).unwrap();
        s.set("mack", &toml::Value::Integer(8)).unwrap();
        s.set("topology", &v("two-node")).unwrap();
        s.set("cap", &v("30s")).unwrap();
        s.set("send_rate", &v("2mbit")).unwrap();
        assert_eq!(s.mode, SimMode::Aero(Mode::HybridNackMack));
        assert_eq!((s.size, s.mtu, s.mack), (2_000_000, 1200, 8));
        assert_eq!(s.fec, Some(FecSetting::Parity(16)));
        assert_eq!(s.topology, Topology::TwoNode);
        assert_eq!(s.cap, Duration::from_secs(30));
        // send_rate leaves the links alone; rate sets both.
        assert_eq!((s.rate_bps, s.link0().rate_bps), (2_000_000, 5_000_000));
        s.set("rate", &toml::Value::Integer(3_000_000)).unwrap();
        assert_eq!((s.rate_bps, s.link0().rate_bps), (3_000_000, 3_000_000));
        s.set("workload", &v("messages")).unwrap();
        s.set("workload.count", &toml::Value::Integer(7)).unwrap();
        assert_eq!(s.workload.messages(0).len(), 7);
        s.validate().unwrap();
        for (key, value, needle) in [
            ("mode", v("tcp"), "unknown mode"),
            ("size", v("0"), "size"),
            ("mtu", v("big"), "whole number"),
            ("fec", v("300"), "`fec` = \"300\""),
            ("topology", v("ring"), "two-node or papers"),
            ("cap", v("soon"), "`cap`"),
            ("rate", v("fast"), "`rate`"),
            ("workload", v("telemetry"), "request-response"),
        ] {
            let e = s.clone().set(key, &value).unwrap_err().to_string();
            assert!(e.contains(needle), "{key}: {e}");
        }
    }

    #[test]
    fn set_link_keys_in_every_form() {
        let mut s = two_paths();
        s.set("ber", &toml::Value::Float(1e-5)).unwrap();
        for p in &s.network.paths {
            assert_eq!(p.forward_config(0).ber, 1e-5);
            assert_eq!(p.reverse_config(0).ber, 1e-5);
        }
        s.set("reverse.delay", &v("300ms")).unwrap();
        s.set("forward.loss", &toml::Value::Float(0.01)).unwrap();
        for p in &s.network.paths {
            assert_eq!(p.forward_config(0).delay, Duration::from_millis(10));
            assert_eq!(p.reverse_config(0).delay, Duration::from_millis(300));
            assert_eq!((p.forward.loss, p.reverse_config(0).loss), (0.01, 0.0));
        }
        s.set("path[1].rate_bps", &v("256kbit")).unwrap();
        s.set("path[1].reverse.jitter", &v("5ms")).unwrap();
        s.set("path[0].forward.allow_reorder", &toml::Value::Boolean(true))
            .unwrap();
        assert_eq!(s.network.paths[0].forward.rate_bps, 5_000_000);
        assert_eq!(s.network.paths[1].forward.rate_bps, 256_000);
        assert_eq!(s.network.paths[1].reverse_config(0).rate_bps, 256_000);
        assert_eq!(
            s.network.paths[1].reverse_config(0).jitter,
            Duration::from_millis(5)
        );
        assert!(s.network.paths[0].forward.allow_reorder);
        assert!(!s.network.paths[1].forward.allow_reorder);
        // Nested keys, set one at a time in either order: coupled checks wait for validate.
        s.set("burst.bad_time", &v("50ms")).unwrap();
        assert!(s.validate().unwrap_err().to_string().contains("burst"));
        s.set("burst.good_time", &v("2s")).unwrap();
        s.set("burst.ber_bad", &toml::Value::Float(1e-3)).unwrap();
        // A table with required keys cannot be started one key at a time: the error says
        // to give it whole; then its keys can be changed one by one.
        let e = s
            .clone()
            .set("random_outage.mean_up", &v("3min"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("whole table"), "{e}");
        s.set(
            "random_outage",
            &toml::from_str::<toml::Value>(
                "mean_up = \"3min\"\ndown_min = \"45s\"\ndown_max = \"46s\"\n",
            )
            .unwrap(),
        )
        .unwrap();
        s.set("random_outage.down_max", &v("50s")).unwrap();
        s.set(
            "outages",
            &toml::Value::Array(vec![toml::from_str::<toml::Value>(
                "start = \"5s\"\nduration = \"2s\"\n",
            )
            .unwrap()]),
        )
        .unwrap();
        s.set("duplicate", &toml::Value::Float(0.01)).unwrap();
        s.set("queue_bytes", &toml::Value::Integer(30_000)).unwrap();
        s.validate().unwrap();
        let l = &s.network.paths[1].reverse_config(0);
        let b = l.burst.unwrap();
        assert_eq!(b.good_time, Some(Duration::from_secs(2)));
        assert_eq!(b.ber_bad, Some(1e-3));
        assert_eq!(l.random_outage.unwrap().down_max, Duration::from_secs(50));
        assert_eq!(l.outages.len(), 1);
        assert_eq!((l.duplicate, l.queue_bytes), (0.01, 30_000));
    }

    #[test]
    fn bad_erasure_keys_name_key_and_what_is_accepted() {
        let s = Scenario::default();
        for (key, value, needle) in [
            ("erasure", v("lots"), "off, auto, or a ratio"),
            ("erasure", v("0.5"), "off, auto, or a ratio"),
            ("erasure", v("NaN"), "off, auto, or a ratio"),
            ("max_delay", v("soon"), "`max_delay`"),
            ("max_delay", v("-1s"), "`max_delay`"),
            ("erasure_target", v("1.5"), "between 0 and 1"),
            ("erasure_target", v("NaN"), "between 0 and 1"),
            ("erasure_target", v("x"), "residual loss rate"),
        ] {
            let e = s.clone().set(key, &value).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
            assert!(e.contains(needle), "{key} = {value}: {e}");
        }
        // A delay the engine refuses is caught when the scenario is checked.
        let mut s = Scenario::default();
        s.set("max_delay", &v("0s")).unwrap();
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("max-delay"), "{e}");
        let mut ok = Scenario::default();
        ok.set("erasure", &v("1.25")).unwrap();
        ok.set("max_delay", &v("1s")).unwrap();
        ok.set("erasure_target", &v("1e-4")).unwrap();
        ok.validate().unwrap();
    }

    #[test]
    fn bad_link_keys_name_key_value_and_accepted() {
        let s = two_paths();
        for (key, value, needle) in [
            ("ber", toml::Value::Float(2.0), "[0, 1)"),
            ("forward.loss", toml::Value::Float(1.5), "[0, 1]"),
            ("rate_bps", toml::Value::Integer(0), "at least 1"),
            ("delay", v("10"), "missing unit"),
            ("speed", v("1"), "path[i].forward.K"),
            ("burst.colour", v("red"), "unknown field"),
            ("path[2].ber", toml::Value::Float(0.0), "has 2 path(s)"),
            ("path[x].ber", toml::Value::Float(0.0), "not a number"),
            ("path[0]ber", toml::Value::Float(0.0), "accepted"),
            ("forward.", toml::Value::Float(0.0), "empty part"),
            (
                "protected_prefix",
                toml::Value::Integer(0),
                "set by the simulator",
            ),
            ("allow_reorder", v("yes"), "allow_reorder"),
            ("ber.x", toml::Value::Float(0.0), "not a table"),
        ] {
            let e = s.clone().set(key, &value).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
            assert!(e.contains(needle), "{key}: {e}");
        }
    }

    #[test]
    fn link_round_trip_changes_nothing_else() {
        // Setting a key to its current value through the toml round trip gives back the
        // same scenario: no field is lost or rounded on the way.
        let mut s = Scenario::default().with_links(|l| {
            l.jitter = Duration::from_nanos(1_234_567);
            l.ber = 1.234_567_89e-5;
            l.burst = Some(aerotp_link::GilbertElliott::per_packet(0.01, 0.3, 0.7));
        });
        let before = s.clone();
        s.set("loss", &toml::Value::Float(0.0)).unwrap();
        assert_eq!(s, before);
    }
}
