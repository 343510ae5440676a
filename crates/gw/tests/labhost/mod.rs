//! Host set-up shared by the gateway's root lab tests (`e2e_ack.rs`, `transparent.rs`,
//! `lab.rs`, `rules_sysctls.rs`): whether they can run here, `ip`, and the namespaces and
//! rules they make, removed on drop.

#![allow(dead_code)]

use std::process::{Command, Stdio};

use aerotp_gw::transparent::RuleSpec;

/// Whether the lab test `what` runs: not with `AEROTP_SKIP_LAB=1` (it says so); otherwise it
/// must be root (for `needs`) and have every `(program, version flag)` of `tools`, or it
/// fails saying what to do.
pub fn lab_available(what: &str, needs: &str, tools: &[(&str, &str)]) -> bool {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: {what} skipped");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the {what} needs root ({needs}); run as root or set AEROTP_SKIP_LAB=1 to skip it"
    );
    for &(prog, arg) in tools {
        let ok = Command::new(prog)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "{prog} not found: run scripts/lab-deps.sh (or AEROTP_SKIP_LAB=1)"
        );
    }
    true
}

/// Runs `prog args`, failing the test with its stderr if it fails.
pub fn run(prog: &str, args: &[&str]) {
    let out = Command::new(prog).args(args).output().expect(prog);
    assert!(
        out.status.success(),
        "{prog} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn ip(args: &[&str]) {
    run("ip", args)
}

/// A namespace made by a test, deleted on drop (its veth pairs go with it).
pub struct NsGuard(pub String);

impl NsGuard {
    /// A fresh namespace `PREFIX-PID-TAG` (one left by a killed run is removed first).
    pub fn new(prefix: &str, tag: &str) -> NsGuard {
        let name = format!("{prefix}-{}-{tag}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        ip(&["netns", "add", &name]);
        NsGuard(name)
    }
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Installed rules, removed on drop.
pub struct RulesGuard(pub RuleSpec);

impl Drop for RulesGuard {
    fn drop(&mut self) {
        if let Err(e) = self.0.remove() {
            eprintln!("removing the rules: {e}");
        }
    }
}
