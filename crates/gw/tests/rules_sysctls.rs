//! `aerotp gw rules install --tcp-tun` records the kernel settings it changes and `remove`
//! puts them back (docs/gateway.md §TCP reliable: end-to-end semantics), in a namespace made
//! here (the settings are per namespace: the host's are never touched).
//!
//! * `remove_puts_the_settings_back`: in a fresh namespace with a veth standing for the
//!   ingress's TUN, settings other than the ones install gives (forwarding off, the device's
//!   rp_filter 1, all.rp_filter 1); install changes them (1, 0, 2 and IPv6 forwarding 1) and
//!   records the values before in /run/aerotp/sysctls-NETNS.txt; a second install keeps the
//!   record of the first; remove puts every value back and deletes the record. Then: with
//!   the record deleted, remove takes the rules away and fails naming the record's path and
//!   the settings to check; with nothing installed and no record, remove is no error.
//!
//! Needs root and `nft`, `ip` (scripts/lab-deps.sh); fails saying so unless
//! AEROTP_SKIP_LAB=1. The namespace is removed by a drop guard.

use std::process::{Command, Stdio};

use aerotp_gw::transparent::{sysctls, RuleSpec};

mod labhost;
use labhost::{ip, lab_available};

/// A namespace made by the test, deleted on drop.
struct NsGuard(String);

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(sysctls::state_path(Some(&self.0)));
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The value of /proc/sys `path` in namespace `ns`.
fn get(ns: &str, path: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "cat", path])
        .output()
        .expect("ip netns exec");
    assert!(o.status.success(), "cat {path} in {ns}");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

fn set(ns: &str, path: &str, v: &str) {
    let st = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            &format!("echo {v} > {path}"),
        ])
        .status()
        .expect("ip netns exec");
    assert!(st.success(), "{path} = {v} in {ns}");
}

const FWD: &str = "/proc/sys/net/ipv4/ip_forward";
const DEV_RP: &str = "/proc/sys/net/ipv4/conf/tuntest0/rp_filter";
const ALL_RP: &str = "/proc/sys/net/ipv4/conf/all/rp_filter";
const FWD6: &str = "/proc/sys/net/ipv6/conf/all/forwarding";

#[test]
fn remove_puts_the_settings_back() {
    if !lab_available(
        "rules sysctl test",
        "namespaces, nftables",
        &[("nft", "--version"), ("ip", "-V")],
    ) {
        return;
    }
    let ns = NsGuard(format!("aerotp-sysctl-{}", std::process::id()));
    let _ = Command::new("ip")
        .args(["netns", "del", &ns.0])
        .stderr(Stdio::null())
        .status();
    ip(&["netns", "add", &ns.0]);
    ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
    // A veth stands for the ingress's TUN device (only its name is routed to).
    ip(&[
        "-n", &ns.0, "link", "add", "tuntest0", "type", "veth", "peer", "name", "tuntest1",
    ]);
    ip(&["-n", &ns.0, "link", "set", "tuntest0", "up"]);
    ip(&["-n", &ns.0, "link", "set", "tuntest1", "up"]);
    let ipv6 = std::path::Path::new("/proc/sys/net/ipv6").exists();
    set(&ns.0, FWD, "0");
    set(&ns.0, DEV_RP, "1");
    set(&ns.0, ALL_RP, "1");
    if ipv6 {
        set(&ns.0, FWD6, "0");
    }
    let values = |ns: &str| {
        let mut v = vec![get(ns, FWD), get(ns, DEV_RP), get(ns, ALL_RP)];
        if ipv6 {
            v.push(get(ns, FWD6));
        }
        v
    };
    let before = values(&ns.0);
    let spec = RuleSpec {
        iif: vec!["lo".into()],
        tcp_port: None,
        tcp_tun: Some("tuntest0".into()),
        udp_port: None,
        mark: 0x1,
        route_table: 100,
        exclude: vec![],
        netns: Some(ns.0.clone()),
        ipv6,
    };
    let record = sysctls::state_path(Some(&ns.0));
    let _ = std::fs::remove_file(&record);

    spec.install().expect("install");
    let mut changed = vec!["1".to_string(), "0".into(), "2".into()];
    if ipv6 {
        changed.push("1".into());
    }
    assert_eq!(values(&ns.0), changed, "what install gives");
    let first = std::fs::read_to_string(&record).expect("the record");
    assert!(first.contains(&format!("{FWD} 0")), "{first}");
    spec.install().expect("a second install replaces the first");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        first,
        "the record of the first install kept (not the values it gave)"
    );
    spec.remove().expect("remove");
    assert_eq!(values(&ns.0), before, "every value put back");
    assert!(!record.exists(), "the record deleted");
    assert!(!spec.installed());

    // No record of rules installed with --tcp-tun: the rules go, the error says what to do.
    spec.install().expect("install");
    std::fs::remove_file(&record).unwrap();
    let e = spec.remove().unwrap_err();
    assert!(
        e.contains(&record.display().to_string()) && e.contains("by hand") && e.contains(FWD),
        "{e}"
    );
    assert!(!spec.installed(), "the rules removed anyway");
    spec.remove()
        .expect("nothing installed and no record: nothing to do");
    // The settings install gave stay (nothing recorded them): put back for the drop.
    assert_eq!(values(&ns.0), changed);
}
