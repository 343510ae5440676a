//! The example traces shipped in `bench/traces/` stay loadable and drive a link as their
//! rows say: every `.csv` there is read with `Trace::from_file` and replayed.

use std::path::PathBuf;
use std::time::Duration;

use aerotp_link::{Link, LinkConfig, LossReason, Offer, Trace};

fn trace_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_trace_loads_and_replays() {
    let files = trace_files();
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        for repeat in [false, true] {
            let trace = Trace::from_file(&file, repeat).unwrap_or_else(|e| panic!("{e}"));
            let end = trace.rows.last().unwrap().at;
            let cfg = LinkConfig {
                // As the simulator and the relay set them.
                per_packet_overhead: 28,
                protected_prefix: 28,
                trace: Some(trace.clone()),
                ..LinkConfig::default()
            };
            let mut link = Link::new(cfg, 1).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            // One 200 B packet every 250 ms over the trace (twice over when it repeats): the
            // link is idle at each send, so the row at the send time is the one in force.
            let until = if repeat { end * 2 } else { end };
            let mut t = Duration::ZERO;
            let mut dead_rows = 0;
            while t <= until {
                let row = trace.row_at(t).copied().unwrap_or_default();
                let rate = row.rate_bps.unwrap_or(5_000_000);
                assert_eq!(link.rate_at(t), rate, "{} at {t:?}", file.display());
                let offer = link.send(t, vec![0; 200]);
                if row.loss == Some(1.0) {
                    dead_rows += 1;
                    assert_eq!(
                        offer,
                        Offer::Lost(LossReason::Random),
                        "{} at {t:?}",
                        file.display()
                    );
                } else if let Offer::Queued { arrival, .. } = offer {
                    let tx = link.serialisation_time_at(200, t);
                    let delay = row.delay.unwrap_or(Duration::from_millis(10));
                    assert!(arrival >= t + tx + delay, "{} at {t:?}", file.display());
                }
                while link.recv(t).is_some() {}
                t += Duration::from_millis(250);
            }
            let has_dead = trace.rows.iter().any(|r| r.loss == Some(1.0));
            assert_eq!(dead_rows > 0, has_dead, "{}", file.display());
        }
    }
}

/// The scenario shipped beside the traces loads (its trace relative to it) and builds links,
/// and the docs quote it and the step trace as they are.
#[test]
fn shipped_scenario_loads_and_docs_quote_the_files() {
    use aerotp_link::Network;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = root.join("bench/traces/two-paths.toml");
    let net = Network::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(net.paths.len(), 2);
    for (i, p) in net.paths.iter().enumerate() {
        for c in [p.forward_config(3), p.reverse_config(3)] {
            Link::new(c, i as u64).unwrap();
        }
    }
    let los = net.paths[0].forward_config(3);
    assert_eq!(los.trace.as_ref().unwrap().rows.len(), 151);
    assert_eq!(los.burst.unwrap().ber_bad, Some(1e-3));
    assert_eq!(net.paths[0].reverse_config(3).rate_bps, 256_000);
    let sat = &net.paths[1];
    assert_eq!(
        sat.forward_config(3).random_outage,
        sat.reverse_config(3).random_outage
    );
    let docs = std::fs::read_to_string(root.join("docs/link-model.md")).unwrap();
    for quoted in ["bench/traces/two-paths.toml", "bench/traces/steps.csv"] {
        let text = std::fs::read_to_string(root.join(quoted)).unwrap();
        assert!(
            docs.contains(&text),
            "docs/link-model.md no longer quotes {quoted} as it is"
        );
    }
}
