//! Engine events from the engine's own per-connection state: after each driver step, the
//! driver hands each connection's statistics and state to [`Observer::observe`], which writes
//! what changed since the last look. Counters become deltas (how many TPDUs were declared lost
//! in that step), values become their new value. One source of truth: these are the numbers
//! the engine acts on, read, never recomputed.

use std::collections::HashMap;
use std::time::Duration;

use aerotp_proto::{ConnectionStats, State};
use serde_json::{json, Value};

use crate::schema::{
    FEC_UPDATED, LOSS_DETECTED, METRICS_UPDATED, OUTAGE, STATE_UPDATED, TPDUS_RECOVERED,
};
use crate::writer::QlogWriter;

/// Connections remembered at once; beyond, the table starts afresh (the next look at each
/// connection writes its full state again, never a wrong delta).
pub const MAX_CONNECTIONS: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Snapshot {
    state: State,
    rtt: Duration,
    srtt: Duration,
    rto: Duration,
    rate_bps: u64,
    fec_parity: u8,
    retransmitted: u64,
    timeouts: u64,
    holes_given_up: u64,
    corrected: u64,
    rebuilt: u64,
    outages: u64,
}

impl Snapshot {
    fn of(s: &ConnectionStats, state: State) -> Snapshot {
        Snapshot {
            state,
            rtt: s.rtt,
            srtt: s.srtt,
            rto: s.rto,
            rate_bps: s.rate_bps,
            fec_parity: s.fec_parity,
            retransmitted: s.sender.tpdus_retransmitted,
            timeouts: s.sender.timeouts,
            holes_given_up: s.receiver.tpdus_lost,
            corrected: s.receiver.tpdus_corrected,
            rebuilt: s.receiver.tpdus_rebuilt,
            outages: s.outages,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Remembers each connection's last state (keyed by which endpoint and its handle number).
#[derive(Debug, Default)]
pub struct Observer {
    last: HashMap<(String, u64), Snapshot>,
}

impl Observer {
    pub fn new() -> Observer {
        Observer::default()
    }

    /// The events of what changed on connection `conn` of endpoint `at` since the last call.
    pub fn changes(
        &mut self,
        at: &str,
        conn: u64,
        s: &ConnectionStats,
        state: State,
    ) -> Vec<(&'static str, Value)> {
        let now = Snapshot::of(s, state);
        if self.last.len() >= MAX_CONNECTIONS && !self.last.contains_key(&(at.to_owned(), conn)) {
            self.last.clear();
        }
        let before = self.last.insert((at.to_owned(), conn), now);
        let mut out = Vec::new();
        let id = json!({ "at": at, "connection": conn });
        let with = |mut v: Value| {
            v["at"] = id["at"].clone();
            v["connection"] = id["connection"].clone();
            v
        };
        let b = before.unwrap_or(Snapshot {
            state: State::Closed,
            rtt: Duration::ZERO,
            srtt: Duration::ZERO,
            rto: Duration::ZERO,
            rate_bps: 0,
            fec_parity: 0,
            retransmitted: 0,
            timeouts: 0,
            holes_given_up: 0,
            corrected: 0,
            rebuilt: 0,
            outages: 0,
        });
        if before.is_none() || b.state != now.state {
            out.push((STATE_UPDATED, with(json!({ "old": before.map(|x| x.state.to_string()), "new": now.state.to_string() }))));
        }
        if (b.rtt, b.srtt, b.rto, b.rate_bps) != (now.rtt, now.srtt, now.rto, now.rate_bps) {
            out.push((METRICS_UPDATED, with(json!({ "latest_rtt_ms": ms(now.rtt),
                "smoothed_rtt_ms": ms(now.srtt), "rto_ms": ms(now.rto), "rate_bps": now.rate_bps }))));
        }
        if before.is_none() && now.fec_parity != 0
            || before.is_some() && b.fec_parity != now.fec_parity
        {
            out.push((
                FEC_UPDATED,
                with(json!({ "old": before.map(|x| x.fec_parity), "new": now.fec_parity })),
            ));
        }
        let lost = (
            now.retransmitted.saturating_sub(b.retransmitted),
            now.timeouts.saturating_sub(b.timeouts),
            now.holes_given_up.saturating_sub(b.holes_given_up),
        );
        if lost != (0, 0, 0) {
            out.push((
                LOSS_DETECTED,
                with(json!({ "retransmissions_queued": lost.0,
                "timeouts": lost.1, "holes_given_up": lost.2 })),
            ));
        }
        let rec = (
            now.corrected.saturating_sub(b.corrected),
            now.rebuilt.saturating_sub(b.rebuilt),
        );
        if rec != (0, 0) {
            out.push((
                TPDUS_RECOVERED,
                with(json!({ "fec_corrected": rec.0, "rebuilt_from_repairs": rec.1 })),
            ));
        }
        if now.outages > b.outages {
            out.push((OUTAGE, with(json!({ "outages": now.outages }))));
        }
        out
    }

    /// Writes the changes of one connection (see [`Observer::changes`]).
    pub fn observe<W: std::io::Write>(
        &mut self,
        w: &mut QlogWriter<W>,
        time: Duration,
        at: &str,
        conn: u64,
        s: &ConnectionStats,
        state: State,
    ) -> std::io::Result<()> {
        for (name, data) in self.changes(at, conn, s, state) {
            w.event(time, name, data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_look_writes_state_then_only_changes_and_counters_become_deltas() {
        let mut o = Observer::new();
        let mut s = ConnectionStats {
            srtt: Duration::from_millis(20),
            ..Default::default()
        };
        let first = o.changes("sender", 1, &s, State::AsynSent);
        let names: Vec<_> = first.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [STATE_UPDATED, METRICS_UPDATED]);
        assert!(
            o.changes("sender", 1, &s, State::AsynSent).is_empty(),
            "nothing changed"
        );
        s.sender.tpdus_retransmitted = 5;
        s.sender.timeouts = 1;
        s.receiver.tpdus_rebuilt = 2;
        s.fec_parity = 16;
        let c = o.changes("sender", 1, &s, State::Established);
        let names: Vec<_> = c.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [STATE_UPDATED, FEC_UPDATED, LOSS_DETECTED, TPDUS_RECOVERED]
        );
        assert_eq!(c[2].1["retransmissions_queued"], 5);
        assert_eq!(c[3].1["rebuilt_from_repairs"], 2);
        assert_eq!(c[0].1["old"], State::AsynSent.to_string());
        s.sender.tpdus_retransmitted = 7;
        let c = o.changes("sender", 1, &s, State::Established);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].1["retransmissions_queued"], 2,
            "a delta, not the total"
        );
        // Another endpoint's connection with the same handle number is its own.
        assert_eq!(
            o.changes("receiver", 1, &s, State::Established)[0].0,
            STATE_UPDATED
        );
    }
}
