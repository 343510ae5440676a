//! Tests of the gateway's configuration: files, flags, defaults and every refusal.
use super::*;

use aerotp_net::FecSetting;

#[test]
fn admission_keys_are_checked() {
    let base = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        ..FileConfig::default()
    };
    let s = base.clone().settings().unwrap();
    assert_eq!(
        (s.admission.setup_timeout, s.admission.max_half_open),
        (Duration::from_secs(30), 128)
    );
    let ok = FileConfig {
        setup_timeout: Some("5s".into()),
        max_half_open: Some(0),
        ..base.clone()
    };
    let s = ok.settings().unwrap();
    assert_eq!(
        (s.admission.setup_timeout, s.admission.max_half_open),
        (Duration::from_secs(5), 0)
    );
    for (t, n, want) in [
        (Some("0s"), None, "setup_timeout"),
        (Some("500ms"), None, "setup_timeout"),
        (Some("11min"), None, "setup_timeout"),
        (None, Some(5000), "max_half_open 5000"),
    ] {
        let bad = FileConfig {
            setup_timeout: t.map(str::to_string),
            max_half_open: n,
            ..base.clone()
        };
        let e = bad.settings().unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn the_connection_cap_is_checked_and_bounds_the_half_open() {
    let base = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        ..FileConfig::default()
    };
    let s = base.clone().settings().unwrap();
    assert_eq!(
        (s.admission.max_connections, s.admission.max_half_open),
        (DEFAULT_MAX_CONNECTIONS, 128)
    );
    let with = |c: Option<usize>, h: Option<usize>| FileConfig {
        max_connections: c,
        max_half_open: h,
        ..base.clone()
    };
    let s = with(Some(64), None).settings().unwrap();
    assert_eq!(
        (s.admission.max_connections, s.admission.max_half_open),
        (64, 64)
    );
    let s = with(Some(65_536), Some(5000)).settings().unwrap();
    assert_eq!(
        (s.admission.max_connections, s.admission.max_half_open),
        (65_536, 5000)
    );
    for (c, h, want) in [
        (Some(0), None, "max_connections 0: give 1 to 65536"),
        (Some(65_537), None, "max_connections 65537"),
        (Some(100), Some(101), "max_half_open 101: give 0 to 100"),
    ] {
        let e = with(c, h).settings().unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn an_idle_timeout_under_a_second_is_refused() {
    let base = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        ..FileConfig::default()
    };
    for (t, want) in [
        ("500ms", "idle_timeout 500ms: give at least 1s"),
        ("0s", "idle_timeout '0s'"),
        ("soon", "idle_timeout"),
    ] {
        let bad = FileConfig {
            idle_timeout: Some(t.into()),
            ..base.clone()
        };
        let e = bad.settings().unwrap_err().to_string();
        assert!(e.contains(want), "{t}: {e}");
    }
    let ok = FileConfig {
        idle_timeout: Some("1s".into()),
        ..base
    };
    assert_eq!(ok.settings().unwrap().timeouts.idle, Duration::from_secs(1));
}

fn flow(udp: bool, mode: Option<&str>, fec: Option<&str>) -> FlowSpec {
    let local = Some("127.0.0.1:0".to_string());
    FlowSpec {
        tcp_listen: if udp { None } else { local.clone() },
        udp_listen: if udp { local } else { None },
        mode: mode.map(String::from),
        fec: fec.map(String::from),
        ..Default::default()
    }
}

#[test]
fn erasure_per_flow_then_gateway_then_the_mode_default() {
    let mut udp = flow(true, Some("quasi-reliable"), None);
    udp.erasure = Some("1.25".into());
    udp.max_delay = Some("200ms".into());
    let f = FileConfig {
        peer: Some("127.0.0.1:9000".into()),
        erasure: Some("off".into()),
        flows: vec![udp, flow(true, Some("unreliable"), None)],
        ..Default::default()
    };
    let s = f.settings().unwrap();
    let r = &s.routes;
    assert_eq!(
        r[0].erasure.mode,
        Some(aerotp_net::ErasureMode::Ratio(1.25))
    );
    assert_eq!(r[0].erasure.max_delay, Some(Duration::from_millis(200)));
    assert_eq!(
        r[1].erasure.mode,
        Some(aerotp_net::ErasureMode::Off),
        "the gateway's"
    );
    assert_eq!(r[1].erasure.max_delay, None, "the mode's default");
    assert_eq!(
        FileConfig::default().settings().unwrap().coding.erasure,
        ErasureChoice::default()
    );
    for (key, bad) in [("erasure", "lots"), ("erasure", "0.5"), ("max_delay", "0s")] {
        let mut g = flow(true, Some("quasi-reliable"), None);
        match key {
            "erasure" => g.erasure = Some(bad.into()),
            _ => g.max_delay = Some(bad.into()),
        }
        let f = FileConfig {
            flows: vec![g],
            ..Default::default()
        };
        let e = format!("{:#}", f.settings().unwrap_err());
        assert!(e.contains(key) && e.contains(bad), "{key}={bad}: {e}");
    }
}

#[test]
fn fec_per_flow_then_gateway_then_auto() {
    let cfg = FileConfig {
        flows: vec![
            flow(false, None, None),
            flow(false, Some("reliable"), Some("p16")),
            flow(true, Some("quasi-reliable"), None),
            flow(true, None, Some("off")),
        ],
        ..Default::default()
    };
    let s = cfg.settings().unwrap();
    let fecs: Vec<FecSetting> = s.routes.iter().map(|r| r.fec).collect();
    assert_eq!(
        fecs,
        [
            FecSetting::Auto,
            FecSetting::Parity(16),
            FecSetting::Auto,
            FecSetting::Off
        ]
    );
    assert_eq!(s.coding.fec, FecSetting::Auto);

    let cfg = FileConfig {
        fec: Some("off".into()),
        ..cfg
    };
    let s = cfg.settings().unwrap();
    let fecs: Vec<FecSetting> = s.routes.iter().map(|r| r.fec).collect();
    assert_eq!(
        fecs,
        [
            FecSetting::Off,
            FecSetting::Parity(16),
            FecSetting::Off,
            FecSetting::Off
        ]
    );
    assert_eq!(s.coding.fec, FecSetting::Off);
}

#[test]
fn the_sample_config_is_a_valid_ingress_with_fec_auto() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gw/gateway.toml");
    let c = FileConfig::load(&p).unwrap();
    c.check_role(Role::Ingress).unwrap();
    let s = c.settings().unwrap();
    assert_eq!(s.routes.len(), 3);
    assert!(s.routes.iter().all(|r| r.fec == FecSetting::Auto));
    // The commented egress part, uncommented, is a valid egress.
    let text = std::fs::read_to_string(&p).unwrap();
    let egress: String = text
        .lines()
        .skip_while(|l| !l.starts_with("# ---- egress"))
        .skip(1)
        .map(|l| format!("{}\n", l.trim_start_matches("# ")))
        .collect();
    let e: FileConfig = toml::from_str(&egress).unwrap();
    e.check_role(Role::Egress).unwrap();
    assert_eq!(e.settings().unwrap().coding.fec, FecSetting::Auto);
}

#[test]
fn the_debian_packages_configs_are_a_valid_ingress_and_egress_storing_under_var_lib_aerotp() {
    // packaging/etc/: installed as /etc/aerotp/ by scripts/package.sh (docs/packaging.md).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/etc");
    for (file, role) in [("ingress", Role::Ingress), ("egress", Role::Egress)] {
        let c = FileConfig::load(&dir.join(format!("{file}.toml"))).unwrap();
        c.check_role(role).unwrap();
        let s = c.settings().unwrap();
        let store = s.custody.store.as_ref().map(|p| p.display().to_string());
        assert_eq!(store, Some(format!("/var/lib/aerotp/{file}")), "{file}");
    }
}

#[test]
fn a_transparent_table_is_an_ingress_setting_checked_key_by_key() {
    let text = "[transparent]\ntcp_listen = \"0.0.0.0:7400\"\ndeny = [\"*:25\"]\n";
    let c: FileConfig = toml::from_str(text).unwrap();
    c.check_role(Role::Ingress).unwrap();
    let t = c
        .settings()
        .unwrap()
        .transparent
        .expect("transparent settings");
    assert_eq!(t.tcp, Some("0.0.0.0:7400".parse().unwrap()));
    assert!(!t.policy.permits("10.0.0.1:25".parse().unwrap()));
    let e = format!("{:#}", c.check_role(Role::Egress).unwrap_err());
    assert!(e.contains("`transparent`") && e.contains("ingress"), "{e}");
    let e = toml::from_str::<FileConfig>("[transparent]\ntcp_port = 1\n").unwrap_err();
    assert!(e.to_string().contains("tcp_port"), "{e}");
    let bad: FileConfig =
        toml::from_str("[transparent]\ntcp_listen = \"0.0.0.0:7400\"\nallow = [\"10.0.0.0/99\"]\n")
            .unwrap();
    let e = format!("{:#}", bad.settings().unwrap_err());
    assert!(
        e.contains("transparent.allow") && e.contains("10.0.0.0/99"),
        "{e}"
    );
}

#[test]
fn a_key_of_the_other_role_is_an_error_naming_it() {
    let ingress_only = FileConfig {
        flows: vec![flow(false, None, None)],
        ..Default::default()
    };
    assert!(ingress_only.check_role(Role::Ingress).is_ok());
    let e = format!("{:#}", ingress_only.check_role(Role::Egress).unwrap_err());
    assert!(e.contains("`flow`") && e.contains("ingress"), "{e}");
    let egress_only = FileConfig {
        allow: vec!["10.0.0.1:80".into()],
        ..Default::default()
    };
    assert!(egress_only.check_role(Role::Egress).is_ok());
    let e = format!("{:#}", egress_only.check_role(Role::Ingress).unwrap_err());
    assert!(e.contains("`allow`") && e.contains("egress"), "{e}");
}

#[test]
fn mtu_and_rate_out_of_range_name_the_value_and_the_range() {
    let c = FileConfig {
        mtu: Some(100),
        ..Default::default()
    };
    let e = format!("{:#}", c.settings().unwrap_err());
    assert!(e.contains("mtu 100") && e.contains("576"), "{e}");
    let c = FileConfig {
        rate: Some("500bit".into()),
        ..Default::default()
    };
    let e = format!("{:#}", c.settings().unwrap_err());
    assert!(e.contains("500") && e.contains("1000 b/s"), "{e}");
}

#[test]
fn flags_win_over_the_file_and_bad_values_say_which_key() {
    let flags = FileConfig {
        fec: Some("p8".into()),
        ..Default::default()
    };
    let file = FileConfig {
        fec: Some("auto".into()),
        rate: Some("2mbit".into()),
        ..Default::default()
    };
    let s = flags.merge(file).settings().unwrap();
    assert_eq!(
        (s.coding.fec, s.link.rate),
        (FecSetting::Parity(8), 2_000_000)
    );

    let bad = FileConfig {
        fec: Some("lots".into()),
        ..Default::default()
    };
    let e = format!("{:#}", bad.settings().unwrap_err());
    assert!(e.contains("fec"), "{e}");
    let bad = FileConfig {
        flows: vec![FlowSpec {
            tcp_listen: Some("127.0.0.1:0".into()),
            mode: Some("quasi-reliable".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = format!("{:#}", bad.settings().unwrap_err());
    assert!(e.contains("not offered for TCP flows"), "{e}");
}

#[test]
fn sizes_follow_the_shared_rule_and_errors_name_the_key() {
    let c = FileConfig {
        store_capacity: Some("1mb".into()),
        window: Some("64KiB".into()),
        ..Default::default()
    };
    let s = c.settings().unwrap();
    assert_eq!(
        (s.custody.store_capacity, s.custody.window),
        (1_000_000, 65_536)
    );
    for (key, bad) in [
        ("store_capacity", "0"),
        ("window", "1.5B"),
        ("window", "8Mbit"),
    ] {
        let mut c = FileConfig::default();
        if key == "window" {
            c.window = Some(bad.into());
        } else {
            c.store_capacity = Some(bad.into());
        }
        let e = format!("{:#}", c.settings().unwrap_err());
        assert!(e.contains(key) && e.contains(bad), "{e}");
    }
}

#[test]
fn key_file_and_encrypt_keys_are_read_and_checked() {
    let t: FileConfig =
        toml::from_str("key_file = \"/etc/aerotp/gw.key\"\nencrypt = true\n").unwrap();
    let s = t.settings().unwrap();
    assert_eq!(
        s.auth.key_file.as_deref(),
        Some(std::path::Path::new("/etc/aerotp/gw.key"))
    );
    assert!(s.auth.encrypt);
    let c = FileConfig {
        encrypt: Some(true),
        ..Default::default()
    };
    let e = format!("{:#}", c.settings().unwrap_err());
    assert!(e.contains("encrypt") && e.contains("key_file"), "{e}");
}

#[tokio::test]
async fn a_bad_key_file_stops_the_gateway_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.key");
    std::fs::write(&path, "nonsense").unwrap();
    let c = FileConfig {
        key_file: Some(path.clone()),
        ..Default::default()
    };
    let s = c.settings().unwrap();
    let lo = "127.0.0.1:0".parse().unwrap();
    // Created 644 by `write`: refused for its permissions first.
    let e = format!("{:#}", crate::ctx::bind_endpoint(&s, lo).unwrap_err());
    assert!(e.contains("key_file") && e.contains("chmod 600"), "{e}");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = format!("{:#}", crate::ctx::bind_endpoint(&s, lo).unwrap_err());
    assert!(
        e.contains("key_file") && e.contains("not a key file"),
        "{e}"
    );
    aerotp_net::keyfile::write(&path, aerotp_net::keyfile::WriteMode::Force).unwrap();
    let ep = crate::ctx::bind_endpoint(&s, lo).unwrap();
    assert!(ep.authenticated());
}

#[test]
fn peer_paths_belong_to_an_ingress_with_a_peer_and_are_bounded() {
    let base = FileConfig {
        peer: Some("10.77.0.2:47000".into()),
        peer_paths: vec!["10.77.1.2:47000".into(), "10.77.2.2:47000".into()],
        ..FileConfig::default()
    };
    base.check_role(Role::Ingress).unwrap();
    let s = base.clone().settings().unwrap();
    assert_eq!(
        s.paths.peer_paths,
        ["10.77.1.2:47000", "10.77.2.2:47000"]
            .map(|a| PathAddr::from(a.parse::<SocketAddr>().unwrap()))
            .to_vec()
    );
    let egress = FileConfig {
        peer: None,
        ..base.clone()
    };
    let e = format!("{:#}", egress.check_role(Role::Egress).unwrap_err());
    assert!(
        e.contains("`peer_paths` is a setting of the ingress"),
        "{e}"
    );
    let no_peer = FileConfig {
        peer: None,
        ..base.clone()
    };
    let e = no_peer.settings().unwrap_err().to_string();
    assert!(e.contains("peer_paths needs peer"), "{e}");
    let many = FileConfig {
        peer_paths: (1..=8).map(|i| format!("10.77.{i}.2:47000")).collect(),
        ..base.clone()
    };
    let e = many.settings().unwrap_err().to_string();
    assert!(e.contains("at most 8 paths"), "{e}");
    let bad = FileConfig {
        peer_paths: vec!["not an address".into()],
        ..base
    };
    assert!(bad
        .settings()
        .unwrap_err()
        .to_string()
        .contains("peer_paths"));
    // From TOML too.
    let f: FileConfig = toml::from_str(
        r#"
        peer = "10.77.0.2:47000"
        peer_paths = ["10.77.1.2:47000"]
        "#,
    )
    .unwrap();
    assert_eq!(f.peer_paths.len(), 1);
}

#[test]
fn a_path_may_name_the_local_address_it_leaves_from() {
    let f: FileConfig = toml::from_str(
        r#"
        peer = "10.77.0.2:47000"
        peer_from = "10.77.0.1"
        peer_paths = ["10.77.1.1=10.77.1.2:47000", "10.77.2.2:47000"]
        "#,
    )
    .unwrap();
    f.check_role(Role::Ingress).unwrap();
    let s = f.clone().settings().unwrap();
    let a = |x: &str| x.parse::<SocketAddr>().unwrap();
    let ip = |x: &str| x.parse::<std::net::IpAddr>().unwrap();
    assert_eq!(
        s.paths.peer_paths,
        [
            PathAddr::new(Some(ip("10.77.1.1")), a("10.77.1.2:47000")),
            a("10.77.2.2:47000").into()
        ]
    );
    assert_eq!(
        s.paths.path_sources,
        [
            (a("10.77.1.2:47000"), ip("10.77.1.1")),
            (a("10.77.0.2:47000"), ip("10.77.0.1"))
        ]
    );
    let only_from = FileConfig {
        peer_from: f.peer_from.clone(),
        ..FileConfig::default()
    };
    let e = format!("{:#}", only_from.check_role(Role::Egress).unwrap_err());
    assert!(e.contains("`peer_from` is a setting of the ingress"), "{e}");
    for (paths, from, want) in [
        (vec!["garbage=10.77.1.2:47000"], None, "not an IP address"),
        (vec!["10.77.0.2:47000"], None, "already a path"),
        (
            vec!["10.77.3.1=10.77.1.2:47000", "10.77.3.1=10.77.1.2:47000"],
            None,
            "already a path",
        ),
        // The first path again: `peer` from `peer_from`.
        (
            vec!["10.77.0.1=10.77.0.2:47000"],
            Some("10.77.0.1"),
            "already a path",
        ),
        (vec!["::1=10.77.1.2:47000"], None, "not of the family"),
        (vec![], Some("fe80::1"), "not of the family"),
        (vec![], Some("10.77.0.1:9"), "peer_from"),
    ] {
        let bad = FileConfig {
            peer_paths: paths.iter().map(|p| p.to_string()).collect(),
            peer_from: from.map(String::from),
            ..f.clone()
        };
        let e = format!("{:#}", bad.settings().unwrap_err());
        assert!(e.contains(want), "{paths:?} {from:?}: {e}");
    }
    // Two radios to the egress's one address: two paths, told apart by the local address.
    let one_egress = FileConfig {
        peer_paths: vec!["10.77.1.1=10.77.0.2:47000".into()],
        ..f.clone()
    };
    assert_eq!(
        one_egress.settings().unwrap().paths.peer_paths,
        [PathAddr::new(Some(ip("10.77.1.1")), a("10.77.0.2:47000"))]
    );
    let no_peer = FileConfig {
        peer: None,
        peer_paths: vec![],
        ..f
    };
    let e = format!("{:#}", no_peer.settings().unwrap_err());
    assert!(e.contains("peer_from needs peer"), "{e}");
}

#[tokio::test]
async fn a_local_address_the_host_does_not_have_stops_the_gateway_at_start() {
    let f = FileConfig {
        peer: Some("127.0.0.1:47000".into()),
        peer_paths: vec!["203.0.113.9=127.0.0.2:47000".into()],
        ..FileConfig::default()
    };
    let s = f.settings().unwrap();
    let e = crate::ctx::bind_endpoint(&s, s.paths.bind).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("203.0.113.9") && e.contains("not an address of this host"),
        "{e}"
    );
}

#[test]
fn the_tun_window_follows_the_rate_unless_given() {
    let at = |rate: &str, window: Option<&str>| {
        FileConfig {
            rate: Some(rate.into()),
            window: window.map(String::from),
            ..FileConfig::default()
        }
        .settings()
        .unwrap()
        .tun_window()
    };
    // Two seconds of the link, within 256 KiB and 16 MiB.
    assert_eq!(at("5mbit", None), 1_250_000);
    assert_eq!(at("100kbit", None), 256 << 10);
    assert_eq!(at("1gbit", None), 16 << 20);
    // Given: as given, whatever the rate.
    assert_eq!(at("5mbit", Some("64KiB")), 64 << 10);
    assert_eq!(at("1gbit", Some("256KiB")), 256 << 10);
}

#[test]
fn the_dscp_key_is_a_plan_over_the_standard_one() {
    let base = FileConfig {
        listen: Some("127.0.0.1:0".into()),
        ..FileConfig::default()
    };
    let s = base.clone().settings().unwrap();
    assert_eq!(s.link.dscp, aerotp_net::DscpPlan::STANDARD);
    let set = |v: &str| {
        FileConfig {
            dscp: Some(v.into()),
            ..base.clone()
        }
        .settings()
    };
    let s = set("bulk=af11").unwrap();
    assert_eq!(s.link.dscp.dscp(crate::frame::Class::Bulk).value(), 10);
    assert_eq!(set("off").unwrap().link.dscp, aerotp_net::DscpPlan::OFF);
    let e = set("bulk=af99").unwrap_err().to_string();
    assert!(
        e.contains("dscp (--dscp or the `dscp` key)") && e.contains("not a DSCP"),
        "{e}"
    );
}
