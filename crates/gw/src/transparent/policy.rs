//! Allow/deny lists of a transparent ingress: which original destinations it carries
//! (docs/gateway.md §Transparent interception).
//!
//! An entry is `PREFIX[:PORTS]`: `PREFIX` an IPv4 `a.b.c.d[/len]` or an IPv6 `[x::y][/len]`
//! (or `*`, every address), `PORTS` a port `80` or a range `8000-8099` (none: every port).
//! A destination is carried when no deny entry matches it and the allow list is empty or
//! one of its entries matches. Written by hand: the prefix test is three lines, and no
//! well-kept crate parses the `prefix:ports` pair with errors naming the flag.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One `PREFIX[:PORTS]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DestRule {
    pub addr: IpAddr,
    /// Prefix length in bits (0 = every address of the family; `*` matches both families).
    pub len: u8,
    /// Both families (`*`).
    pub any_family: bool,
    pub ports: (u16, u16),
}

const FORMAT: &str = "give PREFIX[:PORT[-PORT]], e.g. 10.0.0.0/8, 192.168.1.7:80, \
     10.1.0.0/16:8000-8099, [2001:db8::]/32:443 or *:53";

impl DestRule {
    /// Parses one entry; the error names `key` (the flag or config key), the value and the
    /// accepted form.
    pub fn parse(key: &str, s: &str) -> Result<DestRule, String> {
        DestRule::parse_entry(s).map_err(|why| format!("{key} '{s}': {why}; {FORMAT}"))
    }

    /// Parses one entry; the error says what is wrong in it (the caller names the key).
    pub fn parse_entry(s: &str) -> Result<DestRule, String> {
        let (net, ports) = split_ports(s)?;
        let ports = match ports {
            None => (0, u16::MAX),
            Some(p) => parse_ports(p)?,
        };
        if net == "*" {
            return Ok(DestRule {
                addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                len: 0,
                any_family: true,
                ports,
            });
        }
        let (a, len) = match net.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (net, None),
        };
        let addr: IpAddr = if let Some(v6) = a.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            v6.parse::<Ipv6Addr>()
                .map(IpAddr::V6)
                .map_err(|_| format!("'{v6}' is not an IPv6 address"))?
        } else {
            a.parse::<Ipv4Addr>()
                .map(IpAddr::V4)
                .map_err(|_| format!("'{a}' is not an IPv4 address (IPv6 goes in [])"))?
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("prefix length '{l}' is not 0 to {max}")),
            },
        };
        Ok(DestRule {
            addr,
            len,
            any_family: false,
            ports,
        })
    }

    pub fn matches(&self, d: SocketAddr) -> bool {
        let port_ok = (self.ports.0..=self.ports.1).contains(&d.port());
        let addr_ok = self.any_family
            || match (self.addr, d.ip()) {
                (IpAddr::V4(p), IpAddr::V4(a)) => prefix_eq(&p.octets(), &a.octets(), self.len),
                (IpAddr::V6(p), IpAddr::V6(a)) => prefix_eq(&p.octets(), &a.octets(), self.len),
                _ => false,
            };
        port_ok && addr_ok
    }
}

/// `a` and `b` agree on their first `len` bits.
fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let (whole, rest) = (usize::from(len / 8), len % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

/// Splits `net[:ports]`; an IPv6 address is bracketed, so the port colon is the one after `]`.
fn split_ports(s: &str) -> Result<(&str, Option<&str>), String> {
    if s.is_empty() {
        return Err("empty".into());
    }
    if s.starts_with('[') {
        let close = s.find(']').ok_or("no closing ']'")?;
        let after = &s[close + 1..];
        // `[x::]/len:ports`: the length sits between `]` and the port colon.
        return match after.find(':') {
            Some(i) => Ok((&s[..close + 1 + i], Some(&after[i + 1..]))),
            None => Ok((s, None)),
        };
    }
    if s.matches(':').count() > 1 {
        return Err("an IPv6 address goes in [], e.g. [2001:db8::]/32:443".into());
    }
    match s.split_once(':') {
        Some((n, p)) => Ok((n, Some(p))),
        None => Ok((s, None)),
    }
}

fn parse_ports(p: &str) -> Result<(u16, u16), String> {
    let one = |x: &str| {
        x.parse::<u16>()
            .map_err(|_| format!("port '{x}' is not 0 to 65535"))
    };
    let (a, b) = match p.split_once('-') {
        Some((a, b)) => (one(a)?, one(b)?),
        None => (one(p)?, one(p)?),
    };
    if a > b {
        return Err(format!("port range {a}-{b} is empty (first > last)"));
    }
    Ok((a, b))
}

/// The allow and deny lists of a transparent ingress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestPolicy {
    pub allow: Vec<DestRule>,
    pub deny: Vec<DestRule>,
}

impl DestPolicy {
    /// Parses both lists; errors name `allow_key` or `deny_key`.
    pub fn parse(
        (allow_key, allow): (&str, &[String]),
        (deny_key, deny): (&str, &[String]),
    ) -> Result<DestPolicy, String> {
        let list = |k: &str, v: &[String]| {
            v.iter()
                .map(|s| DestRule::parse(k, s))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(DestPolicy {
            allow: list(allow_key, allow)?,
            deny: list(deny_key, deny)?,
        })
    }

    /// Deny wins; an empty allow list allows every destination not denied.
    pub fn permits(&self, d: SocketAddr) -> bool {
        !self.deny.iter().any(|r| r.matches(d))
            && (self.allow.is_empty() || self.allow.iter().any(|r| r.matches(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_and_ports_match_as_written() {
        let r = DestRule::parse("--transparent-allow", "10.1.0.0/16:8000-8099").unwrap();
        assert!(r.matches(sa("10.1.200.3:8000")) && r.matches(sa("10.1.0.1:8099")));
        assert!(!r.matches(sa("10.2.0.1:8000")) && !r.matches(sa("10.1.0.1:8100")));
        let r = DestRule::parse("k", "192.168.1.7").unwrap();
        assert!(r.matches(sa("192.168.1.7:1")) && !r.matches(sa("192.168.1.6:1")));
        let r = DestRule::parse("k", "10.0.0.0/9").unwrap();
        assert!(r.matches(sa("10.127.255.255:5")) && !r.matches(sa("10.128.0.0:5")));
        let r = DestRule::parse("k", "[2001:db8::]/32:443").unwrap();
        assert!(r.matches(sa("[2001:db8:1::5]:443")) && !r.matches(sa("[2001:db9::]:443")));
        assert!(
            !r.matches(sa("10.0.0.1:443")),
            "an IPv6 prefix is not an IPv4 one"
        );
        let r = DestRule::parse("k", "*:53").unwrap();
        assert!(r.matches(sa("1.2.3.4:53")) && r.matches(sa("[::1]:53")));
        assert!(!r.matches(sa("1.2.3.4:54")));
        let r = DestRule::parse("k", "0.0.0.0/0").unwrap();
        assert!(r.matches(sa("255.1.2.3:9")) && !r.matches(sa("[::1]:9")));
    }

    #[test]
    fn deny_wins_and_an_empty_allow_list_allows_the_rest() {
        let p = DestPolicy::parse(
            ("a", &["10.0.0.0/8".into()]),
            ("d", &["10.9.0.0/16".into(), "*:25".into()]),
        )
        .unwrap();
        assert!(p.permits(sa("10.1.1.1:80")));
        assert!(!p.permits(sa("10.9.1.1:80")), "denied prefix");
        assert!(!p.permits(sa("10.1.1.1:25")), "denied port");
        assert!(!p.permits(sa("11.1.1.1:80")), "not in the allow list");
        let open = DestPolicy::parse(("a", &[]), ("d", &["*:25".into()])).unwrap();
        assert!(open.permits(sa("11.1.1.1:80")) && !open.permits(sa("11.1.1.1:25")));
    }

    #[test]
    fn bad_entries_name_the_key_the_value_and_the_form() {
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.0/x",
            "300.1.1.1",
            "10.0.0.1:70000",
            "10.0.0.1:90-80",
            "10.0.0.1:",
            "[2001:db8::/32",
            "[zz::]/8",
            "2001:db8::/32",
            "host.example:80",
        ] {
            let e = DestRule::parse("--transparent-deny", bad).unwrap_err();
            assert!(
                e.contains("--transparent-deny")
                    && e.contains(&format!("'{bad}'"))
                    && e.contains("PREFIX"),
                "{bad}: {e}"
            );
        }
    }
}
