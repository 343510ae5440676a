//! Runs the `aerotp sim` binary and checks its JSON contract and its flag validation.

use std::process::Command;

fn aerotp(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(args)
        .output()
        .expect("run aerotp")
}

#[test]
fn sim_json_is_one_object_with_the_contract_keys() {
    let out = aerotp(&[
        "sim",
        "--mode",
        "hybrid-nack-mack",
        "--ber",
        "1e-4",
        "--size",
        "60kB",
        "--runs",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON object");
    assert_eq!(v["mode"], "hybrid-nack-mack");
    assert_eq!(v["ber"].as_f64(), Some(1e-4));
    assert_eq!(v["loss"].as_f64(), Some(0.0));
    assert_eq!(v["runs"], 3);
    assert_eq!(v["complete_runs"], 3, "{v}");
    assert_eq!(v["delivered_bytes"].as_f64(), Some(60_000.0));
    let g = v["goodput_bps"].as_f64().unwrap();
    assert!(g > 1e6 && g < 5e6, "{g}");
    for k in ["mean_delay_s", "overhead_bytes", "setup_delay_s"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    // The bottleneck's queue, forward: seconds, ordered, over every datagram of every run.
    let q = &v["queue_delay"];
    let at = |k: &str| q[k].as_f64().unwrap_or(-1.0);
    assert!(
        0.0 <= at("p50") && at("p50") <= at("p99") && at("p99") <= at("max"),
        "{q}"
    );
    assert!(q["n"].as_u64().unwrap() >= 3 * 40, "{q}");
    assert!(v["queue_drops"].as_f64().unwrap() >= 0.0, "{v}");
}

#[test]
fn sim_rejects_bad_flags_with_a_message() {
    for (args, needle) in [
        (&["sim", "--mode", "reliable", "--ber", "1.5"][..], "BER"),
        (&["sim", "--mode", "tcp", "--ber", "0"][..], "unknown mode"),
        (
            &["sim", "--mode", "reliable", "--ber", "0", "--size", "0"][..],
            "size",
        ),
        (
            &["sim", "--mode", "reliable", "--ber", "0", "--runs", "0"][..],
            "runs",
        ),
        (
            &["sim", "--mode", "reliable", "--ber", "0", "--rate", "lots"][..],
            "rate",
        ),
    ] {
        let out = aerotp(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
