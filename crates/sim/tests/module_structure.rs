//! The structure rules of docs/design.md, held for the simulator, the link model, the lab,
//! the lab benches and the plots: no import cycle among a crate's modules and no source file
//! (tests aside) over 800 lines, as `scripts/check-module-cycles.py` reads them. The
//! checker's own self-test runs first, so a broken checker cannot pass everything.

use std::path::Path;
use std::process::Command;

fn checker(args: &[&str]) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(root.join("scripts/check-module-cycles.py"))
        .args(args)
        .current_dir(&root)
        .output()
        .expect("python3 runs scripts/check-module-cycles.py (install python3)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn the_checker_finds_what_it_should() {
    let (ok, text) = checker(&["--self-test"]);
    assert!(ok, "{text}");
    assert!(text.contains("self-test passed"), "{text}");
}

#[test]
fn sim_link_lab_labbench_and_plot_have_no_module_cycle_and_no_long_file() {
    let mut args = Vec::new();
    for c in ["sim", "link", "lab", "labbench", "plot"] {
        args.push("--crate".to_owned());
        args.push(format!("crates/{c}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, text) = checker(&args);
    assert!(ok, "{text}");
    assert!(text.contains("in 5 crate(s)"), "{text}");
}
