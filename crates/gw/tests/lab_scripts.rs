//! The lab scripts' rate helpers (`crates/gw/scripts/lab-up.sh`): `rate_below` and `gw_rate`,
//! which sets the gateways' `--rate` in `lab-tun.sh`. Paced at exactly the emulated link's
//! rate, the gateways never drain a queue a burst leaves at the link, and the control flow's
//! round trip under saturating uploads doubles in its own class (docs/results/gw.md, "Where
//! the control flow waited"); the flows measurement runs them 3 % under it. Needs bash and
//! awk only (no root).

use std::path::Path;
use std::process::Command;

/// Runs `snippet` in bash after sourcing lab-up.sh; its stdout, or `None` if it failed.
fn lab_up(snippet: &str) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/lab-up.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(". '{}'; {snippet}", script.display()))
        .output()
        .expect("bash");
    out.status.success().then(|| {
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    })
}

#[test]
fn rate_below_takes_a_share_of_a_rate_in_any_unit() {
    assert_eq!(lab_up("rate_below 5mbit 97").as_deref(), Some("4850000"));
    assert_eq!(lab_up("rate_below 10Mbps 90").as_deref(), Some("9000000"));
    assert_eq!(lab_up("rate_below 2.4kbit 50").as_deref(), Some("1200"));
    assert_eq!(lab_up("rate_below 500000 97").as_deref(), Some("485000"));
    assert_eq!(lab_up("rate_below 1gbit 97").as_deref(), Some("970000000"));
    assert_eq!(lab_up("rate_below fast 97"), None);
}

#[test]
fn the_flows_measurement_paces_the_gateways_under_the_link() {
    // The priorities are measured with the gateways 3 % under the link's rate ...
    assert_eq!(lab_up("gw_rate flows 5mbit").as_deref(), Some("4850000"));
    assert_eq!(lab_up("gw_rate flows 256kbit").as_deref(), Some("248320"));
    // ... the ceiling with the gateways at the link's rate.
    assert_eq!(lab_up("gw_rate curl 5mbit").as_deref(), Some("5mbit"));
    assert_eq!(lab_up("gw_rate upload 5mbit").as_deref(), Some("5mbit"));
}

#[test]
fn lab_tun_takes_the_gateways_rate_from_gw_rate() {
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/lab-tun.sh"))
            .expect("lab-tun.sh");
    assert!(script.contains(r#"GW_RATE=${GW_RATE:-$(gw_rate "$WHAT" "$RATE")}"#));
    // Both gateways are started at GW_RATE, neither at the link's RATE.
    assert_eq!(script.matches(r#"--rate "$GW_RATE""#).count(), 2);
    assert!(!script.contains(r#"gw ingress --peer 10.77.0.2:9000 --rate "$RATE""#));
}
