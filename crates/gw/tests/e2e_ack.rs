//! Reliable mode's end-to-end acknowledgements, with the air link cut mid-transfer
//! (docs/gateway.md §TCP reliable: end-to-end semantics; figures in docs/results/gw.md).
//!
//! The TUN lab (5 Mb/s, 10 ms) plus an "app" namespace behind the ingress, as in
//! `transparent.rs`. A source thread in the app namespace sends 4 MB to a destination thread
//! in the ground namespace (10.77.0.2:8500) through interception; once the destination has
//! 1 MB the air link is cut for 3 s (nftables drops everything on the air namespace's link
//! device, both ways), then restored. Every 10 ms the test reads the source socket's
//! `TCP_INFO` `tcpi_bytes_acked` and, after it, the destination socket's
//! `tcpi_bytes_received` (both capped at the 4 MB: a FIN counts one), so a sample that shows
//! acked > received is a real violation. Each run checks the 4 MB arrived intact and in order.
//!
//! * `reliable_tun_acks_only_what_the_destination_has`: `--transparent-tun` (the user-space
//!   TCP): acked never exceeds received, at every sample; and the ingress did forward bytes
//!   ahead of their acknowledgement (it is not simply slow).
//! * `reliable_route_through_the_tun_acks_only_what_the_destination_has`: the same through
//!   an explicit reliable route on an address the air host does not have (10.79.0.1:8500),
//!   which the ingress routes into its TUN device; another port of that address is refused.
//! * `reliable_tun_slow_destination`: the same with a destination reading 400 kB/s (bytes
//!   queue in the egress's socket: the egress confirms only what the destination acknowledged).
//! * `reliable_tun_ipv6`: 1 MB over IPv6 through the TUN, no cut, the same sampling.
//! * `tun_errors_name_the_flag_and_the_cause`: a device that is no TUN stops the ingress
//!   with an error naming `--transparent-tun` and `CAP_NET_ADMIN`.
//! * `kernel_paths_acknowledge_ahead`: the measurement behind the choice, on the TPROXY
//!   listener: `reliable` with the default 256 KiB window and with a 16 KiB one,
//!   and `near-reliable` (custody: acknowledged at once, held until confirmed — unchanged):
//!   prints the most the source saw acknowledged beyond the destination. Near-reliable must
//!   run ahead (custody) and deliver everything after the cut.
//!
//! Interception is installed with `RuleSpec` (`aerotp gw rules`; `--tcp-tun` for the TUN
//! path) and removed after each run, checked gone.
//!
//! Needs root, `nft` and `ip` (scripts/lab-deps.sh); fails saying so unless
//! AEROTP_SKIP_LAB=1. Bounded: 60 s per run; namespaces and rules removed by drop guards.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use aerotp_gw::config::FileConfig;
use aerotp_gw::transparent::{RuleSpec, TransparentSpec};
use aerotp_gw::Gateway;
use aerotp_lab::{Lab, LabConfig, LinkConfig, Side};

mod ns_gateway;
use ns_gateway::{start_gateway, NsGateway};

mod labhost;
use labhost::{ip, lab_available, run, NsGuard, RulesGuard};

const TOTAL: u64 = 4_000_000;
const CUT_AFTER: u64 = 1_000_000;
const CUT: Duration = Duration::from_secs(3);
const PORT: u16 = 8500;
/// Nobody listens there: the egress's connection is refused.
const CLOSED: u16 = 8501;
/// Denied at the ingress (`--transparent-deny`).
const DENIED: u16 = 8502;
/// The explicit route's listen address in `Path::TunRoute`: no interface has it.
const ROUTE_ADDR: &str = "10.79.0.1";

/// Runs `f` on a thread in namespace `ns` (by name, /var/run/netns).
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("namespace file");
        // SAFETY: setns on this thread only, with an open namespace descriptor.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

/// `TCP_INFO`'s `tcpi_bytes_acked` and `tcpi_bytes_received` (offsets 120 and 128 of
/// `struct tcp_info`, Linux ≥ 4.1). The active side's `bytes_acked` counts its SYN (1 once
/// the handshake is done) and then its FIN; the passive side's `bytes_received` counts
/// neither the SYN nor, before the FIN, anything but data.
fn tcp_bytes(fd: i32) -> (u64, u64) {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes; the kernel writes at most len and updates it.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    assert!(
        len >= 136,
        "TCP_INFO too short ({len}): kernel older than 4.1"
    );
    let at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    (at(120), at(128))
}

fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

/// How interception is set up for a run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    /// `--transparent-tun`: the user-space TCP.
    Tun,
    /// An explicit reliable route on an address the air host does not have (`ROUTE_ADDR`),
    /// served by the user-space TCP: the ingress routes the address into its TUN device; no
    /// interception rules.
    TunRoute,
    /// The TPROXY listener in reliable mode with this window.
    KernelReliable(&'static str),
    /// The TPROXY listener in near-reliable mode (custody).
    KernelNearReliable,
}

/// What one run measured.
#[derive(Debug)]
struct Measured {
    samples: u64,
    cut_samples: u64,
    /// Most bytes the source saw acknowledged beyond what the destination had (≤ 0: never).
    max_excess: i64,
    /// Same, during the cut only.
    max_excess_cut: i64,
    /// Most bytes the ingress had taken from the source beyond what the destination had.
    max_ahead: i64,
    /// Longest gap between two samples.
    max_gap: Duration,
    secs: f64,
}

fn start_lab(name: &str) -> Lab {
    let link = LinkConfig {
        rate_bps: 5_000_000,
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    Lab::start(LabConfig {
        forward: link.clone(),
        reverse: link,
        seed: 3,
        name: Some(name.into()),
    })
    .expect("lab start")
}

fn gateways(lab: &Lab, w: &std::path::Path, path: Path) -> (NsGateway, NsGateway) {
    let egress = start_gateway(
        lab,
        Side::Ground,
        aerotp_gw::Role::Egress,
        FileConfig {
            listen: Some("10.77.0.2:9000".into()),
            allow_any: Some(true),
            rate: Some("5mbit".into()),
            store: Some(w.join("store-eg")),
            ..Default::default()
        },
    );
    let (transparent, window) = match path {
        Path::Tun | Path::TunRoute => (
            TransparentSpec {
                tun: Some("aetp0".into()),
                mode: Some("reliable".into()),
                deny: vec![format!("10.77.0.2/32:{DENIED}")],
                ..Default::default()
            },
            None,
        ),
        Path::KernelReliable(win) => (
            TransparentSpec {
                tcp_listen: Some("0.0.0.0:7400".into()),
                mode: Some("reliable".into()),
                ..Default::default()
            },
            Some(win.to_string()),
        ),
        Path::KernelNearReliable => (
            TransparentSpec {
                tcp_listen: Some("0.0.0.0:7400".into()),
                ..Default::default()
            },
            None,
        ),
    };
    let ingress = start_gateway(
        lab,
        Side::Air,
        aerotp_gw::Role::Ingress,
        FileConfig {
            peer: Some("10.77.0.2:9000".into()),
            rate: Some("5mbit".into()),
            store: Some(w.join("store-in")),
            window,
            transparent: Some(transparent),
            flows: (path == Path::TunRoute)
                .then(|| aerotp_gw::config::FlowSpec {
                    tcp_listen: Some(format!("{ROUTE_ADDR}:{PORT}")),
                    dest: Some(format!("10.77.0.2:{PORT}")),
                    mode: Some("reliable".into()),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        },
    );
    std::thread::sleep(Duration::from_millis(1000));
    (egress, ingress)
}

/// The air link cut (true) or restored (false): an nftables table in the air namespace that
/// drops everything in and out of its link device.
fn cut(air_ns: &str, on: bool) {
    let script = if on {
        "table inet aerotp_e2e_cut {\n chain i { type filter hook prerouting priority -300; \
         iifname \"atp-air\" drop; }\n chain o { type filter hook output priority -300; \
         oifname \"atp-air\" drop; }\n}\n"
    } else {
        "delete table inet aerotp_e2e_cut\n"
    };
    let mut c = Command::new("ip")
        .args(["netns", "exec", air_ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    c.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success(), "nft {script}");
}

/// Ingress flows' bytes taken from sources (the sum of `end`).
fn ingress_taken(gw: &Gateway) -> u64 {
    gw.reg.snapshot().iter().map(|f| f.lock().end()).sum()
}

/// One 4 MB transfer with the link cut for 3 s after the first 1 MB, sampled every 10 ms.
/// `slow`: the destination reads 8 KiB every 20 ms (400 kB/s, below the link's rate) with a
/// 16 KiB receive buffer, so bytes queue in the egress's socket to it. Such a run takes 14 s
/// or, by chance, up to 22 s: over loopback the egress's kernel bounds its MSS to half the
/// largest window the destination offered (about 15 KB) while the destination rounds its
/// window down to what it last received (about 13 KB); once that window is below the MSS
/// the egress's socket sends only on its persist timer, 13 KB per ~200 ms, until its queue
/// drains (seen with `ss -tin`: `timer:(persist`, `snd_wnd` < `mss`). Kernel TCP between
/// the egress and the destination, not the gateway: the MSS clamped to 4096 at the
/// destination, five runs took 14.0 s each.
fn transfer_with_cut(path: Path, slow: bool, tag: &str) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    for d in ["store-in", "store-eg"] {
        std::fs::create_dir(w.join(d)).unwrap();
    }
    let lab = start_lab(tag);
    let air_ns = lab.air_ns().to_owned();
    let app = NsGuard::new("aerotp-e2e", tag);
    ip(&[
        "-n", &air_ns, "link", "add", "e2gw0", "type", "veth", "peer", "name", "e2app0",
    ]);
    ip(&["-n", &air_ns, "link", "set", "e2app0", "netns", &app.0]);
    ip(&["-n", &air_ns, "addr", "add", "10.78.0.1/24", "dev", "e2gw0"]);
    ip(&["-n", &air_ns, "link", "set", "e2gw0", "up"]);
    ip(&["-n", &app.0, "addr", "add", "10.78.0.2/24", "dev", "e2app0"]);
    ip(&["-n", &app.0, "link", "set", "e2app0", "up"]);
    ip(&["-n", &app.0, "link", "set", "lo", "up"]);
    ip(&["-n", &app.0, "route", "add", "default", "via", "10.78.0.1"]);

    // The destination: accepts one connection, reads it all, checks every byte.
    let (dst_tx, dst_rx) = mpsc::channel();
    let dest = lab
        .spawn_in(Side::Ground, move || {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("socket");
            if slow {
                sock.set_recv_buffer_size(16 * 1024).unwrap();
            }
            let at: std::net::SocketAddr = format!("10.77.0.2:{PORT}").parse().unwrap();
            sock.bind(&at.into()).expect("bind destination");
            sock.listen(4).unwrap();
            let l: TcpListener = sock.into();
            dst_tx.send(-1).unwrap();
            let (mut s, _) = l.accept().expect("accept");
            // The sampler reads this socket's TCP_INFO through its descriptor, valid until
            // the socket is returned below.
            dst_tx.send(s.as_raw_fd()).unwrap();
            let mut buf = vec![0u8; if slow { 8192 } else { 65_536 }];
            let mut got = 0u64;
            let mut bad = None;
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            loop {
                let n = match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => panic!("destination read after {got} bytes: {e}"),
                };
                for (i, b) in buf[..n].iter().enumerate() {
                    if bad.is_none() && *b != byte(got + i as u64) {
                        bad = Some(got + i as u64);
                    }
                }
                got += n as u64;
                if slow {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            (got, bad, s)
        })
        .expect("destination thread");
    dst_rx.recv().unwrap();
    let (egress, ingress) = gateways(&lab, w, path);
    // `aerotp gw rules`: intercepted TCP from the app side is routed into the ingress's TUN
    // device (after the ingress made it), or to the TPROXY listener.
    let tun = path == Path::Tun;
    let route = path == Path::TunRoute;
    let spec = RuleSpec {
        iif: vec!["e2gw0".into()],
        tcp_port: (!tun).then_some(7400),
        tcp_tun: tun.then(|| "aetp0".to_string()),
        udp_port: None,
        mark: 0x1,
        route_table: 100,
        exclude: vec![],
        netns: Some(air_ns.clone()),
        ipv6: false,
    };
    // An explicit route needs no rules: its address is routed into the device by the
    // ingress (checked), and the air host forwards the application's packets there.
    let rules = (!route).then(|| {
        spec.install().expect("install the rules");
        RulesGuard(spec.clone())
    });
    if route {
        run(
            "ip",
            &[
                "netns",
                "exec",
                &air_ns,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ],
        );
        let r = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["-n", &air_ns, "-4", "route", "show", ROUTE_ADDR])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned();
        assert!(
            r.contains("dev aetp0"),
            "{ROUTE_ADDR} not routed into the device: {r}"
        );
    }
    if tun {
        let r = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["-n", &air_ns, "-4", "route", "show", "table", "101"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned();
        assert!(r.contains("default dev aetp0"), "{r}");
    }

    // The source: connects to the destination's address (no gateway address anywhere) and
    // writes 4 MB, then closes.
    let (src_tx, src_rx) = mpsc::channel();
    let to = if route { ROUTE_ADDR } else { "10.77.0.2" };
    let source = in_netns(&app.0, move || {
        let mut s = TcpStream::connect_timeout(
            &format!("{to}:{PORT}").parse().unwrap(),
            Duration::from_secs(5),
        )
        .expect("source connect");
        s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        src_tx.send(s.try_clone().unwrap()).unwrap();
        let chunk: Vec<u8> = (0..TOTAL).map(byte).collect();
        s.write_all(&chunk).expect("source write");
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let src = src_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("source connected");
    let dst_fd = dst_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("destination accepted");

    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(60);
    let cutting = Arc::new(AtomicBool::new(false));
    let mut m = Measured {
        samples: 0,
        cut_samples: 0,
        max_excess: i64::MIN,
        max_excess_cut: i64::MIN,
        max_ahead: 0,
        max_gap: Duration::ZERO,
        secs: 0.0,
    };
    let mut cut_thread = None;
    let mut last = Instant::now();
    let gw = ingress.gw.clone();
    loop {
        // The source's count includes its SYN (acknowledged by the handshake): one less.
        let (acked, _) = tcp_bytes(src.as_raw_fd());
        let acked = acked.saturating_sub(1);
        let (_, received) = tcp_bytes(dst_fd);
        let (acked, received) = (acked.min(TOTAL), received.min(TOTAL));
        let excess = acked as i64 - received as i64;
        let ahead = ingress_taken(&gw) as i64 - received as i64;
        m.samples += 1;
        m.max_excess = m.max_excess.max(excess);
        m.max_ahead = m.max_ahead.max(ahead);
        if cutting.load(Ordering::Acquire) {
            m.cut_samples += 1;
            m.max_excess_cut = m.max_excess_cut.max(excess);
        }
        let now = Instant::now();
        m.max_gap = m.max_gap.max(now - last);
        last = now;
        if received >= CUT_AFTER && cut_thread.is_none() {
            let (ns, flag) = (air_ns.clone(), cutting.clone());
            cut_thread = Some(std::thread::spawn(move || {
                cut(&ns, true);
                flag.store(true, Ordering::Release);
                std::thread::sleep(CUT);
                flag.store(false, Ordering::Release);
                cut(&ns, false);
            }));
        }
        if received >= TOTAL && acked >= TOTAL {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{path:?}: transfer not done in 60 s (acked {acked}, received {received})"
        );
        std::thread::sleep(Duration::from_millis(10).saturating_sub(now.elapsed()));
    }
    m.secs = t0.elapsed().as_secs_f64();
    cut_thread
        .expect("the link was cut")
        .join()
        .expect("cut thread");
    // The destination closes; its FIN crosses back and ends the source's read.
    let (got, bad, s) = dest.join().expect("destination thread");
    drop(s);
    source.join().expect("source thread");
    let label = format!("{path:?}{}", if slow { " slow destination" } else { "" });
    assert_eq!(got, TOTAL, "{label}: destination got {got} bytes");
    assert_eq!(bad, None, "{label}: destination bytes differ");
    eprintln!(
        "{label}: {TOTAL} B intact in {:.2} s with a {} s cut; {} samples ({} during the \
         cut, longest gap {} ms); source acked beyond the destination: at most {} B ({} B \
         during the cut); ingress took at most {} B beyond the destination",
        m.secs,
        CUT.as_secs(),
        m.samples,
        m.cut_samples,
        m.max_gap.as_millis(),
        m.max_excess,
        m.max_excess_cut,
        m.max_ahead
    );
    if tun && !slow {
        refusals(&app.0);
    }
    if route {
        other_port_refused(&app.0);
    }
    drop(rules);
    let left = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["-n", &air_ns, "-4", "rule"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(!left.contains("fwmark"), "rules left behind: {left}");
    ingress.stop();
    egress.stop();
    drop(app);
    lab.stop().expect("lab teardown");
    m
}

/// Through the TUN: a destination that refuses the egress resets the source's connection
/// (which our SYN-ACK had opened); a denied destination's SYN is answered with RST.
fn refusals(app_ns: &str) {
    let r = in_netns(app_ns, || {
        let to = |p: u16| format!("10.77.0.2:{p}").parse().unwrap();
        let mut s = TcpStream::connect_timeout(&to(CLOSED), Duration::from_secs(5))
            .expect("the ingress's own TCP accepts first");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The reset may meet the write (if it came first) or the read after it.
        let refused = match s.write_all(b"hello") {
            Err(e) => Err(e),
            Ok(()) => s.read(&mut [0u8; 16]),
        };
        let denied = TcpStream::connect_timeout(&to(DENIED), Duration::from_secs(5));
        (
            refused.map_err(|e| e.kind()),
            denied.map(|_| ()).map_err(|e| e.kind()),
        )
    })
    .join()
    .expect("refusals thread");
    assert_eq!(
        r.0,
        Err(std::io::ErrorKind::ConnectionReset),
        "a refused destination"
    );
    assert_eq!(
        r.1,
        Err(std::io::ErrorKind::ConnectionRefused),
        "a denied destination"
    );
}

/// The explicit route's address is the gateway's: another port there is refused (RST).
fn other_port_refused(app_ns: &str) {
    let r = in_netns(app_ns, || {
        TcpStream::connect_timeout(
            &format!("{ROUTE_ADDR}:{CLOSED}").parse().unwrap(),
            Duration::from_secs(5),
        )
        .map(|_| ())
        .map_err(|e| e.kind())
    })
    .join()
    .expect("refusal thread");
    assert_eq!(
        r,
        Err(std::io::ErrorKind::ConnectionRefused),
        "another port of the route's address"
    );
}

/// Without a usable TUN device the ingress does not start, and says why.
#[test]
fn tun_errors_name_the_flag_and_the_cause() {
    if !lab_here() {
        return;
    }
    let ns = NsGuard::new("aerotp-e2e", "tunerr");
    let e = in_netns(&ns.0, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cfg = FileConfig {
                peer: Some("10.77.0.2:9000".into()),
                transparent: Some(TransparentSpec {
                    // A device that exists and is no TUN.
                    tun: Some("lo".into()),
                    mode: Some("reliable".into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let settings = cfg.settings().expect("settings");
            match aerotp_gw::start(aerotp_gw::Role::Ingress, settings).await {
                Ok(_) => String::new(),
                Err(e) => format!("{e:#}"),
            }
        })
    })
    .join()
    .unwrap();
    assert!(
        e.contains("--transparent-tun") && e.contains("creating TUN device lo"),
        "{e}"
    );
    assert!(e.contains("CAP_NET_ADMIN"), "{e}");
}

/// Whether the lab this file's tests need is here (else they fail saying so, or skip with
/// AEROTP_SKIP_LAB=1).
fn lab_here() -> bool {
    lab_available(
        "end-to-end acknowledgement lab test",
        "namespaces, nftables, TUN",
        &[("nft", "--version"), ("ip", "-V")],
    )
}

/// A run through the user-space TCP: sampled through the cut, the source never acknowledged
/// beyond the destination, and the ingress did hold bytes back (or nothing was tested).
fn assert_end_to_end(m: &Measured) {
    assert!(m.cut_samples >= 200, "cut sampled {} times", m.cut_samples);
    assert!(
        m.max_excess <= 0,
        "the source saw {} B acknowledged that the destination did not have",
        m.max_excess
    );
    // The ingress must have held bytes the destination did not have yet (or nothing was held
    // back to test). How many depends on how fast the source fills the window before the cut:
    // 188 KB on a quiet machine, 47 KB with the whole workspace's tests beside it; 16 KB is
    // a dozen full segments.
    assert!(
        m.max_ahead > 16_384,
        "the ingress forwarded at most {} B ahead of the destination: not a test of holding \
         acknowledgements back",
        m.max_ahead
    );
    assert!(
        m.max_gap < Duration::from_millis(60),
        "sampling gap {:?}",
        m.max_gap
    );
}

#[test]
fn reliable_tun_acks_only_what_the_destination_has() {
    if lab_here() {
        assert_end_to_end(&transfer_with_cut(Path::Tun, false, "e2etun"));
    }
}

/// An explicit `reliable` route (`[[flow]] tcp_listen = "10.79.0.1:8500"`, an address the
/// air host does not have) served by the user-space TCP: the application is pointed at the
/// route, not intercepted, and gets the same guarantee. Without the TUN's route the ingress
/// could not even listen there (a kernel listener on an address of the host acknowledges
/// ahead: `kernel_paths_acknowledge_ahead`).
#[test]
fn reliable_route_through_the_tun_acks_only_what_the_destination_has() {
    if lab_here() {
        assert_end_to_end(&transfer_with_cut(Path::TunRoute, false, "e2eroute"));
    }
}

#[test]
fn kernel_paths_acknowledge_ahead() {
    if !lab_here() {
        return;
    }
    let big = transfer_with_cut(Path::KernelReliable("256KiB"), false, "e2ek256");
    let small = transfer_with_cut(Path::KernelReliable("16KiB"), false, "e2ek16");
    let custody = transfer_with_cut(Path::KernelNearReliable, false, "e2enr");
    eprintln!(
        "acknowledged beyond the destination during the cut: kernel reliable 256 KiB window \
         {} B, 16 KiB window {} B, near-reliable (custody) {} B",
        big.max_excess_cut, small.max_excess_cut, custody.max_excess_cut
    );
    // Near-reliable is custody: acknowledged at once, the bytes held through the cut.
    assert!(
        custody.max_excess_cut > 1_000_000,
        "near-reliable acknowledged only {} B ahead during the cut",
        custody.max_excess_cut
    );
}

#[test]
fn reliable_tun_slow_destination() {
    if !lab_here() {
        return;
    }
    let m = transfer_with_cut(Path::Tun, true, "e2eslow");
    assert!(
        m.max_excess <= 0,
        "the source saw {} B acknowledged that the (slow) destination did not have",
        m.max_excess
    );
}

/// IPv6 through the same TUN path: an application namespace with IPv6 addresses only sends
/// 1 MB to `[fd77::2]:8500` on the ground (the lab link itself, and the gateways' AeroTP, stay
/// IPv4); the bytes arrive intact and, sampled every 10 ms, the source is never acknowledged
/// more than the destination has.
#[test]
fn reliable_tun_ipv6() {
    if !lab_here() {
        return;
    }
    const V6_TOTAL: u64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    for d in ["store-in", "store-eg"] {
        std::fs::create_dir(w.join(d)).unwrap();
    }
    let lab = start_lab("e2etun6");
    let (air_ns, ground_ns) = (lab.air_ns().to_owned(), lab.ground_ns().to_owned());
    let app = NsGuard::new("aerotp-e2e", "e2etun6");
    ip(&[
        "-n", &air_ns, "link", "add", "e2gw6", "type", "veth", "peer", "name", "e2app6",
    ]);
    ip(&["-n", &air_ns, "link", "set", "e2app6", "netns", &app.0]);
    let v6_on = |ns: &str, dev: &str| {
        let knob = format!("echo 0 > /proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
        run("ip", &["netns", "exec", ns, "sh", "-c", &knob]);
    };
    for (ns, dev) in [(&air_ns, "lo"), (&air_ns, "e2gw6"), (&ground_ns, "lo")] {
        v6_on(ns, dev);
    }
    ip(&[
        "-n",
        &air_ns,
        "-6",
        "addr",
        "add",
        "fd78::1/64",
        "dev",
        "e2gw6",
        "nodad",
    ]);
    ip(&["-n", &air_ns, "link", "set", "e2gw6", "up"]);
    ip(&[
        "-n",
        &app.0,
        "-6",
        "addr",
        "add",
        "fd78::2/64",
        "dev",
        "e2app6",
        "nodad",
    ]);
    ip(&["-n", &app.0, "link", "set", "e2app6", "up"]);
    ip(&["-n", &app.0, "link", "set", "lo", "up"]);
    ip(&[
        "-n", &app.0, "-6", "route", "add", "default", "via", "fd78::1",
    ]);
    ip(&[
        "-n",
        &ground_ns,
        "-6",
        "addr",
        "add",
        "fd77::2/128",
        "dev",
        "lo",
        "nodad",
    ]);

    let (dst_tx, dst_rx) = mpsc::channel();
    let dest = lab
        .spawn_in(Side::Ground, move || {
            let l = TcpListener::bind(("fd77::2", PORT)).expect("bind destination");
            let (mut s, _) = l.accept().expect("accept");
            dst_tx.send(s.as_raw_fd()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            (got, s)
        })
        .expect("destination thread");
    let (egress, ingress) = gateways(&lab, w, Path::Tun);
    // The device the ingress made inherits the lab's IPv6-off default.
    v6_on(&air_ns, "aetp0");
    let spec = RuleSpec {
        iif: vec!["e2gw6".into()],
        tcp_port: None,
        tcp_tun: Some("aetp0".into()),
        udp_port: None,
        mark: 0x1,
        route_table: 100,
        exclude: vec![],
        netns: Some(air_ns.clone()),
        ipv6: true,
    };
    spec.install().expect("install the rules");
    let rules = RulesGuard(spec);
    let (src_tx, src_rx) = mpsc::channel();
    let source = in_netns(&app.0, move || {
        let mut s = TcpStream::connect_timeout(
            &format!("[fd77::2]:{PORT}").parse().unwrap(),
            Duration::from_secs(5),
        )
        .expect("source connect over IPv6");
        src_tx.send(s.try_clone().unwrap()).unwrap();
        let data: Vec<u8> = (0..V6_TOTAL).map(byte).collect();
        s.write_all(&data).expect("source write");
        s.shutdown(Shutdown::Write).unwrap();
    });
    let src = src_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("connected");
    let dst_fd = dst_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("accepted");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut samples, mut max_excess) = (0u64, i64::MIN);
    loop {
        let acked = tcp_bytes(src.as_raw_fd()).0.saturating_sub(1).min(V6_TOTAL);
        let received = tcp_bytes(dst_fd).1.min(V6_TOTAL);
        samples += 1;
        max_excess = max_excess.max(acked as i64 - received as i64);
        if acked >= V6_TOTAL && received >= V6_TOTAL {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "IPv6: acked {acked}, received {received}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    source.join().expect("source thread");
    let (got, s) = dest.join().expect("destination thread");
    drop(s);
    eprintln!(
        "IPv6 through the TUN: {} B received, {samples} samples, source acked beyond the \
         destination at most {max_excess} B",
        got.len()
    );
    assert_eq!(got.len() as u64, V6_TOTAL);
    assert!(
        got.iter().enumerate().all(|(i, b)| *b == byte(i as u64)),
        "bytes differ"
    );
    assert!(max_excess <= 0, "IPv6: {max_excess} B acknowledged ahead");
    drop(rules);
    ingress.stop();
    egress.stop();
    drop(app);
    lab.stop().expect("lab teardown");
}
