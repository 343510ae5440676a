//! tshark with the workspace's Wireshark dissector (`tools/wireshark/aerotp.lua`), for the tests
//! that decode captures (`aerotp-capture`'s and the CLI's).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether tshark is installed (`scripts/lab-deps.sh` installs it).
pub fn present() -> bool {
    Command::new("tshark").arg("--version").output().is_ok()
}

/// For a test's dissector part: true if tshark is installed. Without it the test fails — a
/// check that silently does nothing on a machine missing a tool passes where it should not —
/// unless `AEROTP_SKIP_TSHARK=1` says to skip (then it says so on stderr and returns false).
/// `scripts/test.sh` installs tshark before the tests run.
pub fn required(what: &str) -> bool {
    if present() {
        return true;
    }
    if std::env::var("AEROTP_SKIP_TSHARK").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_TSHARK=1: {what} skipped (tshark is not installed)");
        return false;
    }
    panic!(
        "{what} needs tshark, which is not installed: run bash scripts/lab-deps.sh (as root), \
         or set AEROTP_SKIP_TSHARK=1 to skip it"
    );
}

/// The dissector's path (this crate sits at `crates/testkit` of the workspace).
pub fn dissector() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/aerotp.lua")
}

/// Decodes `file` with the dissector and returns, per packet, the values of `fields` in order
/// (every occurrence, comma-separated). Panics if tshark fails or reports a Lua error, which
/// it prints on stderr instead of failing.
pub fn fields(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(
        !stderr.contains("Lua") && !stderr.contains("error"),
        "tshark complained: {stderr}"
    );
    String::from_utf8(out.stdout)
        .expect("tshark prints UTF-8")
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}
