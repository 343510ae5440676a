//! Radio events: each change a radio (DLEP, docs/dlep.md) made to a path, as the engine
//! applied it (`aerotp_proto::RadioChange`, taken from `Endpoint::poll_radio_change` by the
//! runtime's driver), written at the engine's time of the change. Unlike the observer's
//! events these are not read from a snapshot after the step: a rate said and taken back
//! within one step would be lost between two looks.

use aerotp_proto::{RadioChange, RadioSignal};
use serde_json::{json, Value};

/// The event data of change `c` on endpoint `at` (`"local"` in a runtime trace).
pub fn radio_event(at: &str, c: &RadioChange) -> Value {
    let mut v = json!({
        "at": at,
        "connection": c.connection.0,
        "path": c.path,
        "remote": c.remote.to_string(),
        "signal": c.signal.name(),
        "rate_bps": c.rate_bps,
        "rate_reason": c.rate_reason.name(),
        "path_rate_bps": c.path_rate_bps,
    });
    match c.signal {
        RadioSignal::Rate(bps) => v["radio_rate_bps"] = json!(bps),
        RadioSignal::Latency(d) => v["latency_ms"] = json!(d.as_secs_f64() * 1e3),
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerotp_proto::{ConnectionHandle, RateReason};
    use std::time::Duration;

    #[test]
    fn a_rate_change_names_the_rate_said_and_the_rate_in_force() {
        let c = RadioChange {
            at: Duration::from_millis(1500),
            connection: ConnectionHandle(4),
            path: 1,
            remote: "10.0.0.2:9000".parse().unwrap(),
            signal: RadioSignal::Rate(1_000_000),
            rate_bps: 950_000,
            rate_reason: RateReason::Radio,
            path_rate_bps: 950_000,
        };
        let v = radio_event("local", &c);
        assert_eq!(v["signal"], "rate");
        assert_eq!(v["radio_rate_bps"], 1_000_000);
        assert_eq!(v["rate_bps"], 950_000);
        assert_eq!(v["rate_reason"], "radio");
        assert_eq!(
            (v["connection"].as_u64(), v["path"].as_u64()),
            (Some(4), Some(1))
        );
        assert_eq!(v["remote"], "10.0.0.2:9000");
        assert!(v.get("latency_ms").is_none());
        let l = radio_event(
            "local",
            &RadioChange {
                signal: RadioSignal::Latency(Duration::from_micros(12_500)),
                ..c
            },
        );
        assert_eq!(l["latency_ms"], 12.5);
        assert!(l.get("radio_rate_bps").is_none());
    }
}
