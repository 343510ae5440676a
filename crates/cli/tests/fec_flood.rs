//! Maximal-parity datagrams spoofed from a live sender's address, as an on-path attacker
//! makes them (docs/security.md, "State bounded under attack: FEC decoding"): `aerotp send` →
//! a relay → `aerotp recv`, the relay forwarding both ways and injecting, 40 or 400 times a
//! second, a datagram with the sender's own header (ports, tag, AUTH bit) naming parity 254
//! and carrying no parity at all. The receiver sees them from the sender's address and can
//! only find out by decoding. Without and with a key: every transfer arrives intact, and the
//! figures — goodput against the clean run, the receiver's `/metrics` latency — are printed
//! (`cargo test -p aerotp --test fec_flood -- --nocapture`, recorded in
//! docs/results/security.md).

use aerotp_testkit::relay::Relay;
use aerotp_testkit::{free_tcp, free_udp, KillOnDrop};
use aerotp_wire::{crc32c, Header};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

/// The sender's header as last seen, turned into a datagram naming parity 254 whose 1275
/// bytes hold no parity: header check and AUTH bit as the sender's, body junk.
fn spoofed(h: &Header, authed: bool) -> Vec<u8> {
    let h = Header {
        seq: h.seq.wrapping_add(3),
        fec: 254,
        len: 1000,
        ..*h
    };
    let mut out = if authed {
        h.to_bytes_auth().to_vec()
    } else {
        h.to_bytes().to_vec()
    };
    out.extend_from_slice(&[0x5A; 1000]);
    let crc = crc32c(&out[aerotp_wire::HEADER_LEN..]);
    out.extend_from_slice(&crc.to_be_bytes());
    out.resize(1275, 0xA5);
    out
}

/// The relay's forgery: the sender's last datagram's header, parity 254 (`None` before the
/// sender sent anything that parses).
fn forge(last: &[u8]) -> Option<Vec<u8>> {
    Header::parse_any(last)
        .ok()
        .map(|(h, authed)| spoofed(&h, authed))
}

/// One GET /metrics: how long until the whole answer was read.
fn scrape(addr: &str) -> Option<Duration> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    body.starts_with(b"HTTP/1.").then(|| t.elapsed())
}

/// Scrapes every 50 ms while `busy`; returns the latencies.
fn scraper(addr: String, busy: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let mut l = Vec::new();
        let t0 = Instant::now();
        while busy.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(120) {
            l.push(scrape(&addr).unwrap_or(Duration::from_secs(5)));
            std::thread::sleep(Duration::from_millis(50));
        }
        l
    })
}

const SIZE: usize = 5_000_000;

/// Sends the file through the relay at `per_second` spoofed datagrams a second: (wall time
/// of the send, worst and p99 metrics latency, injected).
fn run(
    d: &Path,
    relay: &Relay,
    key: &[&str],
    metrics: &str,
    per_second: u32,
    n: usize,
) -> (Duration, Duration, Duration, u64) {
    let data: Vec<u8> = (0..SIZE as u32)
        .map(|i| (i * 31 + i / 4099) as u8)
        .collect();
    let name = format!("f{n}.bin");
    let input = d.join(&name).to_str().unwrap().to_owned();
    std::fs::write(&input, &data).unwrap();
    relay.inject_per_second(per_second);
    let before = relay.injected();
    let busy = Arc::new(AtomicBool::new(true));
    let sc = scraper(metrics.to_owned(), busy.clone());
    let to = relay.front().to_string();
    let mut args = vec![
        "send", &input, "--to", &to, "--mode", "reliable", "--rate", "20mbit",
    ];
    args.extend_from_slice(key);
    let t = Instant::now();
    let o = bin().args(&args).output().unwrap();
    let wall = t.elapsed();
    busy.store(false, Ordering::Relaxed);
    relay.inject_per_second(0);
    let mut lat = sc.join().unwrap();
    assert!(
        o.status.success(),
        "send at {per_second}/s: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = d.join("rx").join(&name);
    let t = Instant::now();
    while std::fs::read(&out).ok().as_deref() != Some(&data[..]) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{name} arrived intact"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    lat.sort();
    let worst = lat.last().copied().unwrap_or_default();
    let p99 = lat
        .get(lat.len().saturating_sub(1) * 99 / 100)
        .copied()
        .unwrap_or_default();
    (wall, worst, p99, relay.injected() - before)
}

#[test]
fn spoofed_maximal_parity_floods_cost_the_transfer_little_keyed_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keyfile = d.join("k.key").to_str().unwrap().to_owned();
    assert!(bin().args(["keygen", &keyfile]).status().unwrap().success());
    std::fs::create_dir_all(d.join("rx")).unwrap();
    println!("figure: key  spoofed/s  injected  goodput_vs_clean  metrics_p99_ms  metrics_max_ms");
    let mut n = 0;
    for keyed in [false, true] {
        let key: Vec<&str> = if keyed {
            vec!["--key-file", &keyfile]
        } else {
            vec!["--insecure"]
        };
        let (listen, metrics) = (free_udp().to_string(), free_tcp().to_string());
        let rx = d.join("rx").to_str().unwrap().to_owned();
        let mut args = vec![
            "recv",
            "--listen",
            &listen,
            "-o",
            &rx,
            "--metrics",
            &metrics,
        ];
        args.extend_from_slice(&key);
        let _recv = KillOnDrop::new(
            bin()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let t = Instant::now();
        while scrape(&metrics).is_none() {
            assert!(t.elapsed() < Duration::from_secs(10), "recv serves metrics");
            std::thread::sleep(Duration::from_millis(50));
        }
        let relay = Relay::start(listen.parse().unwrap(), false, Some(Box::new(forge)));
        let mut clean: Option<Duration> = None;
        for per_second in [0, 40, 400] {
            n += 1;
            let (wall, worst, p99, injected) = run(d, &relay, &key, &metrics, per_second, n);
            let c = *clean.get_or_insert(wall);
            let ratio = c.as_secs_f64() / wall.as_secs_f64();
            println!(
                "figure: {:<4} {per_second:>9}  {injected:>8}  {ratio:>16.3}  {:>14.1}  {:>14.1}",
                if keyed { "yes" } else { "no" },
                p99.as_secs_f64() * 1e3,
                worst.as_secs_f64() * 1e3
            );
            if per_second > 0 {
                assert!(
                    injected > u64::from(per_second),
                    "the flood ran: {injected}"
                );
                // Loose bounds for a shared machine; the figures are the benchmark.
                assert!(ratio > 0.5, "goodput {ratio:.3} of clean at {per_second}/s");
                assert!(worst < Duration::from_secs(1), "metrics took {worst:?}");
            }
        }
    }
}
