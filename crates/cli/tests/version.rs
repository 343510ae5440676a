//! `aerotp --version` names the build: the package version and the commit (crates/cli/build.rs).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_package_version_and_the_commit_it_was_built_from() {
    let out = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .arg("--version")
        .output()
        .expect("run aerotp --version");
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let want = match (
        std::env::var("AEROTP_BUILD_COMMIT").ok(),
        git(&["rev-parse", "--short", "HEAD"]),
    ) {
        // A packager's commit wins over git (build.rs).
        (Some(c), _) if !c.trim().is_empty() => c.trim().to_string(),
        (_, Some(hash)) => {
            let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])
                .expect("git status")
                .is_empty();
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        // No git or no repository (a source tarball): the build says so.
        (_, None) => "unknown".to_string(),
    };
    assert_eq!(
        line.trim_end(),
        format!("aerotp {} ({want})", env!("CARGO_PKG_VERSION"))
    );
}
