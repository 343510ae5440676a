//! Impairments in their command-line forms: scheduled outages (`START+DURATION`),
//! Gilbert–Elliott bursts and random outages (`key=value` lists), each error naming the
//! input and the accepted forms.

use std::time::Duration;

use super::units::parse_duration;
use crate::config::{GilbertElliott, LinkConfig, Outage, RandomOutage};
use crate::error::LinkError;

/// Parses a scheduled outage `START+DURATION`, both durations as in [`parse_duration`],
/// START relative to the link's epoch. Example: `2s+1.5s` = link down from 2 s to 3.5 s.
/// The duration must be positive.
pub fn parse_outage(input: &str) -> Result<Outage, LinkError> {
    let (start, duration) = input.split_once('+').ok_or_else(|| {
        LinkError::parse(
            "outage",
            input,
            "expected START+DURATION, e.g. 2s+1.5s (down from 2 s for 1.5 s)",
        )
    })?;
    let start = parse_duration(start)
        .map_err(|e| LinkError::parse("outage", input, format!("bad START: {e}")))?;
    let duration = parse_duration(duration)
        .map_err(|e| LinkError::parse("outage", input, format!("bad DURATION: {e}")))?;
    if duration.is_zero() {
        return Err(LinkError::parse(
            "outage",
            input,
            "DURATION must be positive",
        ));
    }
    Ok(Outage { start, duration })
}

/// Which directions of a path a random outage (`--random-outage ...,dir=`) drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutageScope {
    /// Both directions on one schedule (a path-level `random_outage`: the call drops).
    #[default]
    Both,
    /// The forward direction only (its own schedule).
    Forward,
    /// The reverse direction only (its own schedule).
    Reverse,
}

/// Splits `k=v,k=v` into pairs, refusing empty items, a missing `=`, an empty key or value,
/// and a key given twice. `what` and `forms` go into the error.
fn key_values<'a>(
    what: &'static str,
    input: &'a str,
    forms: &str,
) -> Result<Vec<(&'a str, &'a str)>, LinkError> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if input.trim().is_empty() {
        return Err(LinkError::parse(what, input, format!("is empty; {forms}")));
    }
    for item in input.split(',') {
        let item = item.trim();
        let Some((k, v)) = item.split_once('=') else {
            return Err(LinkError::parse(
                what,
                input,
                format!("item {item:?} is not KEY=VALUE; {forms}"),
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || v.is_empty() {
            return Err(LinkError::parse(
                what,
                input,
                format!("item {item:?} has an empty key or value; {forms}"),
            ));
        }
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(LinkError::parse(
                what,
                input,
                format!("key `{k}` is given twice"),
            ));
        }
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// A finite number in `range` (inclusive of 1 when `allow_one`), for key `key`.
fn probability_value(
    what: &'static str,
    input: &str,
    key: &str,
    value: &str,
    allow_one: bool,
) -> Result<f64, LinkError> {
    let accepted = if allow_one {
        "a probability in [0, 1], e.g. 0.5"
    } else {
        "a bit-error rate in [0, 1), e.g. 1e-3"
    };
    let p: f64 = value.parse().map_err(|_| {
        LinkError::parse(
            what,
            input,
            format!("`{key}` {value:?} is not a number; give {accepted}"),
        )
    })?;
    let ok = p.is_finite() && p >= 0.0 && if allow_one { p <= 1.0 } else { p < 1.0 };
    if !ok {
        return Err(LinkError::parse(
            what,
            input,
            format!("`{key}` is {value}; give {accepted}"),
        ));
    }
    Ok(p)
}

/// A mean sojourn in packets (≥ 1, finite).
fn packets_value(
    what: &'static str,
    input: &str,
    key: &str,
    value: &str,
) -> Result<f64, LinkError> {
    let n: f64 = value.parse().map_err(|_| {
        LinkError::parse(
            what,
            input,
            format!("`{key}` {value:?} is not a number of packets (>= 1, e.g. 20)"),
        )
    })?;
    if !(n.is_finite() && n >= 1.0) {
        return Err(LinkError::parse(
            what,
            input,
            format!("`{key}` is {value}; a mean sojourn in packets must be a number >= 1"),
        ));
    }
    Ok(n)
}

/// A positive duration for key `key`.
fn positive_duration(
    what: &'static str,
    input: &str,
    key: &str,
    value: &str,
) -> Result<Duration, LinkError> {
    let d = parse_duration(value)
        .map_err(|e| LinkError::parse(what, input, format!("`{key}`: {e}")))?;
    if d.is_zero() {
        return Err(LinkError::parse(
            what,
            input,
            format!("`{key}` is 0; it must be positive (e.g. 2s, 50ms)"),
        ));
    }
    Ok(d)
}

/// The forms of `--burst`, quoted in its errors and its `--help`.
pub const BURST_FORMS: &str =
    "expected comma-separated KEY=VALUE: the sojourns as good=DUR,bad=DUR \
(mean times, e.g. good=2s,bad=50ms) or good=N,bad=N (mean packets) or p_gb=P,p_bg=P \
(per-packet switch probabilities) or good_time/bad_time or good_packets/bad_packets; then \
optionally loss_bad (default 1), loss_good (default 0), ber_bad, ber_good (default: the \
link's BER). Example: good=2s,bad=50ms,ber_bad=1e-3,loss_bad=0";

/// Parses a Gilbert–Elliott burst channel from its command-line form: comma-separated
/// `KEY=VALUE` with [`GilbertElliott`]'s field names (`p_gb`, `p_bg`, `good_packets`,
/// `bad_packets`, `good_time`, `bad_time`, `loss_bad`, `loss_good`, `ber_bad`, `ber_good`)
/// and two shorthands: `good=`/`bad=` take a duration (→ `good_time`/`bad_time`) or a plain
/// number (→ `good_packets`/`bad_packets`). Exactly one sojourn form must be given;
/// `loss_bad` defaults to 1 as in a config file. Example:
/// `good=2s,bad=50ms,ber_bad=1e-3,loss_bad=0` (bit-error bursts of 50 ms every 2 s, no loss).
pub fn parse_burst(input: &str) -> Result<GilbertElliott, LinkError> {
    const WHAT: &str = "burst";
    let mut ge = GilbertElliott::per_packet(0.0, 0.0, 1.0);
    let mut seen: Vec<&str> = Vec::new();
    for (k, v) in key_values(WHAT, input, BURST_FORMS)? {
        // The shorthands good=/bad= stand for a field chosen by the value: a bare number is
        // a count of packets, anything else must be a duration.
        let field = match (k, v.parse::<f64>().is_ok()) {
            ("good", true) => "good_packets",
            ("good", false) => "good_time",
            ("bad", true) => "bad_packets",
            ("bad", false) => "bad_time",
            (other, _) => other,
        };
        if seen.contains(&field) {
            return Err(LinkError::parse(
                WHAT,
                input,
                format!("`{k}` sets `{field}`, which is already given; give it once"),
            ));
        }
        seen.push(field);
        match field {
            "p_gb" => ge.p_gb = probability_value(WHAT, input, k, v, true)?,
            "p_bg" => ge.p_bg = probability_value(WHAT, input, k, v, true)?,
            "loss_bad" => ge.loss_bad = probability_value(WHAT, input, k, v, true)?,
            "loss_good" => ge.loss_good = probability_value(WHAT, input, k, v, true)?,
            "ber_bad" => ge.ber_bad = Some(probability_value(WHAT, input, k, v, false)?),
            "ber_good" => ge.ber_good = Some(probability_value(WHAT, input, k, v, false)?),
            "good_packets" => ge.good_packets = Some(packets_value(WHAT, input, k, v)?),
            "bad_packets" => ge.bad_packets = Some(packets_value(WHAT, input, k, v)?),
            "good_time" => ge.good_time = Some(positive_duration(WHAT, input, k, v)?),
            "bad_time" => ge.bad_time = Some(positive_duration(WHAT, input, k, v)?),
            other => {
                return Err(LinkError::parse(
                    WHAT,
                    input,
                    format!("unknown key `{other}`; {BURST_FORMS}"),
                ))
            }
        }
    }
    // The config's own check decides the sojourn forms (exactly one, both halves given).
    let check = LinkConfig {
        burst: Some(ge),
        ..LinkConfig::default()
    };
    check.validate().map_err(|e| {
        let problem = match e {
            LinkError::InvalidConfig { field, problem } => format!("`{field}` {problem}"),
            other => other.to_string(),
        };
        LinkError::parse(WHAT, input, format!("{problem}; {BURST_FORMS}"))
    })?;
    Ok(ge)
}

/// The forms of `--random-outage`, quoted in its errors and its `--help`.
pub const RANDOM_OUTAGE_FORMS: &str =
    "expected up=MEAN,down=MIN-MAX[,seed=N][,dir=both|forward|reverse], \
e.g. up=3min,down=45s-50s (up for an exponential time of mean 3 min, then down 45 to 50 s); \
down=45s means exactly 45 s; dir=both (default) drops both directions of every path together";

/// A random outage's `down` value: `MIN-MAX` or one duration (`MIN` = `MAX`), both positive
/// and `MIN <= MAX`.
fn down_range(what: &'static str, input: &str, v: &str) -> Result<(Duration, Duration), LinkError> {
    let (lo, hi) = match v.split_once('-') {
        Some((lo, hi)) => (
            positive_duration(what, input, "down (MIN)", lo.trim())?,
            positive_duration(what, input, "down (MAX)", hi.trim())?,
        ),
        None => {
            let d = positive_duration(what, input, "down", v)?;
            (d, d)
        }
    };
    if hi < lo {
        return Err(LinkError::parse(
            what,
            input,
            format!("`down` {v}: MIN must not exceed MAX (e.g. down=45s-50s)"),
        ));
    }
    Ok((lo, hi))
}

/// A `dir` value: which directions an outage takes down.
fn outage_scope(what: &'static str, input: &str, v: &str) -> Result<OutageScope, LinkError> {
    match v {
        "both" => Ok(OutageScope::Both),
        "forward" => Ok(OutageScope::Forward),
        "reverse" => Ok(OutageScope::Reverse),
        other => Err(LinkError::parse(
            what,
            input,
            format!("`dir` {other:?} is not both, forward or reverse"),
        )),
    }
}

/// Parses random outages from their command-line form:
/// `up=MEAN,down=MIN-MAX[,seed=N][,dir=both|forward|reverse]` (`mean_up=` is accepted for
/// `up=`, and `down=D` means `down=D-D`). `dir=both` is a path-level outage (one schedule for
/// both directions); `forward`/`reverse` drop that direction only.
pub fn parse_random_outage(input: &str) -> Result<(RandomOutage, OutageScope), LinkError> {
    const WHAT: &str = "random outage";
    let mut up = None;
    let mut down = None;
    let mut seed = None;
    let mut scope = OutageScope::Both;
    for (k, v) in key_values(WHAT, input, RANDOM_OUTAGE_FORMS)? {
        match k {
            "up" | "mean_up" => {
                if up.is_some() {
                    return Err(LinkError::parse(
                        WHAT,
                        input,
                        "`up` and `mean_up` are the same key; give one",
                    ));
                }
                up = Some(positive_duration(WHAT, input, k, v)?);
            }
            "down" => down = Some(down_range(WHAT, input, v)?),
            "seed" => {
                seed = Some(v.parse::<u64>().map_err(|_| {
                    LinkError::parse(
                        WHAT,
                        input,
                        format!("`seed` {v:?} is not a whole number in [0, 2^64)"),
                    )
                })?)
            }
            "dir" => scope = outage_scope(WHAT, input, v)?,
            other => {
                return Err(LinkError::parse(
                    WHAT,
                    input,
                    format!("unknown key `{other}`; {RANDOM_OUTAGE_FORMS}"),
                ))
            }
        }
    }
    let missing = |key: &str| {
        LinkError::parse(
            WHAT,
            input,
            format!("`{key}` is missing; {RANDOM_OUTAGE_FORMS}"),
        )
    };
    let mean_up = up.ok_or_else(|| missing("up"))?;
    let (down_min, down_max) = down.ok_or_else(|| missing("down"))?;
    Ok((
        RandomOutage {
            mean_up,
            down_min,
            down_max,
            seed,
        },
        scope,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::units::parse_rate;

    #[test]
    fn outages() {
        let o = parse_outage("2s+1.5s").unwrap();
        assert_eq!(o.start, Duration::from_secs(2));
        assert_eq!(o.duration, Duration::from_millis(1500));
        let msg = |s: &str| parse_outage(s).unwrap_err().to_string();
        assert!(msg("2s").contains("START+DURATION"));
        assert!(msg("2x+1s").contains("bad START"));
        assert!(msg("2s+1").contains("bad DURATION"));
        assert!(msg("2s+0s").contains("must be positive"));
    }

    #[test]
    fn bursts_in_every_form() {
        let ge = parse_burst("good=2s,bad=50ms,ber_bad=1e-3,loss_bad=0").unwrap();
        assert_eq!(ge.good_time, Some(Duration::from_secs(2)));
        assert_eq!(ge.bad_time, Some(Duration::from_millis(50)));
        assert_eq!(ge.ber_bad, Some(1e-3));
        assert_eq!(ge.loss_bad, 0.0);
        assert_eq!(ge.good_packets, None);
        let ge = parse_burst("good=200, bad=5").unwrap();
        assert_eq!((ge.good_packets, ge.bad_packets), (Some(200.0), Some(5.0)));
        assert_eq!(
            ge.loss_bad, 1.0,
            "loss_bad defaults to 1 as in a config file"
        );
        let ge = parse_burst("p_gb=0.01,p_bg=0.2,loss_good=0.001,ber_good=1e-6").unwrap();
        assert_eq!((ge.p_gb, ge.p_bg), (0.01, 0.2));
        assert_eq!(ge.loss_good, 0.001);
        assert_eq!(ge.ber_good, Some(1e-6));
        let ge = parse_burst("good_time=1min,bad_time=1.5s").unwrap();
        assert_eq!(ge.bad_time, Some(Duration::from_millis(1500)));
        let ge = parse_burst("good_packets=1e3,bad_packets=2.5").unwrap();
        assert_eq!(ge.good_packets, Some(1000.0));
    }

    #[test]
    fn burst_errors_name_the_key_and_the_forms() {
        let msg = |s: &str| parse_burst(s).unwrap_err().to_string();
        for (input, needles) in [
            ("", &["empty", "good=DUR"][..]),
            ("good", &["not KEY=VALUE"]),
            ("good=,bad=1s", &["empty key or value"]),
            ("good=2s,good=3s,bad=1s", &["`good` is given twice"]),
            (
                "good=2s,good_time=3s,bad=1s",
                &["`good_time`", "already given"],
            ),
            ("fast=1", &["unknown key `fast`", "good=DUR"]),
            ("good=2s", &["bad_time", "missing"]),
            ("good=2s,bad=5", &["exactly one"]),
            ("p_gb=0.1,p_bg=0.1,good=1s,bad=1s", &["exactly one"]),
            ("p_gb=0,p_bg=0", &["exactly one"]),
            ("good=0.5,bad=3", &["`good`", ">= 1"]),
            ("good=NaN,bad=3", &["`good`", ">= 1"]),
            ("good=inf,bad=3", &["`good`", ">= 1"]),
            ("good=-1,bad=3", &["`good`", ">= 1"]),
            ("good=0s,bad=3s", &["`good`", "positive"]),
            ("good=2x,bad=3s", &["`good`", "unknown unit"]),
            ("good=1s,bad=1s,ber_bad=1", &["`ber_bad`", "[0, 1)"]),
            ("good=1s,bad=1s,ber_bad=x", &["`ber_bad`", "not a number"]),
            ("good=1s,bad=1s,loss_bad=1.5", &["`loss_bad`", "[0, 1]"]),
            ("good=1s,bad=1s,loss_good=-0.1", &["`loss_good`", "[0, 1]"]),
            ("p_gb=2,p_bg=0.1", &["`p_gb`", "[0, 1]"]),
        ] {
            let m = msg(input);
            assert!(m.contains("burst"), "{input:?}: {m}");
            for n in needles {
                assert!(m.contains(n), "{input:?}: {m} lacks {n:?}");
            }
        }
    }

    #[test]
    fn random_outages() {
        let (r, scope) = parse_random_outage("up=3min,down=45s-50s").unwrap();
        assert_eq!(r.mean_up, Duration::from_secs(180));
        assert_eq!(
            (r.down_min, r.down_max),
            (Duration::from_secs(45), Duration::from_secs(50))
        );
        assert_eq!(r.seed, None);
        assert_eq!(scope, OutageScope::Both);
        let (r, scope) =
            parse_random_outage(" mean_up=10s , down=2s, seed=9, dir=reverse").unwrap();
        assert_eq!(
            (r.down_min, r.down_max),
            (Duration::from_secs(2), Duration::from_secs(2))
        );
        assert_eq!(r.seed, Some(9));
        assert_eq!(scope, OutageScope::Reverse);
        assert_eq!(
            parse_random_outage("up=1s,down=1s,dir=forward").unwrap().1,
            OutageScope::Forward
        );
        assert_eq!(
            parse_random_outage("up=1s,down=1s,dir=both").unwrap().1,
            OutageScope::Both
        );
    }

    #[test]
    fn random_outage_errors_name_the_key_and_the_forms() {
        let msg = |s: &str| parse_random_outage(s).unwrap_err().to_string();
        for (input, needles) in [
            ("", &["empty", "up=MEAN"][..]),
            ("up=3min", &["`down` is missing", "up=MEAN"]),
            ("down=1s", &["`up` is missing"]),
            ("up=3min,down=50s-45s", &["MIN must not exceed MAX"]),
            ("up=0s,down=1s", &["`up`", "positive"]),
            ("up=1s,down=0s-1s", &["down (MIN)", "positive"]),
            ("up=1s,down=1s-", &["down (MAX)"]),
            ("up=1s,down=1s,seed=-1", &["`seed`", "whole number"]),
            (
                "up=1s,down=1s,dir=up",
                &["`dir`", "both, forward or reverse"],
            ),
            ("up=1s,mean_up=2s,down=1s", &["same key"]),
            ("up=1s,down=1s,when=now", &["unknown key `when`"]),
            ("up=10,down=1s", &["`up`", "missing unit"]),
        ] {
            let m = msg(input);
            assert!(m.contains("random outage"), "{input:?}: {m}");
            for n in needles {
                assert!(m.contains(n), "{input:?}: {m} lacks {n:?}");
            }
        }
    }

    /// Garbage never panics: random strings over the characters the forms use (and a few
    /// others, multi-byte included) give Ok or Err, nothing else.
    #[test]
    fn garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "0123456789.,=-+ e_smunkbitgoodbadupdownseedirµ∞\u{0}xyz"
            .chars()
            .collect();
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let mut accepted = 0;
        for _ in 0..20_000 {
            let len = rng.gen_range(0..24);
            let s: String = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            accepted += usize::from(parse_burst(&s).is_ok());
            accepted += usize::from(parse_random_outage(&s).is_ok());
            let _ = parse_rate(&s);
            let _ = parse_duration(&s);
            let _ = parse_outage(&s);
        }
        // Random strings are almost never valid forms; the point is that none panicked.
        assert!(accepted < 100, "{accepted}");
        for s in [
            "good=1s,bad=1s,",
            ",",
            "=",
            "==",
            "good==1s",
            "up=1s,down=--",
            "down=-",
            "good=1e999,bad=1",
        ] {
            assert!(
                parse_burst(s).is_err() && parse_random_outage(s).is_err(),
                "{s:?}"
            );
        }
    }
}
