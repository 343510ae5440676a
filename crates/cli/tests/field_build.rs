//! The field build (`cargo build --release -p aerotp --no-default-features`: send, recv, gw,
//! keygen, link) links none of the development crates: the simulator, the lab, its
//! benchmarks, QUIC/TLS and the plotting code (docs/packaging.md). Checked on the resolved
//! dependency graph, so a new path to one of them fails here whichever crate opens it.

use std::collections::BTreeSet;
use std::process::Command;

const NOT_IN_THE_FIELD: [&str; 8] = [
    "aerotp-sim",
    "aerotp-lab",
    "aerotp-labbench",
    "aerotp-plot",
    "quinn",
    "rustls",
    "rcgen",
    "plotters",
];

/// The crate names of `cargo tree -p aerotp -e normal --prefix none` with these extra flags.
fn linked(features: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree", "--locked", "-p", "aerotp", "-e", "normal", "--prefix", "none",
        ])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_field_build_links_no_simulator_lab_quic_tls_or_plotting() {
    let field = linked(&["--no-default-features"]);
    assert!(
        field.contains("aerotp-gw") && field.contains("aerotp-net"),
        "the field build lost the gateway or the runtime: {field:?}"
    );
    let found: Vec<_> = NOT_IN_THE_FIELD
        .iter()
        .filter(|c| field.contains(**c))
        .collect();
    assert!(
        found.is_empty(),
        "the field build links {found:?}; find the path with \
         `cargo tree -p aerotp -e normal --no-default-features -i CRATE`"
    );
}

#[test]
fn the_default_build_keeps_the_development_commands_crates() {
    // The check above means something only if these names are the ones cargo prints.
    let full = linked(&[]);
    let missing: Vec<_> = NOT_IN_THE_FIELD
        .iter()
        .filter(|c| !full.contains(**c))
        .collect();
    assert!(missing.is_empty(), "the default build lacks {missing:?}");
}
