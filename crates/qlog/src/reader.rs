//! Reads a trace back: JSON-SEQ records, the first a qlog header of this schema. Streaming
//! (one record in memory at a time), so a trace of any length can be analysed.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::schema::{RS, SCHEMA_URI};

/// Longest record accepted (a MACK with every entry is a few kB; this leaves room).
pub const MAX_RECORD: usize = 1 << 20;

/// One event of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub time_ms: f64,
    pub name: String,
    pub data: Value,
}

/// Calls `f` with every event of the trace in `input` (named `what` in errors), after checking
/// the header. Errors name the record and what was wrong with it.
pub fn for_each_record(input: impl Read, what: &str, mut f: impl FnMut(Record)) -> Result<u64> {
    let mut r = BufReader::new(input);
    let mut buf = Vec::new();
    let mut index = 0u64;
    let mut header_seen = false;
    loop {
        buf.clear();
        let n = r
            .by_ref()
            .take(MAX_RECORD as u64 + 1)
            .read_until(RS, &mut buf)
            .with_context(|| format!("reading {what}"))?;
        if n == 0 {
            break;
        }
        if buf.len() > MAX_RECORD {
            bail!("{what}: record {index} is longer than {MAX_RECORD} bytes: not a trace of this tool");
        }
        if buf.last() == Some(&RS) {
            buf.pop();
        }
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_slice(text)
            .with_context(|| format!("{what}: record {index} is not JSON (a JSON-SEQ qlog file is expected, as `--qlog` writes)"))?;
        if !header_seen {
            let fmt = v.get("qlog_format").and_then(Value::as_str);
            let schemas = v.pointer("/trace/event_schemas").and_then(Value::as_array);
            if fmt != Some("JSON-SEQ")
                || !schemas.is_some_and(|s| s.iter().any(|x| x == SCHEMA_URI))
            {
                bail!(
                    "{what}: the first record is not a qlog JSON-SEQ header of schema {SCHEMA_URI}"
                );
            }
            header_seen = true;
        } else {
            let time_ms = v
                .get("time")
                .and_then(Value::as_f64)
                .with_context(|| format!("{what}: record {index} has no numeric \"time\""))?;
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .with_context(|| format!("{what}: record {index} has no \"name\""))?
                .to_owned();
            let data = v.get("data").cloned().unwrap_or(Value::Null);
            f(Record {
                time_ms,
                name,
                data,
            });
        }
        index += 1;
    }
    if !header_seen {
        bail!("{what}: empty (no qlog header)");
    }
    Ok(index.saturating_sub(1))
}

/// Every event of the trace at `path`.
pub fn read_trace(path: &Path) -> Result<Vec<Record>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut v = Vec::new();
    for_each_record(f, &path.display().to_string(), |r| v.push(r))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::{QlogWriter, Vantage};
    use std::time::Duration;

    #[test]
    fn what_the_writer_writes_reads_back() {
        let mut w = QlogWriter::new(Vec::new(), "t", Vantage::Client, 1 << 20).unwrap();
        w.event(
            Duration::from_millis(5),
            "aerotp:a",
            serde_json::json!({"x": 1}),
        )
        .unwrap();
        w.event(Duration::from_millis(7), "aerotp:b", Value::Null)
            .unwrap();
        let (_, bytes) = w.finish().unwrap();
        let mut got = Vec::new();
        assert_eq!(
            for_each_record(&bytes[..], "t", |r| got.push(r)).unwrap(),
            2
        );
        assert_eq!(got[0].name, "aerotp:a");
        assert_eq!(got[0].time_ms, 5.0);
        assert_eq!(got[0].data["x"], 1);
        assert_eq!(got[1].time_ms, 7.0);
    }

    #[test]
    fn garbage_and_foreign_files_are_refused_with_a_reason() {
        let e = for_each_record(&b"hello"[..], "f", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("not JSON"), "{e:#}");
        let e =
            for_each_record(&b"\x1e{\"qlog_format\":\"JSON-SEQ\"}\n"[..], "f", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("schema"), "{e:#}");
        let e = for_each_record(&b""[..], "f", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("empty"), "{e:#}");
        let mut big = vec![RS];
        big.extend(std::iter::repeat_n(b' ', MAX_RECORD + 10));
        let e = for_each_record(&big[..], "f", |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("longer"), "{e:#}");
    }
}
