//! `aerotp sim --qlog` and `aerotp trace`: a trace holds what the engine did, number for
//! number — the trace's count of data TPDUs, retransmissions, repairs and rebuilt TPDUs equals
//! what the simulator reports for the same run — the chart is a PNG, and bad paths or files
//! are refused before anything is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn aerotp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run aerotp")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aerotp-qlog-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn only_file(dir: &Path, ext: &str) -> PathBuf {
    let v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v[0].clone()
}

/// One simulated run with a trace; returns (sim JSON, trace summary JSON, trace dir).
fn traced(name: &str, sim: &[&str]) -> (Value, Value, PathBuf) {
    let dir = scratch(name);
    let q = dir.join("q");
    std::fs::create_dir_all(&q).unwrap();
    let mut args = vec![
        "sim",
        "--runs",
        "1",
        "--topology",
        "two-node",
        "--json",
        "--qlog",
    ];
    args.push(q.to_str().unwrap());
    args.extend_from_slice(sim);
    let o = aerotp(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let simj: Value = serde_json::from_slice(&o.stdout).unwrap();
    let file = only_file(&q, "sqlog");
    let png = dir.join("chart.png");
    let o = aerotp(&[
        "trace",
        file.to_str().unwrap(),
        "--json",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tr: Value = serde_json::from_slice(&o.stdout).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    (simj, tr, dir)
}

fn n(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn a_reliable_trace_counts_what_the_simulator_counts() {
    let (sim, tr, dir) = traced(
        "reliable",
        &[
            "--mode", "reliable", "--size", "600kB", "--ber", "2e-5", "--fec", "off", "--seed", "4",
        ],
    );
    assert!(
        n(&sim, "retransmissions") > 0.0,
        "the case must lose something: {sim}"
    );
    assert_eq!(n(&tr, "data_tpdus_first"), n(&sim, "data_tpdus"));
    assert_eq!(
        n(&tr, "data_tpdus_retransmitted"),
        n(&sim, "retransmissions")
    );
    assert_eq!(n(&tr, "data_bytes_first"), 600_000.0);
    assert!(
        n(&tr["engine"]["sender"], "retransmissions_queued") >= n(&sim, "retransmissions"),
        "{tr}"
    );
    assert_eq!(
        n(&tr["engine"]["receiver"], "fec_corrected"),
        n(&sim, "tpdus_corrected")
    );
    assert!(n(&tr, "control_received") > 10.0, "MACKs: {tr}");
    let states: Vec<String> = tr["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    assert!(
        states
            .iter()
            .any(|s| s.starts_with("sender:") && s.ends_with("CLOSED")),
        "{states:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_erasure_trace_counts_repairs_and_rebuilt_tpdus() {
    let (sim, tr, dir) = traced(
        "erasure",
        &[
            "--mode",
            "quasi-reliable",
            "--size",
            "600kB",
            "--ber",
            "0",
            "--loss",
            "0.03",
            "--seed",
            "2",
        ],
    );
    assert!(
        n(&sim, "repairs_sent") > 0.0 && n(&sim, "tpdus_rebuilt") > 0.0,
        "{sim}"
    );
    assert_eq!(n(&tr, "repairs_sent"), n(&sim, "repairs_sent"));
    assert_eq!(
        n(&tr["engine"]["receiver"], "rebuilt_from_repairs"),
        n(&sim, "tpdus_rebuilt")
    );
    // Quasi-reliable never resends data, except the TPDU that carries the AFIN when the
    // peer's AFINACK is lost (the close handshake, with the last bytes it carries).
    let trace = std::fs::read(only_file(&dir.join("q"), "sqlog")).unwrap();
    let mut resent = 0;
    for rec in trace.split(|b| *b == 0x1E).filter(|r| !r.is_empty()) {
        let v: Value = serde_json::from_slice(rec).unwrap();
        if v["data"]["retransmission"] == Value::Bool(true) {
            let h = &v["data"]["header"];
            assert!(
                h["flags"].to_string().contains("AFIN"),
                "quasi-reliable resent data: {v}"
            );
            resent += 1;
        }
    }
    assert_eq!(n(&tr, "data_tpdus_retransmitted"), f64::from(resent));
    assert!(resent <= 2, "{resent} AFINs resent");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_qlog_paths_and_bad_trace_files_are_refused() {
    let dir = scratch("bad");
    let file = dir.join("plain");
    std::fs::write(&file, b"not a directory").unwrap();
    let under = file.join("q");
    let o = aerotp(&[
        "sim",
        "--runs",
        "1",
        "--size",
        "100kB",
        "--qlog",
        under.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--qlog") && !err.contains("panicked") && !err.contains("stack backtrace"),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "nothing reported: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = aerotp(&["trace", file.to_str().unwrap(), "--no-plot"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not JSON"), "{err}");
    assert!(!dir.join("plain.png").exists());
    let o = aerotp(&["trace", dir.join("missing.sqlog").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("opening"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `send --qlog` and `recv --qlog` over loopback: each writes its own trace, and the sender's
/// trace counts exactly the data TPDUs `send --json` reports (sent minus retransmitted minus
/// the ASYN's extra copies), and the receiver's what `recv --json` reports received.
#[test]
fn send_and_recv_traces_count_what_they_report() {
    use aerotp_testkit::{free_udp, random, wait_bounded, KillOnDrop};
    use std::process::Stdio;
    use std::time::Duration;
    let dir = scratch("live");
    let (q, rx) = (dir.join("q"), dir.join("rx"));
    std::fs::create_dir_all(&q).unwrap();
    std::fs::create_dir_all(&rx).unwrap();
    let src = dir.join("flight.bin");
    std::fs::write(&src, random(1_500_000, 9)).unwrap();
    let port = free_udp().port();
    let listen = format!("127.0.0.1:{port}");
    let recv = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args([
            "recv",
            "--insecure",
            "--listen",
            &listen,
            "-o",
            rx.to_str().unwrap(),
            "--once",
            "--json",
        ])
        .args(["--qlog", q.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recv = KillOnDrop::new(recv);
    std::thread::sleep(Duration::from_millis(300));
    let send = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args([
            "send",
            "--insecure",
            src.to_str().unwrap(),
            "--to",
            &listen,
            "--mode",
            "reliable",
        ])
        .args(["--rate", "40mbit", "--json", "--qlog", q.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let send = wait_bounded(send, Duration::from_secs(40));
    let recv = wait_bounded(recv.take(), Duration::from_secs(20));
    assert!(
        send.status.success(),
        "{}",
        String::from_utf8_lossy(&send.stderr)
    );
    assert!(
        recv.status.success(),
        "{}",
        String::from_utf8_lossy(&recv.stderr)
    );
    let last = |o: &Output| -> Value {
        let s = String::from_utf8_lossy(&o.stdout);
        serde_json::from_str(s.lines().last().unwrap()).unwrap()
    };
    let (sj, rj) = (last(&send), last(&recv));
    let file = |prefix: &str| -> PathBuf {
        std::fs::read_dir(&q)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} trace in {}", q.display()))
    };
    let summary = |p: PathBuf| -> Value {
        let o = aerotp(&["trace", p.to_str().unwrap(), "--json", "--no-plot"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let st = summary(file("send-"));
    let first = n(&sj, "tpdus_sent") - n(&sj, "tpdus_retransmitted") - n(&st, "asyn_copies");
    assert_eq!(n(&st, "data_tpdus_first"), first, "{st}\n{sj}");
    assert_eq!(
        n(&st, "data_tpdus_retransmitted"),
        n(&sj, "tpdus_retransmitted")
    );
    assert!(n(&st, "data_bytes_first") >= 1_500_000.0, "{st}");
    let rt = summary(file("recv-"));
    assert!(
        n(&rt, "control_sent") > 0.0,
        "the receiver acknowledged: {rt}"
    );
    // The receiver heard the sender's close; it exits once its verdict is acknowledged, in
    // the linger, before the connection reaches CLOSED (docs/runtime.md, "Commands end with
    // the work").
    let states = rt["states"].to_string();
    assert!(states.contains("AFIN_RCVD"), "{states}");
    assert!(
        n(&rj, "tpdus_received") >= n(&st, "data_tpdus_first"),
        "{rj}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `aerotp trace` reads a `--pcap` capture too: the same datagram counts as the simulator's
/// (a capture has no engine events).
#[test]
fn trace_reads_a_capture_and_counts_what_the_simulator_counts() {
    let dir = scratch("pcap");
    let cap = dir.join("run.pcapng");
    let o = aerotp(&[
        "sim",
        "--runs",
        "1",
        "--topology",
        "two-node",
        "--json",
        "--mode",
        "reliable",
        "--size",
        "600kB",
        "--ber",
        "2e-5",
        "--fec",
        "off",
        "--seed",
        "4",
        "--pcap",
        cap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sim: Value = serde_json::from_slice(&o.stdout).unwrap();
    let png = dir.join("c.png");
    let o = aerotp(&[
        "trace",
        cap.to_str().unwrap(),
        "--json",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tr: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(n(&tr, "data_tpdus_first"), n(&sim, "data_tpdus"));
    assert_eq!(
        n(&tr, "data_tpdus_retransmitted"),
        n(&sim, "retransmissions")
    );
    assert_eq!(tr["sender"], "10.0.0.1:9000");
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    std::fs::remove_dir_all(dir).unwrap();
}
