//! Tests of the keys a file gives as the flags do (issue 41 item 3): capture and trace,
//! a rate as text or an integer, addresses without a port, two flows on one port, and the
//! rates of the sample and packaged configurations.
use super::*;

#[test]
fn capture_and_trace_keys_are_read_from_the_file_and_flags_win() {
    let file: FileConfig = toml::from_str(
        "pcap = \"/tmp/gw.pcapng\"\npcap_queue = \"64MB\"\nqlog = \"/tmp/gw-qlog\"\n",
    )
    .unwrap();
    let s = file.clone().settings().unwrap();
    assert_eq!(
        s.recording.pcap.as_deref(),
        Some(std::path::Path::new("/tmp/gw.pcapng"))
    );
    assert_eq!(s.recording.pcap_queue, 64_000_000);
    assert_eq!(
        s.recording.qlog.as_deref(),
        Some(std::path::Path::new("/tmp/gw-qlog"))
    );
    let flags = FileConfig {
        pcap: Some("/tmp/flag.pcapng".into()),
        pcap_queue: Some("1MiB".into()),
        ..FileConfig::default()
    };
    let s = flags.merge(file).settings().unwrap();
    assert_eq!(
        s.recording.pcap.as_deref(),
        Some(std::path::Path::new("/tmp/flag.pcapng"))
    );
    assert_eq!(s.recording.pcap_queue, 1 << 20);
    assert_eq!(
        s.recording.qlog.as_deref(),
        Some(std::path::Path::new("/tmp/gw-qlog"))
    );
    // Unset: no capture, no trace, the flag's default queue.
    let s = FileConfig::default().settings().unwrap();
    assert_eq!(
        (s.recording.pcap, s.recording.pcap_queue, s.recording.qlog),
        (None, 8 << 20, None)
    );
    let bad = FileConfig {
        pcap_queue: Some("lots".into()),
        ..FileConfig::default()
    };
    let e = format!("{:#}", bad.settings().unwrap_err());
    assert!(e.contains("pcap_queue") && e.contains("lots"), "{e}");
}

#[test]
fn a_rate_key_takes_text_or_an_integer_of_bits_per_second() {
    let rate =
        |toml: &str| toml::from_str::<FileConfig>(toml).map(|c| c.settings().map(|s| s.link.rate));
    assert_eq!(rate("rate = 5000000").unwrap().unwrap(), 5_000_000);
    assert_eq!(rate("rate = 4.8e6").unwrap().unwrap(), 4_800_000);
    assert_eq!(rate("rate = \"4.8mbit\"").unwrap().unwrap(), 4_800_000);
    // An integer goes through the same checks as the text.
    let e = format!("{:#}", rate("rate = 500").unwrap().unwrap_err());
    assert!(e.contains("500") && e.contains("1000 b/s"), "{e}");
    for bad in ["rate = -5", "rate = 2.5", "rate = true"] {
        let e = rate(bad).unwrap_err().to_string();
        assert!(
            e.contains("rate") && e.contains("integer of bits per second"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn an_address_without_a_port_says_so_with_an_example() {
    for (key, v) in [
        ("peer", "127.0.0.1"),
        ("peer", "egress.example"),
        ("peer", "::1"),
        ("peer", "[::1]"),
        ("listen", "10.77.0.2"),
        ("metrics", "127.0.0.1"),
    ] {
        let c = match key {
            "peer" => FileConfig {
                peer: Some(v.into()),
                ..FileConfig::default()
            },
            "listen" => FileConfig {
                listen: Some(v.into()),
                ..FileConfig::default()
            },
            _ => FileConfig {
                metrics: Some(v.into()),
                ..FileConfig::default()
            },
        };
        let e = format!("{:#}", c.settings().unwrap_err());
        assert!(
            e.contains(&format!("{key} '{v}': no port")) && e.contains("e.g. 10.77.0.2:9000"),
            "{key} {v}: {e}"
        );
        assert!(!e.contains("cannot resolve"), "{e}");
    }
    let flow = FileConfig {
        flows: vec![FlowSpec {
            udp_listen: Some("127.0.0.1".into()),
            ..FlowSpec::default()
        }],
        ..FileConfig::default()
    };
    let e = format!("{:#}", flow.settings().unwrap_err());
    assert!(e.contains("udp_listen '127.0.0.1': no port"), "{e}");
    // With a port, a name that does not resolve is still said to be one.
    let c = FileConfig {
        peer: Some("no-such-host.invalid:9000".into()),
        ..FileConfig::default()
    };
    let e = format!("{:#}", c.settings().unwrap_err());
    assert!(
        e.contains("cannot resolve 'no-such-host.invalid:9000'"),
        "{e}"
    );
}

#[test]
fn two_flows_on_one_listen_port_are_refused_naming_both() {
    let tcp = |a: &str| FlowSpec {
        tcp_listen: Some(a.into()),
        ..FlowSpec::default()
    };
    let udp = |a: &str| FlowSpec {
        udp_listen: Some(a.into()),
        ..FlowSpec::default()
    };
    let with = |flows: Vec<FlowSpec>| {
        FileConfig {
            flows,
            ..FileConfig::default()
        }
        .settings()
    };
    for (flows, want) in [
        (
            vec![
                tcp("127.0.0.1:5000"),
                udp("127.0.0.1:5000"),
                tcp("127.0.0.1:5000"),
            ],
            "[[flow]] 1 (tcp_listen 127.0.0.1:5000) and [[flow]] 3 (tcp_listen 127.0.0.1:5000) \
             both listen on TCP port 5000",
        ),
        (
            vec![udp("0.0.0.0:14550"), udp("127.0.0.1:14550")],
            "[[flow]] 1 (udp_listen 0.0.0.0:14550) and [[flow]] 2 (udp_listen 127.0.0.1:14550) \
             both listen on UDP port 14550",
        ),
        (
            vec![tcp("127.0.0.1:8080"), tcp("[::]:8080")],
            "both listen on TCP port 8080",
        ),
    ] {
        let e = format!("{:#}", with(flows).unwrap_err());
        assert!(
            e.contains(want) && e.contains("give each flow its own port"),
            "{e}"
        );
    }
    // TCP and UDP on one port, two addresses of one port, port 0 (any free port), and an
    // IPv4 wildcard beside an IPv6 address: each binds.
    with(vec![tcp("127.0.0.1:5000"), udp("127.0.0.1:5000")]).unwrap();
    with(vec![tcp("127.0.0.1:5000"), tcp("127.0.0.2:5000")]).unwrap();
    with(vec![tcp("127.0.0.1:0"), tcp("127.0.0.1:0")]).unwrap();
    with(vec![tcp("0.0.0.0:5000"), tcp("[::1]:5000")]).unwrap();
}

#[test]
fn the_sample_and_packaged_configs_stay_under_the_link_rate_they_name() {
    // The sample and the packaged configs are for a 5 Mb/s air link: a fixed rate, or the cap
    // the flows that cannot discover are paced at, must stay a few per cent under it
    // (`--help`, docs/gateway.md §Rate), never at it.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for file in [
        "docs/gw/gateway.toml",
        "packaging/etc/ingress.toml",
        "packaging/etc/egress.toml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        // Commented keys too (the sample's egress part).
        let keys: String = text
            .lines()
            .map(|l| format!("{}\n", l.trim_start_matches("# ")))
            .filter(|l| l.starts_with("rate") || l.starts_with("max_rate"))
            .collect();
        assert!(!keys.is_empty(), "{file} sets no rate");
        for line in keys.lines() {
            let c: FileConfig = toml::from_str(line).unwrap();
            let rate = c.settings().unwrap().link.rate;
            assert!(
                (4_500_000..=4_900_000).contains(&rate),
                "{file}: {line}: not a few per cent under 5 Mb/s"
            );
        }
    }
}

#[test]
fn a_gateway_needs_a_key_file_or_insecure_and_not_both() {
    for role in [Role::Ingress, Role::Egress] {
        let e = format!(
            "{:#}",
            FileConfig::default()
                .settings()
                .unwrap()
                .require_key(role)
                .unwrap_err()
        );
        for needle in [
            "no key_file",
            "aerotp keygen /etc/aerotp/gw.key",
            "--key-file",
            "key_file = \"/etc/aerotp/gw.key\"",
            "--insecure",
            "insecure = true",
        ] {
            assert!(e.contains(needle), "{role}: no {needle:?} in {e}");
        }
        let other = if role == Role::Ingress {
            "egress"
        } else {
            "ingress"
        };
        assert!(
            e.contains(&format!("copy it to the {other} gateway")),
            "{e}"
        );
    }
    let insecure: FileConfig = toml::from_str("insecure = true\n").unwrap();
    let s = insecure.clone().settings().unwrap();
    assert!(s.auth.insecure);
    s.require_key(Role::Ingress).unwrap();
    let keyed: FileConfig = toml::from_str("key_file = \"/etc/aerotp/gw.key\"\n").unwrap();
    let s = keyed.clone().settings().unwrap();
    assert!(!s.auth.insecure);
    s.require_key(Role::Egress).unwrap();
    // Both (a flag over a file, say): refused, naming both, not one silently ignored.
    let e = format!("{:#}", insecure.merge(keyed).settings().unwrap_err());
    assert!(
        e.contains("insecure")
            && e.contains("key_file /etc/aerotp/gw.key")
            && e.contains("both set"),
        "{e}"
    );
}

#[test]
fn the_sample_and_packaged_configs_authenticate_with_a_key_under_etc_aerotp() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (file, role) in [
        ("docs/gw/gateway.toml", Role::Ingress),
        ("packaging/etc/ingress.toml", Role::Ingress),
        ("packaging/etc/egress.toml", Role::Egress),
    ] {
        let s = FileConfig::load(&root.join(file))
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(
            s.auth.key_file.as_deref(),
            Some(std::path::Path::new("/etc/aerotp/gw.key")),
            "{file}"
        );
        assert!(!s.auth.insecure, "{file}");
        s.require_key(role).unwrap();
    }
}
