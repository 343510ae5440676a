//! What `send`, `recv` and their JSON say of each path of a connection (docs/stats.md,
//! "Paths").

use aerotp_net::ConnectionStats;
use serde_json::{json, Value};

/// The progress line's part for several paths: each one's state, delivery rate and round
/// trip (nothing for one path).
pub fn progress(s: &ConnectionStats) -> String {
    let mut m = String::new();
    if s.paths.len() > 1 {
        for (i, p) in s.paths.iter().enumerate() {
            let state = if p.up { "up" } else { "DOWN" };
            m.push_str(&format!(
                " | p{i} {state} {:.2}Mb/s {:.0}ms",
                p.delivered_bps as f64 / 1e6,
                p.srtt.as_secs_f64() * 1e3
            ));
        }
    }
    m
}

/// Per-path statistics (docs/stats.md, "Paths"), one object per path.
pub fn json(s: &ConnectionStats) -> Value {
    s.paths
        .iter()
        .map(|p| {
            json!({
                "remote": p.remote.to_string(),
                "local": p.local.map(|l| l.to_string()),
                "up": p.up,
                "srtt_ms": p.srtt.as_secs_f64() * 1e3,
                "delivered_bps": p.delivered_bps,
                "weight": p.weight,
                "ber": p.ber,
                "tpdus_sent": p.sent.tpdus_sent,
                "tpdus_acked": p.sent.tpdus_acked,
                "tpdus_lost": p.sent.tpdus_lost,
                "datagrams_sent": p.datagrams_sent,
                "bytes_sent": p.bytes_sent,
                "datagrams_received": p.datagrams_received,
                "bytes_received": p.bytes_received,
                "time_up_s": p.time_up.as_secs_f64(),
                "time_down_s": p.time_down.as_secs_f64(),
                "downs": p.downs,
                "probes": p.probes,
                "radio": radio(p),
            })
        })
        .collect()
}

/// What path `p`'s radio says now and how often it changed (docs/stats.md, "Paths"; all
/// zeros and nulls without a radio).
fn radio(p: &aerotp_proto::PathStats) -> Value {
    let r = &p.radio;
    json!({
        "rate_bps": p.rate.radio_bps,
        "latency_ms": r.latency.map(|l| l.as_secs_f64() * 1e3),
        "down": r.down,
        "paused": r.paused,
        "rate_changes": r.rate_changes,
        "latency_changes": r.latency_changes,
        "downs": r.downs,
        "ups": r.ups,
        "pauses": r.pauses,
        "restarts": r.restarts,
    })
}
