//! Replays every committed corpus file (`fuzz/corpus/<target>/*`) through the same target
//! functions the fuzzer runs, on stable, so `cargo test` keeps every input the campaigns found
//! passing. The corpus directories must exist and be non-empty: a missing corpus fails here
//! rather than passing vacuously.

use aerotp_fuzz_corpus::{CountingAlloc, TARGETS};
use std::path::PathBuf;

// Counts heap bytes per thread so the endpoint target checks its memory bound here too.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn replay(target: &str) {
    let run = TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .map(|(_, f)| *f)
        .expect("a known target");
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|e| e.expect("readable directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for f in &files {
        let data = std::fs::read(f).expect("readable corpus file");
        // Name the input on failure: the panic inside the target says what broke.
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "{target}: input {} fails", f.display());
    }
    println!("{target}: {} inputs replayed", files.len());
}

#[test]
fn every_target_has_a_replay_test() {
    let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "wire_header",
            "wire_control",
            "wire_tpdu",
            "fec_decode",
            "proto_codec",
            "proto_endpoint",
            "proto_endpoint_keyed",
            "gw_frame",
            "gw_store"
        ]
    );
}

#[test]
fn wire_header() {
    replay("wire_header");
}
#[test]
fn wire_control() {
    replay("wire_control");
}
#[test]
fn wire_tpdu() {
    replay("wire_tpdu");
}
#[test]
fn fec_decode() {
    replay("fec_decode");
}
#[test]
fn proto_codec() {
    replay("proto_codec");
}
#[test]
fn proto_endpoint() {
    replay("proto_endpoint");
}
#[test]
fn proto_endpoint_keyed() {
    replay("proto_endpoint_keyed");
}
#[test]
fn gw_frame() {
    replay("gw_frame");
}
#[test]
fn gw_store() {
    replay("gw_store");
}
