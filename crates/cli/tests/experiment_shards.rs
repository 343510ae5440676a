//! `aerotp experiment run PLAN --shard I/N` and `aerotp experiment merge`: three shards
//! merged give the single run's CSV byte for byte; bad shard values and incomplete sets of
//! shards are refused with a clear error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PLAN: &str = r#"
seed = 3
runs = 2
[base]
size = "20kB"
topology = "two-node"
rate = "2mbit"
[[experiment]]
name = "tiny"
x = "ber"
grid = { ber = [0.0, 1e-5, 1e-4, 3e-4] }
series = [
  { name = "reliable", set = { mode = "reliable" } },
  { name = "hybrid", set = { mode = "hybrid-nack-mack", fec = "auto" } },
]
"#;

fn aerotp(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run aerotp")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &Output, says: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted; wanted: {says}");
    assert!(err.contains(says), "wanted {says:?} in:\n{err}");
}

fn tmp() -> PathBuf {
    let d = std::env::temp_dir().join(format!("aerotp-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn three_shards_merged_give_the_single_runs_csv_byte_for_byte() {
    let d = tmp();
    std::fs::write(d.join("tiny.toml"), PLAN).unwrap();
    ok(&aerotp(
        &d,
        &[
            "experiment",
            "run",
            "tiny.toml",
            "--out",
            "whole",
            "--jobs",
            "2",
        ],
    ));
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let out = ok(&aerotp(
            &d,
            &[
                "experiment",
                "run",
                "tiny.toml",
                "--shard",
                &shard,
                "--out",
                &format!("s{i}"),
            ],
        ));
        // 8 points: shards 1 and 2 have 3 each, shard 3 has 2.
        let n = if i == 3 { 2 } else { 3 };
        assert!(out.contains(&format!("shard {i}/3: {n} points")), "{out}");
        assert!(!d.join(format!("s{i}/tiny.csv")).exists());
    }
    refused(
        &aerotp(
            &d,
            &["experiment", "merge", "tiny.toml", "s1", "s3", "--out", "m"],
        ),
        "missing shard 2/3",
    );
    refused(
        &aerotp(
            &d,
            &[
                "experiment",
                "merge",
                "tiny.toml",
                "s1",
                "s2",
                "s2",
                "s3",
                "--out",
                "m",
            ],
        ),
        "overlapping shards: shard 2/3 is both s2 and s2",
    );
    let out = ok(&aerotp(
        &d,
        &[
            "experiment",
            "merge",
            "tiny.toml",
            "s1",
            "s2",
            "s3",
            "--out",
            "merged",
        ],
    ));
    assert!(out.contains("merged 3 shards: 8 points"), "{out}");
    let whole = std::fs::read(d.join("whole/tiny.csv")).unwrap();
    assert_eq!(String::from_utf8_lossy(&whole).lines().count(), 9);
    assert_eq!(whole, std::fs::read(d.join("merged/tiny.csv")).unwrap());
    let report = std::fs::read_to_string(d.join("merged/report.md")).unwrap();
    assert!(
        report.contains("aerotp experiment merge tiny.toml s1 s2 s3"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_shard_values_are_refused() {
    let d = std::env::temp_dir();
    for (bad, says) in [
        (
            "0/3",
            "the shard number must be 1 to 3 (shards count from 1)",
        ),
        ("4/3", "the shard number must be 1 to 3"),
        ("1/0", "the number of shards must be at least 1"),
        ("x", "`x` is not I/N"),
    ] {
        let out = aerotp(&d, &["experiment", "run", "absent.toml", "--shard", bad]);
        refused(&out, says);
        assert_eq!(out.status.code(), Some(2), "a usage error");
    }
}
