//! `aerotp send --dlep` following MIT-LL's LL-DLEP (`aerotp_testkit::ll_dlep`; this test
//! FAILS, never skips, without it: scripts/build-ll-dlep.sh): every change the modem makes to
//! the path is in the sender's `--qlog` trace (`aerotp:radio_updated`, at the engine's time
//! of the change, which the header's `reference_time` puts on the wall clock), its log (info
//! level), its `--metrics` while it runs and its `--json` at the end (docs/stats.md,
//! docs/qlog.md).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use aerotp_testkit::ll_dlep::Modem;
use aerotp_testkit::{
    free_tcp, free_udp, prom, random, wait_bounded, wait_until, wall_ms, KillOnDrop,
};
use serde_json::Value;

const MAC: &str = "00:11:22:33:44:55";

fn spawn(args: &[&str]) -> KillOnDrop {
    KillOnDrop::new(
        Command::new(env!("CARGO_BIN_EXE_aerotp"))
            .args(args)
            .env("RUST_LOG", "aerotp_net=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// One scrape: the body, or `None` if nothing answers.
fn scrape(addr: &str) -> Option<String> {
    prom::get(addr).map(|(_, body)| body)
}

/// The radio rate gauge's one sample, bytes per second, once the metrics answer with one.
fn radio_rate(addr: &str) -> Option<f64> {
    let m = prom::parse(&scrape(addr)?, "aerotp_");
    let s: Vec<f64> = m
        .samples
        .iter()
        .filter(|s| s.name == "aerotp_radio_rate_bytes_per_second")
        .map(|s| s.value)
        .collect();
    assert!(s.len() <= 1, "one path, one radio rate: {s:?}");
    s.first().copied()
}

/// The trace's header and its `aerotp:radio_updated` events (time, data).
fn radio_events(qlog_dir: &Path) -> (Value, Vec<(f64, Value)>) {
    let files: Vec<_> = std::fs::read_dir(qlog_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlog"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let first = bytes
        .split(|&b| b == 0x1E)
        .find(|r| !r.trim_ascii().is_empty())
        .unwrap();
    let header: Value = serde_json::from_slice(first.trim_ascii()).unwrap();
    let events = aerotp_qlog::read_trace(&files[0])
        .unwrap()
        .into_iter()
        .filter(|r| r.name == "aerotp:radio_updated")
        .map(|r| (r.time_ms, r.data))
        .collect();
    (header, events)
}

#[test]
fn a_modems_changes_are_in_the_trace_the_log_the_metrics_and_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let mport = free_tcp().port();
    let mut modem = Modem::start(dir.path(), mport);
    // Said before the sender exists: LL-DLEP announces it when the session comes up.
    modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 2000000"));
    let mut commands = vec![(wall_ms(), "rate", Some(2_000_000u64))];

    let data = random(1_500_000, 38);
    let src = dir.path().join("d.bin");
    std::fs::write(&src, &data).unwrap();
    let (out, qlog) = (dir.path().join("rx"), dir.path().join("qlog"));
    std::fs::create_dir(&out).unwrap();
    let listen = format!("127.0.0.1:{}", free_udp().port());
    let metrics = format!("127.0.0.1:{}", free_tcp().port());
    let (modem_addr, map) = (format!("127.0.0.1:{mport}"), format!("{MAC}=127.0.0.1"));
    let recv = spawn(&[
        "recv",
        "--insecure",
        "--listen",
        &listen,
        "-o",
        out.to_str().unwrap(),
        "--once",
    ]);
    let send = spawn(&[
        "send",
        "--insecure",
        src.to_str().unwrap(),
        "--to",
        &listen,
        "--mode",
        "reliable",
        "--rate",
        "5mbit",
        "--dlep",
        &modem_addr,
        "--dlep-map",
        &map,
        "--qlog",
        qlog.to_str().unwrap(),
        "--metrics",
        &metrics,
        "--json",
    ]);

    // 1.5 MB at the radio's 2 Mb/s take 6 s: every command below comes while it runs.
    wait_until(
        "the radio's 2 Mb/s in the metrics",
        Duration::from_secs(10),
        || radio_rate(&metrics) == Some(250_000.0),
    );
    modem.cli(&format!(
        "dest update {MAC} Current_Data_Rate_Transmit 1000000"
    ));
    commands.push((wall_ms(), "rate", Some(1_000_000)));
    wait_until(
        "the radio's 1 Mb/s in the metrics",
        Duration::from_secs(2),
        || radio_rate(&metrics) == Some(125_000.0),
    );
    modem.cli(&format!("dest down {MAC}"));
    commands.push((wall_ms(), "down", None));
    std::thread::sleep(Duration::from_millis(300));
    let m = prom::parse(&scrape(&metrics).expect("send still runs"), "aerotp_");
    let down = m
        .samples
        .iter()
        .find(|s| s.name == "aerotp_radio_changes_total" && s.labels["kind"] == "down");
    assert_eq!(down.map(|s| s.value), Some(1.0), "one down counted");
    modem.cli(&format!("dest up {MAC} Current_Data_Rate_Transmit 2000000"));
    let t = wall_ms();
    commands.push((t, "up", None));
    commands.push((t, "rate", Some(2_000_000)));

    let s = wait_bounded(send.take(), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&s.stderr);
    assert_eq!(s.status.code(), Some(0), "send: {stderr}");
    let r = wait_bounded(recv.take(), Duration::from_secs(20));
    assert_eq!(r.status.code(), Some(0), "recv");
    assert_eq!(
        std::fs::read(out.join("d.bin")).unwrap(),
        data,
        "every byte"
    );

    // --json: what the radio says of the path at the end, and its changes counted.
    let j: Value = serde_json::from_str(
        String::from_utf8_lossy(&s.stdout)
            .lines()
            .last()
            .unwrap_or(""),
    )
    .expect("send --json");
    let radio = &j["paths"][0]["radio"];
    assert_eq!(radio["rate_bps"], 2_000_000, "{radio}");
    assert_eq!(
        [
            &radio["rate_changes"],
            &radio["downs"],
            &radio["ups"],
            &radio["pauses"]
        ],
        [3, 1, 1, 0],
        "{radio}"
    );
    assert_eq!(
        (&radio["down"], &radio["paused"]),
        (&Value::Bool(false), &Value::Bool(false))
    );

    // The log: one info line per change in force.
    for needle in [
        "radio: rate 1000000 b/s in force",
        "radio: down in force",
        "radio: up in force",
    ] {
        assert!(
            stderr.contains(needle),
            "no '{needle}' in the log: {stderr}"
        );
    }

    // The trace: the same changes in order (a latency the modem may report is no command's),
    // each after its command on the wall clock and, once the connection runs, within a
    // second of it; a rate in force within the radio's.
    let (header, events) = radio_events(&qlog);
    let reference = header["trace"]["common_fields"]["reference_time"]
        .as_f64()
        .expect("reference_time");
    assert!(
        reference > 1.6e12,
        "the trace's start on the wall clock: {reference}"
    );
    let events: Vec<_> = events
        .into_iter()
        .filter(|(_, d)| d["signal"] != "latency")
        .collect();
    let said: Vec<(&str, Option<u64>)> = events
        .iter()
        .map(|(_, d)| (d["signal"].as_str().unwrap(), d["radio_rate_bps"].as_u64()))
        .collect();
    let asked: Vec<(&str, Option<u64>)> = commands.iter().map(|c| (c.1, c.2)).collect();
    assert_eq!(said, asked, "{events:?}");
    for (i, ((time, d), (cmd, ..))) in events.iter().zip(&commands).enumerate() {
        let at = reference + time;
        assert!(at + 2.0 >= *cmd, "{d} at {at} ms, its command at {cmd} ms");
        assert!(
            i == 0 || at < cmd + 1000.0,
            "{d} at {at} ms, its command at {cmd} ms"
        );
        assert_eq!(d["path"], 0);
        if let Some(r) = d["radio_rate_bps"].as_u64() {
            assert!(d["rate_bps"].as_u64().unwrap() <= r, "{d}");
            assert_eq!(d["rate_reason"], "radio", "{d}");
        }
    }

    // `aerotp trace` counts them among the engine's totals.
    let trace = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(["trace", "--json", "--no-plot"])
        .arg(
            std::fs::read_dir(&qlog)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path(),
        )
        .output()
        .unwrap();
    assert_eq!(trace.status.code(), Some(0), "{trace:?}");
    let summary: Value = serde_json::from_slice(&trace.stdout).expect("trace --json");
    let counted = summary["engine"]["local"]["radio_changes"].as_u64();
    let latencies = radio_events(&qlog).1.len() - events.len();
    assert_eq!(
        counted,
        Some((commands.len() + latencies) as u64),
        "{summary}"
    );
}
