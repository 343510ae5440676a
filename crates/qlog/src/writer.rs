//! Writes a trace: the header record, then events, each prefixed by the JSON-SEQ record
//! separator and ended by a newline; bounded in bytes so a long run cannot fill a disk.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::schema::{QLOG_VERSION, RS, SCHEMA_URI, TRUNCATED};

/// Default bound of one trace file.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// Whose view a trace is (qlog's `vantage_point`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// The endpoint that opened the connection.
    Client,
    /// The endpoint that accepted it.
    Server,
    /// Both endpoints, as the simulator sees them (events say which with `at`).
    Network,
}

impl Vantage {
    fn name(self) -> &'static str {
        match self {
            Vantage::Client => "client",
            Vantage::Server => "server",
            Vantage::Network => "network",
        }
    }
}

/// Counts of a finished trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteStats {
    pub events: u64,
    pub bytes: u64,
    /// Events not written because the bound was reached.
    pub dropped: u64,
}

/// A trace being written to `W` (a file behind a `BufWriter`, or memory in tests).
#[derive(Debug)]
pub struct QlogWriter<W: Write> {
    out: W,
    max_bytes: u64,
    stats: WriteStats,
    truncated: bool,
    line: Vec<u8>,
}

impl<W: Write> QlogWriter<W> {
    /// Writes the header record: `title` (e.g. the command line), the vantage point, and the
    /// schema. `max_bytes` bounds the whole file (at least 4 KiB). Event times are from a
    /// reference of 0 (the simulator's virtual time).
    pub fn new(out: W, title: &str, vantage: Vantage, max_bytes: u64) -> std::io::Result<Self> {
        QlogWriter::with_reference(out, title, vantage, max_bytes, Duration::ZERO)
    }

    /// As [`QlogWriter::new`], event times counted from `reference` since the Unix epoch
    /// (a runtime trace: its start on the wall clock), written in the header as
    /// `reference_time` in milliseconds, so a trace's events can be set beside other clocks
    /// of the same host (bench/dlep-steps.py: the modem's commands).
    pub fn with_reference(
        out: W,
        title: &str,
        vantage: Vantage,
        max_bytes: u64,
        reference: Duration,
    ) -> std::io::Result<Self> {
        let mut w = QlogWriter {
            out,
            max_bytes: max_bytes.max(4096),
            stats: WriteStats::default(),
            truncated: false,
            line: Vec::with_capacity(512),
        };
        // 0 as before for a trace without a wall-clock reference (the simulator's).
        let reference_ms = if reference.is_zero() {
            json!(0)
        } else {
            json!(reference.as_secs_f64() * 1e3)
        };
        let header = json!({
            "qlog_version": QLOG_VERSION,
            "qlog_format": "JSON-SEQ",
            "title": title,
            "trace": {
                "vantage_point": { "type": vantage.name() },
                "common_fields": { "time_format": "relative", "reference_time": reference_ms },
                "event_schemas": [SCHEMA_URI],
            },
        });
        w.put(&header)?;
        Ok(w)
    }

    fn put(&mut self, v: &Value) -> std::io::Result<()> {
        self.line.clear();
        self.line.push(RS);
        serde_json::to_writer(&mut self.line, v)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.stats.bytes += self.line.len() as u64;
        Ok(())
    }

    /// One event at `time` since the trace's reference (virtual time in the simulator).
    pub fn event(&mut self, time: Duration, name: &str, data: Value) -> std::io::Result<()> {
        if self.truncated {
            self.stats.dropped += 1;
            return Ok(());
        }
        let v = json!({ "time": time.as_secs_f64() * 1e3, "name": name, "data": data });
        // Leave room for the truncation record itself.
        let room = self.max_bytes.saturating_sub(self.stats.bytes + 200);
        let len = serde_json::to_vec(&v).map(|b| b.len() as u64 + 2)?;
        if len > room {
            self.truncated = true;
            self.stats.dropped += 1;
            let note = json!({ "time": time.as_secs_f64() * 1e3, "name": TRUNCATED,
                "data": { "max_bytes": self.max_bytes } });
            return self.put(&note);
        }
        self.put(&v)?;
        self.stats.events += 1;
        Ok(())
    }

    /// Flushes and returns the counts and the writer.
    pub fn finish(mut self) -> std::io::Result<(WriteStats, W)> {
        self.out.flush()?;
        Ok((self.stats, self.out))
    }

    pub fn stats(&self) -> WriteStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_json_seq_and_the_bound_holds() {
        let mut w = QlogWriter::new(Vec::new(), "t", Vantage::Network, 4096).unwrap();
        for i in 0..1000u64 {
            w.event(Duration::from_millis(i), "aerotp:x", json!({ "i": i }))
                .unwrap();
        }
        let (s, bytes) = w.finish().unwrap();
        assert!(bytes.len() as u64 <= 4096, "{} bytes", bytes.len());
        assert_eq!(s.bytes, bytes.len() as u64);
        assert!(
            s.events > 10 && s.dropped > 0 && s.events + s.dropped == 1000,
            "{s:?}"
        );
        let recs: Vec<&[u8]> = bytes
            .split(|&b| b == RS)
            .filter(|r| !r.is_empty())
            .collect();
        assert_eq!(
            recs.len() as u64,
            1 + s.events + 1,
            "header, events, truncation note"
        );
        for r in &recs {
            assert_eq!(r.last(), Some(&b'\n'));
            let _: Value = serde_json::from_slice(r).unwrap();
        }
        let last: Value = serde_json::from_slice(recs.last().unwrap()).unwrap();
        assert_eq!(last["name"], TRUNCATED);
    }
}
