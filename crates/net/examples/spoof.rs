//! Issue 14's spoofed-ASYN figure on loopback (docs/results/security.md): 10^5 ASYNs, each from
//! its own source address and port that never answers (a socket bound, used once and closed:
//! what the listener sends back goes nowhere, as to a spoofed address), into a listening
//! `aerotp recv` with its defaults. While the flood goes on a real `aerotp send` must connect
//! within 1 s (`--connect-timeout 1s`, reliable mode) and deliver its file intact. Printed: the flood's size and
//! rate, the receiver's peak resident memory (VmHWM), the sender's exit status and time, and
//! what the output directory holds (the one file, no litter). The bounds at work are the
//! set-up timeout and `max_half_open` (docs/security.md, "Half-open connections").
//!
//! `cargo run --release -p aerotp-net --example spoof -- [--asyns 100000] [--file-mb 8]`
//! (`AEROTP` names the binary, default target/release/aerotp) prints one line.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aerotp_testkit::probe::{count_flag, memory_kb};
use aerotp_wire::{emit_tpdu, Flags, Header, Mode};

/// The `i`-th spoofed source: its own loopback address (127.1.0.0 and up), any port.
fn source(i: u64) -> SocketAddr {
    let n = 0x7F01_0000u32 + i as u32;
    SocketAddr::from((Ipv4Addr::from(n), 0))
}

/// The `i`-th spoofed ASYN: a new connection's opening TPDU, each from its own port and tag.
fn spoofed_asyn(i: u64) -> Header {
    Header {
        mode: Mode::Reliable,
        flags: Flags::ASYN,
        src_port: 1 + (i % 60_000) as u16,
        dst_port: aerotp_net::DEFAULT_PORT,
        seq: 0,
        timestamp: i as u32,
        fec: 0,
        tag: 1 + (i % 255) as u8,
        len: 0,
    }
}

/// `aerotp recv` listening on `listen`, writing into `out`, its output discarded.
fn start_receiver(
    bin: &str,
    listen: &str,
    out: &std::path::Path,
) -> std::io::Result<std::process::Child> {
    Command::new(bin)
        .args(["recv", "--listen", listen, "-o"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// The names of the files in `dir`.
fn file_names(dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let asyns = count_flag("--asyns", 100_000);
    let file_mb = count_flag("--file-mb", 8);
    let bin = std::env::var("AEROTP").unwrap_or_else(|_| "target/release/aerotp".into());
    let out_dir = tempfile::tempdir()?;
    let in_dir = tempfile::tempdir()?;
    let input = in_dir.path().join("real.bin");
    let data: Vec<u8> = (0..file_mb * 1_000_000)
        .map(|i| (i * 131 % 251) as u8)
        .collect();
    std::fs::write(&input, &data)?;
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    let mut recv = start_receiver(&bin, &listen, out_dir.path())?;
    std::thread::sleep(Duration::from_millis(500));
    let (idle_hwm, _) = memory_kb(recv.id());
    // An ASYN with 200 bytes of data, as a sender's first TPDU.
    let body = vec![0x5Au8; 200];
    let mut dgram = Vec::with_capacity(300);
    let t0 = Instant::now();
    let mut sender = None;
    let mut sender_start = t0;
    for i in 0..asyns {
        if i == asyns / 5 {
            // A fifth of the flood has gone: the real sender starts, the flood goes on.
            sender_start = Instant::now();
            sender = Some(
                Command::new(&bin)
                    .args(["send", "--to", &listen, "--mode", "reliable"])
                    .args(["--connect-timeout", "1s"])
                    .arg(&input)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()?,
            );
        }
        dgram.clear();
        emit_tpdu(spoofed_asyn(i), &body, &mut dgram)?;
        let s = UdpSocket::bind(source(i))?;
        s.send_to(&dgram, &listen)?;
    }
    let flood_secs = t0.elapsed().as_secs_f64();
    let sender = sender.expect("started").wait_with_output()?;
    let send_secs = sender_start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let (hwm, rss) = memory_kb(recv.id());
    let alive = recv.try_wait()?.is_none();
    let _ = recv.kill();
    let _ = recv.wait();
    let names = file_names(out_dir.path())?;
    let intact = names == ["real.bin"]
        && std::fs::read(out_dir.path().join("real.bin")).is_ok_and(|d| d == data);
    if !sender.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&sender.stderr));
    }
    println!(
        "{asyns} spoofed ASYNs from distinct sources in {flood_secs:.1} s ({:.0}/s): receiver \
         peak RSS {:.1} MB (idle {:.1} MB, now {:.1} MB), still running: {alive}; real {file_mb} MB \
         send: exit {} after {send_secs:.2} s (--connect-timeout 1s); output directory: {} \
         file(s) {:?}, intact: {intact}",
        asyns as f64 / flood_secs,
        hwm as f64 * 1024.0 / 1e6,
        idle_hwm as f64 * 1024.0 / 1e6,
        rss as f64 * 1024.0 / 1e6,
        sender.status.code().unwrap_or(-1),
        names.len(),
        &names[..names.len().min(3)],
    );
    Ok(())
}
