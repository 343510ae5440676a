//! A failing command prints what went wrong as one message chain and exits 1; it never
//! prints a backtrace, whatever RUST_BACKTRACE says, and writes nothing.

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
