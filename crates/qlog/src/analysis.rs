//! What `aerotp trace` makes of a trace: a time-sequence chart of the endpoint that sent the
//! most data (first transmissions, retransmissions, repair TPDUs, and the cumulative
//! acknowledgement it received), and a summary of the whole trace.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use aerotp_plot::{draw_timeseq, Mark, Marks, TimeSeq};
use serde_json::Value;

use crate::reader::Record;
use crate::schema::*;

/// Points kept per chart series; beyond, every other point is dropped (the chart stays
/// readable and memory bounded on any length of trace).
pub const MAX_POINTS: usize = 200_000;

#[derive(Default)]
struct Series {
    points: Vec<(f64, f64)>,
    stride: usize,
    seen: usize,
}

impl Series {
    fn push(&mut self, p: (f64, f64)) {
        self.seen += 1;
        if self.stride > 1 && !self.seen.is_multiple_of(self.stride) {
            return;
        }
        self.points.push(p);
        if self.points.len() >= MAX_POINTS {
            self.points = self.points.iter().copied().step_by(2).collect();
            self.stride = self.stride.max(1) * 2;
        }
    }
}

/// Per endpoint (`at`): what it sent and the acknowledgements it received.
#[derive(Default)]
struct Side {
    highest: u64,
    first: Series,
    retx: Series,
    repairs: Series,
    acked: Series,
    data_first: u64,
    data_retx: u64,
    asyn_copies: u64,
    data_bytes_first: u64,
    repairs_sent: u64,
    control_sent: u64,
    control_received: u64,
    undecodable_received: u64,
    first_data_ms: Option<f64>,
    last_data_ms: f64,
}

/// What one endpoint's engine reported over the trace (sums of the observer's deltas).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct EngineTotals {
    pub retransmissions_queued: u64,
    pub timeouts: u64,
    pub holes_given_up: u64,
    pub fec_corrected: u64,
    pub rebuilt_from_repairs: u64,
    pub outages: u64,
    pub fec_changes: u64,
    /// Changes a radio (DLEP) made to a path (`aerotp:radio_updated`).
    pub radio_changes: u64,
    pub last_smoothed_rtt_ms: Option<f64>,
}

/// A trace in figures (`aerotp trace` prints it; `--json` gives the same fields).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub events: u64,
    pub duration_s: f64,
    /// The endpoint whose sending the chart shows.
    pub sender: String,
    pub data_tpdus_first: u64,
    pub data_tpdus_retransmitted: u64,
    /// Extra copies of the opening ASYN TPDU.
    pub asyn_copies: u64,
    pub data_bytes_first: u64,
    pub repairs_sent: u64,
    pub control_sent: u64,
    pub control_received: u64,
    pub undecodable_received: u64,
    /// Data bytes sent first time / (last − first data TPDU sent).
    pub send_rate_bps: f64,
    /// The engine's own counts, per endpoint (`at`).
    pub engine: BTreeMap<String, EngineTotals>,
    /// State changes in order, `at:connection new-state`.
    pub states: Vec<String>,
    pub truncated: bool,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "events {} over {:.3} s; sender `{}`",
            self.events, self.duration_s, self.sender
        )?;
        writeln!(
            f,
            "data TPDUs: {} sent first ({} bytes, {:.3} Mb/s while sending), {} retransmitted, {} ASYN copies; {} repair TPDUs",
            self.data_tpdus_first,
            self.data_bytes_first,
            self.send_rate_bps / 1e6,
            self.data_tpdus_retransmitted,
            self.asyn_copies,
            self.repairs_sent
        )?;
        writeln!(
            f,
            "control TPDUs: {} sent, {} received; {} received datagrams undecodable",
            self.control_sent, self.control_received, self.undecodable_received
        )?;
        for (at, e) in &self.engine {
            writeln!(
                f,
                "engine `{at}`: {} retransmissions queued, {} timeouts, {} holes given up, {} TPDUs corrected by FEC, {} rebuilt from repairs, {} outages, {} FEC changes, {} radio changes, last smoothed RTT {}",
                e.retransmissions_queued,
                e.timeouts,
                e.holes_given_up,
                e.fec_corrected,
                e.rebuilt_from_repairs,
                e.outages,
                e.fec_changes,
                e.radio_changes,
                e.last_smoothed_rtt_ms.map_or("-".into(), |x| format!("{x:.1} ms"))
            )?;
        }
        writeln!(f, "states: {}", self.states.join(", "))?;
        if self.truncated {
            writeln!(f, "the trace was truncated at its byte bound")?;
        }
        Ok(())
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Analyses `records`; writes the chart to `png` if given.
pub fn analyse(
    records: impl IntoIterator<Item = Record>,
    png: Option<&Path>,
    title: &str,
) -> anyhow::Result<Summary> {
    let mut sides: BTreeMap<String, Side> = BTreeMap::new();
    let mut s = Summary::default();
    let (mut t0, mut t1) = (f64::INFINITY, f64::NEG_INFINITY);
    for r in records {
        s.events += 1;
        t0 = t0.min(r.time_ms);
        t1 = t1.max(r.time_ms);
        let d = &r.data;
        let at = d
            .get("at")
            .and_then(Value::as_str)
            .unwrap_or("local")
            .to_owned();
        match r.name.as_str() {
            TPDU_SENT => sides.entry(at).or_default().on_sent(d, r.time_ms),
            TPDU_RECEIVED => sides.entry(at).or_default().on_received(d, r.time_ms),
            LOSS_DETECTED | TPDUS_RECOVERED | OUTAGE | FEC_UPDATED | RADIO_UPDATED
            | METRICS_UPDATED => s.engine.entry(at).or_default().count(&r.name, d),
            STATE_UPDATED => {
                let c = d.get("connection").and_then(Value::as_u64).unwrap_or(0);
                let new = d.get("new").and_then(Value::as_str).unwrap_or("?");
                s.states.push(format!("{at}:{c} {new}"));
            }
            TRUNCATED => s.truncated = true,
            _ => {}
        }
    }
    if t1 >= t0 {
        s.duration_s = (t1 - t0) / 1e3;
    }
    // The chart and the sending figures are those of the endpoint that sent the most data.
    let main = sides
        .iter()
        .max_by_key(|(_, v)| v.data_first + v.data_retx + v.asyn_copies)
        .map(|(k, _)| k.clone());
    let Some(k) = main else {
        if let Some(p) = png {
            draw_timeseq(
                p,
                &TimeSeq {
                    title,
                    marks: Vec::new(),
                },
            )?;
        }
        return Ok(s);
    };
    let side = sides.remove(&k).unwrap_or_default();
    s.sender = k;
    // Undecodable datagrams count wherever they arrived.
    let undecodable_elsewhere = sides.values().map(|x| x.undecodable_received).sum::<u64>();
    side.summarise(&mut s, undecodable_elsewhere);
    if let Some(p) = png {
        draw_timeseq(p, &side.chart(title))?;
    }
    Ok(s)
}

impl Side {
    /// A `tpdu_sent` event of this endpoint, at `time_ms`.
    fn on_sent(&mut self, d: &Value, time_ms: f64) {
        let t = time_ms / 1e3;
        match d.get("kind").and_then(Value::as_str) {
            Some("data") => {
                let wire = d
                    .pointer("/header/seq")
                    .and_then(Value::as_u64)
                    .unwrap_or(0) as u32;
                let seq = aerotp_wire::expand_seq(self.highest, wire);
                self.highest = self.highest.max(seq);
                self.first_data_ms.get_or_insert(time_ms);
                self.last_data_ms = time_ms;
                if d.get("asyn_copy").and_then(Value::as_bool) == Some(true) {
                    self.asyn_copies += 1;
                } else if d.get("retransmission").and_then(Value::as_bool) == Some(true) {
                    self.data_retx += 1;
                    self.retx.push((t, seq as f64));
                } else {
                    self.data_first += 1;
                    self.data_bytes_first += d
                        .pointer("/header/len")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    self.first.push((t, seq as f64));
                }
            }
            Some("repair") => {
                self.repairs_sent += 1;
                // Drawn at the highest sequence number sent so far: what it protects.
                self.repairs.push((t, self.highest as f64));
            }
            Some("control") => self.control_sent += 1,
            _ => {}
        }
    }

    /// A `tpdu_received` event of this endpoint, at `time_ms`: the cumulative acknowledgement
    /// (MACK or ACK) a control TPDU carries goes on the chart.
    fn on_received(&mut self, d: &Value, time_ms: f64) {
        if d.get("error").is_some() {
            self.undecodable_received += 1;
        } else if d.get("kind").and_then(Value::as_str) == Some("control") {
            self.control_received += 1;
            let cum = d
                .pointer("/frames/mack/cum")
                .or_else(|| d.pointer("/frames/ack/cum"))
                .and_then(Value::as_u64);
            if let Some(c) = cum {
                self.acked.push((time_ms / 1e3, c as f64));
            }
        }
    }

    /// The summary's sending figures, from this endpoint (the sender).
    fn summarise(&self, s: &mut Summary, undecodable_elsewhere: u64) {
        s.data_tpdus_first = self.data_first;
        s.data_tpdus_retransmitted = self.data_retx;
        s.asyn_copies = self.asyn_copies;
        s.data_bytes_first = self.data_bytes_first;
        s.repairs_sent = self.repairs_sent;
        s.control_sent = self.control_sent;
        s.control_received = self.control_received;
        s.undecodable_received = self.undecodable_received + undecodable_elsewhere;
        if let Some(f) = self.first_data_ms {
            let span = (self.last_data_ms - f) / 1e3;
            if span > 0.0 {
                s.send_rate_bps = self.data_bytes_first as f64 * 8.0 / span;
            }
        }
    }

    /// The time-sequence chart of this endpoint's sending.
    fn chart(self, title: &str) -> TimeSeq<'_> {
        TimeSeq {
            title,
            marks: vec![
                Marks {
                    name: "data sent".into(),
                    mark: Mark::Dot,
                    colour: 0,
                    points: self.first.points,
                },
                Marks {
                    name: "cumulative ACK received".into(),
                    mark: Mark::Step,
                    colour: 2,
                    points: self.acked.points,
                },
                Marks {
                    name: "repair TPDU sent".into(),
                    mark: Mark::Dot,
                    colour: 1,
                    points: self.repairs.points,
                },
                Marks {
                    name: "retransmission".into(),
                    mark: Mark::Cross,
                    colour: 3,
                    points: self.retx.points,
                },
            ],
        }
    }
}

impl EngineTotals {
    /// An engine event `name` of this endpoint: its deltas summed, the last RTT kept.
    fn count(&mut self, name: &str, d: &Value) {
        match name {
            LOSS_DETECTED => {
                self.retransmissions_queued += u(d, "retransmissions_queued");
                self.timeouts += u(d, "timeouts");
                self.holes_given_up += u(d, "holes_given_up");
            }
            TPDUS_RECOVERED => {
                self.fec_corrected += u(d, "fec_corrected");
                self.rebuilt_from_repairs += u(d, "rebuilt_from_repairs");
            }
            OUTAGE => self.outages += 1,
            FEC_UPDATED => self.fec_changes += 1,
            RADIO_UPDATED => self.radio_changes += 1,
            METRICS_UPDATED => {
                self.last_smoothed_rtt_ms = d
                    .get("smoothed_rtt_ms")
                    .and_then(Value::as_f64)
                    .or(self.last_smoothed_rtt_ms);
            }
            _ => {}
        }
    }
}
