//! Datagram events: each datagram a driver sends or receives, decoded as the engine would see
//! it (per-TPDU FEC applied to a copy first), with its header fields, the contents of its
//! control body, and — for data TPDUs sent — whether the TPDU number was sent before.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_wire::{parse_tpdu_any, ControlBody, Flags, Header};
use serde_json::{json, Map, Value};

use crate::schema::{TPDU_RECEIVED, TPDU_SENT};
use crate::writer::QlogWriter;

/// TPDU numbers remembered per flow for telling retransmissions: those within this many of
/// the highest sent (older ones are forgotten, so memory stays bounded on long transfers).
pub const RETX_MEMORY: u32 = 1 << 16;
/// Flows remembered at once (each a sender's ports and tag); the oldest is forgotten beyond.
pub const MAX_FLOWS: usize = 4096;

#[derive(Debug, Default)]
struct FlowSeqs {
    highest: u32,
    seen: HashSet<u32>,
}

/// Turns datagrams into `tpdu_sent`/`tpdu_received` events.
#[derive(Debug, Default)]
pub struct TpduLog {
    flows: HashMap<(SocketAddr, u16, u16, u8), FlowSeqs>,
    scratch: Vec<u8>,
}

fn flag_names(f: Flags) -> Vec<&'static str> {
    const NAMES: [(Flags, &str); 8] = [
        (Flags::ASYN, "ASYN"),
        (Flags::AFIN, "AFIN"),
        (Flags::ACK, "ACK"),
        (Flags::MACK, "MACK"),
        (Flags::NACK, "NACK"),
        (Flags::SNACK, "SNACK"),
        (Flags::RST, "RST"),
        (Flags::RPT, "RPT"),
    ];
    NAMES
        .iter()
        .filter(|(x, _)| f.contains(*x))
        .map(|&(_, n)| n)
        .collect()
}

fn header_json(h: &Header) -> Value {
    json!({
        "mode": h.mode.name(), "flags": flag_names(h.flags), "src_port": h.src_port,
        "dst_port": h.dst_port, "seq": h.seq, "timestamp": h.timestamp, "fec": h.fec,
        "tag": h.tag, "len": h.len,
    })
}

fn frames_json(c: &ControlBody) -> Value {
    let mut m = Map::new();
    if let Some(a) = &c.ack {
        m.insert(
            "ack".into(),
            json!({"cum": a.cum, "delivered": a.delivered, "window": a.window}),
        );
    }
    if let Some(k) = &c.mack {
        m.insert(
            "mack".into(),
            json!({"cum": k.ack.cum, "delivered": k.ack.delivered, "window": k.ack.window,
                "ts_echo": k.ts_echo, "ack_delay_100us": k.ack_delay, "max_delay_ms": k.max_delay,
                "entries": k.entries, "ranges": k.ranges}),
        );
    }
    if let Some(n) = &c.nack {
        m.insert("nack".into(), json!(n.seqs));
    }
    if let Some(s) = &c.snack {
        m.insert("snack".into(), json!(s.ranges));
    }
    if let Some(r) = &c.report {
        m.insert(
            "report".into(),
            json!({"ber_ppb": r.ber_ppb, "tpdus": r.tpdus, "lost": r.lost, "seen": r.seen,
                "wire_lost": r.wire_lost, "bursts": r.bursts}),
        );
    }
    if let Some(x) = &c.reset {
        m.insert("reset".into(), json!(x));
    }
    Value::Object(m)
}

impl TpduLog {
    pub fn new() -> TpduLog {
        TpduLog::default()
    }

    /// The event data of one datagram; `sent`: leaving `src` (else arriving at `dst`);
    /// `at`: which endpoint, in a trace that holds both.
    pub fn data(
        &mut self,
        sent: bool,
        at: &str,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) -> Value {
        let mut d = json!({ "at": at, "src": src.to_string(), "dst": dst.to_string(), "length": bytes.len() });
        // Correct a copy as the engine would: what a receiver sees after its FEC.
        self.scratch.clear();
        self.scratch.extend_from_slice(bytes);
        let mut corrected = 0u64;
        if let Some(p) = Header::peek_fec(bytes).filter(|&p| p > 0) {
            if let Ok(c) = aerotp_fec::decode(p, &mut self.scratch) {
                corrected = c.symbols as u64;
            }
        }
        let (t, auth) = match parse_tpdu_any(&self.scratch) {
            Ok(x) => x,
            Err(e) => {
                d["error"] = json!(e.to_string());
                return d;
            }
        };
        let h = t.header;
        d["header"] = header_json(&h);
        d["body_ok"] = json!(t.body_ok);
        d["auth"] = json!(auth);
        if corrected > 0 {
            d["fec_symbols_corrected"] = json!(corrected);
        }
        let kind = if h.flags.is_repair() {
            "repair"
        } else if h.flags.is_challenge() {
            "challenge"
        } else if h.flags.is_echo() {
            "echo"
        } else if h.flags.is_data() {
            "data"
        } else {
            "control"
        };
        d["kind"] = json!(kind);
        if kind == "control" && t.body_ok && !auth {
            match ControlBody::parse(h.flags, t.body) {
                Ok(c) => d["frames"] = frames_json(&c),
                Err(e) => d["frames_error"] = json!(e.to_string()),
            }
        }
        if kind == "challenge" && t.body_ok && !auth {
            // Address validation (docs/spec.md §9): RETRY is a CHALLENGE that kept no state.
            if let Ok(c) = aerotp_wire::Challenge::parse(t.body) {
                d["retry"] = json!(c.retry);
                d["ts_echo"] = json!(c.ts_echo);
            }
        }
        if sent && kind == "data" {
            // The opening ASYN goes out in several copies (`asyn_copies`): a copy, not a
            // retransmission (an ASYN resent after a loss is counted as a copy too).
            let again = self.seen_before(src, &h);
            let copy = again && h.flags.contains(Flags::ASYN);
            d["retransmission"] = json!(again && !copy);
            if copy {
                d["asyn_copy"] = json!(true);
            }
        }
        d
    }

    /// Whether this data TPDU's number was sent before on its flow (bounded memory).
    fn seen_before(&mut self, src: SocketAddr, h: &Header) -> bool {
        let key = (src, h.src_port, h.dst_port, h.tag);
        if !self.flows.contains_key(&key) && self.flows.len() >= MAX_FLOWS {
            self.flows.clear();
        }
        let f = self.flows.entry(key).or_default();
        let again = !f.seen.insert(h.seq);
        if h.seq.wrapping_sub(f.highest) < 1 << 31 {
            f.highest = h.seq;
        }
        if f.seen.len() > 2 * RETX_MEMORY as usize {
            let floor = f.highest.wrapping_sub(RETX_MEMORY);
            f.seen.retain(|&s| s.wrapping_sub(floor) < 1 << 31);
        }
        again
    }

    /// The event of one datagram as a [`crate::Record`] (what `aerotp trace` makes of a
    /// packet capture).
    pub fn record(
        &mut self,
        time: Duration,
        sent: bool,
        at: &str,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) -> crate::Record {
        crate::Record {
            time_ms: time.as_secs_f64() * 1e3,
            name: if sent { TPDU_SENT } else { TPDU_RECEIVED }.to_owned(),
            data: self.data(sent, at, src, dst, bytes),
        }
    }

    /// Writes the event of one datagram.
    #[allow(clippy::too_many_arguments)]
    pub fn write<W: std::io::Write>(
        &mut self,
        w: &mut QlogWriter<W>,
        time: Duration,
        sent: bool,
        at: &str,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        let data = self.data(sent, at, src, dst, bytes);
        w.event(time, if sent { TPDU_SENT } else { TPDU_RECEIVED }, data)
    }
}
