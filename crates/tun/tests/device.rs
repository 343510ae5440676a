//! A TUN device in a network namespace of its own (root): created under its name, nothing to
//! read while down, brought up, and a packet written into it taken by the kernel, which answers an ICMP
//! echo to the device's own address back through it.
//!
//! The same device registered with tokio (`AsyncTun`, the gateway's): its queue lengthened,
//! a reply awaited.
//!
//! Needs root; fails saying so unless AEROTP_SKIP_LAB=1. The namespace is the test thread's
//! own (`unshare`), gone with the thread: nothing is left on the host.

use std::io;
use std::time::{Duration, Instant};

use aerotp_tun::{checksum, AsyncTun, Tun};

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
        ip(&["addr", "add", "10.99.0.1/24", "dev", "tuntest0"]);
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

/// `ip ARGS` in the calling thread's namespace (/proc/PID/task/TID/ns); its output. Panics if
/// it fails.
fn ip(args: &[&str]) -> String {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let ns = format!("/proc/{}/task/{tid}/ns/net", std::process::id());
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={ns}"))
        .arg("ip")
        .args(args)
        .output()
        .expect("nsenter");
    assert!(out.status.success(), "ip {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_tokio_device_is_up_takes_a_queue_length_and_awaits_packets() {
    if !root() {
        return;
    }
    std::thread::spawn(|| {
        // SAFETY: unshare on this thread only; it leaves the namespace when it ends.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare");
        // A runtime on this thread: the device is made, and read, in its namespace.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let tun = AsyncTun::create("tuntest1").expect("create");
            assert_eq!(tun.name(), "tuntest1");
            let link = ip(&["-o", "link", "show", "tuntest1"]);
            assert!(link.contains(",UP") && link.contains("qlen 500"), "{link}");
            tun.set_queue_len(4321).expect("queue length");
            let link = ip(&["-o", "link", "show", "tuntest1"]);
            assert!(link.contains("qlen 4321"), "{link}");
            ip(&["addr", "add", "10.98.0.1/24", "dev", "tuntest1"]);
            let req = ping([10, 98, 0, 2], [10, 98, 0, 1]);
            assert_eq!(tun.send(&req).unwrap(), req.len());
            let mut buf = [0u8; 2048];
            let reply = async {
                loop {
                    let n = tun.recv(&mut buf).await.expect("read");
                    // Skip what the kernel sends on its own (IPv6 neighbour discovery).
                    if n >= 28 && buf[0] >> 4 == 4 && buf[9] == 1 && buf[20] == 0 {
                        return n;
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(5), reply)
                .await
                .expect("an echo reply within 5 s");
            assert_eq!(&buf[12..16], &[10, 98, 0, 1]);
            assert_eq!(&buf[16..20], &[10, 98, 0, 2]);
        });
    })
    .join()
    .expect("the namespace thread");
}
