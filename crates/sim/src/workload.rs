//! What the applications do: one bulk file, periodic messages, a constant-rate stream, or
//! requests and responses. Set by `--workload` and the `workload` keys of `Scenario::set`.

use std::fmt;
use std::time::Duration;

use aerotp_link::{format_duration, format_rate, parse_duration, parse_rate};

use crate::scenario::{parse_size, SimError};

/// The traffic of a run. Every workload's bytes form one stream whose content the receiver
/// checks (every byte intact and in order); the workloads differ in when bytes are written.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// The scenario's `size` bytes written at t = 0 (as fast as the send buffer takes them).
    Bulk,
    /// `size` bytes every `interval` (a telemetry frame stream, an interactive session), for
    /// `count` messages or for `duration` (`ceil(duration / interval)` messages).
    Messages {
        size: usize,
        interval: Duration,
        count: Option<u64>,
        duration: Option<Duration>,
    },
    /// A constant `rate_bps` of application data for `duration`, written in `chunk`-byte
    /// pieces (one every `chunk · 8 / rate_bps`).
    Stream {
        rate_bps: u64,
        duration: Duration,
        chunk: usize,
    },
    /// The client writes `request` bytes; once the whole request has arrived the server
    /// answers `response` bytes. `count` exchanges, the next one when the previous response
    /// is in (`interval` None) or every `interval`.
    RequestResponse {
        request: usize,
        response: usize,
        count: u64,
        interval: Option<Duration>,
    },
}

/// What `set("workload", "messages")` etc. start from.
impl Workload {
    pub fn default_messages() -> Workload {
        Workload::Messages {
            size: 200,
            interval: Duration::from_millis(100),
            count: Some(100),
            duration: None,
        }
    }
    pub fn default_stream() -> Workload {
        Workload::Stream {
            rate_bps: 1_000_000,
            duration: Duration::from_secs(10),
            chunk: 1000,
        }
    }
    pub fn default_request_response() -> Workload {
        Workload::RequestResponse {
            request: 200,
            response: 2000,
            count: 10,
            interval: None,
        }
    }

    /// The kind's name as `--workload` takes it.
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Bulk => "bulk",
            Workload::Messages { .. } => "messages",
            Workload::Stream { .. } => "stream",
            Workload::RequestResponse { .. } => "request-response",
        }
    }

    fn of_kind(kind: &str) -> Option<Workload> {
        Some(match kind {
            "bulk" => Workload::Bulk,
            "messages" => Workload::default_messages(),
            "stream" => Workload::default_stream(),
            "request-response" => Workload::default_request_response(),
            _ => return None,
        })
    }

    /// Messages of the workload in writing order: (time the application writes it, bytes).
    /// Bulk is one message of `bulk_size` at t = 0; request-response lists the requests
    /// (their start times are only known for a fixed `interval`; otherwise 0 and the driver
    /// paces them by the responses).
    pub fn messages(&self, bulk_size: usize) -> Vec<(Duration, usize)> {
        match *self {
            Workload::Bulk => vec![(Duration::ZERO, bulk_size)],
            Workload::Messages {
                size,
                interval,
                count,
                duration,
            } => {
                let n = self.count_of(count, duration, interval);
                (0..n).map(|i| (interval * i as u32, size)).collect()
            }
            Workload::Stream {
                rate_bps,
                duration,
                chunk,
            } => {
                let n = stream_chunks(rate_bps, duration, chunk);
                (0..n)
                    .map(|i| (chunk_time(i, chunk, rate_bps), chunk))
                    .collect()
            }
            Workload::RequestResponse {
                request,
                count,
                interval,
                ..
            } => (0..count)
                .map(|i| (interval.map_or(Duration::ZERO, |d| d * i as u32), request))
                .collect(),
        }
    }

    fn count_of(&self, count: Option<u64>, duration: Option<Duration>, interval: Duration) -> u64 {
        match (count, duration) {
            (Some(c), _) => c,
            (None, Some(d)) => (d.as_nanos().div_ceil(interval.as_nanos().max(1))) as u64,
            (None, None) => 0,
        }
    }

    /// Bytes the client writes in all (requests only for request-response).
    pub fn total_bytes(&self, bulk_size: usize) -> u64 {
        self.messages(bulk_size).iter().map(|m| m.1 as u64).sum()
    }

    /// Checks the parameters; errors name the key, the value and what is accepted.
    pub fn validate(&self) -> Result<(), SimError> {
        match *self {
            Workload::Bulk => Ok(()),
            Workload::Messages {
                size,
                interval,
                count,
                duration,
            } => self.validate_messages(size, interval, count, duration),
            Workload::Stream {
                rate_bps,
                duration,
                chunk,
            } => validate_stream(rate_bps, duration, chunk),
            Workload::RequestResponse {
                request,
                response,
                count,
                interval,
            } => validate_request_response(request, response, count, interval),
        }
    }

    /// The parameters of a `messages` workload.
    fn validate_messages(
        &self,
        size: usize,
        interval: Duration,
        count: Option<u64>,
        duration: Option<Duration>,
    ) -> Result<(), SimError> {
        require(size > 0, "size", "0", "a message needs at least 1 byte")?;
        require(
            !interval.is_zero(),
            "interval",
            "0s",
            "give a positive interval, e.g. 100ms",
        )?;
        // `count` wins over `duration` (setting one clears the other), so the
        // duration only matters when there is no count.
        require(count != Some(0), "count", "0", "give at least 1 message")?;
        require(
            count.is_some() || duration.is_some(),
            "count",
            "none",
            "give count or duration",
        )?;
        require(
            count.is_some() || duration != Some(Duration::ZERO),
            "duration",
            "0s",
            "give a positive duration, e.g. 10s",
        )?;
        let n = self.count_of(count, duration, interval);
        require(
            n <= 10_000_000 && n.saturating_mul(size as u64) <= 1_000_000_000_000,
            "count",
            n.to_string(),
            "at most 10 000 000 messages and 1 TB in all",
        )
    }

    /// Applies `workload` (a kind name, or a table with `kind` and parameters) or
    /// `workload.KEY`. `key` is the part after `workload` (empty or `.KEY`).
    pub fn set(&mut self, sub: &str, value: &toml::Value) -> Result<(), SimError> {
        if sub.is_empty() {
            return match value {
                toml::Value::String(kind) => {
                    *self = Workload::of_kind(kind).ok_or_else(|| unknown_kind(kind))?;
                    Ok(())
                }
                toml::Value::Table(t) => {
                    let kind = t.get("kind").and_then(|k| k.as_str()).ok_or_else(|| {
                        SimError::Setting {
                            key: "workload".into(),
                            value: value.to_string(),
                            problem: "a table needs `kind` (bulk, messages, stream, request-response)".into(),
                        }
                    })?;
                    let mut w = Workload::of_kind(kind).ok_or_else(|| unknown_kind(kind))?;
                    for (k, v) in t.iter().filter(|(k, _)| *k != "kind") {
                        w.set_param(k, v)?;
                    }
                    *self = w;
                    Ok(())
                }
                other => Err(SimError::Setting {
                    key: "workload".into(),
                    value: other.to_string(),
                    problem: "give a kind (bulk, messages, stream, request-response) or a table with `kind`".into(),
                }),
            };
        }
        match sub.strip_prefix('.') {
            Some(k) => self.set_param(k, value),
            None => Err(SimError::Setting {
                key: format!("workload{sub}"),
                value: value.to_string(),
                problem: "unknown setting; give workload or workload.KEY".into(),
            }),
        }
    }

    /// Parses `--workload KIND[,KEY=VALUE...]`, e.g. `messages,size=200,interval=100ms,count=50`.
    pub fn parse(spec: &str) -> Result<Workload, SimError> {
        let mut items = spec.split(',').map(str::trim);
        let kind = items.next().unwrap_or_default();
        let mut w = Workload::of_kind(kind).ok_or_else(|| unknown_kind(kind))?;
        for item in items {
            let Some((k, v)) = item.split_once('=') else {
                return Err(SimError::Setting {
                    key: "workload".into(),
                    value: spec.into(),
                    problem: format!(
                        "item {item:?} is not KEY=VALUE; give e.g. messages,size=200,interval=100ms,count=50"
                    ),
                });
            };
            w.set_param(k.trim(), &toml::Value::String(v.trim().to_owned()))?;
        }
        w.validate()?;
        Ok(w)
    }

    fn set_param(&mut self, k: &str, v: &toml::Value) -> Result<(), SimError> {
        let key = format!("workload.{k}");
        let kind = self.kind();
        match (self, k) {
            (Workload::Messages { size, .. }, "size") => *size = parsed(&key, v, parse_size)?,
            (Workload::Messages { interval, .. }, "interval") => *interval = parsed(&key, v, parse_duration)?,
            (Workload::Messages { count, duration, .. }, "count") => {
                *count = Some(parsed(&key, v, int_of)?);
                *duration = None;
            }
            (Workload::Messages { count, duration, .. }, "duration") => {
                *duration = Some(parsed(&key, v, parse_duration)?);
                *count = None;
            }
            (Workload::Stream { rate_bps, .. }, "rate") => *rate_bps = parsed(&key, v, parse_rate)?,
            (Workload::Stream { duration, .. }, "duration") => *duration = parsed(&key, v, parse_duration)?,
            (Workload::Stream { chunk, .. }, "chunk") => *chunk = parsed(&key, v, parse_size)?,
            (Workload::RequestResponse { request, .. }, "request" | "size") => {
                *request = parsed(&key, v, parse_size)?
            }
            (Workload::RequestResponse { response, .. }, "response") => {
                *response = parsed(&key, v, parse_size)?
            }
            (Workload::RequestResponse { count, .. }, "count") => *count = parsed(&key, v, int_of)?,
            (Workload::RequestResponse { interval, .. }, "interval") => {
                *interval = match v.as_str() {
                    Some("none") => None,
                    _ => Some(parsed(&key, v, parse_duration)?),
                }
            }
            _ => {
                return Err(SimError::Setting {
                    key,
                    value: v.to_string(),
                    problem: format!(
                        "is not a parameter of the {kind} workload; messages takes size, interval, count or duration; stream takes rate, duration, chunk; request-response takes request, response, count, interval; bulk takes none (the file size is `size`)"
                    ),
                })
            }
        }
        Ok(())
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Bulk => f.write_str("bulk"),
            Workload::Messages {
                size,
                interval,
                count,
                duration,
            } => {
                write!(
                    f,
                    "messages,size={size},interval={}",
                    format_duration(*interval)
                )?;
                match (count, duration) {
                    (Some(c), _) => write!(f, ",count={c}"),
                    (None, Some(d)) => write!(f, ",duration={}", format_duration(*d)),
                    _ => Ok(()),
                }
            }
            Workload::Stream {
                rate_bps,
                duration,
                chunk,
            } => write!(
                f,
                "stream,rate={},duration={},chunk={chunk}",
                format_rate(*rate_bps),
                format_duration(*duration)
            ),
            Workload::RequestResponse {
                request,
                response,
                count,
                interval,
            } => {
                write!(
                    f,
                    "request-response,request={request},response={response},count={count}"
                )?;
                match interval {
                    Some(i) => write!(f, ",interval={}", format_duration(*i)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Chunks a stream writes: whole chunks that fit in `duration` at `rate_bps`.
/// The parameters of a `stream` workload.
fn validate_stream(rate_bps: u64, duration: Duration, chunk: usize) -> Result<(), SimError> {
    require(
        rate_bps > 0,
        "rate",
        "0",
        "give a positive rate, e.g. 1mbit",
    )?;
    require(
        !duration.is_zero(),
        "duration",
        "0s",
        "give a positive duration, e.g. 10s",
    )?;
    require(chunk > 0, "chunk", "0", "a chunk needs at least 1 byte")?;
    let n = stream_chunks(rate_bps, duration, chunk);
    require(
        n > 0,
        "duration",
        format_duration(duration),
        "is shorter than one chunk at this rate; give a longer duration or a smaller chunk",
    )?;
    require(
        n <= 10_000_000,
        "chunk",
        chunk.to_string(),
        "makes more than 10 000 000 chunks; give a larger chunk",
    )
}

/// The parameters of a `request-response` workload.
fn validate_request_response(
    request: usize,
    response: usize,
    count: u64,
    interval: Option<Duration>,
) -> Result<(), SimError> {
    require(
        request > 0,
        "request",
        "0",
        "a request needs at least 1 byte",
    )?;
    require(
        response > 0,
        "response",
        "0",
        "a response needs at least 1 byte",
    )?;
    require(
        (1..=1_000_000).contains(&count),
        "count",
        count.to_string(),
        "give 1 to 1 000 000 exchanges",
    )?;
    require(
        interval != Some(Duration::ZERO),
        "interval",
        "0s",
        "give a positive interval, or none for back to back",
    )
}

fn stream_chunks(rate_bps: u64, duration: Duration, chunk: usize) -> u64 {
    let bits = u128::from(rate_bps) * duration.as_nanos() / 1_000_000_000;
    (bits / (chunk as u128 * 8)).min(u128::from(u64::MAX)) as u64
}

/// When chunk `i` of a stream is written: `i · chunk · 8 / rate` (exact in nanoseconds).
fn chunk_time(i: u64, chunk: usize, rate_bps: u64) -> Duration {
    let ns = u128::from(i) * chunk as u128 * 8 * 1_000_000_000 / u128::from(rate_bps);
    Duration::from_nanos(ns.min(u128::from(u64::MAX)) as u64)
}

fn unknown_kind(kind: &str) -> SimError {
    SimError::Setting {
        key: "workload".into(),
        value: kind.into(),
        problem: "is not a workload; give bulk, messages, stream or request-response".into(),
    }
}

fn text_of(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `Ok` when `ok`; otherwise the error for `workload.KEY` = `value`, saying what is accepted.
fn require(ok: bool, key: &str, value: impl Into<String>, problem: &str) -> Result<(), SimError> {
    if ok {
        return Ok(());
    }
    Err(SimError::Setting {
        key: format!("workload.{key}"),
        value: value.into(),
        problem: problem.to_owned(),
    })
}

/// The value of `key` (a string, or any TOML value as written) read by `parse`; a failure
/// names the key and the value and says why.
fn parsed<T, E: fmt::Display>(
    key: &str,
    v: &toml::Value,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<T, SimError> {
    let t = text_of(v);
    parse(&t).map_err(|e| SimError::Setting {
        key: key.into(),
        problem: e.to_string(),
        value: t,
    })
}

fn int_of(t: &str) -> Result<u64, &'static str> {
    t.parse::<u64>()
        .map_err(|_| "is not a whole number (e.g. 100)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for spec in [
            "bulk",
            "messages,size=200,interval=100ms,count=50",
            "messages,size=1000,interval=20ms,duration=2s",
            "stream,rate=1mbit,duration=10s,chunk=1000",
            "request-response,request=200,response=2000,count=10",
            "request-response,request=200,response=2000,count=10,interval=1s",
        ] {
            let w = Workload::parse(spec).unwrap();
            assert_eq!(w.to_string(), spec);
            assert_eq!(Workload::parse(&w.to_string()).unwrap(), w);
        }
        let w = Workload::parse("messages,size=1kB,interval=20ms,duration=1s").unwrap();
        assert_eq!(w.messages(0).len(), 50);
        assert_eq!(w.messages(0)[49], (Duration::from_millis(980), 1000));
        let s = Workload::parse("stream,rate=80kbit,duration=1s,chunk=1000").unwrap();
        let m = s.messages(0);
        assert_eq!(m.len(), 10);
        assert_eq!(m[1].0, Duration::from_millis(100));
        assert_eq!(Workload::Bulk.messages(77), vec![(Duration::ZERO, 77)]);
    }

    #[test]
    fn bad_specs_name_key_value_and_range() {
        for (spec, needle) in [
            ("telemetry", "bulk, messages"),
            ("messages,size=0", "workload.size"),
            ("messages,interval=0s", "workload.interval"),
            ("messages,count=0", "workload.count"),
            ("messages,count=many", "whole number"),
            ("messages,rate=1mbit", "not a parameter of the messages"),
            ("stream,rate=0", "workload.rate"),
            (
                "stream,rate=8bit,duration=1s,chunk=1000",
                "shorter than one chunk",
            ),
            ("request-response,response=0", "workload.response"),
            ("messages,size", "KEY=VALUE"),
            ("bulk,size=1", "not a parameter of the bulk"),
        ] {
            let e = Workload::parse(spec).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }

    #[test]
    fn validate_names_the_first_bad_key() {
        let m = |count, duration| Workload::Messages {
            size: 10,
            interval: Duration::from_millis(100),
            count,
            duration,
        };
        let rr = |count, interval| Workload::RequestResponse {
            request: 1,
            response: 1,
            count,
            interval,
        };
        for (w, key, value) in [
            (m(None, None), "workload.count", "none"),
            (m(Some(0), Some(Duration::ZERO)), "workload.count", "0"),
            (m(None, Some(Duration::ZERO)), "workload.duration", "0s"),
            (m(Some(10_000_001), None), "workload.count", "10000001"),
            (rr(0, None), "workload.count", "0"),
            (rr(1_000_001, None), "workload.count", "1000001"),
            (rr(1, Some(Duration::ZERO)), "workload.interval", "0s"),
        ] {
            match w.validate() {
                Err(SimError::Setting {
                    key: k, value: v, ..
                }) => {
                    assert_eq!((k.as_str(), v.as_str()), (key, value), "{w:?}")
                }
                other => panic!("{w:?}: {other:?}"),
            }
        }
        assert!(m(Some(10_000_000), Some(Duration::ZERO)).validate().is_ok());
        assert!(m(None, Some(Duration::from_secs(1))).validate().is_ok());
        assert!(rr(1_000_000, None).validate().is_ok());
    }

    #[test]
    fn set_takes_kinds_tables_and_keys() {
        let mut w = Workload::Bulk;
        w.set("", &toml::Value::String("messages".into())).unwrap();
        assert_eq!(w, Workload::default_messages());
        w.set(".interval", &toml::Value::String("20ms".into()))
            .unwrap();
        w.set(".size", &toml::Value::Integer(64)).unwrap();
        assert_eq!(w.to_string(), "messages,size=64,interval=20ms,count=100");
        let t: toml::Value = toml::from_str("kind = \"stream\"\nrate = \"2mbit\"\n").unwrap();
        w.set("", &t).unwrap();
        assert!(matches!(
            w,
            Workload::Stream {
                rate_bps: 2_000_000,
                ..
            }
        ));
        assert!(w.set("", &toml::Value::Integer(3)).is_err());
        assert!(w.set("x", &toml::Value::Integer(3)).is_err());
    }
}
