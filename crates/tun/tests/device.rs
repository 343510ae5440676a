//! A TUN device in a network namespace of its own (root): created under its name, nothing to
//! read while down, brought up, and a packet written into it taken by the kernel, which answers an ICMP
//! echo to the device's own address back through it.
//!
//! Needs root; fails saying so unless AEROTP_SKIP_LAB=1. The namespace is the test thread's
//! own (`unshare`), gone with the thread: nothing is left on the host.

use std::io;
use std::time::{Duration, Instant};

use aerotp_tun::{checksum, Tun};

fn root() -> bool {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: TUN device test skipped");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the TUN device test needs root (a namespace, a TUN device); run as root or set \
         AEROTP_SKIP_LAB=1 to skip it"
    );
    true
}

/// An ICMP echo request from `src` to `dst`, IPv4, checksums right.
fn ping(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    icmp.extend_from_slice(b"aerotp-tun");
    let c = !checksum::fold(checksum::sum(&icmp, 0));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, 1, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let h = checksum::ipv4_header(&p);
    p[10..12].copy_from_slice(&h.to_be_bytes());
    p.extend_from_slice(&icmp);
    p
}

#[test]
fn a_device_in_a_namespace_of_its_own_carries_packets() {
    if !root() {
        return;
    }
    std::thread::spawn(|| {
        // SAFETY: unshare on this thread only; it leaves the namespace when it ends.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        let tun = Tun::create("tuntest0").expect("create");
        assert_eq!(tun.name(), "tuntest0");
        // Down, nothing is queued (once up, the kernel's IPv6 may send its own packets).
        let mut buf = [0u8; 2048];
        assert_eq!(
            tun.recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        tun.set_up().expect("up");
        // The device's address, by `ip` in this thread's namespace (/proc/self/task/TID/ns).
        let tid = unsafe { libc::gettid() };
        let ns = format!("/proc/{}/task/{tid}/ns/net", std::process::id());
        let st = std::process::Command::new("nsenter")
            .args([&format!("--net={ns}"), "ip", "addr", "add", "10.99.0.1/24"])
            .args(["dev", "tuntest0"])
            .status()
            .expect("nsenter");
        assert!(st.success(), "address the device");
        let req = ping([10, 99, 0, 2], [10, 99, 0, 1]);
        assert_eq!(tun.send(&req).unwrap(), req.len());
        // The kernel's echo reply comes back out of the device.
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            match tun.recv(&mut buf) {
                Ok(n) if n >= 28 && buf[9] == 1 && buf[20] == 0 => {
                    assert_eq!(&buf[12..16], &[10, 99, 0, 1]);
                    assert_eq!(&buf[16..20], &[10, 99, 0, 2]);
                    assert_eq!(checksum::ipv4_header(&buf[..20]), 0);
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < until, "no echo reply in 5 s");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    })
    .join()
    .expect("the namespace thread");
}
