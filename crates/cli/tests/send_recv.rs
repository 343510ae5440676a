//! `aerotp send` / `aerotp recv` / `aerotp demo` as a user runs them (the built binary), on
//! loopback, directly and through `aerotp link` (BER 1e-4 and an outage).

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use aerotp_testkit::{free_udp, random, wait_bounded, KillOnDrop};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

/// Asserts a finished command's exit status, showing its stderr (and `what`) if it differs.
fn assert_exit(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn json_of(out: &Output) -> serde_json::Value {
    let s = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(s.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {s:?} stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn spawn_link(listen: u16, to: u16, extra: &[&str]) -> Child {
    let mut c = bin();
    c.args([
        "link",
        "--listen",
        &format!("127.0.0.1:{listen}"),
        "--to",
        &format!("127.0.0.1:{to}"),
        "--stats-interval",
        "0s",
    ]);
    c.args(extra).stdout(Stdio::null()).stderr(Stdio::null());
    c.spawn().unwrap()
}

/// One file through a relay; returns (recv output, send output, received bytes).
fn through_link(
    mode: &str,
    data: &[u8],
    link: &[&str],
    send_extra: &[&str],
) -> (Output, Output, Option<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("flight.bin");
    std::fs::write(&src, data).unwrap();
    let out_dir = dir.path().join("rx");
    std::fs::create_dir(&out_dir).unwrap();
    let rport = free_udp().port();
    let lport = free_udp().port();
    let recv = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &format!("127.0.0.1:{rport}"),
            "-o",
            out_dir.to_str().unwrap(),
            "--once",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed on every way out of this function, a failed assertion included.
    let recv = KillOnDrop::new(recv);
    let _relay = KillOnDrop::new(spawn_link(lport, rport, link));
    std::thread::sleep(Duration::from_millis(300));
    let send = bin()
        .args([
            "send",
            "--insecure",
            src.to_str().unwrap(),
            "--to",
            &format!("127.0.0.1:{lport}"),
            "--mode",
            mode,
            "--json",
        ])
        .args(send_extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let send = wait_bounded(send, Duration::from_secs(40));
    let recv = wait_bounded(recv.take(), Duration::from_secs(20));
    let got = std::fs::read(out_dir.join("flight.bin")).ok();
    assert!(
        !out_dir.read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".aerotp-tmp")),
        "no temporary file left"
    );
    (recv, send, got)
}

#[test]
fn reliable_and_hybrid_through_ber_1e4_and_an_outage() {
    let data = random(400_000, 3);
    let link = [
        "--rate",
        "20mbit",
        "--delay",
        "5ms",
        "--ber",
        "1e-4",
        "--outage",
        "500ms+500ms",
    ];
    for mode in ["reliable", "hybrid-nack-mack"] {
        let (recv, send, got) = through_link(mode, &data, &link, &["--rate", "18mbit"]);
        assert_exit(&send, 0, mode);
        assert_exit(&recv, 0, mode);
        assert!(got.as_deref() == Some(&data[..]), "{mode}: file differs");
        let r = json_of(&recv);
        let s = json_of(&send);
        assert_eq!(r["bytes"], 400_000);
        assert_eq!(s["delivered_confirmed"], true);
        assert!(
            s["tpdus_retransmitted"].as_u64().unwrap() > 0,
            "{mode}: lossy link → retransmissions"
        );
        let ber = r["measured_ber"].as_f64().unwrap();
        assert!(ber > 2e-5 && ber < 5e-4, "{mode}: measured BER {ber}");
    }
}

#[test]
fn quasi_reliable_reports_losses_and_keeps_partial() {
    // 1 MB at 5 Mb/s takes ~1.6 s from ~0.3 s after the relay starts; the outage sits in the
    // middle, so the header TPDU (which names the file) arrives and later data is lost.
    let data = random(1_000_000, 5);
    let link = [
        "--rate",
        "20mbit",
        "--delay",
        "5ms",
        "--ber",
        "1e-5",
        "--outage",
        "900ms+400ms",
    ];
    let dir_marker = "flight.bin.partial";
    let (recv, send, got) = through_link("quasi-reliable", &data, &link, &["--rate", "5mbit"]);
    assert_exit(&send, 0, "send");
    assert_exit(&recv, 5, "incomplete lossy transfer");
    assert!(got.is_none(), "never left looking complete");
    let r = json_of(&recv);
    assert!(r["tpdus_lost"].as_u64().unwrap() > 0);
    assert!(r["bytes"].as_u64().unwrap() < data.len() as u64);
    assert!(r["saved_as"].as_str().unwrap().ends_with(dir_marker));
}

#[test]
fn several_transfers_at_once_get_their_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let rport = free_udp().port();
    let mut recv = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &format!("127.0.0.1:{rport}"),
            "-o",
            dir.path().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let files: Vec<(String, Vec<u8>)> = (0..3)
        .map(|i| {
            (
                format!("part{i}.dat"),
                random(150_000 + i * 1000, i as u64 + 10),
            )
        })
        .collect();
    let src = tempfile::tempdir().unwrap();
    let senders: Vec<Child> = files
        .iter()
        .map(|(n, d)| {
            let p = src.path().join(n);
            std::fs::write(&p, d).unwrap();
            bin()
                .args([
                    "send",
                    "--insecure",
                    p.to_str().unwrap(),
                    "--to",
                    &format!("127.0.0.1:{rport}"),
                    "--mode",
                    "reliable",
                    "--rate",
                    "20mbit",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for s in senders {
        let o = wait_bounded(s, Duration::from_secs(20));
        assert_exit(&o, 0, "send");
    }
    std::thread::sleep(Duration::from_millis(1000));
    let _ = recv.kill();
    let _ = recv.wait();
    for (n, d) in &files {
        assert_eq!(std::fs::read(dir.path().join(n)).unwrap(), *d, "{n}");
    }
}

fn expect_fail(args: &[&str], code: i32, needle: &str) {
    let c = bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_bounded(c, Duration::from_secs(20));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

#[test]
fn bad_flags_are_rejected_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.bin");
    std::fs::write(&f, b"hello").unwrap();
    let f = f.to_str().unwrap();
    let to = "127.0.0.1:9";
    // `send FILE --to 127.0.0.1:9` followed by: (flags, exit code, words the error must hold).
    let send_cases: &[(&[&str], i32, &str)] = &[
        (&["--mode", "bogus"], 2, "unknown transfer mode"),
        (&["--mode", "datagram"], 2, "not files"),
        (&["--mode", "reliable", "--rate", "fast"], 2, "rate"),
        (&["--mode", "reliable", "--rate", "10"], 2, "too low"),
        (&["--mode", "reliable", "--fec", "999"], 2, "fec"),
        (&["--mode", "reliable", "--mack", "0"], 2, "1 to 365"),
        (&["--mode", "reliable", "--mtu", "50"], 2, "128 to 65000"),
        (
            &["--mode", "reliable", "--initial-ber", "1.5"],
            2,
            "outside [0, 1)",
        ),
        (
            &["--mode", "reliable", "--initial-ber=-0.1"],
            2,
            "outside [0, 1)",
        ),
        (
            &["--mode", "reliable", "--connect-timeout", "0s"],
            2,
            "greater than zero",
        ),
    ];
    for (flags, code, needle) in send_cases {
        let mut args = vec!["send", "--insecure", f, "--to", to];
        args.extend_from_slice(flags);
        expect_fail(&args, *code, needle);
    }
    expect_fail(
        &[
            "send",
            "--insecure",
            f,
            "--to",
            "nowhere",
            "--mode",
            "reliable",
        ],
        1,
        "--to nowhere",
    );
    expect_fail(
        &[
            "send",
            "--insecure",
            "/nonexistent/file",
            "--to",
            to,
            "--mode",
            "reliable",
        ],
        1,
        "cannot open",
    );
    let recv_cases: &[(&[&str], i32, &str)] = &[
        (&["--listen", "not-an-address"], 2, "invalid"),
        (&["--listen", "127.0.0.1:0", "--rate", "1x"], 2, "rate"),
        (
            &["--listen", "127.0.0.1:0", "-o", "/nonexistent/dir/"],
            1,
            "no such directory",
        ),
    ];
    for (flags, code, needle) in recv_cases {
        let mut args = vec!["recv", "--insecure"];
        args.extend_from_slice(flags);
        expect_fail(&args, *code, needle);
    }
    let busy = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    expect_fail(&["recv", "--insecure", "--listen", &addr], 1, "in use");
}

#[test]
fn unreachable_peer_fails_after_the_connect_timeout() {
    // A bound UDP socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.bin");
    std::fs::write(&f, random(10_000, 1)).unwrap();
    let t = Instant::now();
    let to = silent.local_addr().unwrap().to_string();
    expect_fail(
        &[
            "send",
            "--insecure",
            f.to_str().unwrap(),
            "--to",
            &to,
            "--mode",
            "reliable",
            "--connect-timeout",
            "1s",
        ],
        3,
        "no answer",
    );
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

#[test]
fn stdin_to_stdout() {
    let rport = free_udp().port();
    // Standard output goes to a file: a pipe nobody drains while we wait would fill and block
    // the receiver.
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().join("stdout.bin");
    let recv = bin()
        .args([
            "recv",
            "--insecure",
            "--listen",
            &format!("[::1]:{rport}"),
            "-o",
            "-",
        ])
        .stdout(Stdio::from(std::fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let data = random(200_000, 9);
    let mut send = bin()
        .args([
            "send",
            "--insecure",
            "-",
            "--to",
            &format!("[::1]:{rport}"),
            "--mode",
            "reliable",
            "--rate",
            "50mbit",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut w = send.stdin.take().unwrap();
        w.write_all(&data).unwrap();
    }
    let s = wait_bounded(send, Duration::from_secs(20));
    assert_exit(&s, 0, "send");
    let r = wait_bounded(recv, Duration::from_secs(20));
    assert_exit(&r, 0, "recv");
    let got = std::fs::read(&out_path).unwrap();
    assert!(
        got == data,
        "stdout carries the stream exactly ({} of {} bytes)",
        got.len(),
        data.len()
    );
}

#[test]
fn a_modem_that_is_not_there_costs_the_transfer_nothing() {
    // --dlep to a port where nothing listens: the client retries in the background and the
    // path goes on as without DLEP (docs/dlep.md).
    let data = random(300_000, 17);
    let modem = aerotp_testkit::free_tcp().to_string();
    let (recv, send, got) = through_link(
        "reliable",
        &data,
        &["--rate", "5mbit", "--delay", "5ms"],
        &["--dlep", &modem],
    );
    assert_exit(&send, 0, "send with an absent modem");
    assert_exit(&recv, 0, "recv");
    assert_eq!(got.as_deref(), Some(&data[..]), "every byte");
}

#[test]
fn bad_dlep_flags_are_refused_before_anything_is_sent() {
    for (args, needle) in [
        (vec!["--dlep", "modem.local:abc"], "--dlep"),
        (
            vec!["--dlep", "127.0.0.1:854", "--dlep-map", "00:11=10.0.0.2"],
            "--dlep-map",
        ),
        (vec!["--dlep-map", "00:11:22:33:44:55=10.0.0.2"], "--dlep"),
    ] {
        let o = bin()
            .args([
                "send",
                "--insecure",
                "/dev/null",
                "--to",
                "127.0.0.1:9",
                "--mode",
                "reliable",
            ])
            .args(&args)
            .output()
            .unwrap();
        assert_exit(&o, 2, &format!("{args:?}"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A link that carries jumbo datagrams: `send --mtu 9000` to `recv --mtu 9000` moves the file
/// in 9000-byte datagrams. (A receiver left at its default, 1500, takes none of them.)
#[test]
fn jumbo_datagrams_when_both_ends_are_told() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("jumbo.bin");
    let data = random(1_000_000, 11);
    std::fs::write(&src, &data).unwrap();
    let out_dir = dir.path().join("rx");
    std::fs::create_dir(&out_dir).unwrap();
    let rport = free_udp().port();
    let recv = bin()
        .args(["recv", "--insecure", "--once", "--mtu", "9000", "--listen"])
        .arg(format!("127.0.0.1:{rport}"))
        .arg("-o")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let send = bin()
        .args([
            "send",
            "--insecure",
            "--mode",
            "reliable",
            "--mtu",
            "9000",
            "--json",
        ])
        .arg(&src)
        .arg("--to")
        .arg(format!("127.0.0.1:{rport}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let s = wait_bounded(send, Duration::from_secs(30));
    assert_exit(&s, 0, "send");
    let r = wait_bounded(recv, Duration::from_secs(30));
    assert_exit(&r, 0, "recv");
    assert_eq!(std::fs::read(out_dir.join("jumbo.bin")).unwrap(), data);
    let j = json_of(&s);
    let sent = j["tpdus_sent"].as_u64().unwrap_or_else(|| panic!("{j}"));
    // 1 MB in bodies of about 8,900 bytes is some 113 TPDUs; at 1472 it would be 690.
    assert!((110..200).contains(&sent), "{sent} TPDUs sent: {j}");
}
