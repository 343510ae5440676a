//! Real, unmodified programs through the gateways in the TUN lab (docs/lab.md): 5 Mb/s,
//! 10 ms, BER 1e-5 both ways. The ingress runs in the air namespace, the egress in the ground
//! namespace (each on a tokio runtime whose threads were started inside the namespace), and
//! at the same time:
//!
//! * `curl` downloads a 2 MB random file from `python3 -m http.server` (near-reliable, bulk);
//!   SHA-256 compared;
//! * a plain-socket Python client streams 1.5 MB over about 6 s to a plain-socket Python
//!   receiver (reliable, control); every byte compared;
//! * a Python sender emits 300 sequence-numbered UDP telemetry datagrams at 50/s to a Python
//!   receiver (quasi-reliable, telemetry); every datagram received is compared, and
//!   delivered + reported lost/dropped = sent.
//!
//! Needs root (namespaces, TUN), `python3` and `curl` (scripts/lab-deps.sh); fails saying so
//! unless AEROTP_SKIP_LAB=1. Bounded: every program has a deadline (the whole test takes
//! about 20 s); the lab's namespaces are removed at the end and checked gone.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aerotp_gw::config::{FileConfig, FlowSpec};
use aerotp_lab::{Lab, LabConfig, LinkConfig, Side};

mod ns_gateway;
use aerotp_testkit::random;
use ns_gateway::start_gateway;

mod labhost;
use labhost::lab_available;

/// Waits for `c` to exit within `deadline`; kills it and fails otherwise.
fn wait(mut c: Child, what: &str, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(s) = c.try_wait().expect("try_wait") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{what} did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn py(lab: &Lab, side: Side, script: &str, args: &[&str]) -> Child {
    lab.command(side, "python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3")
}

const TCP_RECEIVER: &str = r#"
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 7000)); s.listen(1); s.settimeout(60)
c, _ = s.accept(); c.settimeout(60)
with open(sys.argv[1], "wb") as f:
    while True:
        b = c.recv(65536)
        if not b: break
        f.write(b)
c.close()
"#;

const TCP_SOURCE: &str = r#"
import socket, sys, time
data = open(sys.argv[1], "rb").read()
s = socket.create_connection(("127.0.0.1", 8081), timeout=60)
n = 30
step = (len(data) + n - 1) // n
for i in range(n):
    s.sendall(data[i * step:(i + 1) * step])
    time.sleep(0.2)
s.shutdown(socket.SHUT_WR)
while s.recv(65536): pass
print("sent", len(data))
"#;

const UDP_RECEIVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.2", 14550)); s.settimeout(30)
with open(sys.argv[1], "w") as f:
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        f.write(b.hex() + "\n"); f.flush()
        s.settimeout(4)
"#;

const UDP_SOURCE: &str = r#"
import socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(300):
    s.sendto(struct.pack(">I", i) + bytes((i * 7 + j) % 256 for j in range(196)), ("127.0.0.1", 14550))
    time.sleep(0.02)
print("sent 300")
"#;

fn telemetry(i: u32) -> Vec<u8> {
    let mut v = i.to_be_bytes().to_vec();
    v.extend((0..196u32).map(|j| ((i * 7 + j) % 256) as u8));
    v
}

fn sha(p: &Path) -> [u8; 32] {
    aerotp_testkit::sha256_file(p)
}

#[test]
fn real_programs_through_the_gateways_in_a_lossy_lab() {
    if !lab_available(
        "gateway lab test",
        "network namespaces, TUN",
        &[("python3", "--version"), ("curl", "--version")],
    ) {
        return;
    }
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(100);
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    for d in ["srv", "store-in", "store-eg"] {
        std::fs::create_dir(w.join(d)).unwrap();
    }
    std::fs::write(w.join("srv/blob"), random(2_000_000, 1)).unwrap();
    std::fs::write(w.join("stream.src"), random(1_500_000, 2)).unwrap();
    let link = LinkConfig {
        rate_bps: 5_000_000,
        delay: Duration::from_millis(10),
        ber: 1e-5,
        ..LinkConfig::default()
    };
    let lab = Lab::start(LabConfig {
        forward: link.clone(),
        reverse: link,
        seed: 5,
        name: Some("gwtest".into()),
    })
    .expect("lab start");
    let (air_ns, ground_ns) = (lab.air_ns().to_owned(), lab.ground_ns().to_owned());
    let s = |p: &str| w.join(p).to_string_lossy().into_owned();

    // Ground: the HTTP server and the receivers.
    let http = lab
        .command(Side::Ground, "python3")
        .args([
            "-m",
            "http.server",
            "-b",
            "10.77.0.2",
            "-d",
            &s("srv"),
            "8000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("http.server");
    let tcp_rx = py(&lab, Side::Ground, TCP_RECEIVER, &[&s("stream.out")]);
    let udp_rx = py(&lab, Side::Ground, UDP_RECEIVER, &[&s("udp.out")]);
    let egress = start_gateway(
        &lab,
        Side::Ground,
        aerotp_gw::Role::Egress,
        FileConfig {
            listen: Some("10.77.0.2:9000".into()),
            tcp_connect: Some("10.77.0.2:8000".into()),
            udp_connect: Some("10.77.0.2:14550".into()),
            allow: vec!["10.77.0.2:7000".into()],
            rate: Some("5mbit".into()),
            store: Some(w.join("store-eg")),
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
            store: Some(w.join("store-in")),
            flows: vec![
                FlowSpec {
                    tcp_listen: Some("127.0.0.1:8080".into()),
                    mode: Some("near-reliable".into()),
                    class: Some("bulk".into()),
                    ..Default::default()
                },
                FlowSpec {
                    tcp_listen: Some("127.0.0.1:8081".into()),
                    dest: Some("10.77.0.2:7000".into()),
                    mode: Some("reliable".into()),
                    class: Some("control".into()),
                    ..Default::default()
                },
                FlowSpec {
                    udp_listen: Some("127.0.0.1:14550".into()),
                    mode: Some("quasi-reliable".into()),
                    class: Some("telemetry".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    );
    // Let the server and receivers bind.
    std::thread::sleep(Duration::from_millis(1500));

    // Air: the three clients at once.
    let curl = lab
        .command(Side::Air, "curl")
        .args(["-sS", "--max-time", "80", "-o", &s("gw.bin")])
        .args(["-w", "%{time_total} s %{size_download} B\n"])
        .arg("http://127.0.0.1:8080/blob")
        .stdout(Stdio::inherit())
        .spawn()
        .expect("curl");
    let tcp_tx = py(&lab, Side::Air, TCP_SOURCE, &[&s("stream.src")]);
    let udp_tx = py(&lab, Side::Air, UDP_SOURCE, &[]);

    let c = wait(curl, "curl", deadline);
    assert!(c.success(), "curl failed: {c}");
    let st = wait(tcp_tx, "TCP stream source", deadline);
    assert!(st.success(), "TCP stream source failed: {st}");
    let st = wait(tcp_rx, "TCP stream receiver", deadline);
    assert!(st.success(), "TCP stream receiver failed: {st}");
    let st = wait(udp_tx, "UDP sender", deadline);
    assert!(st.success(), "UDP sender failed: {st}");
    let st = wait(udp_rx, "UDP receiver", deadline);
    assert!(st.success(), "UDP receiver failed: {st}");

    // Every byte compared.
    assert_eq!(
        sha(&w.join("gw.bin")),
        sha(&w.join("srv/blob")),
        "HTTP download differs"
    );
    let (a, b) = (
        std::fs::read(w.join("stream.src")).unwrap(),
        std::fs::read(w.join("stream.out")).unwrap(),
    );
    assert_eq!(b.len(), a.len(), "TCP stream length");
    assert!(a == b, "TCP stream bytes differ");
    let lines = std::fs::read_to_string(w.join("udp.out")).unwrap();
    let mut seqs = Vec::new();
    for l in lines.lines() {
        let d: Vec<u8> = (0..l.len() / 2)
            .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let i = u32::from_be_bytes(d[..4].try_into().unwrap());
        assert_eq!(d, telemetry(i), "telemetry datagram {i} altered");
        seqs.push(i);
    }
    assert!(
        seqs.windows(2).all(|p| p[0] < p[1]),
        "telemetry in order, once"
    );
    let lost = egress.gw.reg.udp_lost.load(Ordering::Relaxed);
    let dropped = ingress.gw.reg.udp_dropped.load(Ordering::Relaxed)
        + egress.gw.reg.udp_dropped.load(Ordering::Relaxed);
    eprintln!(
        "telemetry: {} of 300 delivered, {lost} reported lost, {dropped} dropped",
        seqs.len()
    );
    assert_eq!(
        seqs.len() as u64 + lost + dropped,
        300,
        "every datagram delivered or reported"
    );
    assert!(seqs.len() >= 250, "most telemetry delivered");

    let (fwd, rev) = lab.stats();
    eprintln!(
        "link: forward {} pkts {} corrupted, reverse {} pkts {} corrupted; {:.1} s",
        fwd.delivered_packets,
        fwd.corrupted_packets,
        rev.delivered_packets,
        rev.corrupted_packets,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        fwd.corrupted_packets + rev.corrupted_packets > 0,
        "the link was meant to be lossy"
    );
    ingress.stop();
    egress.stop();
    let mut http = http;
    let _ = http.kill();
    let _ = http.wait();
    lab.stop().expect("lab teardown");
    let ns = String::from_utf8_lossy(
        &std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip netns list")
            .stdout,
    )
    .into_owned();
    assert!(
        !ns.contains(&air_ns) && !ns.contains(&ground_ns),
        "namespaces left: {ns}"
    );
    assert!(t0.elapsed() < Duration::from_secs(120));
}
