//! Issue 14's memory figure on loopback (docs/results/security.md): hostile peers open
//! connections to a listening `aerotp recv` and send it bodies as large as the MTU allows, all
//! beyond a hole they never fill, so every byte waits in the receiver's reorder buffers; the
//! receiver's peak resident memory (VmHWM) is read from /proc when they are done. The bounds
//! that hold it are `reorder_bytes` per connection and `max_reorder_bytes` per endpoint
//! (docs/security.md, "State bounded under attack: reorder memory").
//!
//! `cargo run --release -p aerotp-net --example hostile -- [--conns 16] [--tpdus 16384]`
//! (`AEROTP` names the binary, default target/release/aerotp) prints one line.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aerotp_testkit::probe::{count_flag, memory_kb};
use aerotp_wire::{emit_tpdu, Flags, Header, Mode};

fn main() -> anyhow::Result<()> {
    let conns = count_flag("--conns", 16);
    let tpdus = count_flag("--tpdus", 16_384) as u32;
    let bin = std::env::var("AEROTP").unwrap_or_else(|_| "target/release/aerotp".into());
    let dir = tempfile::tempdir()?;
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    let mut recv = Command::new(&bin)
        .args(["recv", "--listen", &listen, "-o"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    let (idle_hwm, _) = memory_kb(recv.id());
    // Largest body at the default MTU without FEC: 1500 - 28 (IP/UDP) - 24 (header, CRC).
    let body = vec![0xA5u8; 1448];
    let t = Instant::now();
    let mut sent = 0u64;
    let socks: Vec<UdpSocket> = (0..conns)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(1600);
    for (i, s) in socks.iter().enumerate() {
        let h = Header {
            mode: Mode::Reliable,
            flags: Flags::ASYN,
            src_port: 40_000 + i as u16,
            dst_port: aerotp_net::DEFAULT_PORT,
            seq: 0,
            timestamp: 0,
            fec: 0,
            tag: 1 + (i % 250) as u8,
            len: 0,
        };
        out.clear();
        emit_tpdu(h, &[], &mut out)?;
        s.send_to(&out, &listen)?;
    }
    std::thread::sleep(Duration::from_millis(200));
    // Then every connection's TPDUs 2.. (1 never comes), interleaved, paced lightly so the
    // receiver's socket keeps up.
    for seq in 2..tpdus + 2 {
        for (i, s) in socks.iter().enumerate() {
            let h = Header {
                mode: Mode::Reliable,
                flags: Flags::empty(),
                src_port: 40_000 + i as u16,
                dst_port: aerotp_net::DEFAULT_PORT,
                seq,
                timestamp: seq,
                fec: 0,
                tag: 1 + (i % 250) as u8,
                len: body.len() as u16,
            };
            out.clear();
            emit_tpdu(h, &body, &mut out)?;
            s.send_to(&out, &listen)?;
            sent += out.len() as u64;
        }
        if seq % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let (hwm, rss) = memory_kb(recv.id());
    let alive = recv.try_wait()?.is_none();
    let _ = recv.kill();
    let _ = recv.wait();
    println!(
        "{conns} hostile connections x {tpdus} out-of-order TPDUs of 1448 B ({:.0} MB sent in \
         {:.1} s): receiver peak RSS {:.1} MB (idle {:.1} MB, now {:.1} MB), still running: {alive}",
        sent as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        hwm as f64 * 1024.0 / 1e6,
        idle_hwm as f64 * 1024.0 / 1e6,
        rss as f64 * 1024.0 / 1e6,
    );
    Ok(())
}
