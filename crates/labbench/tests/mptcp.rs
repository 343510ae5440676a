//! Kernel MPTCP over two lab paths: the file arrives intact, both paths carry a fair part of
//! it (the subflows were really opened on both), MPTCP beats single-path TCP on the same
//! lab, and the namespaces are gone afterwards. Needs root and iproute2; fails saying so
//! unless AEROTP_SKIP_LAB=1.

use std::time::Duration;

use aerotp_labbench::multipath::{self, Config};
use aerotp_labbench::Proto;

#[test]
fn mptcp_stripes_over_two_lab_paths_and_beats_one_path() {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: MPTCP lab test skipped");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the MPTCP lab test needs root (network namespaces, TUN); run as root or set AEROTP_SKIP_LAB=1"
    );
    let cfg = Config {
        paths: 2,
        rate_bps: 4_000_000,
        delay: Duration::from_millis(5),
        ber: 0.0,
        size: 2_000_000,
        runs: 1,
        seed: 5,
        cap: Duration::from_secs(30),
        protocols: vec![
            Proto::parse("tcp-cubic").unwrap(),
            Proto::parse("mptcp-cubic").unwrap(),
        ],
    };
    let r = multipath::run(&cfg, |l| eprintln!("{l}")).unwrap();
    let tcp = &r.rows[0];
    let mp = &r.rows[1];
    for row in [tcp, mp] {
        assert!(row.complete && row.sha_ok, "{row:?}");
    }
    let total: u64 = mp.path_bytes.iter().sum();
    for (i, b) in mp.path_bytes.iter().enumerate() {
        assert!(
            *b as f64 > 0.25 * total as f64,
            "MPTCP path {i} carried {b} of {total} bytes: {mp:?}"
        );
    }
    assert!(
        tcp.path_bytes[1] < tcp.path_bytes[0] / 50,
        "single-path TCP stays on path 0: {tcp:?}"
    );
    assert!(
        mp.goodput_bps > 1.4 * tcp.goodput_bps,
        "MPTCP {:.0} b/s vs TCP {:.0} b/s",
        mp.goodput_bps,
        tcp.goodput_bps
    );
    let ns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    let pid = std::process::id().to_string();
    assert!(!ns.contains(&pid), "namespaces left behind: {ns}");
}
