//! Tests of `aerotp gw`'s flags: each role's own, the rules, transparent interception.
use super::*;

fn parse(args: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("gw").chain(args.iter().copied()))
}

#[test]
fn a_flag_of_the_other_role_is_an_error() {
    for args in [
        &[
            "egress",
            "--listen",
            "127.0.0.1:9000",
            "--tcp-listen",
            "127.0.0.1:80",
        ][..],
        &[
            "egress",
            "--listen",
            "127.0.0.1:9000",
            "--peer",
            "127.0.0.1:1",
        ],
        &["egress", "--listen", "127.0.0.1:9000", "--mode", "reliable"],
        &[
            "ingress",
            "--peer",
            "127.0.0.1:9000",
            "--allow",
            "127.0.0.1:80",
        ],
        &[
            "ingress",
            "--peer",
            "127.0.0.1:9000",
            "--tcp-connect",
            "127.0.0.1:80",
        ],
    ] {
        let e = parse(args).expect_err(&args.join(" "));
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
        assert!(e.to_string().contains(args[3]), "{e}");
    }
    assert!(parse(&["egress", "--listen", "127.0.0.1:9000", "--fec", "auto"]).is_ok());
}

#[test]
fn help_lists_only_the_role_s_flags() {
    let help = |role: &str| parse(&[role, "--help"]).unwrap_err().to_string();
    let (i, e) = (help("ingress"), help("egress"));
    for f in [
        "--peer",
        "--tcp-listen",
        "--udp-listen",
        "--mode",
        "--class",
    ] {
        assert!(i.contains(f) && !e.contains(f), "{f}");
    }
    for f in ["--listen ", "--tcp-connect", "--udp-connect", "--allow"] {
        assert!(e.contains(f) && !i.contains(f), "{f}");
    }
    for f in ["--fec", "--rate", "--metrics", "--config"] {
        assert!(e.contains(f) && i.contains(f), "{f}");
    }
}

#[test]
fn rules_flags_are_checked_and_errors_name_the_flag() {
    let rules = |extra: &[&str]| -> Result<aerotp_gw::transparent::RuleSpec> {
        let mut v = vec!["rules", "print"];
        v.extend_from_slice(extra);
        match parse(&v)?.cmd {
            Cmd::Rules(r) => r.spec(),
            _ => panic!("rules"),
        }
    };
    let s = rules(&["--iif", "veth1", "--tcp-port", "7400", "--mark", "0x10"]).unwrap();
    assert_eq!((s.mark, s.tcp_port, s.udp_port), (0x10, Some(7400), None));
    assert!(s.print().contains("tproxy ip to :7400 meta mark set 0x10"));
    for (args, want) in [
        (&["--tcp-port", "7400"][..], "--iif"),
        (&["--iif", "e", "--tcp-port", "70000"], "--tcp-port"),
        (&["--iif", "e", "--udp-port", "x"], "--udp-port"),
        (
            &["--iif", "e", "--tcp-port", "1", "--mark", "0xzz"],
            "--mark",
        ),
        (&["--iif", "e"], "--tcp-port"),
        (
            &["--iif", "e", "--tcp-port", "1", "--exclude", "10.0.0.0/33"],
            "--exclude '10.0.0.0/33'",
        ),
        (
            &["--iif", "e", "--tcp-port", "1", "--route-table", "255"],
            "--route-table '255'",
        ),
        (&["--iif", "e b", "--tcp-port", "1"], "--iif 'e b'"),
    ] {
        let e = format!("{:#}", rules(args).unwrap_err());
        assert!(e.contains(want), "{args:?}: want {want}: {e}");
    }
}

#[test]
fn transparent_flags_reach_the_settings_and_bad_ones_are_named() {
    let ingress = |extra: &[&str]| {
        let mut v = vec!["ingress", "--peer", "127.0.0.1:1"];
        v.extend_from_slice(extra);
        match parse(&v).unwrap().cmd {
            Cmd::Ingress(a) => a.file_config().and_then(|c| c.settings()),
            _ => panic!("ingress"),
        }
    };
    let s = ingress(&[
        "--transparent-tcp",
        "0.0.0.0:7400",
        "--transparent-deny",
        "10.9.0.0/16",
        "--transparent-mode",
        "reliable",
    ])
    .unwrap();
    let t = s.transparent.expect("transparent settings");
    assert_eq!(t.tcp, Some("0.0.0.0:7400".parse().unwrap()));
    assert!(!t.policy.permits("10.9.1.1:80".parse().unwrap()));
    assert!(ingress(&[]).unwrap().transparent.is_none());
    let t = ingress(&[
        "--transparent-tun",
        "aetp0",
        "--transparent-mode",
        "reliable",
        "--transparent-tcp-class",
        "control=*:7100",
        "--transparent-tcp-class",
        "telemetry=10.77.0.0/16",
    ])
    .unwrap()
    .transparent
    .expect("transparent settings");
    let class = |d: &str| t.tcp_class(d.parse().unwrap()).name();
    assert_eq!(
        (class("10.77.0.2:7100"), class("10.77.0.2:7200")),
        ("control", "telemetry")
    );
    assert_eq!(class("10.1.0.2:7200"), "bulk");
    for (args, want) in [
        (&["--transparent-tcp", "nowhere"][..], "--transparent-tcp"),
        (&["--transparent-allow", "10.0.0.0/8"], "--transparent-tcp"),
        (
            &[
                "--transparent-tcp",
                "0.0.0.0:1",
                "--transparent-allow",
                "10.0.0.1:0-x",
            ],
            "--transparent-allow",
        ),
        (
            &["--transparent-tcp-class", "control=*:7100"],
            "--transparent-tcp-class) 'control=*:7100': classes of intercepted TCP",
        ),
        (
            &[
                "--transparent-tcp",
                "0.0.0.0:1",
                "--transparent-tcp-class",
                "top=*:7100",
            ],
            "unknown class 'top'",
        ),
    ] {
        let e = format!("{:#}", ingress(args).unwrap_err());
        assert!(e.contains(want), "{args:?}: want {want}: {e}");
    }
}

#[test]
fn flow_flags_without_a_flow_and_file_keys_of_the_other_role_are_errors() {
    let Cmd::Ingress(a) = parse(&["ingress", "--peer", "127.0.0.1:1", "--mode", "reliable"])
        .unwrap()
        .cmd
    else {
        panic!("ingress")
    };
    let e = format!("{:#}", a.file_config().unwrap_err());
    assert!(e.contains("--mode reliable"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("egress.toml");
    std::fs::write(&p, "listen = \"127.0.0.1:9000\"\npeer = \"127.0.0.1:1\"\n").unwrap();
    let Cmd::Egress(a) = parse(&["egress", "--config", p.to_str().unwrap()])
        .unwrap()
        .cmd
    else {
        panic!("egress")
    };
    let e = format!("{:#}", a.file_config().unwrap_err());
    assert!(e.contains("`peer`") && e.contains("ingress"), "{e}");
}

#[test]
fn rate_flags_reach_the_settings_and_the_start_line_says_which() {
    use aerotp_gw::config::{RateControl, DEFAULT_CAP_BPS};
    let egress = |extra: &[&str]| {
        let mut v = vec!["egress", "--listen", "127.0.0.1:0"];
        v.extend_from_slice(extra);
        match parse(&v).unwrap().cmd {
            Cmd::Egress(a) => a.file_config().and_then(|c| c.settings()),
            _ => panic!("egress"),
        }
    };
    let s = egress(&[]).unwrap();
    assert_eq!(
        (s.link.rate_control, s.link.rate),
        (RateControl::Discover, DEFAULT_CAP_BPS)
    );
    assert!(
        rate_line(&s).starts_with("rate discovered by reliable flows under their class's share of 5mbit (max_rate, default"),
        "{}",
        rate_line(&s)
    );
    let s = egress(&["--max-rate", "8mbit"]).unwrap();
    assert_eq!(
        (s.link.rate_control, s.link.rate),
        (RateControl::Discover, 8_000_000)
    );
    assert!(
        rate_line(&s).contains("share of 8mbit (max_rate);"),
        "{}",
        rate_line(&s)
    );
    let s = egress(&["--rate", "auto", "--max-rate", "2mbit"]).unwrap();
    assert_eq!(
        (s.link.rate_control, s.link.rate),
        (RateControl::Discover, 2_000_000)
    );
    let s = egress(&["--rate", "4.8mbit"]).unwrap();
    assert_eq!(
        (s.link.rate_control, s.link.rate),
        (RateControl::Fixed, 4_800_000)
    );
    assert_eq!(rate_line(&s), "rate 4800kbit fixed (rate), shared by class");
    let e = format!(
        "{:#}",
        egress(&["--rate", "4.8mbit", "--max-rate", "8mbit"]).unwrap_err()
    );
    assert!(e.contains("give one of them"), "{e}");
}
