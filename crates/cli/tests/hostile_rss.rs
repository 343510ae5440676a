//! 32 hostile peers against a keyless `aerotp recv` with its defaults (docs/security.md,
//! "State bounded under attack: receive memory"): each opens a connection and never proves
//! its address — some send 1400-byte data in order, some far ahead of what is delivered, some
//! tens of thousands of 1-byte bodies — while a real sender moves 5 MB to the same receiver.
//! The receiver's peak resident set (VmHWM) stays within 64 MB and the real file arrives
//! intact (`cargo test -p aerotp --test hostile_rss -- --nocapture` prints the figure).

use aerotp_testkit::{free_udp, peak_rss, KillOnDrop};
use aerotp_wire::{emit_tpdu, Flags, Header, Mode};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

/// The AeroTP port `recv` accepts on by default (`--port`).
const PORT: u16 = 1;
const HOSTILE: usize = 32;

/// Hostile peer `i`'s TPDU `seq` (0 is its ASYN) with a body of `len` bytes.
fn tpdu(i: usize, seq: u32, len: usize) -> Vec<u8> {
    let h = Header {
        mode: Mode::Reliable,
        flags: if seq == 0 {
            Flags::ASYN
        } else {
            Flags::empty()
        },
        src_port: 40_000 + i as u16,
        dst_port: PORT,
        seq,
        timestamp: seq.wrapping_mul(1000).max(1),
        fec: 0,
        tag: 1,
        len: 0,
    };
    let mut out = Vec::new();
    emit_tpdu(h, &vec![(i as u8) ^ (seq as u8); len], &mut out).unwrap();
    out
}

/// What peer `i` sends, in order: a third in-order 1400-byte bodies, a third far ahead, a
/// third 1-byte bodies in order.
fn script(i: usize) -> Vec<Vec<u8>> {
    let mut v = vec![tpdu(i, 0, 1400)];
    match i % 3 {
        0 => v.extend((1..2_000).map(|s| tpdu(i, s, 1400))),
        1 => v.extend((0..1_500).map(|k| tpdu(i, 5_000 + 3 * k, 1400))),
        _ => v.extend((1..30_000).map(|s| tpdu(i, s, 1))),
    }
    v
}

#[test]
fn thirty_two_hostile_peers_keep_a_keyless_receiver_within_64_mb() {
    let d = tempfile::tempdir().unwrap();
    let path = |name: &str| d.path().join(name).to_str().unwrap().to_owned();
    let rx = path("rx");
    std::fs::create_dir_all(&rx).unwrap();
    let listen = free_udp().to_string();
    let recv = KillOnDrop::new(
        bin()
            .args(["recv", "--listen", &listen, "-o", &rx, "--insecure"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let idle = peak_rss(recv.id());

    // The real transfer, beside the attack.
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 + i / 509) as u8).collect();
    let input = path("real.bin");
    std::fs::write(&input, &data).unwrap();
    let real = KillOnDrop::new(
        bin()
            .args([
                "send",
                &input,
                "--to",
                &listen,
                "--mode",
                "reliable",
                "--insecure",
                "--rate",
                "50mbit",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );

    // The attack: 32 sockets that never read (so never answer a CHALLENGE).
    let scripts: Vec<Vec<Vec<u8>>> = (0..HOSTILE).map(script).collect();
    let socks: Vec<UdpSocket> = (0..HOSTILE)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let (mut sent, mut bytes) = (0u64, 0u64);
    let longest = scripts.iter().map(Vec::len).max().unwrap();
    for k in 0..longest {
        for (s, script) in socks.iter().zip(&scripts) {
            if let Some(d) = script.get(k) {
                if s.send_to(d, &listen).is_ok() {
                    sent += 1;
                    bytes += d.len() as u64;
                }
            }
        }
        // About 60 MB/s of attack: fast, but not so fast that loopback drops most of it.
        if k % 16 == 0 {
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    let o = aerotp_testkit::wait_bounded(real.take(), Duration::from_secs(60));
    assert!(
        o.status.success(),
        "the real send: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = Instant::now();
    let out = std::path::Path::new(&rx).join("real.bin");
    while std::fs::read(&out).ok().as_deref() != Some(&data[..]) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the real file arrived intact"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let peak = peak_rss(recv.id());
    println!(
        "figure: {HOSTILE} hostile peers sent {sent} TPDUs ({:.1} MB); recv peak RSS {:.1} MB \
         (idle {:.1} MB); the real 5 MB intact",
        bytes as f64 / 1e6,
        peak as f64 / 1e6,
        idle as f64 / 1e6
    );
    assert!(
        peak <= 64 << 20,
        "recv's peak resident set {:.1} MB is above 64 MB",
        peak as f64 / 1e6
    );
}
