//! A keyed transfer recorded on the wire and replayed to a restarted `aerotp recv` writes
//! nothing (docs/security.md, "Replays"): the recording verifies — same key — but its sender
//! never answers the new receiver's challenge, so no connection of it is ever proven.

use aerotp_testkit::relay::Relay;
use aerotp_testkit::{free_udp, KillOnDrop};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

fn recv(listen: &str, out: &str, key: &str) -> KillOnDrop {
    KillOnDrop::new(
        bin()
            .args([
                "recv",
                "--listen",
                listen,
                "-o",
                out,
                "--key-file",
                key,
                "--setup-timeout",
                "1s",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn files_in(dir: &str) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_keyed_transfer_replayed_to_a_restarted_receiver_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let path = |name: &str| d.path().join(name).to_str().unwrap().to_owned();
    let key = path("k.key");
    assert!(bin().args(["keygen", &key]).status().unwrap().success());
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
    let input = path("in.bin");
    std::fs::write(&input, &data).unwrap();
    let (out1, out2) = (path("first"), path("second"));
    std::fs::create_dir_all(&out1).unwrap();
    std::fs::create_dir_all(&out2).unwrap();
    let listen = free_udp().to_string();

    // The real transfer, through the recorder.
    let first = recv(&listen, &out1, &key);
    std::thread::sleep(Duration::from_millis(300));
    let rec = Relay::start(listen.parse().unwrap(), true, None);
    let via = rec.front().to_string();
    let o = bin()
        .args([
            "send",
            &input,
            "--to",
            &via,
            "--mode",
            "reliable",
            "--key-file",
            &key,
            "--rate",
            "20mbit",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = Instant::now();
    while std::fs::read(Path::new(&out1).join("in.bin"))
        .ok()
        .as_deref()
        != Some(&data[..])
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the real transfer arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (recording, upstream) = rec.stop();
    drop(first);
    assert!(
        recording.len() > 100,
        "{} datagrams recorded",
        recording.len()
    );

    // The receiver restarts (new process, same key, same port); the attacker replays the
    // whole recording from the address the receiver knew the sender by, at about its pace.
    let second = recv(&listen, &out2, &key);
    std::thread::sleep(Duration::from_millis(300));
    for d in &recording {
        upstream.send_to(d, &listen).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    // Past the slot's bound (a half-open connection that took more than its opening TPDU is
    // kept four set-up timeouts: 4 s), and the challenges answered to nobody.
    std::thread::sleep(Duration::from_secs(5));
    let o = stderr_of(second);
    assert!(
        files_in(&out2).is_empty(),
        "a replay wrote {:?}; recv said: {o}",
        files_in(&out2)
    );
    assert!(
        o.contains("unproven") || o.contains("never proved"),
        "recv names the dropped connection: {o}"
    );
}

/// Kills `child` and returns what it wrote on stderr.
fn stderr_of(child: KillOnDrop) -> String {
    let mut c = child.take();
    let _ = c.kill();
    let out = c.wait_with_output().expect("collect the output");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
