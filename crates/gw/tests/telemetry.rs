//! Real range telemetry through the gateways in the TUN lab (5 Mb/s, 10 ms, BER 1e-5 both
//! ways), each stream replayed in the air namespace into the ingress once per UDP mode of the
//! gateways and received behind the egress in the ground namespace, where each datagram is
//! parsed and validated by the stream's own library and compared with what was sent, packet
//! by packet:
//!
//! * an IRIG 106 Chapter 10 recording built and checked with pychapter10 (TMATS, time,
//!   MIL-STD-1553 and ARINC-429 packets of 36 B to about 16 KB — many larger than one
//!   datagram of the link), as a Chapter 10 UDP stream (format 1 UDP transfer header),
//!   `tools/telemetry/ch10.py`;
//! * IRIG 106 Chapter 24 TmNS messages built and read with AcraNetwork (40 B to about 6 KB),
//!   one per datagram, `tools/telemetry/tmns.py`.
//!
//! * `reliable` and `quasi-reliable`: every packet arrives, valid and byte-identical, in order.
//! * `datagram`: every packet is either delivered intact or counted lost by the gateways
//!   (fragments the link lost); none dropped by a gateway for size or any other reason.
//!
//! The figures of docs/telemetry.md come from this test with `--nocapture` (packets
//! delivered, lost, and one-way delay percentiles per stream and mode);
//! `AEROTP_TELEMETRY_BER=1e-4` runs it at another bit-error rate, where only integrity is
//! asserted (nothing altered, nothing dropped by a gateway, every packet delivered or counted).
//!
//! Needs root (namespaces, TUN) and the virtual environment tools/telemetry/.venv with
//! pychapter10 and AcraNetwork (scripts/telemetry-deps.sh makes it; the tools run its
//! interpreter, never the system Python's; `AEROTP_TELEMETRY_PYTHON` names another one);
//! fails saying so unless AEROTP_SKIP_LAB=1. Bounded: each replay has a deadline; the lab's
//! namespaces are removed at the end.

#[path = "ns_gateway/mod.rs"]
mod ns_gateway;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_lab::{Lab, LabConfig, LinkConfig, Side};
use ns_gateway::{start_gateway, wait_output as wait};
use serde_json::Value;

const PACKETS: usize = 240;

fn tool(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tools/telemetry")
        .join(name)
}

/// The telemetry tools' interpreter: `AEROTP_TELEMETRY_PYTHON`, else the virtual
/// environment scripts/telemetry-deps.sh makes (tools/telemetry/.venv).
fn python() -> String {
    std::env::var("AEROTP_TELEMETRY_PYTHON").unwrap_or_else(|_| {
        tool(".venv/bin/python")
            .to_str()
            .expect("a UTF-8 path")
            .to_owned()
    })
}

fn lab_available() -> bool {
    if std::env::var("AEROTP_SKIP_LAB").is_ok_and(|v| v == "1") {
        eprintln!("AEROTP_SKIP_LAB=1: telemetry lab test skipped");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the telemetry lab test needs root (network namespaces, TUN); run as root or set \
         AEROTP_SKIP_LAB=1 to skip it"
    );
    let ok = Command::new(python())
        .args(["-c", "import chapter10, AcraNetwork"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with pychapter10 and AcraNetwork not found: run scripts/telemetry-deps.sh (it \
         makes that virtual environment), or set AEROTP_SKIP_LAB=1",
        python()
    );
    true
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

struct Replay {
    sent: Vec<Value>,
    got: Vec<Value>,
    lost: u64,
    dropped: u64,
}

/// Replays the recording through route `port` (ingress 127.0.0.1:port in air, receiver
/// 10.77.0.2:port+100 in ground) and returns what was sent and received, with the gateways'
/// lost and dropped counts over the replay.
fn replay(lab: &Lab, gws: [&aerotp_gw::Gateway; 2], dir: &Path, port: u16, stream: &str) -> Replay {
    let rec = dir.join(format!("flight.{stream}"));
    let out = dir.join(format!("recv-{stream}-{port}.jsonl"));
    let counts = |g: &aerotp_gw::Gateway| {
        (
            g.reg.udp_lost.load(Ordering::Relaxed),
            g.reg.udp_dropped.load(Ordering::Relaxed),
        )
    };
    let before = [counts(gws[0]), counts(gws[1])];
    let recv = lab
        .command(Side::Ground, &python())
        .arg(tool(&format!("{stream}.py")))
        .args(["recv", &format!("10.77.0.2:{}", port + 100)])
        .arg(&out)
        .args(["--count", &PACKETS.to_string(), "--idle", "6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("recv tool");
    std::thread::sleep(Duration::from_millis(400));
    let send = lab
        .command(Side::Air, &python())
        .arg(tool(&format!("{stream}.py")))
        .arg("send")
        .arg(&rec)
        .args([&format!("127.0.0.1:{port}"), "--rate", "2e6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("send tool");
    let deadline = Instant::now() + Duration::from_secs(40);
    let s = wait(send, "send tool", deadline);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let r = wait(recv, "recv tool", deadline);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let after = [counts(gws[0]), counts(gws[1])];
    Replay {
        sent: lines(&dir.join(format!("flight.{stream}.index"))),
        got: lines(&out),
        lost: (after[0].0 - before[0].0) + (after[1].0 - before[1].0),
        dropped: (after[0].1 - before[0].1) + (after[1].1 - before[1].1),
    }
}

/// Median and 99th percentile one-way delay (sender's send time to receiver's arrival
/// time, one host clock) of the packets delivered, in ms (nearest rank).
fn delays(r: &Replay) -> (f64, f64) {
    let mut d: Vec<f64> = r
        .got
        .iter()
        .filter_map(|v| {
            let s = &r.sent[v["seq"].as_u64()? as usize];
            Some((v["t"].as_f64()? - s["t"].as_f64()?) * 1e3)
        })
        .collect();
    if d.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    d.sort_by(f64::total_cmp);
    let q = |p: f64| d[((p * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1];
    (q(0.5), q(0.99))
}

#[test]
fn chapter10_and_tmns_through_the_gateways_in_every_udp_mode() {
    if !lab_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    for (stream, min_max) in [("ch10", 8_000), ("tmns", 4_000)] {
        let g = Command::new(python())
            .arg(tool(&format!("{stream}.py")))
            .arg("gen")
            .arg(w.join(format!("flight.{stream}")))
            .args(["--packets", &PACKETS.to_string(), "--seed", "7"])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        let gen: Value = serde_json::from_slice(&g.stdout).unwrap();
        assert!(
            gen["max"].as_u64().unwrap() > min_max,
            "{stream}: packets larger than a datagram: {gen}"
        );
    }
    let ber: f64 = std::env::var("AEROTP_TELEMETRY_BER")
        .ok()
        .map(|v| {
            v.parse()
                .expect("AEROTP_TELEMETRY_BER: a bit-error rate such as 1e-4")
        })
        .unwrap_or(1e-5);
    let link = LinkConfig {
        rate_bps: 5_000_000,
        delay: Duration::from_millis(10),
        ber,
        ..LinkConfig::default()
    };
    let lab = Lab::start(LabConfig {
        forward: link.clone(),
        reverse: link,
        seed: 11,
        name: Some("ch10".into()),
    })
    .expect("lab start");
    let modes = [
        (16001u16, "reliable"),
        (16002, "quasi-reliable"),
        (16003, "datagram"),
    ];
    let egress = start_gateway(
        &lab,
        Side::Ground,
        aerotp_gw::Role::Egress,
        FileConfig {
            listen: Some("10.77.0.2:9000".into()),
            allow: modes
                .iter()
                .map(|(p, _)| format!("10.77.0.2:{}", p + 100))
                .collect(),
            rate: Some("5mbit".into()),
            ..Default::default()
        },
    );
    let ingress = start_gateway(
        &lab,
        Side::Air,
        aerotp_gw::Role::Ingress,
        FileConfig {
            peer: Some("10.77.0.2:9000".into()),
            rate: Some("5mbit".into()),
            flows: modes
                .iter()
                .map(|(p, m)| FlowSpec {
                    udp_listen: Some(format!("127.0.0.1:{p}")),
                    dest: Some(format!("10.77.0.2:{}", p + 100)),
                    mode: Some((*m).into()),
                    class: Some("telemetry".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    for (stream, (port, mode)) in ["ch10", "tmns"]
        .into_iter()
        .flat_map(|s| modes.map(|m| (s, m)))
    {
        let r = replay(&lab, [&ingress.gw, &egress.gw], w, port, stream);
        let valid = r.got.iter().filter(|v| v["valid"] == true).count();
        let (p50, p99) = delays(&r);
        eprintln!(
            "BER {ber:e} {stream} {mode}: {} packets sent, {} received ({valid} valid), gateways: \
             {} lost, {} dropped; one-way delay p50 {p50:.1} ms, p99 {p99:.1} ms",
            r.sent.len(),
            r.got.len(),
            r.lost,
            r.dropped
        );
        assert_eq!(r.sent.len(), PACKETS);
        assert!(r.sent.iter().all(|v| v["valid"] == true));
        assert_eq!(
            valid,
            r.got.len(),
            "{mode}: every packet delivered is valid Chapter 10"
        );
        assert_eq!(
            r.dropped, 0,
            "{mode}: no datagram dropped by a gateway (size or other)"
        );
        // Each packet received is one that was sent, intact (same bytes), at most once, in order.
        let seqs: Vec<u64> = r.got.iter().map(|v| v["seq"].as_u64().unwrap()).collect();
        assert!(
            seqs.windows(2).all(|p| p[0] < p[1]),
            "{mode}: in order, once"
        );
        for v in &r.got {
            let s = &r.sent[v["seq"].as_u64().unwrap() as usize];
            assert_eq!(
                v["sha256"], s["sha256"],
                "{mode}: packet {} altered",
                v["seq"]
            );
        }
        match mode {
            "reliable" | "quasi-reliable" if ber <= 1e-5 => {
                assert_eq!(r.got.len(), PACKETS, "{mode}: every packet arrives");
                assert_eq!(r.lost, 0, "{mode}: nothing lost");
            }
            "reliable" => assert_eq!(r.got.len(), PACKETS, "reliable: every packet arrives"),
            _ => {
                // The gateways count a loss by the gap it leaves in the sequence, so packets
                // lost after the last one that arrived leave no gap to count (nothing follows
                // them): those are the tail, and there may be at most a couple.
                let got: std::collections::BTreeSet<u64> =
                    r.got.iter().filter_map(|v| v["seq"].as_u64()).collect();
                let missing: Vec<u64> = (0..PACKETS as u64).filter(|s| !got.contains(s)).collect();
                let last = got.iter().next_back().copied().unwrap_or(0);
                let tail = PACKETS as u64 - 1 - last;
                assert!(
                    tail <= 2,
                    "{mode}: the last {tail} packets lost ({missing:?})"
                );
                assert_eq!(
                    r.got.len() as u64 + r.lost + tail,
                    PACKETS as u64,
                    "{mode}: every packet delivered or counted lost by the link, but for a lost \
                     tail of {tail} (missing {missing:?})"
                )
            }
        }
    }
    ingress.stop();
    egress.stop();
    lab.stop().expect("lab stop");
}
