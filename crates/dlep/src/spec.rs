//! The text forms a user gives: where the modem is (`ADDR[:PORT]` or `discover`) and which
//! peer address a destination stands for (`MAC=IP`). Shared by `aerotp`'s `--dlep` flags and
//! the gateways' `dlep`/`dlep_map` configuration keys; errors name what is expected.

use std::net::{IpAddr, SocketAddr};

use crate::discovery::DLEP_PORT;
use crate::{ClientConfig, Discovery, Mac, Target};

/// What to say when a modem address is not understood.
const TARGET_FORMS: &str = "give the modem's IP address with an optional TCP port (default \
    854), e.g. 192.0.2.1, 192.0.2.1:854, fe80::1 or [fe80::1]:854, or `discover` to find it \
    with DLEP Peer Discovery (multicast 224.0.0.117:854)";

/// The client settings for `s`: `discover` (Peer Discovery on 224.0.0.117:854, the defaults of
/// [`Discovery`]), or an IPv4 or IPv6 address with an optional port (854 when absent; IPv6
/// with a port in brackets).
pub fn parse_target(s: &str) -> Result<ClientConfig, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("discover") {
        return Ok(ClientConfig::discover(Discovery::default()));
    }
    let addr = if let Ok(ip) = t.parse::<IpAddr>() {
        SocketAddr::new(ip, DLEP_PORT)
    } else if let Ok(a) = t.parse::<SocketAddr>() {
        a
    } else if let Some(ip) = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.parse::<IpAddr>().ok())
    {
        SocketAddr::new(ip, DLEP_PORT)
    } else {
        return Err(format!("'{s}' is not a modem address: {TARGET_FORMS}"));
    };
    if addr.port() == 0 {
        return Err(format!(
            "'{s}': port 0 is not a port to connect to: {TARGET_FORMS}"
        ));
    }
    if addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(format!(
            "'{s}': {} is not a modem's own address: {TARGET_FORMS}",
            addr.ip()
        ));
    }
    Ok(ClientConfig::connect(addr))
}

/// The text [`parse_target`] reads back to the same target: `discover` for the default
/// discovery, else the address and port.
pub fn target_text(cfg: &ClientConfig) -> String {
    match &cfg.target {
        Target::Connect(a) => a.to_string(),
        Target::Discover(_) => "discover".to_string(),
    }
}

/// One `MAC=IP` mapping: the destination the modem names by `MAC` (six hex pairs separated by
/// colons, or eight for an EUI-64) is the AeroTP peer at `IP`.
pub fn parse_mapping(s: &str) -> Result<(Mac, IpAddr), String> {
    let Some((m, ip)) = s.split_once('=') else {
        return Err(format!(
            "'{s}' is not a mapping: give MAC=IP, the destination's MAC address as the modem \
             reports it and the AeroTP peer's IP address, e.g. 00:11:22:33:44:55=10.0.0.2"
        ));
    };
    let mac = m.trim().parse::<Mac>().map_err(|_| {
        format!(
            "'{s}': the MAC address '{}' is not one: give six hex pairs separated by colons, \
             e.g. 00:11:22:33:44:55 (eight for an EUI-64)",
            m.trim()
        )
    })?;
    let ip = ip.trim().parse::<IpAddr>().map_err(|_| {
        format!(
            "'{s}': '{}' is not an IP address: give the AeroTP peer's address without a port, \
             e.g. 10.0.0.2 or fe80::2",
            ip.trim()
        )
    })?;
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(format!(
            "'{s}': {ip} is not a peer's address: give the address AeroTP sends to"
        ));
    }
    Ok((mac, ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(s: &str) -> SocketAddr {
        match parse_target(s).unwrap().target {
            Target::Connect(a) => a,
            t => panic!("{s}: {t:?}"),
        }
    }

    #[test]
    fn targets_with_and_without_a_port() {
        assert_eq!(connect("192.0.2.1"), "192.0.2.1:854".parse().unwrap());
        assert_eq!(
            connect(" 192.0.2.1:9854 "),
            "192.0.2.1:9854".parse().unwrap()
        );
        assert_eq!(connect("fe80::1"), "[fe80::1]:854".parse().unwrap());
        assert_eq!(connect("[fe80::1]"), "[fe80::1]:854".parse().unwrap());
        assert_eq!(connect("[fe80::1]:1000"), "[fe80::1]:1000".parse().unwrap());
        let d = parse_target("discover").unwrap();
        assert_eq!(d, ClientConfig::discover(Discovery::default()));
        assert_eq!(parse_target("DISCOVER").unwrap(), d);
        for s in ["discover", "192.0.2.1:854", "[fe80::1]:1000"] {
            assert_eq!(target_text(&parse_target(s).unwrap()), s);
        }
    }

    #[test]
    fn bad_targets_say_what_is_expected() {
        for bad in [
            "",
            "modem",
            "192.0.2.1:",
            "192.0.2.1:70000",
            "192.0.2.1:x",
            "192.0.2",
            "fe80::1:854:x",
            "discovery",
        ] {
            let e = parse_target(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
            assert!(
                e.contains("e.g. 192.0.2.1") && e.contains("discover"),
                "{e}"
            );
        }
        let e = parse_target("192.0.2.1:0").unwrap_err();
        assert!(e.contains("port 0"), "{e}");
        for bad in ["0.0.0.0", "224.0.0.117", "[::]:854"] {
            let e = parse_target(bad).unwrap_err();
            assert!(e.contains("not a modem's own address"), "{bad}: {e}");
        }
    }

    #[test]
    fn mappings_and_their_errors() {
        let (m, ip) = parse_mapping("00:11:22:33:44:AB=10.0.0.2").unwrap();
        assert_eq!(m, Mac::eui48([0, 0x11, 0x22, 0x33, 0x44, 0xab]));
        assert_eq!(ip, IpAddr::from([10, 0, 0, 2]));
        let (m, ip) = parse_mapping(" 01:02:03:04:05:06:07:08 = fe80::2 ").unwrap();
        assert_eq!(m, Mac::eui64([1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(ip, "fe80::2".parse::<IpAddr>().unwrap());

        let e = parse_mapping("00:11:22:33:44:55").unwrap_err();
        assert!(e.contains("give MAC=IP"), "{e}");
        for bad in [
            "00:11:22:33:44=10.0.0.2",
            "zz:11:22:33:44:55=10.0.0.2",
            "=10.0.0.2",
        ] {
            let e = parse_mapping(bad).unwrap_err();
            assert!(e.contains("the MAC address"), "{bad}: {e}");
            assert!(e.contains("e.g. 00:11:22:33:44:55"), "{e}");
        }
        for bad in [
            "00:11:22:33:44:55=10.0.0",
            "00:11:22:33:44:55=10.0.0.2:47000",
            "00:11:22:33:44:55=",
        ] {
            let e = parse_mapping(bad).unwrap_err();
            assert!(e.contains("is not an IP address"), "{bad}: {e}");
        }
        let e = parse_mapping("00:11:22:33:44:55=0.0.0.0").unwrap_err();
        assert!(e.contains("not a peer's address"), "{e}");
    }
}
