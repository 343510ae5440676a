//! The Prometheus text exposition format (0.0.4) as every AeroTP metrics family is written:
//! HELP and TYPE lines, samples with escaped labels, values as Prometheus spells them. Kept
//! apart from `crate::metrics` (the endpoint's families and the HTTP server) so that the
//! modules that render families of their own (`crate::radio_metrics`) depend on the writer
//! alone.

use std::fmt::Write as _;

/// A metric family's type in the exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// Writes one family's HELP and TYPE lines. `name` is the full name; a counter's must end in
/// `_total` and only a counter's may (the naming scheme every scraper and docs/stats.md rely
/// on), checked in debug builds and by the tests that parse both outputs.
pub fn family(out: &mut String, name: &str, kind: Kind, help: &str) {
    debug_assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}");
    let t = match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    };
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {t}");
}

/// A sample's value: counters and byte counts print as integers (exact past 2^53), the rest
/// as floats in the exposition's spelling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

/// Writes one sample of family `name`, labels in the order given, values escaped.
pub fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], v: impl Into<Value>) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", label(v));
        }
        out.push('}');
    }
    let _ = match v.into() {
        Value::Int(v) => writeln!(out, " {v}"),
        Value::Float(v) => writeln!(out, " {}", number(v)),
    };
}

/// One counter family without labels: `aerotp_{name}_total`.
pub fn counter(out: &mut String, name: &str, help: &str, v: u64) {
    let full = format!("aerotp_{name}_total");
    family(out, &full, Kind::Counter, help);
    sample(out, &full, &[], v);
}

/// One gauge family without labels: `aerotp_{name}`.
pub fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    let full = format!("aerotp_{name}");
    family(out, &full, Kind::Gauge, help);
    sample(out, &full, &[], v);
}

/// A float in the exposition format (`NaN`, `+Inf`, `-Inf` spelled as Prometheus wants).
pub(crate) fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// A label value with `\`, `"` and newlines escaped (exposition format).
pub(crate) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
