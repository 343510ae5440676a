//! A failing command prints what went wrong as one message chain and exits non-zero (1 for
//! what is found bad when opened, 2 for the command line); it never prints a backtrace,
//! whatever RUST_BACKTRACE says, and writes nothing. The table test runs every flag of
//! `send`, `recv`, `link`, `sim`, `lab` and both gateway roles with its bad values.

use std::process::Command;

fn aerotp(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the aerotp binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn errors_are_one_message_without_a_backtrace() {
    let dir = std::env::temp_dir().join(format!("aerotp-errors-{}", std::process::id()));
    let pcap = dir.join("missing-dir").join("x.pcapng");
    let pcap = pcap.to_str().unwrap();
    for (args, needle) in [
        (
            vec![
                "sim",
                "--mode",
                "reliable",
                "--scenario",
                "/nonexistent/s.toml",
            ],
            "/nonexistent/s.toml",
        ),
        (
            vec!["sim", "--mode", "reliable", "--runs", "1", "--pcap", pcap],
            "x.pcapng",
        ),
    ] {
        let (code, err) = aerotp(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(!err.contains("backtrace"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!dir.exists(), "nothing written");
}

#[test]
fn bad_capture_and_metrics_values_are_refused_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("aerotp-badflags-{}", std::process::id()));
    let pcap = dir.join("x.pcapng");
    let pcap = pcap.to_str().unwrap();
    for (flag, value) in [
        ("--pcap-queue", "lots"),
        ("--pcap-queue", "-5"),
        ("--metrics", "not-an-address"),
        ("--metrics", "127.0.0.1"),
    ] {
        for cmd in ["send", "recv"] {
            let mut args = vec![cmd];
            if cmd == "send" {
                args.extend(["Cargo.toml", "--to", "127.0.0.1:9", "--mode", "reliable"]);
            } else {
                args.extend(["--listen", "127.0.0.1:0"]);
            }
            // FLAG=VALUE, so a value such as "-5" reaches the flag's parser.
            let both = format!("{flag}={value}");
            args.extend(["--pcap", pcap, both.as_str()]);
            let (code, err) = aerotp(&args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(flag) && err.contains(value), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
    assert!(!dir.exists(), "nothing written");
}

/// Runs `aerotp ARGS` in `cwd` (RUST_BACKTRACE=1), at most 5 s (a refusal takes
/// milliseconds; a command still running then accepted its flags): (exit status, stderr), the
/// status 0 if it had to be killed.
fn aerotp_in(cwd: &std::path::Path, args: &[String]) -> (i32, String) {
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .args(args)
        .current_dir(cwd)
        .env("RUST_BACKTRACE", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the aerotp binary runs");
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            return (0, String::from_utf8_lossy(&out.stderr).into_owned());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every flag of `send`, `recv`, `link`, `sim`, `lab` and both gateway roles, with the bad
/// values it must refuse (zero, negative, NaN, infinite, huge, empty, garbage addresses,
/// unwritable paths): exit status not 0, a message that names the flag, no panic and no
/// backtrace whatever RUST_BACKTRACE says, and nothing written where the command runs.
#[test]
fn every_flag_refuses_bad_values_naming_the_flag() {
    const RATE: &[&str] = &["0", "-5mbit", "NaN", "inf", "1e30bit", "", "fast"];
    const DUR: &[&str] = &["0s", "-1s", "NaN", "inf", "99999999h", "", "soon"];
    // The link emulates any channel, BER 0.5 included; the engine's assumption must be < 0.5.
    const LINK_BER: &[&str] = &["1", "-1e-5", "NaN", "inf", ""];
    const PROB: &[&str] = &["-0.1", "1.5", "NaN", "inf", ""];
    const BER: &[&str] = &["1", "0.5", "-1e-5", "NaN", "inf", ""];
    const ADDR: &[&str] = &["", "garbage", "1.2.3.4", "1.2.3.4:99999", "[::1]"];
    const COUNT: &[&str] = &["0", "-1", "99999999999999999999", "", "many"];
    const ERASURE: &[&str] = &["", "1", "0.5", "5", "NaN", "inf", "lots"];
    const SIZE: &[&str] = &["0", "-1", "", "1e400", "huge", "99999999TB"];
    const UNWRITABLE: &[&str] = &["/proc/aerotp/x.out", "/nonexistent-dir/x.out", ""];
    // `--qlog DIR` creates a missing directory: refused are those that cannot be made.
    const NO_DIR: &[&str] = &["/proc/aerotp/x.out", "/dev/null/x", ""];
    const CLASS: &[&str] = &["", "urgent", "control,bulk"];
    const DSCP: &[&str] = &[
        "",
        "64",
        "ef",
        "control",
        "control=99",
        "control=af44",
        "top=ef",
        "control=ef,control=cs5",
    ];
    // Command prefixes that are valid on their own (a bad flag appended must be refused).
    let send: &[&str] = &[
        "send",
        "--insecure",
        "in.bin",
        "--to",
        "127.0.0.1:9",
        "--mode",
        "reliable",
        "--connect-timeout",
        "1s",
    ];
    let recv: &[&str] = &[
        "recv",
        "--insecure",
        "--listen",
        "127.0.0.1:0",
        "-o",
        "out/",
    ];
    let link: &[&str] = &["link", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"];
    let sim: &[&str] = &["sim", "--mode", "reliable", "--runs", "1", "--size", "10kB"];
    let lab: &[&str] = &["lab", "--air", "true"];
    // Keyless: the bad value, not the missing key, must be what stops them.
    let ingress: &[&str] = &[
        "gw",
        "ingress",
        "--insecure",
        "--peer",
        "127.0.0.1:9",
        "--bind",
        "127.0.0.1:0",
    ];
    let egress: &[&str] = &["gw", "egress", "--insecure", "--listen", "127.0.0.1:0"];
    let bench: &[&str] = &["bench", "loopback", "--size", "1MB", "--no-quic"];
    let link_flags: &[(&str, &[&str])] = &[
        ("--rate", RATE),
        ("--delay", &["-1s", "NaN", "inf", "99999999h", ""]),
        ("--jitter", &["-1s", "NaN", "inf", "99999999h", ""]),
        ("--ber", LINK_BER),
        ("--loss", PROB),
        ("--duplicate", PROB),
        (
            "--outage",
            &["", "1s", "-1s+1s", "1s+0s", "NaN+1s", "inf+inf"],
        ),
        ("--queue", SIZE),
        ("--burst", &["", "garbage", "p=2", "p=NaN,r=0.1"]),
        ("--random-outage", &["", "up=0s,down=1s-2s", "up=NaN"]),
        ("--trace", &["/nonexistent/trace.csv", ""]),
        ("--scenario", &["/nonexistent/s.toml", ""]),
        ("--reverse-rate", RATE),
        ("--reverse-delay", &["-1s", "NaN", "inf", "99999999h", ""]),
        ("--reverse-ber", LINK_BER),
        ("--reverse-loss", PROB),
    ];
    let long = "n".repeat(100);
    let lab_names = ["", "../x", "a b", long.as_str()];
    let mut cases: Vec<(&[&str], &str, &[&str])> = vec![
        (send, "--rate", RATE),
        (bench, "--writes", &["", "copied", "zero-copy", "Shared"]),
        (send, "--fec", &["-1", "999", "pNaN", "", "lots"]),
        (send, "--mack", COUNT),
        (send, "--mtu", COUNT),
        (send, "--erasure", ERASURE),
        (send, "--max-delay", DUR),
        (send, "--erasure-target", PROB),
        (send, "--initial-ber", BER),
        (send, "--connect-timeout", DUR),
        (send, "--silence-timeout", DUR),
        (send, "--port", COUNT),
        (send, "--to", ADDR),
        // A path of another address family than --to's is refused too.
        (
            send,
            "--path",
            &[
                "",
                "garbage",
                "1.2.3.4",
                "1.2.3.4:99999",
                "[::1]",
                "[::1]:9",
                // A path the connection already has (--to's address), a local address that
                // is not one, of another family, or not this host's.
                "127.0.0.1:9",
                "garbage=127.0.0.2:9",
                "=127.0.0.2:9",
                "::1=127.0.0.2:9",
                "203.0.113.9=127.0.0.2:9",
                "127.0.0.2=garbage",
            ],
        ),
        (
            send,
            "--from",
            &[
                "",
                "garbage",
                "127.0.0.1:9",
                "::1",
                "203.0.113.9",
                "0.0.0.0",
            ],
        ),
        (send, "--mode", &["", "datagram", "fast"]),
        (send, "--class", CLASS),
        (send, "--dscp", DSCP),
        (recv, "--class", CLASS),
        (recv, "--dscp", DSCP),
        (send, "--name", &[""]),
        (send, "--pcap", UNWRITABLE),
        (send, "--qlog", NO_DIR),
        (send, "--pcap-queue", SIZE),
        (send, "--metrics", ADDR),
        (recv, "--listen", ADDR),
        (recv, "--port", COUNT),
        (recv, "--mtu", COUNT),
        (bench, "--rate", RATE),
        (recv, "--rate", RATE),
        (recv, "--mack", COUNT),
        (recv, "--idle-timeout", DUR),
        (recv, "--max-connections", COUNT),
        (recv, "--max-half-open", &["-1", "NaN", "99999999", "", "x"]),
        (recv, "--setup-timeout", DUR),
        (
            recv,
            "--output",
            &["/proc/", "/nonexistent-dir/", "", "/proc/x"],
        ),
        (recv, "--pcap", UNWRITABLE),
        (recv, "--qlog", NO_DIR),
        (recv, "--pcap-queue", SIZE),
        (recv, "--metrics", ADDR),
        (link, "--listen", ADDR),
        (link, "--to", ADDR),
        (link, "--max-clients", COUNT),
        (link, "--idle-timeout", DUR),
        // 0s is "never" here.
        (
            link,
            "--stats-interval",
            &["-1s", "NaN", "inf", "99999999h", "", "soon"],
        ),
        (link, "--header-bytes", &["-1", "99999999999", "", "many"]),
        (link, "--seed", &["-1", "", "many"]),
        (link, "--pcap", UNWRITABLE),
        (link, "--pcap-queue", SIZE),
        (sim, "--mode", &["", "fast"]),
        (sim, "--send-rate", RATE),
        (
            sim,
            "--workload",
            &["", "garbage", "messages,size=0", "messages,interval=NaN"],
        ),
        (sim, "--size", SIZE),
        (sim, "--qlog", NO_DIR),
        (sim, "--mtu", COUNT),
        (sim, "--fec", &["-1", "999", ""]),
        (sim, "--mack", COUNT),
        (sim, "--erasure", ERASURE),
        (sim, "--max-delay", DUR),
        (sim, "--erasure-target", PROB),
        (sim, "--runs", COUNT),
        (sim, "--seed", &["-1", "", "many"]),
        (sim, "--pcap", UNWRITABLE),
        (sim, "--timeline", UNWRITABLE),
        (sim, "--topology", &["", "ring"]),
        (sim, "--cap", DUR),
        (lab, "--seed", &["-1", "", "many"]),
        (lab, "--settle", &["-1s", "NaN", "inf", "99999999h", ""]),
        (lab, "--ground-port", COUNT),
        (lab, "--name", &lab_names),
        (lab, "--shell", &["", "sky"]),
        (&["lab"][..], "--outages-until", DUR),
    ];
    for (f, v) in link_flags {
        for prefix in [link, sim, lab] {
            cases.push((prefix, f, v));
        }
    }
    for gw in [ingress, egress] {
        cases.extend([
            (gw, "--rate", RATE),
            (gw, "--fec", &["-1", "999", ""][..]),
            (gw, "--mtu", COUNT),
            (gw, "--window", SIZE),
            (gw, "--metrics", ADDR),
            (gw, "--priority", &["", "urgent"]),
            (gw, "--dscp", DSCP),
            (gw, "--idle-timeout", DUR),
            (gw, "--resume-timeout", DUR),
            (gw, "--setup-timeout", DUR),
            (gw, "--max-half-open", &["-1", "NaN", "99999", "", "x"][..]),
            (
                gw,
                "--store",
                &["in.bin", "", "/proc/aerotp-store", "/proc/x/y"],
            ),
            (gw, "--config", &["/nonexistent/gw.toml", ""]),
            (gw, "--qlog", NO_DIR),
            (gw, "--erasure", ERASURE),
            (gw, "--max-delay", DUR),
        ]);
    }
    cases.extend([
        (ingress, "--peer", ADDR),
        (ingress, "--peer-path", ADDR),
        (
            ingress,
            "--peer-path",
            &[
                "garbage=127.0.0.2:9",
                "::1=127.0.0.2:9",
                "127.0.0.2:9=127.0.0.3:9",
            ],
        ),
        (
            ingress,
            "--peer-from",
            &["", "garbage", "127.0.0.1:9", "::1"],
        ),
        (ingress, "--bind", ADDR),
        (ingress, "--tcp-listen", ADDR),
        (ingress, "--udp-listen", ADDR),
        (ingress, "--store-capacity", SIZE),
        (egress, "--listen", ADDR),
        (
            egress,
            "--tcp-connect",
            &["", "garbage", "host:0", "bad host:80"][..],
        ),
        (
            egress,
            "--udp-connect",
            &["", "garbage", "host:0", "bad host:80"],
        ),
        (egress, "--allow", &["", "*", "10.0.0.1", "10.0.0.1:99999"]),
    ]);
    // Flow keys of the ingress apply to a flow, so they come with --tcp-listen.
    let flow: &[&str] = &[
        "gw",
        "ingress",
        "--insecure",
        "--peer",
        "127.0.0.1:9",
        "--bind",
        "127.0.0.1:0",
        "--tcp-listen",
        "127.0.0.1:0",
    ];
    cases.extend([
        (flow, "--dest", &["", "garbage", "10.0.0.1:0", "a b:80"][..]),
        (flow, "--mode", &["", "datagram", "fast"]),
        (flow, "--class", &["", "vip"]),
    ]);
    let mut checked = 0;
    let mut failures = Vec::new();
    for (prefix, flag, values) in cases {
        for value in values {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("in.bin"), b"hello").unwrap();
            std::fs::create_dir(dir.path().join("out")).unwrap();
            let mut args: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
            // FLAG=VALUE, so that "-1" and "" reach the flag's parser.
            args.push(format!("{flag}={value}"));
            let (code, err) = aerotp_in(dir.path(), &args);
            let what = format!("{args:?}");
            let key = flag.trim_start_matches("--").replace('-', "_");
            let mut left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            left.sort();
            let wrote_out = std::fs::read_dir(dir.path().join("out")).unwrap().count();
            let names_flag = err.contains(flag)
                || err.contains(&key)
                || flag == "--output" && err.contains("-o ");
            let why = if code == 0 {
                "accepted"
            } else if !names_flag {
                "the message does not name the flag"
            } else if err.contains("panicked") || err.contains("backtrace") {
                "panic or backtrace"
            } else if left != ["in.bin", "out"] || wrote_out != 0 {
                "wrote something"
            } else {
                ""
            };
            if !why.is_empty() {
                failures.push(format!("{what}: {why}: {}", err.trim()));
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 300, "{checked} cases");
}

/// The gateways' config file goes through the same checks as their flags: a bad key is
/// refused at start naming the key, before any socket or store exists.
#[test]
fn gateway_config_keys_are_checked_at_start() {
    let cases: &[(&str, &str, &str)] = &[
        ("ingress", "peer = \"127.0.0.1:9\"\nmtu = 0\n", "mtu 0"),
        (
            "ingress",
            "peer = \"127.0.0.1:9\"\nrate = \"NaN\"\n",
            "rate",
        ),
        (
            "ingress",
            "peer = \"127.0.0.1:9\"\nwindow = \"0\"\n",
            "window",
        ),
        (
            "ingress",
            "peer = \"127.0.0.1:9\"\nweights = [0, 1, 1]\n",
            "weights",
        ),
        (
            "ingress",
            "peer = \"127.0.0.1:9\"\nidle_timeout = \"0s\"\n",
            "idle_timeout",
        ),
        (
            "ingress",
            "peer = \"127.0.0.1:9\"\n[[flow]]\ntcp_listen = \"127.0.0.1:0\"\ndest = \"nowhere\"\n",
            "dest",
        ),
        (
            "egress",
            "listen = \"127.0.0.1:0\"\nallow = [\"*\"]\n",
            "allow",
        ),
        (
            "egress",
            "listen = \"127.0.0.1:0\"\ntcp_connect = \"h:0\"\n",
            "tcp_connect",
        ),
        ("egress", "listen = \"garbage\"\n", "listen"),
        (
            "egress",
            "listen = \"127.0.0.1:0\"\nstore = \"gw.toml\"\n",
            "store",
        ),
    ];
    for (role, toml, key) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gw.toml"), toml).unwrap();
        let args: Vec<String> = ["gw", role, "--config", "gw.toml"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (code, err) = aerotp_in(dir.path(), &args);
        assert!(code != 0, "{role} {toml}: accepted: {err}");
        assert!(
            err.contains(key) && !err.contains("backtrace"),
            "{role} {toml}: {err}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "{role} {toml}: wrote something"
        );
    }
}

/// More paths than a connection keeps are refused before any traffic, naming the flag.
#[test]
fn too_many_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.bin"), b"hello").unwrap();
    let mut args: Vec<String> = [
        "send",
        "--insecure",
        "in.bin",
        "--to",
        "127.0.0.1:9",
        "--mode",
        "reliable",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 1..=8 {
        args.push("--path".into());
        args.push(format!("127.0.0.{}:9", i + 1));
    }
    let (code, err) = aerotp_in(dir.path(), &args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("9 paths") && err.contains("at most 8") && err.contains("--path"),
        "{err}"
    );
}

/// A `--path` whose two addresses repeat another path's is refused before any traffic,
/// naming the flag; one that differs only in its local address is another path.
#[test]
fn a_path_that_repeats_another_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.bin"), b"hello").unwrap();
    let send = |extra: &[&str]| {
        let mut args = vec![
            "send",
            "--insecure",
            "in.bin",
            "--to",
            "127.0.0.1:9",
            "--mode",
            "reliable",
        ];
        args.extend_from_slice(extra);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        aerotp_in(dir.path(), &args)
    };
    for (extra, want) in [
        (&["--path", "127.0.0.1:9"][..], "already a path"),
        (
            &[
                "--path",
                "127.0.0.2=127.0.0.3:9",
                "--path",
                "127.0.0.2=127.0.0.3:9",
            ][..],
            "already a path",
        ),
        (
            &["--from", "127.0.0.2", "--path", "127.0.0.2=127.0.0.1:9"][..],
            "the same addresses as --from and --to",
        ),
        (
            &["--path", "nonsense=127.0.0.1:9"][..],
            "is not an IP address",
        ),
    ] {
        let (code, err) = send(extra);
        assert_eq!(code, 1, "{extra:?}: {err}");
        assert!(
            err.contains(want) && err.contains("--path"),
            "{extra:?}: {err}"
        );
    }
}

/// A route's listen address the host does not have is refused at start-up, naming the
/// address; for a reliable route the error says how to serve it end to end instead
/// (`--transparent-tun`: the ingress routes the address into its TUN device).
#[test]
fn a_route_on_an_address_the_host_lacks_is_refused_saying_what_to_do() {
    // 192.0.2.0/24 is TEST-NET-1: no host has it.
    for (mode, want) in [
        ("reliable", "add --transparent-tun NAME"),
        (
            "near-reliable",
            "give one of its addresses (only a reliable route",
        ),
    ] {
        let store = tempfile::tempdir().unwrap();
        let (code, err) = aerotp(&[
            "gw",
            "ingress",
            "--insecure",
            "--peer",
            "127.0.0.1:9",
            "--bind",
            "127.0.0.1:0",
            "--tcp-listen",
            "192.0.2.7:8080",
            "--mode",
            mode,
            "--store",
            store.path().to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{mode}: {err}");
        assert!(
            err.contains("192.0.2.7 is not an address of this host") && err.contains(want),
            "{mode}: {err}"
        );
    }
}
