//! Help and errors that say what the code does (issue 41, item 3): `send --mode` names only the
//! modes it accepts, `--qlog DIR` creates a directory that does not exist yet, and `sim
//! --help` gives the FEC default each mode really has.

use std::process::{Command, Output};

use aerotp_testkit::free_udp;

fn aerotp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The list after "one of:" in an error message.
fn offered(err: &str) -> String {
    let (_, list) = err
        .split_once("one of:")
        .unwrap_or_else(|| panic!("no list in: {err}"));
    list.lines().next().unwrap_or("").to_owned()
}

#[test]
fn send_mode_never_offers_what_it_refuses() {
    let to = free_udp().to_string();
    for bad in ["nope", "datagram"] {
        let o = aerotp(&["send", "--insecure", "x", "--to", &to, "--mode", bad]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad}: {e}");
        let list = offered(&e);
        assert!(
            list.contains("reliable") && list.contains("hybrid-nack-mack"),
            "{bad}: {e}"
        );
        assert!(!list.contains("datagram"), "{bad}: offers datagram: {e}");
    }
    let help = String::from_utf8_lossy(&aerotp(&["send", "--help"]).stdout).into_owned();
    let mode = help
        .split("\n      --mode <MODE>")
        .nth(1)
        .and_then(|h| h.split("--class").next())
        .expect("--mode in send --help")
        .to_owned();
    assert!(!mode.contains("datagram"), "{mode}");
}

#[test]
fn qlog_creates_a_directory_that_does_not_exist_yet() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("new").join("traces");
    let o = aerotp(&[
        "sim",
        "--mode",
        "reliable",
        "--runs",
        "1",
        "--size",
        "50kB",
        "--qlog",
        q.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let traces: Vec<_> = std::fs::read_dir(&q).unwrap().collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    // send too: the directory is made before any traffic (here a peer that never answers).
    let q = dir.path().join("send-traces");
    let to = free_udp().to_string();
    let o = aerotp(&[
        "send",
        "--insecure",
        "-",
        "--to",
        &to,
        "--mode",
        "reliable",
        "--connect-timeout",
        "1s",
        "--qlog",
        q.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(q.is_dir());
    // What cannot be a directory is still refused, naming the flag.
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let o = aerotp(&[
        "sim",
        "--runs",
        "1",
        "--size",
        "50kB",
        "--qlog",
        file.join("q").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--qlog"), "{}", stderr(&o));
}

#[test]
fn sim_help_gives_each_mode_s_real_fec_default() {
    let help = String::from_utf8_lossy(&aerotp(&["sim", "--help"]).stdout).into_owned();
    assert!(
        help.contains("Default: auto in every mode but unreliable, datagram and udp (off there)"),
        "{help}"
    );
    for (mode, fec) in [
        ("reliable", "auto"),
        ("near-reliable", "auto"),
        ("quasi-reliable", "auto"),
        ("hybrid-nack", "auto"),
        ("hybrid-nack-mack", "auto"),
        ("unreliable", "off"),
        ("datagram", "off"),
        ("udp", "off"),
    ] {
        let o = aerotp(&[
            "sim", "--mode", mode, "--ber", "1e-5", "--size", "50kB", "--runs", "1", "--json",
        ]);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["fec"], fec, "{mode}");
    }
}
