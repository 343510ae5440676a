//! A strict parser of the Prometheus text exposition (format 0.0.4) as AeroTP writes it, for
//! the tests of both servers (`send|recv --metrics`, the gateways): it panics, naming the line,
//! on anything a scraper would reject or the naming scheme forbids. Written by hand because the
//! Prometheus crates parse leniently (their job is to scrape, not to judge the writer).
//!
//! Every exposition parsed is also judged by the ecosystem's own linter, `promtool check
//! metrics` (Debian's `prometheus` package; scripts/lab-deps.sh installs it): once per shape
//! (families, HELP, TYPE and series; the values aside) per test process. A missing promtool
//! fails the test, saying how to install it, unless `AEROTP_SKIP_PROMTOOL=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The family name.
    pub name: String,
    /// The labels, unescaped.
    pub labels: BTreeMap<String, String>,
    /// Name and labels as written (the key of [`Exposition::by_series`]).
    pub series: String,
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Family name → `counter` or `gauge`.
    pub types: BTreeMap<String, String>,
}

impl Exposition {
    /// The sum of every sample of family `name` (0 when it has none).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    /// Series as written (`name{labels}`) → value.
    pub fn by_series(&self) -> BTreeMap<String, f64> {
        self.samples
            .iter()
            .map(|s| (s.series.clone(), s.value))
            .collect()
    }
}

/// Parses `text`, checking: every family has one non-empty HELP, then one TYPE (`counter` or
/// `gauge`), before its samples; names are `[a-zA-Z0-9_]` and start with `prefix`; a family
/// is a counter exactly when its name ends in `_total`; counters are finite and not negative;
/// every value parses; labels are `k="v"` pairs, escapes resolved, no key twice; no blank,
/// comment or stray line.
pub fn parse(text: &str, prefix: &str) -> Exposition {
    let mut help = BTreeMap::new();
    let mut x = Exposition::default();
    for line in text.lines() {
        if let Some(r) = line.strip_prefix("# HELP ") {
            let (name, h) = r.split_once(' ').unwrap_or_else(|| panic!("HELP: {line}"));
            assert!(!h.trim().is_empty(), "empty HELP: {line}");
            assert!(
                help.insert(name.to_owned(), ()).is_none(),
                "HELP twice: {line}"
            );
            continue;
        }
        if let Some(r) = line.strip_prefix("# TYPE ") {
            let (name, t) = r.split_once(' ').unwrap_or_else(|| panic!("TYPE: {line}"));
            assert!(matches!(t, "counter" | "gauge"), "type: {line}");
            assert!(help.contains_key(name), "TYPE before HELP: {line}");
            assert_eq!(
                t == "counter",
                name.ends_with("_total"),
                "counter ⇔ _total: {line}"
            );
            let fresh = x.types.insert(name.to_owned(), t.to_owned()).is_none();
            assert!(fresh, "TYPE twice: {line}");
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line: {line:?}"
        );
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => {
                let l = l
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("labels: {line}"));
                (n, labels_of(l, line))
            }
            None => (series, BTreeMap::new()),
        };
        assert!(name.starts_with(prefix), "not {prefix}*: {line}");
        let charset = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        assert!(charset, "name: {line}");
        let t = x
            .types
            .get(name)
            .unwrap_or_else(|| panic!("sample without HELP/TYPE: {line}"));
        if t == "counter" {
            assert!(value.is_finite() && value >= 0.0, "counter value: {line}");
        }
        x.samples.push(Sample {
            name: name.to_owned(),
            labels,
            series: series.to_owned(),
            value,
        });
    }
    promtool_once(text);
    x
}

/// Runs [`promtool_check`] on `text` unless an exposition of the same shape (every line
/// with the sample values removed) was checked already in this process: a scrape loop
/// checks each new set of series once, not every scrape.
fn promtool_once(text: &str) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let shape: String = text
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                l
            } else {
                l.rsplit_once(' ').map_or(l, |(series, _)| series)
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let fresh = SEEN.lock().unwrap_or_else(|e| e.into_inner()).insert(shape);
    if fresh {
        promtool_check(text);
    }
}

/// `promtool check metrics` on `text`: panics with promtool's findings when it finds any
/// problem (a parse error or a lint), or when promtool is not installed (Debian package
/// `prometheus`, scripts/lab-deps.sh) unless `AEROTP_SKIP_PROMTOOL=1`.
pub fn promtool_check(text: &str) {
    if std::env::var("AEROTP_SKIP_PROMTOOL").is_ok_and(|v| v == "1") {
        return;
    }
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool not found: install Debian's `prometheus` package (scripts/lab-deps.sh \
             does), or set AEROTP_SKIP_PROMTOOL=1 to skip the promtool check"
        ),
        Err(e) => panic!("running promtool: {e}"),
    };
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    let out = child.wait_with_output().expect("waiting for promtool");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics ({}): {said}\non:\n{text}",
        out.status
    );
}

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escapes; panics naming `line` on anything else.
fn labels_of(mut s: &str, line: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    while !s.is_empty() {
        let (k, rest) = s
            .split_once("=\"")
            .unwrap_or_else(|| panic!("label: {line}"));
        let mut v = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => v.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => v.push(c),
                    _ => panic!("label escape: {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => v.push(c),
                None => panic!("unterminated label: {line}"),
            }
        };
        assert!(m.insert(k.to_owned(), v).is_none(), "label twice: {line}");
        let after = &rest[end + 1..];
        s = match after.strip_prefix(',') {
            Some(more) => more,
            None if after.is_empty() => after,
            None => panic!("after a label: {line}"),
        };
    }
    m
}

/// One `GET /metrics` (HTTP/1.1, `Connection: close`; std only) from `addr`: the status line
/// and headers, and the body; `None` if nothing answers within 2 s or the answer is cut.
pub fn get(addr: &str) -> Option<(String, String)> {
    let addr: std::net::SocketAddr = addr.parse().ok()?;
    let mut s =
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut b = String::new();
    s.read_to_string(&mut b).ok()?;
    let (head, body) = b.split_once("\r\n\r\n")?;
    Some((head.to_owned(), body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# HELP aerotp_x_total x\n# TYPE aerotp_x_total counter\n\
        aerotp_x_total{a=\"q\\\"z\",b=\"1\"} 3\naerotp_x_total{a=\"\\n\"} 4\n\
        # HELP aerotp_g g\n# TYPE aerotp_g gauge\naerotp_g NaN\n";

    #[test]
    fn parses_labels_values_and_types() {
        let x = parse(GOOD, "aerotp_");
        // promtool agrees (and says nothing).
        promtool_check(GOOD);
        assert_eq!(x.samples.len(), 3);
        assert_eq!(x.sum("aerotp_x_total"), 7.0);
        assert_eq!(x.samples[0].labels["a"], "q\"z");
        assert_eq!(x.samples[1].labels["a"], "\n");
        assert_eq!(x.types["aerotp_g"], "gauge");
        assert_eq!(x.by_series()["aerotp_x_total{a=\"q\\\"z\",b=\"1\"}"], 3.0);
    }

    #[test]
    fn refuses_what_a_scraper_or_the_scheme_would() {
        let bad = [
            "aerotp_x_total 1\n",                                       // no HELP/TYPE
            "# TYPE aerotp_x_total counter\n",                          // TYPE before HELP
            "# HELP aerotp_x x\n# TYPE aerotp_x counter\naerotp_x 1\n", // counter without _total
            "# HELP aerotp_x_total x\n# TYPE aerotp_x_total gauge\n",   // _total gauge
            "# HELP aerotp_x_total x\n# TYPE aerotp_x_total counter\naerotp_x_total -1\n",
            "# HELP aerotp_g g\n# TYPE aerotp_g gauge\naerotp_g one\n", // value
            "# HELP aerotp_g g\n# TYPE aerotp_g gauge\naerotp_g{a=\"1\" 1\n", // labels
            "# HELP aerotp_g g\n# TYPE aerotp_g gauge\naerotp_g{a=\"\\x\"} 1\n",
            "# HELP other g\n# TYPE other gauge\nother 1\n", // prefix
            "\n",
        ];
        for b in bad {
            let r = std::panic::catch_unwind(|| parse(b, "aerotp_"));
            assert!(r.is_err(), "accepted: {b:?}");
        }
    }

    /// promtool judges what it is given: a name in camelCase (which our parser lets pass)
    /// is a lint, a broken label a parse error; both fail the check.
    #[test]
    fn promtool_judges_what_it_is_given() {
        if std::env::var("AEROTP_SKIP_PROMTOOL").is_ok_and(|v| v == "1") {
            return;
        }
        let camel = "# HELP aerotp_sentBytes_total x\n# TYPE aerotp_sentBytes_total counter\n\
            aerotp_sentBytes_total 1\n";
        let r = std::panic::catch_unwind(|| promtool_check(camel));
        let e = r.expect_err("promtool accepted a camelCase name");
        let e = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        assert!(e.contains("camelCase"), "{e}");
        let broken = "# HELP aerotp_g g\n# TYPE aerotp_g gauge\naerotp_g{a=\"1\" 1\n";
        assert!(std::panic::catch_unwind(|| promtool_check(broken)).is_err());
    }
}
