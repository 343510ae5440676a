//! Writes the seed inputs of every fuzz target: `cargo run -p aerotp-fuzz-corpus --example
//! seed -- DIR` creates `DIR/<target>/seed-NNN` (existing files are kept; cargo fuzz cmin
//! then merges seeds and campaign finds into the committed corpus).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: seed DIR (e.g. fuzz/corpus)");
        std::process::exit(2);
    };
    for (target, seeds) in aerotp_fuzz_corpus::seeds::all() {
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i:03}")), s)?;
        }
        println!("{target}: {} seeds", seeds.len());
    }
    Ok(())
}
