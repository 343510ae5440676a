//! End-to-end lab tests: real namespaces, TUN devices and kernel TCP/UDP/ICMP.
//!
//! They need root and iproute2 (and `ping`: scripts/lab-deps.sh). Where these are missing
//! they FAIL with the reason; set AEROTP_SKIP_LAB=1 to skip them deliberately.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use aerotp_lab::{cleanup_leftovers, Lab, LabConfig, LinkConfig, Side};
use sha2::{Digest, Sha256};

/// `None` when AEROTP_SKIP_LAB=1 (the test then does nothing and says so).
fn lab(name: &str, forward: LinkConfig, reverse: LinkConfig) -> Option<Lab> {
    if std::env::var("AEROTP_SKIP_LAB").as_deref() == Ok("1") {
        eprintln!("AEROTP_SKIP_LAB=1: skipping lab test {name}");
        return None;
    }
    let config = LabConfig {
        forward,
        reverse,
        seed: 7,
        name: Some(name.into()),
    };
    match Lab::start(config) {
        Ok(lab) => Some(lab),
        Err(e) => panic!(
            "cannot start the lab: {e:#}\n(the lab tests need root and iproute2, see scripts/lab-deps.sh; \
             set AEROTP_SKIP_LAB=1 to skip them)"
        ),
    }
}

fn link(rate_bps: u64, delay_ms: u64) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay: Duration::from_millis(delay_ms),
        ..LinkConfig::default()
    }
}

fn namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run `ip netns list`");
    assert!(out.status.success(), "ip netns list: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Deterministic pseudo-random bytes (xorshift64*), so the payload is not compressible.
fn payload(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Parse `rtt min/avg/max/mdev = a/b/c/d ms` from ping's summary: (min, max) in ms.
fn ping_rtt(out: &str) -> Option<(f64, f64)> {
    let line = out.lines().find(|l| l.contains("min/avg/max"))?;
    let nums: Vec<f64> = line
        .split('=')
        .nth(1)?
        .trim()
        .trim_end_matches("ms")
        .trim()
        .split('/')
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    Some((nums[0], nums[2]))
}

fn ping(lab: &Lab, from: Side, to: std::net::IpAddr) -> (f64, f64) {
    let out = lab
        .command(from, "ping")
        .args(["-n", "-c", "5", "-i", "0.2", "-W", "2", &to.to_string()])
        .output()
        .expect("run ping inside the namespace (install iputils-ping: scripts/lab-deps.sh)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ping {to} from {from} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("5 received"),
        "lost echo replies on a loss-free link: {text}"
    );
    ping_rtt(&text).unwrap_or_else(|| panic!("no rtt summary in ping output: {text}"))
}

#[test]
fn ping_crosses_the_link_with_its_delay() {
    // Forward 10 ms, reverse 30 ms: RTT = 40 ms + serialisation, both ways.
    let Some(lab) = lab("ping", link(5_000_000, 10), link(1_000_000, 30)) else {
        return;
    };
    let (min, max) = ping(&lab, Side::Air, lab.ground_addr());
    assert!(
        min >= 40.0,
        "RTT {min} ms is below the 40 ms of propagation delay"
    );
    assert!(
        max < 80.0,
        "RTT {max} ms is far above 40 ms: forwarding is late"
    );
    let (min, _) = ping(&lab, Side::Ground, lab.air_addr());
    assert!(min >= 40.0, "RTT {min} ms from ground is below 40 ms");
    let (fwd, rev) = lab.stats();
    // 10 echo requests forward + 10 replies forward (for the ground's pings).
    assert_eq!(fwd.delivered_packets, 10, "forward stats: {fwd:?}");
    assert_eq!(rev.delivered_packets, 10, "reverse stats: {rev:?}");
    let (ns_air, ns_ground) = (lab.air_ns().to_owned(), lab.ground_ns().to_owned());
    assert!(namespaces().contains(&ns_air) && namespaces().contains(&ns_ground));
    lab.stop().expect("clean teardown");
    let left = namespaces();
    assert!(
        !left.contains(&ns_air) && !left.contains(&ns_ground),
        "namespaces left after stop: {left:?}"
    );
}

#[test]
fn kernel_tcp_transfer_is_rate_limited_and_intact() {
    const LEN: usize = 200_000;
    const RATE: u64 = 5_000_000;
    let Some(lab) = lab("tcp", link(RATE, 10), link(RATE, 10)) else {
        return;
    };
    let ground: SocketAddr = (lab.ground_addr(), 5001).into();

    let server = lab
        .spawn_in(
            Side::Ground,
            move || -> io::Result<(usize, Vec<u8>, Instant)> {
                let listener = TcpListener::bind(ground)?;
                listener.set_nonblocking(true)?;
                let deadline = Instant::now() + Duration::from_secs(20);
                let (mut conn, _) = loop {
                    match listener.accept() {
                        Ok(c) => break c,
                        Err(e)
                            if e.kind() == io::ErrorKind::WouldBlock
                                && Instant::now() < deadline =>
                        {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(e) => return Err(e),
                    }
                };
                conn.set_nonblocking(false)?;
                conn.set_read_timeout(Some(Duration::from_secs(20)))?;
                let mut data = Vec::new();
                conn.read_to_end(&mut data)?;
                Ok((data.len(), Sha256::digest(&data).to_vec(), Instant::now()))
            },
        )
        .expect("thread in the ground namespace");
    // Let the listener bind.
    std::thread::sleep(Duration::from_millis(100));

    let data = payload(LEN, 0xAE20);
    let sent_digest = Sha256::digest(&data).to_vec();
    let client = lab
        .spawn_in(Side::Air, move || -> io::Result<Instant> {
            let start = Instant::now();
            let mut conn = TcpStream::connect_timeout(&ground, Duration::from_secs(5))?;
            conn.set_write_timeout(Some(Duration::from_secs(20)))?;
            conn.write_all(&data)?;
            conn.shutdown(std::net::Shutdown::Write)?;
            Ok(start)
        })
        .expect("thread in the air namespace");

    let start = client.join().expect("client thread").expect("client I/O");
    let (len, digest, end) = server.join().expect("server thread").expect("server I/O");
    let elapsed = end - start;
    assert_eq!(len, LEN, "bytes received");
    assert_eq!(digest, sent_digest, "SHA-256 of received data differs");
    let floor = Duration::from_secs_f64(LEN as f64 * 8.0 / RATE as f64);
    assert!(
        elapsed >= floor,
        "{LEN} B took {elapsed:?}, faster than the {floor:?} a 5 Mb/s link allows"
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "transfer took {elapsed:?}"
    );
    let (fwd, _) = lab.stats();
    assert!(fwd.delivered_bytes >= LEN as u64, "forward stats: {fwd:?}");
    eprintln!(
        "200 kB over 5 Mb/s / 10 ms: {elapsed:?} (floor {floor:?}), goodput {:.2} Mb/s",
        LEN as f64 * 8.0 / elapsed.as_secs_f64() / 1e6
    );
    lab.stop().expect("clean teardown");
}

#[test]
fn bit_errors_reach_zero_checksum_udp_apps() {
    const DATAGRAMS: usize = 150;
    const LEN: usize = 1000;
    // BER 1e-4 over 1028-byte IP packets: ~56% of packets carry at least one flip.
    let forward = LinkConfig {
        ber: 1e-4,
        ..link(5_000_000, 5)
    };
    let Some(lab) = lab("ber", forward, link(5_000_000, 5)) else {
        return;
    };
    let ground: SocketAddr = (lab.ground_addr(), 5002).into();
    let receiver = lab
        .spawn_in(Side::Ground, move || -> io::Result<(usize, usize)> {
            let sock = UdpSocket::bind(ground)?;
            sock.set_read_timeout(Some(Duration::from_millis(500)))?;
            let expected = payload(LEN, 1);
            let (mut clean, mut corrupted) = (0, 0);
            let mut buf = [0u8; 2048];
            let deadline = Instant::now() + Duration::from_secs(10);
            while clean + corrupted < DATAGRAMS && Instant::now() < deadline {
                match sock.recv(&mut buf) {
                    Ok(n) if n == LEN && buf[..n] == expected[..] => clean += 1,
                    Ok(_) => corrupted += 1,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        break
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok((clean, corrupted))
        })
        .expect("thread in the ground namespace");
    std::thread::sleep(Duration::from_millis(100));
    let sender = lab
        .spawn_in(Side::Air, move || -> io::Result<()> {
            let sock = UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
            let one: libc::c_int = 1;
            // SAFETY: SO_NO_CHECK takes an int; the fd is a live UDP socket.
            let rc = unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_NO_CHECK,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            let data = payload(LEN, 1);
            for _ in 0..DATAGRAMS {
                sock.send_to(&data, ground)?;
                // 1028 B at 5 Mb/s take 1.6 ms: pace so the queue never overflows.
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(())
        })
        .expect("thread in the air namespace");
    sender.join().expect("sender thread").expect("sender I/O");
    let (clean, corrupted) = receiver
        .join()
        .expect("receiver thread")
        .expect("receiver I/O");
    let (fwd, _) = lab.stats();
    eprintln!("BER 1e-4: {clean} clean, {corrupted} corrupted datagrams received; forward {fwd:?}");
    assert_eq!(
        fwd.offered_packets, DATAGRAMS as u64,
        "forward stats: {fwd:?}"
    );
    assert!(
        fwd.corrupted_packets > 20,
        "too few corrupted packets for BER 1e-4: {fwd:?}"
    );
    assert!(clean > 20, "too few clean datagrams: {clean}");
    assert!(
        corrupted > 10,
        "corrupted datagrams must reach a zero-checksum UDP socket: {corrupted}"
    );
    // Flips in the IP/UDP headers get packets dropped by the kernel: never more arrive than sent.
    assert!(clean + corrupted <= DATAGRAMS);
    assert!(
        (clean + corrupted) as u64 <= fwd.delivered_packets,
        "more datagrams than the link delivered"
    );
    lab.stop().expect("clean teardown");
}

#[test]
fn drop_removes_namespaces_and_leftovers_of_dead_owners_are_cleaned() {
    let Some(lab) = lab("drop", LinkConfig::default(), LinkConfig::default()) else {
        return;
    };
    let (air, ground) = (lab.air_ns().to_owned(), lab.ground_ns().to_owned());
    // A process still running in the lab must not keep the namespace alive.
    let mut sleeper = lab
        .command(Side::Ground, "sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep in the ground namespace");

    // A namespace named like a lab's, owned by a process that has exited.
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id();
    dead.wait().expect("reap true");
    let orphan = format!("aerotp-air-{dead_pid}-orphan");
    let out = Command::new("ip")
        .args(["netns", "add", &orphan])
        .output()
        .expect("ip netns add");
    assert!(out.status.success(), "ip netns add {orphan}: {out:?}");

    let removed = cleanup_leftovers().expect("cleanup_leftovers");
    let now = namespaces();
    assert!(
        !now.contains(&orphan),
        "orphan {orphan} survived cleanup: {now:?}"
    );
    // (A lab started by a parallel test may have removed it first, so `removed` may be 0.)
    eprintln!("cleanup_leftovers removed {removed}");
    assert!(
        now.contains(&air) && now.contains(&ground),
        "cleanup removed a live lab: {now:?}"
    );

    let t = Instant::now();
    drop(lab);
    let status = sleeper.wait().expect("reap sleep");
    assert!(
        !status.success(),
        "sleep should have been killed by teardown: {status}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "teardown took {:?}",
        t.elapsed()
    );
    let now = namespaces();
    assert!(
        !now.contains(&air) && !now.contains(&ground),
        "namespaces left after drop: {now:?}"
    );
}

#[test]
fn invalid_configs_are_rejected_before_anything_is_created() {
    if std::env::var("AEROTP_SKIP_LAB").as_deref() == Ok("1") {
        return;
    }
    let bad = LinkConfig {
        rate_bps: 0,
        ..LinkConfig::default()
    };
    let err = Lab::start(LabConfig {
        forward: bad,
        ..LabConfig::default()
    })
    .expect_err("rate 0 must be rejected");
    assert!(format!("{err:#}").contains("forward"), "{err:#}");
    let err = Lab::start(LabConfig {
        name: Some("bad/name".into()),
        ..LabConfig::default()
    })
    .expect_err("a name with '/' must be rejected");
    assert!(format!("{err:#}").contains("invalid lab name"), "{err:#}");
    assert!(!namespaces().iter().any(|n| n.contains("bad")));
}

/// Several paths: each is its own TUN pair and subnet with its own links. UDP sent between
/// path 1's addresses crosses path 1 only (its counters move, path 0's do not) with path 1's
/// delay, and UDP between path 0's addresses crosses path 0 with its own delay.
#[test]
fn each_path_carries_its_own_traffic_with_its_own_delay() {
    use aerotp_lab::{LabPath, LabPathsConfig};
    if std::env::var("AEROTP_SKIP_LAB").as_deref() == Ok("1") {
        eprintln!("AEROTP_SKIP_LAB=1: skipping lab test paths");
        return;
    }
    const N: usize = 20;
    let path = |delay_ms: u64, seed: u64| LabPath {
        forward: link(5_000_000, delay_ms),
        reverse: link(5_000_000, delay_ms),
        forward_seed: seed,
        reverse_seed: seed + 1,
    };
    let lab = Lab::start_paths(LabPathsConfig {
        paths: vec![path(10, 1), path(60, 3), path(5, 5)],
        name: Some("paths".into()),
    })
    .expect("start a lab of three paths (root, iproute2)");
    assert_eq!(lab.path_count(), 3);
    assert_eq!(lab.ground_addr_of(1).to_string(), "10.77.1.2");
    assert_eq!(lab.ground_addr_of(0), lab.ground_addr());

    // Median one-way delay of N datagrams from the air end of `i` to its ground end.
    let one_way = |i: usize, port: u16| -> f64 {
        let ground = SocketAddr::new(lab.ground_addr_of(i), port);
        let air = SocketAddr::new(lab.air_addr_of(i), 0);
        let rx = lab
            .spawn_in(Side::Ground, move || -> io::Result<Vec<Instant>> {
                let sock = UdpSocket::bind(ground)?;
                sock.set_read_timeout(Some(Duration::from_secs(3)))?;
                let mut at = Vec::new();
                let mut buf = [0u8; 64];
                while at.len() < N {
                    sock.recv(&mut buf)?;
                    at.push(Instant::now());
                }
                Ok(at)
            })
            .expect("receiver thread");
        std::thread::sleep(Duration::from_millis(100));
        let tx = lab
            .spawn_in(Side::Air, move || -> io::Result<Vec<Instant>> {
                let sock = UdpSocket::bind(air)?;
                let mut sent = Vec::new();
                for k in 0..N {
                    sent.push(Instant::now());
                    sock.send_to(&[k as u8; 32], ground)?;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(sent)
            })
            .expect("sender thread");
        let sent = tx.join().expect("sender").expect("send");
        let got = rx
            .join()
            .expect("receiver")
            .expect("every datagram arrives");
        let mut d: Vec<f64> = sent
            .iter()
            .zip(&got)
            .map(|(s, r)| (*r - *s).as_secs_f64() * 1e3)
            .collect();
        d.sort_by(f64::total_cmp);
        d[N / 2]
    };
    let before = lab.all_stats();
    let d1 = one_way(1, 5101);
    let mid = lab.all_stats();
    assert_eq!(
        mid[1].0.offered_packets - before[1].0.offered_packets,
        N as u64
    );
    assert_eq!(
        mid[0].0.offered_packets, before[0].0.offered_packets,
        "path 0 untouched"
    );
    assert_eq!(
        mid[2].0.offered_packets, before[2].0.offered_packets,
        "path 2 untouched"
    );
    let d0 = one_way(0, 5100);
    let after = lab.all_stats();
    assert_eq!(
        after[0].0.offered_packets - mid[0].0.offered_packets,
        N as u64
    );
    assert_eq!(after[1].0.offered_packets, mid[1].0.offered_packets);
    // 60 ms and 10 ms of propagation, plus < 0.1 ms of serialisation and timer slack.
    assert!(
        (60.0..66.0).contains(&d1),
        "path 1 one-way delay {d1:.2} ms"
    );
    assert!(
        (10.0..16.0).contains(&d0),
        "path 0 one-way delay {d0:.2} ms"
    );
    let all = lab.stop_all().expect("clean teardown");
    assert_eq!(all.len(), 3);
    assert!(!namespaces().iter().any(|n| n.ends_with("-paths")));
}
