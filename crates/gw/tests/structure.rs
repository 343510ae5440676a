//! The crate's shape (issue: one of each thing): no import cycle among its top-level modules
//! (each with its subdirectory's files), and no ingress code naming the egress's parts of a
//! flow. Read from the source text, as rustfmt lays it out. File and function lengths are
//! checked for every file of the workspace by `crates/testkit/tests/structure.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module's source without its `#[cfg(test)]` part, the files of its
/// subdirectory (`config/`, `transparent/`, `flow/`) included: a child's use of
/// `crate::x` is its parent's.
fn modules() -> BTreeMap<String, String> {
    fn add(m: &mut BTreeMap<String, String>, name: &str, p: &Path) {
        let text = std::fs::read_to_string(p).unwrap();
        let code = match text.find("#[cfg(test)]") {
            Some(i) => &text[..i],
            None => &text,
        };
        m.entry(name.to_string()).or_default().push_str(code);
    }
    fn add_dir(m: &mut BTreeMap<String, String>, name: &str, dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                add_dir(m, name, &p);
            } else if file.ends_with(".rs") && file != "tests.rs" && !file.ends_with("_tests.rs") {
                add(m, name, &p);
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            add_dir(&mut m, &name, &p);
        } else if p.extension().is_some_and(|x| x == "rs") {
            add(&mut m, &name, &p);
        }
    }
    m
}

/// The crate modules `code` refers to (`crate::x`), comments aside.
fn uses(code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    code.match_indices("crate::")
        .filter_map(|(i, _)| {
            let rest = &code[i + 7..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let m = &rest[..end];
            known.contains(m).then(|| m.to_string())
        })
        .collect()
}

/// A cycle in `g`, if any, as the path of modules around it.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_cycle_among_the_modules() {
    let mods = modules();
    let known: BTreeSet<String> = mods.keys().filter(|m| *m != "lib").cloned().collect();
    let g: BTreeMap<String, BTreeSet<String>> = mods
        .iter()
        .filter(|(m, _)| *m != "lib")
        .map(|(m, code)| {
            let mut u = uses(code, &known);
            u.remove(m);
            (m.clone(), u)
        })
        .collect();
    assert!(g.len() > 10, "modules found: {:?}", g.keys());
    assert_eq!(find_cycle(&g), None, "import graph: {g:#?}");
    // The checker finds a cycle when there is one.
    let mut bad = g.clone();
    bad.get_mut("consts").unwrap().insert("ctx".into());
    assert!(find_cycle(&bad).is_some());
}

/// What only the egress keeps of a flow (`flow.rs`: `FlowRole::Egress`), by the names that
/// reach it.
const EGRESS_ONLY: [&str; 4] = ["EgressParts", "FlowRole::Egress", "DestAcked", ".egress()"];

#[test]
fn the_ingress_never_names_the_egress_s_parts_of_a_flow() {
    // Both roles are one crate, so privacy cannot keep the ingress from the egress's parts
    // of a flow; its flows are created `FlowRole::Ingress` and its code names none of them.
    let mods = modules();
    let named = |m: &str| -> Vec<&str> {
        let code: String = mods[m]
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        EGRESS_ONLY
            .into_iter()
            .filter(|n| code.contains(n))
            .collect()
    };
    assert_eq!(named("ingress"), Vec::<&str>::new());
    assert!(mods["ingress"].contains("FlowRole::Ingress"));
    // The names are the ones the egress uses (a rename would leave the check empty).
    assert!(named("egress").len() >= 3, "{:?}", named("egress"));
}
