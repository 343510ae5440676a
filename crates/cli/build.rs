//! Names the build in `aerotp --version`: sets `AEROTP_COMMIT` to the git commit the binary
//! was built from (short hash, `-dirty` when tracked files differ from it), or to
//! `AEROTP_BUILD_COMMIT` when a packager sets it, or to "unknown" when there is no git or no
//! repository (a source tarball still builds).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=AEROTP_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=GIT_DIR");
    let commit = match std::env::var("AEROTP_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => from_git().unwrap_or_else(|| {
            // No answer from git (none installed, no repository, or a lock held at that
            // moment): run again when the repository's state or the sources change, or an
            // "unknown" once would stay for every later build of this target directory.
            if let Some(root) = workspace_root() {
                for watched in [".git/HEAD", ".git/index", "crates", "Cargo.toml"] {
                    println!("cargo:rerun-if-changed={}", root.join(watched).display());
                }
            }
            "unknown".to_string()
        }),
    };
    println!("cargo:rustc-env=AEROTP_COMMIT={commit}");
}

/// Runs git with optional locks off: `git status` must not refresh the index, or the index's
/// new timestamp would make every later build run this script again.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn from_git() -> Option<String> {
    let hash = git(&["rev-parse", "--short", "HEAD"])?;
    if hash.is_empty() {
        return None;
    }
    // Run again when the commit or the index changes (a commit, a checkout, `git add`), and
    // when any source file of the workspace changes (the tree may turn dirty or clean).
    for name in ["HEAD", "index", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", name]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &head_ref]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(root) = workspace_root() {
        for watched in ["crates", "Cargo.toml", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={}", root.join(watched).display());
        }
    }
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// The workspace's root: two levels above this crate's manifest.
fn workspace_root() -> Option<PathBuf> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    Some(manifest.parent()?.parent()?.to_path_buf())
}
