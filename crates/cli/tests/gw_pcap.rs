//! `--pcap FILE` on `aerotp gw ingress`, `aerotp gw egress` and `aerotp bench loopback`: the
//! file holds what the AeroTP socket sent and received, tshark decodes every packet with
//! tools/wireshark/aerotp.lua (none malformed), and a path that cannot be written is refused
//! naming the flag before any datagram leaves. Loopback only; every wait is bounded.
//! The tshark checks are skipped, with the reason printed, only when tshark is not installed
//! (bash scripts/lab-deps.sh installs it).

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed and reaped when dropped, so a failing test leaves nothing running.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn spawn(args: &[&str]) -> KillOnDrop {
        KillOnDrop(Some(
            bin()
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ))
    }

    /// SIGTERM (the gateway's orderly stop, which closes the capture), then waits at most
    /// `limit`.
    fn terminate(mut self, limit: Duration) -> Output {
        let child = self.0.take().expect("running");
        let pid = i32::try_from(child.id()).expect("pid fits");
        // SAFETY: kill(2) on the pid of our own child, which is not reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        wait_bounded(child, limit)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child` at most `limit`, killing it if it takes longer.
fn wait_bounded(child: Child, limit: Duration) -> Output {
    let mut child = KillOnDrop(Some(child));
    let t = Instant::now();
    loop {
        if child.0.as_mut().unwrap().try_wait().unwrap().is_some() {
            return child.0.take().unwrap().wait_with_output().unwrap();
        }
        assert!(t.elapsed() < limit, "a command took longer than {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// tshark with the dissector: (frame interface, protocols, AeroTP type, malformed) per packet.
fn tshark_rows(file: &Path) -> Vec<Vec<String>> {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/aerotp.lua");
    let out = Command::new("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"])
        .args(["-e", "frame.interface_id", "-e", "frame.protocols"])
        .args(["-e", "aerotp.type", "-e", "_ws.malformed"])
        .output()
        .expect("tshark runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(
        !stderr.contains("Lua") && !stderr.contains("error"),
        "tshark complained: {stderr}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// Every packet of `file` is AeroTP, none malformed; returns the packets per interface
/// (0 = sent, 1 = received).
fn decode_all(file: &Path) -> [usize; 2] {
    let rows = tshark_rows(file);
    let mut per = [0usize; 2];
    for r in &rows {
        assert!(
            r[1].contains("aerotp"),
            "{}: not AeroTP: {r:?}",
            file.display()
        );
        assert!(
            r.get(3).is_none_or(|m| m.is_empty()),
            "{}: malformed: {r:?}",
            file.display()
        );
        assert!(
            !r[2].is_empty(),
            "{}: no AeroTP type: {r:?}",
            file.display()
        );
        per[r[0].parse::<usize>().expect("interface id")] += 1;
    }
    per
}

/// "<who>: capture <path>: N packets written, M records dropped" from a command's stderr.
/// (`tpdu_sent`, `tpdu_received`) events of the one trace in `dir` whose name starts with
/// `prefix`.
fn trace_datagrams(dir: &Path, prefix: &str) -> (u64, u64) {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}*.sqlog in {}", dir.display()));
    let bytes = std::fs::read(&file).unwrap();
    let (mut sent, mut received) = (0, 0);
    for rec in bytes
        .split(|&b| b == 0x1e)
        .filter(|r| !r.trim_ascii().is_empty())
    {
        let v: serde_json::Value = serde_json::from_slice(rec).unwrap();
        match v["name"].as_str() {
            Some("aerotp:tpdu_sent") => sent += 1,
            Some("aerotp:tpdu_received") => received += 1,
            _ => {}
        }
    }
    (sent, received)
}

fn written(stderr: &str, path: &Path) -> u64 {
    let head = format!("capture {}: ", path.display());
    let line = stderr
        .lines()
        .find(|l| l.contains(&head))
        .unwrap_or_else(|| panic!("no capture summary in: {stderr}"));
    let rest = &line[line.find(&head).unwrap() + head.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn gateway_captures_hold_the_air_side_and_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (ing_cap, egr_cap) = (dir.path().join("in.pcapng"), dir.path().join("eg.pcapng"));
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let dest = sink.local_addr().unwrap().to_string();
    let air = format!("127.0.0.1:{}", free_udp_port());
    let udp_in = format!("127.0.0.1:{}", free_udp_port());
    // The egress takes its capture and trace from its config file's keys (the ingress from
    // the flags): the same keys in both (docs/gateway.md).
    let egress_toml = dir.path().join("egress.toml");
    std::fs::write(
        &egress_toml,
        format!(
            "pcap = {:?}\npcap_queue = \"16MiB\"\nqlog = {:?}\n",
            egr_cap.to_str().unwrap(),
            dir.path().to_str().unwrap()
        ),
    )
    .unwrap();
    let egress = KillOnDrop::spawn(&[
        "gw",
        "egress",
        "--insecure",
        "--listen",
        &air,
        "--udp-connect",
        &dest,
        "--config",
        egress_toml.to_str().unwrap(),
    ]);
    let ingress = KillOnDrop::spawn(&[
        "gw",
        "ingress",
        "--insecure",
        "--peer",
        &air,
        "--udp-listen",
        &udp_in,
        "--pcap",
        ing_cap.to_str().unwrap(),
        "--qlog",
        dir.path().to_str().unwrap(),
    ]);
    let src = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 2048];
    // The gateways are up once a datagram crosses them; until then datagrams are sent on.
    let t = Instant::now();
    let mut crossed = 0u32;
    let mut sent = 0u32;
    while crossed < 20 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{crossed} of {sent} datagrams crossed the gateways in 20 s"
        );
        let msg = format!("datagram {sent}");
        src.send_to(msg.as_bytes(), &udp_in).unwrap();
        sent += 1;
        if let Ok((n, _)) = sink.recv_from(&mut buf) {
            assert!(buf[..n].starts_with(b"datagram "), "{:?}", &buf[..n]);
            crossed += 1;
        }
    }
    let ing = ingress.terminate(Duration::from_secs(20));
    let egr = egress.terminate(Duration::from_secs(20));
    let (ie, ee) = (
        String::from_utf8_lossy(&ing.stderr).into_owned(),
        String::from_utf8_lossy(&egr.stderr).into_owned(),
    );
    let (iw, ew) = (written(&ie, &ing_cap), written(&ee, &egr_cap));
    // At least one AeroTP datagram per datagram that crossed, on each side.
    assert!(iw >= u64::from(crossed), "ingress wrote {iw}: {ie}");
    assert!(ew >= u64::from(crossed), "egress wrote {ew}: {ee}");
    // The event trace saw the same datagrams as the capture (one tap feeds both).
    for (role, w) in [("gw-ingress-", iw), ("gw-egress-", ew)] {
        let (sent, received) = trace_datagrams(dir.path(), role);
        assert_eq!(sent + received, w, "{role} trace against its capture");
    }
    if !aerotp_testkit::tshark::required("the gateway captures' tshark decoding") {
        return;
    }
    let (ip, ep) = (decode_all(&ing_cap), decode_all(&egr_cap));
    assert_eq!(
        (ip[0] + ip[1]) as u64,
        iw,
        "ingress: tshark saw another count"
    );
    assert_eq!(
        (ep[0] + ep[1]) as u64,
        ew,
        "egress: tshark saw another count"
    );
    // What the ingress sent is what the egress received (loopback loses nothing).
    assert!(
        ip[0] >= crossed as usize && ep[1] >= crossed as usize,
        "{ip:?} {ep:?}"
    );
}

#[test]
fn bench_loopback_capture_holds_every_datagram_and_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("bench.pcapng");
    let out = wait_bounded(
        bin()
            .args(["bench", "loopback", "--size", "2MB", "--no-quic", "--json"])
            .args(["--rate", "200mbit", "--pcap-queue", "64MiB", "--pcap"])
            .arg(&cap)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &j["runs"][0];
    assert_eq!(run["complete"], true, "{j}");
    let w = written(&err, &cap);
    // 2 MB in datagrams of at most 1500 bytes: at least 2e6 / 1500 data TPDUs sent.
    const LEAST: u64 = 2_000_000 / 1500;
    assert!(w > LEAST, "{w} packets: {err}");
    assert!(err.contains(" 0 records dropped"), "{err}");
    if !aerotp_testkit::tshark::required("the gateway captures' tshark decoding") {
        return;
    }
    let per = decode_all(&cap);
    assert_eq!((per[0] + per[1]) as u64, w);
    assert!(per[0] as u64 >= LEAST && per[1] > 0, "{per:?}");
}

/// `args` exits with status 1 (or any failure), names `--pcap` and the path, creates no
/// file, and nothing reaches `sink`.
fn refused(args: &[&str], path: &Path, sink: &UdpSocket) {
    let out = wait_bounded(
        bin()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?}: {err}");
    let needle = format!("--pcap {}", path.display());
    assert!(err.contains(&needle), "{args:?}: {err}");
    assert!(!path.exists(), "{args:?} created {}", path.display());
    let mut buf = [0u8; 2048];
    assert!(
        sink.recv_from(&mut buf).is_err(),
        "{args:?} sent a datagram"
    );
}

#[test]
fn a_capture_path_that_cannot_be_written_is_refused_before_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir/c.pcapng");
    let b = bad.to_str().unwrap();
    // Stands for the egress (ingress) and for the destination (egress): nothing may reach it.
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let udp_in = format!("127.0.0.1:{}", free_udp_port());
    let air = format!("127.0.0.1:{}", free_udp_port());
    refused(
        &[
            "gw",
            "ingress",
            "--insecure",
            "--peer",
            &to,
            "--udp-listen",
            &udp_in,
            "--pcap",
            b,
        ],
        &bad,
        &sink,
    );
    refused(
        &[
            "gw",
            "egress",
            "--insecure",
            "--listen",
            &air,
            "--udp-connect",
            &to,
            "--pcap",
            b,
        ],
        &bad,
        &sink,
    );
    refused(
        &[
            "bench",
            "loopback",
            "--size",
            "1MB",
            "--no-quic",
            "--pcap",
            b,
        ],
        &bad,
        &sink,
    );
    // The gateway's socket was never bound: its address is free again at once.
    UdpSocket::bind(&air).expect("the egress never bound its --listen address");
}
