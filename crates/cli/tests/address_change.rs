//! The sender's host changes address mid-transfer, as a radio that comes back with another
//! address (docs/spec.md §9, "A peer's new address"): two network namespaces joined by a
//! veth pair, `aerotp recv` in one, `aerotp send` in the other; a second into the transfer
//! the sender's address is replaced by one in another subnet. The runtime names each path's
//! local address on its datagrams; once that address is gone it sends from routing's choice
//! (crates/net/src/udp.rs), the receiver validates the new address and the connection moves
//! there. The file must arrive complete and intact, with no reset, and the namespaces are
//! removed afterwards. Needs root and iproute2; fails saying so unless AEROTP_SKIP_LAB=1.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use aerotp_testkit::{wait_bounded, KillOnDrop};

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The two namespaces, removed on drop (with the veth pair inside them).
struct Namespaces([String; 2]);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_aerotp")])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[test]
fn a_transfer_survives_the_senders_address_changing() {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: address-change test skipped");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the address-change test needs root (network namespaces); run as root or set \
         AEROTP_SKIP_LAB=1"
    );
    let pid = std::process::id();
    let (air, ground) = (
        format!("aerotp-mv-air-{pid}"),
        format!("aerotp-mv-gnd-{pid}"),
    );
    let _ns = Namespaces([air.clone(), ground.clone()]);
    for n in [&air, &ground] {
        ip(&["netns", "add", n]);
        ip(&["-n", n, "link", "set", "lo", "up"]);
    }
    ip(&[
        "link", "add", "mva", "netns", &air, "type", "veth", "peer", "name", "mvg", "netns",
        &ground,
    ]);
    ip(&["-n", &air, "addr", "add", "10.99.0.1/24", "dev", "mva"]);
    ip(&["-n", &ground, "addr", "add", "10.99.0.2/24", "dev", "mvg"]);
    ip(&["-n", &air, "link", "set", "mva", "up"]);
    ip(&["-n", &ground, "link", "set", "mvg", "up"]);
    // The ground reaches the sender's next subnet over the same link.
    ip(&["-n", &ground, "route", "add", "10.99.1.0/24", "dev", "mvg"]);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flight.bin");
    let data = aerotp_testkit::random(6_000_000, 77);
    std::fs::write(&file, &data).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let recv = KillOnDrop::new(
        in_ns(
            &ground,
            &[
                "recv",
                "--insecure",
                "--listen",
                "0.0.0.0:47000",
                "--once",
                "--output",
                out.to_str().unwrap(),
            ],
        )
        .spawn()
        .expect("spawn aerotp recv"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let send = KillOnDrop::new(
        in_ns(
            &air,
            &[
                "send",
                "--insecure",
                "--to",
                "10.99.0.2:47000",
                "--mode",
                "reliable",
                "--rate",
                "16mbit",
                "--json",
                file.to_str().unwrap(),
            ],
        )
        .spawn()
        .expect("spawn aerotp send"),
    );
    // 6 MB at 16 Mb/s is 3 s: the address changes a third of the way in.
    std::thread::sleep(Duration::from_secs(1));
    ip(&["-n", &air, "addr", "add", "10.99.1.1/24", "dev", "mva"]);
    ip(&["-n", &air, "addr", "del", "10.99.0.1/24", "dev", "mva"]);
    ip(&[
        "-n",
        &air,
        "route",
        "add",
        "10.99.0.0/24",
        "dev",
        "mva",
        "src",
        "10.99.1.1",
    ]);
    let sent = wait_bounded(send.take(), Duration::from_secs(60));
    let received = wait_bounded(recv.take(), Duration::from_secs(10));
    let say = |o: &Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(sent.status.success(), "send failed: {}", say(&sent));
    assert!(received.status.success(), "recv failed: {}", say(&received));
    let got = std::fs::read(out.join("flight.bin")).expect("the received file");
    assert!(
        got == data,
        "{} of {} bytes, or other bytes",
        got.len(),
        data.len()
    );
    // The sender's one path now runs from the new address.
    let report: serde_json::Value =
        serde_json::from_slice(&sent.stdout).expect("send --json prints one object");
    let paths = report["paths"].as_array().cloned().unwrap_or_default();
    assert!(
        paths.iter().any(|p| p["local"] == "10.99.1.1"),
        "no path from the new address: {report}"
    );
}
