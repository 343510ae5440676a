//! `send --class` and `--dscp`, `recv --class` as a user runs them: the sender's datagrams
//! carry its class's DSCP, the receiver's answers carry its own, and a transfer reports the
//! class and mark (JSON, and each sent datagram's IP header in `--pcap`).
//! A socket that reads each datagram's TOS byte stands in for the network between them.
#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};
use std::time::Duration;

use aerotp_testkit::tos::{read_marked, tos_reader};
use aerotp_testkit::{free_udp, random, wait_bounded, KillOnDrop};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_and_the_receiver_mark_by_their_class() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("frame.bin");
    std::fs::write(&file, random(10_000, 1)).unwrap();
    let between = tos_reader("127.0.0.1:0");
    let to = between.local_addr().unwrap().to_string();
    let send = bin()
        .args([
            "send",
            "--insecure",
            file.to_str().unwrap(),
            "--to",
            &to,
            "--mode",
            "reliable",
        ])
        .args(["--class", "control", "--connect-timeout", "10s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _send = KillOnDrop::new(send);
    let opening = read_marked(&between, Duration::from_secs(10)).await;
    assert_eq!(opening.dscp(), Some(46), "send --class control: EF");

    // The receiver answers the sender's opening TPDU, forwarded to it, with its own class's
    // mark (here telemetry, re-marked CS4 by --dscp).
    let rport = free_udp();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let recv = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &rport.to_string(),
            "-o",
            out.to_str().unwrap(),
        ])
        .args(["--class", "telemetry", "--dscp", "telemetry=cs4"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _recv = KillOnDrop::new(recv);
    // Until the receiver is up: the opening again every 200 ms, 50 times at most.
    let mut answer = None;
    for _ in 0..50 {
        between.send_to(&opening.data, rport).await.unwrap();
        let wait = aerotp_testkit::tos::read_marked(&between, Duration::from_secs(10));
        if let Ok(m) = tokio::time::timeout(Duration::from_millis(200), wait).await {
            if m.from == rport {
                answer = Some(m);
                break;
            }
        }
    }
    let answer = answer.expect("the receiver answered within 10 s");
    assert_eq!(
        answer.dscp(),
        Some(32),
        "recv --class telemetry --dscp telemetry=cs4"
    );
}

#[test]
fn a_transfer_reports_its_class_and_mark() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("frame.bin");
    std::fs::write(&file, random(50_000, 2)).unwrap();
    let port = free_udp();
    let recv = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &port.to_string(),
            "--once",
            "-o",
        ])
        .arg(dir.path().join("got.bin"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recv = KillOnDrop::new(recv);
    std::thread::sleep(Duration::from_millis(300));
    let send = bin()
        .args([
            "send",
            "--insecure",
            file.to_str().unwrap(),
            "--to",
            &port.to_string(),
        ])
        .args([
            "--mode",
            "reliable",
            "--class",
            "telemetry",
            "--json",
            "--pcap",
        ])
        .arg(dir.path().join("send.pcapng"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let send = wait_bounded(send, Duration::from_secs(30));
    let recv = wait_bounded(recv.take(), Duration::from_secs(10));
    assert_eq!(
        recv.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&recv.stderr)
    );
    assert_eq!(
        send.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&send.stdout).trim()).unwrap();
    assert_eq!(v["class"], "telemetry");
    assert_eq!(v["dscp"], "af41");
    assert_eq!(
        std::fs::read(dir.path().join("got.bin")).unwrap(),
        std::fs::read(&file).unwrap()
    );
    // The capture shows each sent datagram with the mark it left with.
    let (names, packets) = aerotp_capture::read_capture(&dir.path().join("send.pcapng")).unwrap();
    let sent = names.iter().position(|n| n == "sent").unwrap() as u32;
    let marks: Vec<u8> = packets
        .iter()
        .filter(|p| p.iface == sent)
        .map(|p| p.tos)
        .collect();
    assert!(marks.len() > 30, "{} sent", marks.len());
    assert!(marks.iter().all(|&t| t == 34 << 2), "{marks:?}");
}
