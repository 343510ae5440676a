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

#[test]
fn sim_senders_prints_each_sender_and_jain() {
    let out = aerotp(&[
        "sim",
        "--mode",
        "reliable",
        "--send-rate",
        "auto",
        "--senders",
        "2",
        "--sender-start",
        "0s,1s",
        "--settle",
        "1s",
        "--size",
        "2MB",
        "--runs",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).expect("one object");
    assert_eq!(v["complete_runs"], 2, "{v}");
    assert_eq!(v["delivered_bytes"].as_f64(), Some(4e6), "{v}");
    let senders = v["senders"].as_array().expect("senders");
    assert_eq!(senders.len(), 2, "{v}");
    assert_eq!(senders[1]["start_s"].as_f64(), Some(1.0), "{v}");
    for s in senders {
        for k in ["goodput_bps", "delivered_bytes", "start_s", "finish_s"] {
            assert!(s[k].as_f64().is_some(), "{k}: {s}");
        }
    }
    // Measured from 1 s after the second start (2 s) to the first finish.
    assert_eq!(v["jain_from_s"].as_f64(), Some(2.0), "{v}");
    let j = v["jain"].as_f64().expect("an interval with both active");
    assert!(j > 0.5 && j <= 1.0, "{v}");
}

#[test]
fn sim_senders_refuses_what_it_cannot_run_with_exit_2() {
    let base = ["sim", "--mode", "reliable", "--size", "50kB", "--runs", "1"];
    for (extra, needle) in [
        (&["--senders", "0"][..], "at least 1 sender"),
        (&["--senders", "65"][..], "1 to 64"),
        (
            &["--senders", "2", "--sender-start", "0s"][..],
            "one per sender",
        ),
        (&["--sender-delay", "10ms"][..], "--senders 2 or more"),
        (&["--senders", "2", "--workload", "messages"][..], "bulk"),
        (
            &["--senders", "2", "--pcap", "/tmp/never.pcapng"][..],
            "--pcap",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = aerotp(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    let out = aerotp(&["sim", "--mode", "udp", "--senders", "3", "--runs", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mode udp"), "{err}");
}
