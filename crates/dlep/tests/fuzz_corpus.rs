//! Replays the committed corpus of the `dlep_parse` fuzz target (fuzz/corpus/dlep_parse) on
//! stable, so every input that once mattered keeps passing in `cargo test`.

use std::path::Path;

#[test]
fn replay_dlep_parse_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dlep_parse");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        aerotp_dlep::fuzz_parse(&data);
        n += 1;
    }
    assert!(n >= 5, "corpus has only {n} files");
}
