//! One connection over two paths with the built binaries, on loopback, no root: `aerotp link`
//! relays two emulated paths (4 Mb/s each, 10 ms and 30 ms one way), each on its own port,
//! to one `aerotp recv`; `aerotp send --to <path 0> --path <path 1>` spreads the file over
//! both. The relay's two sockets are two addresses to the receiver, and its two ports two to
//! the sender, so each end sees two paths (docs/runtime.md, `send --path`). The sender sends
//! each path from its own local address (`--from`, `--path LOCAL=ADDR`); the relay's capture
//! shows the datagrams arriving from them.

use std::process::{Command, Stdio};
use std::time::Duration;

use aerotp_testkit::{free_udp, wait_bounded, KillOnDrop};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

fn free_port() -> u16 {
    free_udp().port()
}

fn spawn(cmd: &mut Command) -> KillOnDrop {
    KillOnDrop::new(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn aerotp"),
    )
}

#[test]
fn send_spreads_one_connection_over_two_relayed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("two.toml");
    std::fs::write(
        &scenario,
        "[[path]]\nforward = { rate_bps = \"4mbit\", delay = \"10ms\" }\n\
         [[path]]\nforward = { rate_bps = \"4mbit\", delay = \"30ms\" }\n",
    )
    .unwrap();
    let file = dir.path().join("in.bin");
    let data = aerotp_testkit::random(1_500_000, 41);
    std::fs::write(&file, &data).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (p0, p1, server) = (free_port(), free_port(), free_port());
    let addr = |p: u16| format!("127.0.0.1:{p}");
    let pcap = dir.path().join("link.pcapng");
    let link = spawn(bin().args([
        "link",
        "--pcap",
        pcap.to_str().unwrap(),
        "--scenario",
        scenario.to_str().unwrap(),
        "--listen",
        &addr(p0),
        "--listen",
        &addr(p1),
        "--to",
        &addr(server),
        "--to",
        &addr(server),
    ]));
    let recv = spawn(bin().args([
        "recv",
        "--insecure",
        "--listen",
        &addr(server),
        "-o",
        &format!("{}/", out.display()),
        "--once",
        "--json",
    ]));
    std::thread::sleep(Duration::from_millis(500));
    let send = spawn(bin().args([
        "send",
        "--insecure",
        file.to_str().unwrap(),
        "--to",
        &addr(p0),
        "--from",
        "127.0.0.2",
        "--path",
        &format!("127.0.0.3={}", addr(p1)),
        "--mode",
        "reliable",
        "--rate",
        "8mbit",
        "--json",
    ]));
    let s = wait_bounded(send.take(), Duration::from_secs(60));
    let r = wait_bounded(recv.take(), Duration::from_secs(20));
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(s.status.success(), "send: {err}");
    assert!(
        r.status.success(),
        "recv: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(std::fs::read(out.join("in.bin")).unwrap(), data);
    let v: serde_json::Value = serde_json::from_slice(&s.stdout).expect("send --json");
    let paths = v["paths"].as_array().expect("paths in --json");
    assert_eq!(paths.len(), 2, "{v}");
    let sent: Vec<u64> = paths
        .iter()
        .map(|p| p["bytes_sent"].as_u64().unwrap())
        .collect();
    let total: u64 = sent.iter().sum();
    for (p, b) in paths.iter().zip(&sent) {
        assert!(p["up"].as_bool().unwrap(), "{p}");
        assert!(
            b * 10 >= total * 3,
            "a path carried {b} of {total} bytes: {v}"
        );
    }
    // Faster than one 4 Mb/s path could carry it (the relay's links pace each path).
    let goodput = v["goodput_bps"].as_f64().unwrap();
    assert!(goodput > 4_500_000.0, "goodput {goodput} b/s");
    // The receiver saw the sender on both relay sockets: two paths there too.
    let rv: serde_json::Value = serde_json::from_slice(&r.stdout).expect("recv --json");
    assert_eq!(rv["paths"].as_array().map(Vec::len), Some(2), "{rv}");
    // The relay's capture (closed when it stops on Ctrl-C): what reached each of its sockets
    // from the sender came from that path's local address.
    let st = Command::new("kill")
        .args(["-INT", &link.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_bounded(link.take(), Duration::from_secs(20));
    let (_, packets) = aerotp_capture::read_capture(&pcap).expect("the relay's capture");
    let from = |port: u16| -> Vec<std::net::IpAddr> {
        let mut v: Vec<_> = packets
            .iter()
            .filter(|p| p.dst.port() == port && p.src.port() != server)
            .map(|p| p.src.ip())
            .collect();
        v.dedup();
        v
    };
    assert_eq!(from(p0), ["127.0.0.2".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(from(p1), ["127.0.0.3".parse::<std::net::IpAddr>().unwrap()]);
}
