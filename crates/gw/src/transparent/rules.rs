//! The nftables TPROXY rules and policy routes of a transparent ingress, and `aerotp gw
//! rules` printing, installing and removing them (docs/gateway.md §Transparent interception).
//!
//! TPROXY (not REDIRECT): the kernel here has `nft_tproxy` built in, and TPROXY leaves the
//! packet's destination untouched, so the accepted TCP socket's local address *is* the
//! original destination and a UDP datagram's `IP_ORIGDSTADDR` is too — REDIRECT would need
//! conntrack's `SO_ORIGINAL_DST` for TCP and has no equivalent for UDP. The rules run `nft`
//! and `ip` (nftables, iproute2: scripts/lab-deps.sh) rather than talking netlink: the text
//! they run is the text `rules print` shows, so what an operator reviews is what is installed.

use std::process::{Command, Stdio};

use super::policy::DestRule;
use super::sysctls;

/// The nftables table the rules live in (one table: removing it removes every rule).
pub const TABLE: &str = "aerotp_gw";

/// One address family as each tool names it.
#[derive(Debug)]
struct Family {
    /// nftables' `meta nfproto` value.
    nfproto: &'static str,
    /// nftables' address expression and `tproxy` family.
    nft: &'static str,
    /// iproute2's family flag.
    ip: &'static str,
    /// The whole address block (the local route's destination).
    all: &'static str,
}

const FAMILIES: [Family; 2] = [
    Family {
        nfproto: "ipv4",
        nft: "ip",
        ip: "-4",
        all: "0.0.0.0/0",
    },
    Family {
        nfproto: "ipv6",
        nft: "ip6",
        ip: "-6",
        all: "::/0",
    },
];

/// What the rules intercept and where they send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// Interfaces whose incoming traffic is intercepted (the applications' side).
    pub iif: Vec<String>,
    /// The transparent TCP listener's port (`--transparent-tcp`), if TCP is intercepted.
    pub tcp_port: Option<u16>,
    /// Instead: the ingress's TUN device (`--transparent-tun`, reliable end to end): TCP is
    /// marked `mark << 1` and routed into it by table `route_table + 1`.
    pub tcp_tun: Option<String>,
    /// The transparent UDP socket's port (`--transparent-udp`), if UDP is intercepted.
    pub udp_port: Option<u16>,
    /// Firewall mark of intercepted packets (routed to the local table `route_table`).
    pub mark: u32,
    pub route_table: u32,
    /// Destination prefixes never intercepted (no port: they are routed as before).
    pub exclude: Vec<DestRule>,
    /// Network namespace to install into (`ip netns exec`); none: the current one.
    pub netns: Option<String>,
    /// Intercept IPv6 too (the default; off where the host has no IPv6: `--ipv4-only`).
    pub ipv6: bool,
}

impl RuleSpec {
    /// Checks every field; the error names the flag, the value and what is accepted.
    pub fn check(&self) -> Result<(), String> {
        self.check_interfaces()?;
        self.check_targets()?;
        self.check_mark_and_table()?;
        self.check_excludes_and_netns()
    }

    /// `--iif`: at least one, each an interface name.
    fn check_interfaces(&self) -> Result<(), String> {
        if self.iif.is_empty() {
            return Err(
                "--iif: missing; give the interface the applications' traffic comes \
                 in on (repeat for more), e.g. --iif eth1 — intercepting on every interface \
                 would capture the gateway's own management and air-link traffic"
                    .into(),
            );
        }
        for i in &self.iif {
            let ok = !i.is_empty()
                && i.len() <= 15
                && i.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if !ok {
                return Err(format!(
                    "--iif '{i}': not an interface name; give 1 to 15 characters of \
                     letters, digits, '-', '_', '.', '@'"
                ));
            }
        }
        Ok(())
    }

    /// Where intercepted traffic goes: `--tcp-port`, `--tcp-tun` (not both) and
    /// `--udp-port`, at least one.
    fn check_targets(&self) -> Result<(), String> {
        if self.tcp_port.is_none() && self.udp_port.is_none() && self.tcp_tun.is_none() {
            return Err(
                "--tcp-port/--tcp-tun/--udp-port: give at least one (the ports of the \
                 ingress's --transparent-tcp / --transparent-udp listeners, or the device of \
                 its --transparent-tun)"
                    .into(),
            );
        }
        if let Some(t) = &self.tcp_tun {
            if self.tcp_port.is_some() {
                return Err(format!(
                    "--tcp-tun '{t}' and --tcp-port: TCP goes to one of the two (the TUN \
                     device of --transparent-tun, or the --transparent-tcp listener)"
                ));
            }
            let ok = !t.is_empty()
                && t.len() <= 15
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if !ok {
                return Err(format!(
                    "--tcp-tun '{t}': not an interface name; give 1 to 15 characters of \
                     letters, digits, '-', '_', '.', '@'"
                ));
            }
            if self.mark >= 1 << 31 || matches!(self.route_table + 1, 253..=255) {
                return Err(format!(
                    "--tcp-tun: uses mark {:#x} << 1 and table {} + 1; give a mark below \
                     0x80000000 and a table whose successor is not 253-255",
                    self.mark, self.route_table
                ));
            }
        }
        for (flag, p) in [("--tcp-port", self.tcp_port), ("--udp-port", self.udp_port)] {
            if p == Some(0) {
                return Err(format!("{flag} '0': give a port 1 to 65535"));
            }
        }
        Ok(())
    }

    /// `--mark` and `--route-table`.
    fn check_mark_and_table(&self) -> Result<(), String> {
        if self.mark == 0 {
            return Err("--mark '0': give a non-zero firewall mark (0 marks nothing)".into());
        }
        if matches!(self.route_table, 0 | 253..=255) || self.route_table > i32::MAX as u32 {
            return Err(format!(
                "--route-table '{}': give 1 to 252 or 256 to 2147483647 (0 and 253-255 are \
                 the kernel's unspec, default, main and local tables)",
                self.route_table
            ));
        }
        Ok(())
    }

    /// `--exclude` prefixes (no ports; IPv6 only when intercepted) and `--netns`.
    fn check_excludes_and_netns(&self) -> Result<(), String> {
        for x in &self.exclude {
            if x.ports != (0, u16::MAX) || x.any_family {
                return Err(format!(
                    "--exclude '{}/{}': give an address prefix without ports, e.g. 10.0.0.0/8 \
                     or [fd00::]/8",
                    x.addr, x.len
                ));
            }
            if x.addr.is_ipv6() && !self.ipv6 {
                return Err(format!(
                    "--exclude '[{}]/{}': an IPv6 prefix with --ipv4-only (IPv6 is not \
                     intercepted at all then); drop one of the two",
                    x.addr, x.len
                ));
            }
        }
        if let Some(ns) = &self.netns {
            if ns.is_empty() || ns.contains('/') || ns.starts_with('.') {
                return Err(format!(
                    "--netns '{ns}': give the name of a network namespace (ip netns list)"
                ));
            }
        }
        Ok(())
    }

    /// The nftables script: replaces the table atomically (create-if-absent, delete, then
    /// the full table, in one `nft -f` transaction).
    pub(crate) fn nft_script(&self) -> String {
        let mark = format!("{:#x}", self.mark);
        let iifs: Vec<String> = self.iif.iter().map(|i| format!("\"{i}\"")).collect();
        let mut r = Vec::new();
        r.push(format!("iifname != {{ {} }} return", iifs.join(", ")));
        // Traffic for the gateway host itself (its own services, the air link) is not
        // intercepted, nor loopback, multicast and broadcast.
        r.push("fib daddr type local return".into());
        r.push("ip daddr { 127.0.0.0/8, 224.0.0.0/4, 255.255.255.255 } return".into());
        if self.ipv6 {
            // Loopback, link-local (no meaning beyond this link) and multicast.
            r.push("ip6 daddr { ::1, fe80::/10, ff00::/8 } return".into());
        }
        for f in self.families() {
            let x: Vec<String> = self
                .exclude
                .iter()
                .filter(|x| x.addr.is_ipv6() == (f.nft == "ip6"))
                .map(|x| format!("{}/{}", x.addr, x.len))
                .collect();
            if !x.is_empty() {
                r.push(format!("{} daddr {{ {} }} return", f.nft, x.join(", ")));
            }
        }
        if self.tcp_port.is_some() {
            // Packets of connections already accepted go straight to their socket.
            r.push(format!(
                "meta l4proto tcp socket transparent 1 meta mark set {mark} accept"
            ));
        }
        if self.tcp_tun.is_some() {
            // Routed into the ingress's TUN device by the mark (its own table).
            r.push(format!(
                "meta l4proto tcp meta mark set {:#x} accept",
                self.tun_mark()
            ));
        }
        for (proto, port) in [("tcp", self.tcp_port), ("udp", self.udp_port)] {
            let Some(p) = port else { continue };
            for f in self.families() {
                r.push(format!(
                    "meta nfproto {} meta l4proto {proto} tproxy {} to :{p} meta mark set {mark} accept",
                    f.nfproto, f.nft
                ));
            }
        }
        let body: String = r.iter().map(|l| format!("        {l}\n")).collect();
        format!(
            "table inet {TABLE} {{}}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n    \
             chain prerouting {{\n        type filter hook prerouting priority mangle; policy accept;\n\
             {body}    }}\n}}\n"
        )
    }

    /// The families intercepted: IPv4, and IPv6 unless IPv4 only.
    fn families(&self) -> &'static [Family] {
        if self.ipv6 {
            &FAMILIES
        } else {
            &FAMILIES[..1]
        }
    }

    /// The mark of TCP routed into the TUN device (`--tcp-tun`).
    fn tun_mark(&self) -> u32 {
        self.mark << 1
    }

    /// The (mark, table) pairs of the policy routing: TPROXY's, and the TUN device's.
    fn marks(&self) -> Vec<(String, String)> {
        let mut v = vec![(format!("{:#x}", self.mark), self.route_table.to_string())];
        if self.tcp_tun.is_some() {
            v.push((
                format!("{:#x}", self.tun_mark()),
                (self.route_table + 1).to_string(),
            ));
        }
        v
    }

    /// The policy-routing commands (`ip` arguments): marked packets are delivered locally,
    /// or (`--tcp-tun`) routed into the ingress's TUN device; the sysctls that forwarding
    /// needs (`sh -c` arguments).
    pub(crate) fn ip_install(&self) -> Vec<Vec<String>> {
        let (m, t) = (format!("{:#x}", self.mark), self.route_table.to_string());
        let mut v = Vec::new();
        for f in self.families() {
            v.push(words(&[f.ip, "rule", "add", "fwmark", &m, "lookup", &t]));
            v.push(words(&[
                f.ip, "route", "replace", "local", f.all, "dev", "lo", "table", &t,
            ]));
            if let Some(dev) = &self.tcp_tun {
                let (m2, t2) = (&self.marks()[1].0, &self.marks()[1].1);
                v.push(words(&[f.ip, "rule", "add", "fwmark", m2, "lookup", t2]));
                v.push(words(&[
                    f.ip, "route", "replace", "default", "dev", dev, "table", t2,
                ]));
            }
        }
        v
    }

    /// `--tcp-tun`: the kernel settings the TUN path needs (`sysctls::for_tun`: forwarding
    /// on, the device's reverse-path filter off, a strict `conf.all.rp_filter` made loose).
    fn tun_settings(&self) -> Option<Vec<sysctls::Setting>> {
        let dev = self.tcp_tun.as_ref()?;
        Some(sysctls::for_tun(dev, self.ipv6))
    }

    /// The shell text that changes them (`sh -c` argument).
    pub fn sysctls(&self) -> Option<String> {
        Some(sysctls::script(&self.tun_settings()?))
    }

    /// Per family and mark: the command deleting one fwmark rule, and the one flushing its
    /// table.
    fn ip_remove(&self) -> Vec<(Vec<String>, Vec<String>)> {
        let mut v = Vec::new();
        for f in self.families() {
            for (m, t) in self.marks() {
                v.push((
                    words(&[f.ip, "rule", "del", "fwmark", &m, "lookup", &t]),
                    words(&[f.ip, "route", "flush", "table", &t]),
                ));
            }
        }
        v
    }

    /// Everything `install` runs, as a shell script (what `aerotp gw rules print` shows).
    pub fn print(&self) -> String {
        let ns = self
            .netns
            .as_ref()
            .map(|n| format!("ip netns exec {n} "))
            .unwrap_or_default();
        let mut s = String::from(if self.tcp_tun.is_some() {
            "# aerotp gw rules: TCP into the TUN device, UDP by TPROXY (docs/gateway.md)\n"
        } else {
            "# aerotp gw rules: TPROXY interception (docs/gateway.md)\n"
        });
        for (rule, _) in self.ip_remove() {
            s += &format!("{ns}ip {} 2>/dev/null || true\n", rule.join(" "));
        }
        for a in self.ip_install() {
            s += &format!("{ns}ip {}\n", a.join(" "));
        }
        if let Some(sh) = self.sysctls() {
            s += &format!(
                "# the values before are recorded in {} first; `remove` puts them back\n",
                sysctls::state_path(self.netns.as_deref()).display()
            );
            s += &format!("{ns}sh -c '{sh}'\n");
        }
        s += &format!("{ns}nft -f - <<'EOF'\n{}EOF\n", self.nft_script());
        s
    }

    /// Installs the rules (replacing an earlier install of the same table, mark and table
    /// number). Errors carry the failing command and its message.
    pub fn install(&self) -> Result<(), String> {
        self.check()?;
        // A stale rule from an earlier install would be a duplicate: removed first (absent
        // is fine).
        for (rule, _) in self.ip_remove() {
            let _ = self.run("ip", &rule, None);
        }
        for a in self.ip_install() {
            // A failure half-way leaves nothing of the install behind.
            self.run("ip", &a, None).map_err(|e| {
                let _ = self.remove();
                if e.contains("IPv6 is disabled") {
                    format!("{e} (IPv6 is off on this host: give --ipv4-only)")
                } else if e.contains("not up") {
                    format!("{e} (the local routes need the loopback up: ip link set lo up)")
                } else if e.contains("Cannot find device") && self.tcp_tun.is_some() {
                    format!(
                        "{e} (the TUN device is the ingress's: start the ingress with \
                         --transparent-tun first)"
                    )
                } else {
                    e
                }
            })?;
        }
        if let (Some(sh), Some(set)) = (self.sysctls(), self.tun_settings()) {
            let done = sysctls::save(self.netns.as_deref(), &set)
                .and_then(|()| self.run("sh", &words(&["-c", &sh]), None));
            if let Err(e) = done {
                let _ = self.remove();
                return Err(e);
            }
        }
        let nft = self.nft_script();
        if let Err(e) = self.run("nft", &words(&["-f", "-"]), Some(&nft)) {
            let _ = self.remove();
            return Err(e);
        }
        Ok(())
    }

    /// Removes the table, the rule and the route, and puts back the kernel settings an
    /// install recorded; what was not there is not an error, except the record of rules
    /// installed with `--tcp-tun`. Every part is attempted; the error lists those that
    /// failed.
    pub fn remove(&self) -> Result<(), String> {
        self.check()?;
        let was_installed = self.installed();
        let mut failed = Vec::new();
        let absent = |e: &str| {
            e.contains("No such file")
                || e.contains("does not exist")
                || e.contains("Cannot find")
                || e.contains("FIB table does not exist")
        };
        let del = words(&["delete", "table", "inet", TABLE]);
        if let Err(e) = self.run("nft", &del, None) {
            if !absent(&e) {
                failed.push(e);
            }
        }
        for (rule, flush) in self.ip_remove() {
            // `ip rule del` removes one rule per call: repeat (bounded) until none is left.
            for _ in 0..16 {
                if self.run("ip", &rule, None).is_err() {
                    break;
                }
            }
            if let Err(e) = self.run("ip", &flush, None) {
                if !absent(&e) {
                    failed.push(e);
                }
            }
        }
        let ns = self.netns.as_deref();
        match sysctls::restore(ns) {
            Ok(true) => {}
            Ok(false) if was_installed && self.tcp_tun.is_some() => failed.push(format!(
                "the kernel settings `install --tcp-tun` changes were left as they are: no \
                 record of their values before at {} (installed by an older aerotp, or the \
                 record deleted); check them by hand: {}",
                sysctls::state_path(ns).display(),
                self.tun_settings()
                    .unwrap_or_default()
                    .iter()
                    .map(|s| s.path.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            Ok(false) => {}
            Err(e) => failed.push(format!("putting the kernel settings back: {e}")),
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }

    /// Whether the table is installed (in the spec's namespace).
    pub fn installed(&self) -> bool {
        self.run("nft", &words(&["list", "table", "inet", TABLE]), None)
            .is_ok()
    }

    /// Runs `prog args` (in the namespace), feeding `stdin`; the error names the command.
    fn run(&self, prog: &str, args: &[String], stdin: Option<&str>) -> Result<(), String> {
        let mut c = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, prog]);
                c
            }
            None => Command::new(prog),
        };
        c.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let shown = format!("{prog} {}", args.join(" "));
        let mut child = c.spawn().map_err(|e| {
            format!("{shown}: cannot run {prog}: {e} (install nftables and iproute2: scripts/lab-deps.sh)")
        })?;
        if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
            use std::io::Write;
            w.write_all(text.as_bytes())
                .map_err(|e| format!("{shown}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("{shown}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{shown}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RuleSpec {
        RuleSpec {
            iif: vec!["eth1".into()],
            tcp_port: Some(7400),
            tcp_tun: None,
            udp_port: Some(7401),
            mark: 0x1,
            route_table: 100,
            exclude: vec![
                DestRule::parse("--exclude", "10.9.0.0/16").unwrap(),
                DestRule::parse("--exclude", "[fd09::]/16").unwrap(),
            ],
            netns: None,
            ipv6: true,
        }
    }

    #[test]
    fn tcp_into_the_tun_device_by_its_own_mark_and_table() {
        let tun = RuleSpec {
            tcp_port: None,
            tcp_tun: Some("aerotp0".into()),
            ..spec()
        };
        tun.check().unwrap();
        let nft = tun.nft_script();
        assert!(
            nft.contains("meta l4proto tcp meta mark set 0x2 accept"),
            "{nft}"
        );
        assert!(!nft.contains("tproxy ip to :7400"), "{nft}");
        assert!(!nft.contains("socket transparent"), "{nft}");
        assert!(
            nft.contains("tproxy ip to :7401"),
            "UDP still by TPROXY: {nft}"
        );
        let p = tun.print();
        for want in [
            "ip -4 rule add fwmark 0x2 lookup 101",
            "ip -4 route replace default dev aerotp0 table 101",
            "ip -6 rule add fwmark 0x2 lookup 101",
            "ip -6 route replace default dev aerotp0 table 101",
            "ip -4 rule del fwmark 0x2 lookup 101",
            "echo 0 > /proc/sys/net/ipv4/conf/aerotp0/rp_filter",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
        ] {
            assert!(p.contains(want), "want {want}: {p}");
        }
        // The local exclusions come before the mark, as for TPROXY.
        assert!(nft.find("fib daddr type local").unwrap() < nft.find("mark set 0x2").unwrap());
        assert!(spec().sysctls().is_none());
    }

    #[test]
    fn the_script_intercepts_tcp_and_udp_on_the_given_interface_only() {
        let s = spec().nft_script();
        assert!(s.contains("iifname != { \"eth1\" } return"), "{s}");
        assert!(
            s.contains("tcp tproxy ip to :7400 meta mark set 0x1 accept"),
            "{s}"
        );
        assert!(
            s.contains("udp tproxy ip to :7401 meta mark set 0x1 accept"),
            "{s}"
        );
        assert!(s.contains("ip daddr { 10.9.0.0/16 } return"), "{s}");
        assert!(s.contains("ip6 daddr { fd09::/16 } return"), "{s}");
        assert!(
            s.contains("ip6 daddr { ::1, fe80::/10, ff00::/8 } return"),
            "{s}"
        );
        assert!(
            s.contains(
                "meta nfproto ipv6 meta l4proto tcp tproxy ip6 to :7400 meta mark set 0x1 accept"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "meta nfproto ipv6 meta l4proto udp tproxy ip6 to :7401 meta mark set 0x1 accept"
            ),
            "{s}"
        );
        let v4 = RuleSpec {
            ipv6: false,
            exclude: vec![DestRule::parse("--exclude", "10.9.0.0/16").unwrap()],
            ..spec()
        };
        let s4 = v4.nft_script();
        assert!(!s4.contains("ip6") && !s4.contains("ipv6"), "{s4}");
        assert!(!v4.print().contains("ip -6"));
        assert!(s.contains("fib daddr type local return"), "{s}");
        let only_tcp = RuleSpec {
            udp_port: None,
            ..spec()
        };
        assert!(!only_tcp.nft_script().contains("udp"));
        let p = spec().print();
        assert!(p.contains("ip -4 rule add fwmark 0x1 lookup 100"), "{p}");
        assert!(
            p.contains("route replace local 0.0.0.0/0 dev lo table 100"),
            "{p}"
        );
        assert!(p.contains("ip -6 rule add fwmark 0x1 lookup 100"), "{p}");
        assert!(
            p.contains("ip -6 route replace local ::/0 dev lo table 100"),
            "{p}"
        );
        let ns = RuleSpec {
            netns: Some("air".into()),
            ..spec()
        };
        assert!(ns.print().contains("ip netns exec air nft -f -"));
    }

    #[test]
    fn bad_specs_name_the_flag_and_the_value() {
        let cases: Vec<(RuleSpec, &str)> = vec![
            (
                RuleSpec {
                    iif: vec![],
                    ..spec()
                },
                "--iif",
            ),
            (
                RuleSpec {
                    iif: vec!["a\"b".into()],
                    ..spec()
                },
                "--iif 'a\"b'",
            ),
            (
                RuleSpec {
                    iif: vec!["x".repeat(16)],
                    ..spec()
                },
                "--iif",
            ),
            (
                RuleSpec {
                    tcp_port: None,
                    tcp_tun: None,
                    udp_port: None,
                    ..spec()
                },
                "--tcp-port",
            ),
            (
                RuleSpec {
                    tcp_port: Some(0),
                    tcp_tun: None,
                    ..spec()
                },
                "--tcp-port '0'",
            ),
            (
                RuleSpec {
                    udp_port: Some(0),
                    ..spec()
                },
                "--udp-port '0'",
            ),
            (RuleSpec { mark: 0, ..spec() }, "--mark '0'"),
            (
                RuleSpec {
                    tcp_tun: Some("aerotp0".into()),
                    ..spec()
                },
                "--tcp-tun 'aerotp0' and --tcp-port",
            ),
            (
                RuleSpec {
                    tcp_port: None,
                    tcp_tun: Some("a b".into()),
                    ..spec()
                },
                "--tcp-tun 'a b'",
            ),
            (
                RuleSpec {
                    tcp_port: None,
                    tcp_tun: Some("aerotp0".into()),
                    route_table: 252,
                    ..spec()
                },
                "table 252 + 1",
            ),
            (
                RuleSpec {
                    route_table: 254,
                    ..spec()
                },
                "--route-table '254'",
            ),
            (
                RuleSpec {
                    route_table: 0,
                    ..spec()
                },
                "--route-table '0'",
            ),
            (
                RuleSpec {
                    exclude: vec![DestRule::parse("--exclude", "10.0.0.0/8:80").unwrap()],
                    ..spec()
                },
                "--exclude '10.0.0.0/8'",
            ),
            (
                RuleSpec {
                    netns: Some("../x".into()),
                    ..spec()
                },
                "--netns '../x'",
            ),
            (
                RuleSpec {
                    ipv6: false,
                    ..spec()
                },
                "--exclude '[fd09::]/16': an IPv6 prefix with --ipv4-only",
            ),
        ];
        for (s, want) in cases {
            let e = s.check().unwrap_err();
            assert!(e.contains(want), "want {want}: {e}");
            assert!(
                s.install().unwrap_err().contains(want),
                "install checks first"
            );
        }
        spec().check().unwrap();
    }
}
