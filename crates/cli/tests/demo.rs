//! `aerotp demo` as the README's quick start runs it (issue 41, item 3): every transfer under
//! its own name (quasi-reliable runs twice, with two delay bounds), and every word of its
//! tables explained in its output, "FEC p" and "corrected" included.

use std::process::Command;

/// The rows of the table whose header starts with "transfer" and names `column`: the lines
/// after it up to the first empty one.
fn table<'a>(out: &'a str, column: &str) -> Vec<&'a str> {
    out.lines()
        .skip_while(|l| !(l.starts_with("transfer") && l.contains(column)))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// The name a row starts with: up to the first run of two spaces.
fn row_name(row: &str) -> &str {
    row.split("  ").next().unwrap_or("").trim()
}

#[test]
fn the_demo_names_each_transfer_once_and_explains_its_tables() {
    let o = Command::new(env!("CARGO_BIN_EXE_aerotp"))
        .arg("demo")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}\n{out}\n{err}", o.status);
    let names = [
        "reliable",
        "hybrid-nack-mack",
        "quasi-reliable 0.5 s",
        "quasi-reliable 3 s",
        "plain UDP",
    ];
    // Progress: one line per transfer, each under its own name.
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("running ")).collect();
    let want: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("running {}/5: {n} ...", i + 1))
        .collect();
    assert_eq!(progress, want, "{err}");
    // The introduction says what each transfer is, then both tables have one row per name.
    for n in names {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("  {n}  "))),
            "{n} not introduced:\n{out}"
        );
    }
    let delivered = table(&out, "bytes delivered");
    let fate = table(&out, "FEC p");
    for rows in [&delivered, &fate] {
        let got: Vec<&str> = rows.iter().map(|r| row_name(r)).collect();
        assert_eq!(got, names, "{out}");
    }
    // The header of the second table, and every word of it in the key.
    let header = out
        .lines()
        .find(|l| l.starts_with("transfer") && l.contains("FEC p"))
        .unwrap_or_else(|| panic!("no table with FEC p:\n{out}"));
    for word in ["resent", "rebuilt", "never", "corrected", "FEC p"] {
        assert!(header.contains(word), "{header}");
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{word}:"))),
            "{word} is not explained:\n{out}"
        );
    }
    for word in ["intact", "goodput", "mean delay"] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{word}:"))),
            "{word} is not explained:\n{out}"
        );
    }
    // Each FEC strength in the table is spelled out: what it costs and what it corrects.
    for row in fate.iter().filter(|r| !r.starts_with("plain UDP")) {
        let p = row.split_whitespace().last().unwrap();
        let meaning = format!("p={p}: ");
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&meaning))
            .unwrap_or_else(|| panic!("FEC p={p} is not explained:\n{out}"));
        assert!(line.contains("parity bytes per TPDU"), "{line}");
    }
    // The fully reliable modes deliver everything (the demo's exit status says so too).
    for row in &delivered[..2] {
        assert!(
            row.contains("1048576/1048576") && row.contains(" yes "),
            "{row}"
        );
    }
}
