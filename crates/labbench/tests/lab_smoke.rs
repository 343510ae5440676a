//! Lab smoke test: kernel TCP and AeroTP (reliable) each deliver 200 kB intact across a lab
//! link with BER 1e-5, and the lab's namespaces are gone afterwards. Needs root and iproute2;
//! fails saying so unless AEROTP_SKIP_LAB=1.

use std::time::Duration;

use aerotp_lab::{Lab, LabPath, LabPathsConfig};
use aerotp_labbench::{lab, link, transfer, Proto, Spec};

fn lab_available() -> bool {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: lab smoke test skipped");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the lab smoke test needs root (network namespaces, TUN); run as root or set AEROTP_SKIP_LAB=1"
    );
    true
}

fn namespaces() -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tcp_and_aerotp_deliver_across_a_lossy_lab_link() {
    if !lab_available() {
        return;
    }
    let mut l = link(5_000_000, Duration::from_millis(10));
    l.ber = 1e-5;
    for name in ["tcp-cubic", "aerotp-reliable"] {
        let proto = Proto::parse(name).unwrap();
        let t = std::time::Instant::now();
        let lab = lab(&l, 3).expect("lab start");
        eprintln!("{name}: lab up after {:?}", t.elapsed());
        let (air, ground) = (lab.air_ns().to_owned(), lab.ground_ns().to_owned());
        let spec = Spec {
            size: 200_000,
            rate_bps: 5_000_000,
            cap: Duration::from_secs(20),
            port: 5001,
            timeline: false,
            extra_paths: Vec::new(),
        };
        let o = transfer::run(&lab, proto, spec).expect("transfer");
        eprintln!(
            "{name}: transfer done after {:?}, elapsed {:.2}",
            t.elapsed(),
            o.elapsed_s()
        );
        let (fwd, _) = lab.stop().expect("lab teardown");
        eprintln!("{name}: lab down after {:?}", t.elapsed());
        assert!(
            o.complete && o.sha_ok,
            "{name}: {} of 200000 B intact, sha_ok {}, error {:?}",
            o.delivered,
            o.sha_ok,
            o.error
        );
        assert_eq!(o.delivered, 200_000);
        assert!(o.error.is_none(), "{name}: {:?}", o.error);
        // The link really was lossy and really carried the data.
        assert!(fwd.delivered_bytes >= 200_000, "{name}: {fwd:?}");
        let g = o.goodput_bps();
        assert!(g > 100_000.0 && g <= 5_000_000.0, "{name}: goodput {g}");
        let d = o.mean_delay_s.expect("delay");
        assert!(
            d >= 0.010,
            "{name}: mean one-way delay {d} s below the link's 10 ms"
        );
        let ns = namespaces();
        assert!(
            !ns.contains(&air) && !ns.contains(&ground),
            "namespaces left after stop: {ns}"
        );
        eprintln!(
            "{name}: {} B, {:.2} Mb/s, delay {:.1} ms, {} corrupted packets forward",
            o.delivered,
            g / 1e6,
            d * 1e3,
            fwd.corrupted_packets
        );
    }
}

/// One AeroTP connection over two lab paths (docs/spec.md §9): the sender binds the
/// wildcard address, connects to the ground's address on path 0 and adds its address on
/// path 1; each path's link carries a good share of the file, which arrives intact.
#[test]
fn aerotp_spreads_one_connection_over_two_lab_paths() {
    if !lab_available() {
        return;
    }
    let mut l = link(2_000_000, Duration::from_millis(10));
    l.ber = 1e-5;
    let paths = (0..2u64)
        .map(|i| LabPath {
            forward: l.clone(),
            reverse: l.clone(),
            forward_seed: 40 + 2 * i,
            reverse_seed: 41 + 2 * i,
        })
        .collect();
    let lab = Lab::start_paths(LabPathsConfig {
        paths,
        name: Some("mpsmoke".into()),
    })
    .expect("lab start");
    let spec = Spec {
        size: 1_000_000,
        rate_bps: 4_000_000,
        cap: Duration::from_secs(30),
        port: 5002,
        timeline: false,
        extra_paths: vec![lab.ground_addr_of(1)],
    };
    let o = transfer::run(&lab, Proto::parse("aerotp-reliable").unwrap(), spec).expect("transfer");
    let carried: Vec<u64> = lab
        .all_stats()
        .iter()
        .map(|(f, _)| f.delivered_bytes)
        .collect();
    lab.stop_all().expect("lab teardown");
    assert!(
        o.complete && o.sha_ok && o.delivered == 1_000_000,
        "{} of 1000000 B intact, sha_ok {}, error {:?}",
        o.delivered,
        o.sha_ok,
        o.error
    );
    let total: u64 = carried.iter().sum();
    for (i, c) in carried.iter().enumerate() {
        assert!(
            *c * 10 >= total * 3,
            "path {i} carried {c} of {total} bytes forward: not spread ({carried:?})"
        );
    }
    // Faster than one path could carry it (2 Mb/s).
    assert!(o.goodput_bps() > 2_500_000.0, "goodput {}", o.goodput_bps());
}
