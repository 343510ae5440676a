//! `aerotp sim --radio-follows-trace --qlog`: the simulator's trace carries each change the
//! radio made to the sender's path as `aerotp:radio_updated`, as a runtime trace does with
//! `--dlep` (docs/qlog.md), at the virtual time of the trace row that caused it, and
//! `aerotp trace` counts them among the sender's engine totals.

use std::process::Command;

use serde_json::Value;

#[test]
fn a_simulated_radios_rate_changes_are_in_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("steps.csv");
    std::fs::write(&trace, "time_s,rate_bps\n0,5000000\n1,1000000\n3,2500000\n").unwrap();
    let qlog = dir.path().join("q");
    let out = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args([
            "sim", "--mode", "reliable", "--size", "1500kB", "--runs", "1",
        ])
        .args([
            "--rate",
            "5mbit",
            "--delay",
            "10ms",
            "--radio-follows-trace",
        ])
        .arg("--trace")
        .arg(&trace)
        .arg("--qlog")
        .arg(&qlog)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let files: Vec<_> = std::fs::read_dir(&qlog)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let radio: Vec<(f64, Value)> = aerotp_qlog::read_trace(&files[0])
        .unwrap()
        .into_iter()
        .filter(|r| r.name == "aerotp:radio_updated")
        .map(|r| (r.time_ms, r.data))
        .collect();
    let said: Vec<(f64, u64)> = radio
        .iter()
        .map(|(t, d)| (*t, d["radio_rate_bps"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        said,
        [(0.0, 5_000_000), (1000.0, 1_000_000), (3000.0, 2_500_000)],
        "{radio:?}"
    );
    for (_, d) in &radio {
        assert_eq!([&d["at"], &d["signal"]], ["sender", "rate"], "{d}");
        assert_eq!(d["path"], 0, "{d}");
        assert!(
            d["rate_bps"].as_u64() <= d["radio_rate_bps"].as_u64(),
            "{d}"
        );
    }
    let summary = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(["trace", "--json", "--no-plot"])
        .arg(&files[0])
        .output()
        .unwrap();
    assert!(summary.status.success(), "{summary:?}");
    let v: Value = serde_json::from_slice(&summary.stdout).unwrap();
    assert_eq!(v["engine"]["sender"]["radio_changes"], 3, "{v}");
}
