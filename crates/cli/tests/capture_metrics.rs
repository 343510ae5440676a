//! `--pcap` on `aerotp send`, `recv` and `link`, and `--metrics` on `send` and `recv`, as a
//! user runs them (the built binary, loopback only).
//!
//! * The captures of a send→recv transfer hold exactly the datagrams the runtime counted
//!   (packets + dropped records = datagrams sent + received, per interface when nothing was
//!   dropped), every datagram the receiver captured is one the sender captured, byte for
//!   byte, with real timestamps and addresses; and tshark with the dissector decodes them with
//!   no malformed packet (skipped, said so, when tshark is not installed).
//! * The relay's capture holds what entered the link and what left it: the counts are the
//!   link model's, and every corrupted TPDU on "out" has its original on "in".
//! * The metrics endpoints answer during a transfer with Prometheus text in which every
//!   family has HELP and TYPE, counters end in `_total`, every value parses, counters grow.
//! * A capture file that cannot be created and a metrics address that cannot be bound stop
//!   the command at once with a message naming them.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aerotp_capture::{read_capture, CapturedPacket};
use aerotp_testkit::{free_tcp, free_udp, prom, random, tshark, wait_bounded, KillOnDrop};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aerotp"))
}

fn spawn(args: &[&str]) -> KillOnDrop {
    KillOnDrop::new(
        bin()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn json_of(out: &Output, what: &str) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(s.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON ({e}): {s}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Checks a send or recv capture against the JSON the command printed.
fn check_endpoint_capture(file: &Path, j: &serde_json::Value, window: (Duration, Duration)) {
    let (names, packets) = read_capture(file).unwrap();
    assert_eq!(names, vec!["sent", "received"]);
    let c = &j["capture"];
    let (written, dropped) = (u(&c["packets"]), u(&c["dropped"]));
    let (sent, received) = (u(&c["udp_datagrams_sent"]), u(&c["udp_datagrams_received"]));
    assert_eq!(packets.len() as u64, written, "{}", file.display());
    assert_eq!(written + dropped, sent + received, "{c}");
    if dropped == 0 {
        let on = |i| packets.iter().filter(|p| p.iface == i).count() as u64;
        assert_eq!((on(0), on(1)), (sent, received), "{c}");
    }
    for p in &packets {
        assert!(
            p.at >= window.0 && p.at <= window.1,
            "timestamp {:?} outside the run {window:?}",
            p.at
        );
        assert!(
            p.src.ip().is_loopback() && p.dst.ip().is_loopback(),
            "{p:?}"
        );
    }
}

/// tshark with the dissector: (frame interface, protocols, type, CRC status, malformed) per
/// packet.
fn tshark_rows(file: &Path) -> Vec<Vec<String>> {
    let fields = ["frame.interface_id", "frame.protocols", "aerotp.type"];
    let more = ["aerotp.crc.status", "_ws.malformed"];
    tshark::fields(file, &[&fields[..], &more[..]].concat())
}

#[test]
fn send_and_recv_captures_hold_what_the_runtime_counted_and_decode() {
    let dir = tempfile::tempdir().unwrap();
    let data = random(1_500_000, 11);
    let src = dir.path().join("payload.bin");
    std::fs::write(&src, &data).unwrap();
    let (rp, sp) = (
        dir.path().join("recv.pcapng"),
        dir.path().join("send.pcapng"),
    );
    let out = dir.path().join("got.bin");
    let port = free_udp().port();
    let listen = format!("127.0.0.1:{port}");
    let start = now();
    let recv = spawn(&[
        "recv",
        "--insecure",
        "--listen",
        &listen,
        "-o",
        out.to_str().unwrap(),
        "--json",
        "--pcap",
        rp.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&[
        "send",
        "--insecure",
        src.to_str().unwrap(),
        "--to",
        &listen,
        "--mode",
        "reliable",
        "--rate",
        "100mbit",
        "--json",
        "--pcap",
        sp.to_str().unwrap(),
    ]);
    let s = json_of(&wait_bounded(send.take(), Duration::from_secs(60)), "send");
    let r = json_of(&wait_bounded(recv.take(), Duration::from_secs(60)), "recv");
    let end = now();
    assert_eq!(std::fs::read(&out).unwrap(), data);
    check_endpoint_capture(&sp, &s, (start, end));
    check_endpoint_capture(&rp, &r, (start, end));
    let (_, sent) = read_capture(&sp).unwrap();
    let (_, got) = read_capture(&rp).unwrap();
    // The engine's own count of data TPDUs fits in what the sender's capture holds.
    let sent_by_sender: Vec<&CapturedPacket> = sent.iter().filter(|p| p.iface == 0).collect();
    assert!(u(&s["tpdus_sent"]) <= sent_by_sender.len() as u64);
    // Every datagram the receiver read is one the sender wrote, byte for byte, addressed to
    // the listening socket from the sender's socket (a local address, not 0.0.0.0).
    let mut offered: HashMap<&[u8], usize> = HashMap::new();
    for p in &sent_by_sender {
        *offered.entry(&p.payload).or_default() += 1;
        assert_eq!(p.dst, listen.parse::<SocketAddr>().unwrap());
    }
    let arrived: Vec<&CapturedPacket> = got.iter().filter(|p| p.iface == 1).collect();
    for p in &arrived {
        let n = offered.get_mut(p.payload.as_slice()).unwrap_or_else(|| {
            panic!("the receiver captured a datagram the sender did not: {p:?}")
        });
        assert!(*n > 0, "received more copies than were sent");
        *n -= 1;
        assert_eq!(p.src, sent_by_sender[0].src);
    }
    // Loopback loses nothing the receiver was still there for: what the sender sent and the
    // receiver did not read is at most what it retransmitted (a copy the receiver's kernel
    // dropped while it was descheduled) and the few datagrams of the close sent while the
    // receiver was exiting.
    assert!(
        arrived.len() as u64 + u(&s["tpdus_retransmitted"]) + 10 >= sent_by_sender.len() as u64,
        "{} of {}",
        arrived.len(),
        sent_by_sender.len()
    );
    if !tshark::required("the capture's dissector part") {
        return;
    }
    for f in [&sp, &rp] {
        let rows = tshark_rows(f);
        let (_, packets) = read_capture(f).unwrap();
        assert_eq!(rows.len(), packets.len());
        for (i, row) in rows.iter().enumerate() {
            assert!(
                row[1].contains("aerotp"),
                "{} frame {}: {row:?}",
                f.display(),
                i + 1
            );
            assert!(
                !row[2].is_empty(),
                "{} frame {}: no type {row:?}",
                f.display(),
                i + 1
            );
            assert_eq!(row[3], "good", "{} frame {}: {row:?}", f.display(), i + 1);
            assert!(
                row[4].is_empty(),
                "{} frame {}: malformed {row:?}",
                f.display(),
                i + 1
            );
        }
    }
}

/// Bits that differ between two equally long datagrams.
fn bit_distance(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[test]
fn link_capture_shows_what_entered_and_left_with_corrupted_beside_original() {
    let dir = tempfile::tempdir().unwrap();
    let data = random(400_000, 5);
    let src = dir.path().join("p.bin");
    std::fs::write(&src, &data).unwrap();
    let lp = dir.path().join("link.pcapng");
    let (rport, lport) = (free_udp().port(), free_udp().port());
    let (rl, ll) = (format!("127.0.0.1:{rport}"), format!("127.0.0.1:{lport}"));
    let recv = spawn(&[
        "recv",
        "--insecure",
        "--listen",
        &rl,
        "-o",
        dir.path().join("o.bin").to_str().unwrap(),
        "--json",
    ]);
    let link = spawn(&[
        "link",
        "--listen",
        &ll,
        "--to",
        &rl,
        "--rate",
        "20mbit",
        "--delay",
        "5ms",
        "--ber",
        "1e-4",
        "--seed",
        "3",
        "--pcap",
        lp.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let send = spawn(&[
        "send",
        "--insecure",
        src.to_str().unwrap(),
        "--to",
        &ll,
        "--mode",
        "hybrid-nack-mack",
        "--rate",
        "20mbit",
        "--json",
    ]);
    json_of(&wait_bounded(send.take(), Duration::from_secs(60)), "send");
    json_of(&wait_bounded(recv.take(), Duration::from_secs(60)), "recv");
    // Ctrl-C: the relay stops, closes the capture and prints its counters.
    let st = Command::new("kill")
        .args(["-INT", &link.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let lo = wait_bounded(link.take(), Duration::from_secs(20));
    assert_eq!(
        lo.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&lo.stderr)
    );
    // The relay prints its counters as one pretty-printed object.
    let l: serde_json::Value = serde_json::from_slice(&lo.stdout).unwrap();
    let (names, packets) = read_capture(&lp).unwrap();
    assert_eq!(names, vec!["in", "out"]);
    let cnt = |k: &str, d: &str| u(&l[d][k]);
    assert_eq!(u(&l["capture"]["dropped"]), 0, "{l}");
    let ins: Vec<&CapturedPacket> = packets.iter().filter(|p| p.iface == 0).collect();
    let outs: Vec<&CapturedPacket> = packets.iter().filter(|p| p.iface == 1).collect();
    assert_eq!(
        ins.len() as u64,
        cnt("offered_packets", "forward") + cnt("offered_packets", "reverse")
    );
    assert_eq!(
        outs.len() as u64,
        cnt("delivered_packets", "forward") + cnt("delivered_packets", "reverse")
            - u(&l["send_errors"])
    );
    // Every delivered datagram is one that entered, intact or with a few flipped bits.
    let mut by_len: BTreeMap<usize, Vec<&[u8]>> = BTreeMap::new();
    for p in &ins {
        by_len.entry(p.payload.len()).or_default().push(&p.payload);
    }
    let mut corrupted = 0u64;
    for p in &outs {
        let same = by_len.get(&p.payload.len()).map_or(&[][..], Vec::as_slice);
        if same.contains(&p.payload.as_slice()) {
            continue;
        }
        corrupted += 1;
        let closest = same
            .iter()
            .map(|b| bit_distance(b, &p.payload))
            .min()
            .unwrap_or(u32::MAX);
        assert!(
            closest <= 16,
            "a corrupted datagram without its original ({closest} bits)"
        );
    }
    let flipped = cnt("corrupted_packets", "forward") + cnt("corrupted_packets", "reverse");
    let lost_header = cnt("lost_header_corrupt", "forward") + cnt("lost_header_corrupt", "reverse");
    assert!(corrupted > 0, "no corrupted datagram at BER 1e-4");
    // Corrupted in the payload and delivered = what differs from every original.
    assert!(
        corrupted <= flipped && corrupted + lost_header >= flipped,
        "{corrupted} {flipped} {lost_header}"
    );
    // Forward in: client → listening socket; forward out: relay → receiver.
    assert!(ins.iter().any(|p| p.dst.port() == lport));
    assert!(outs.iter().any(|p| p.dst.port() == rport));
    if tshark::required("the link capture's dissector part") {
        let rows = tshark_rows(&lp);
        assert_eq!(rows.len(), packets.len());
        let bad = rows.iter().filter(|r| r[0] == "1" && r[3] == "bad").count();
        assert!(bad > 0, "the dissector shows no failed CRC on \"out\"");
        assert!(rows.iter().all(|r| r[4].is_empty()), "malformed packets");
        assert!(rows.iter().filter(|r| r[0] == "0").all(|r| r[3] == "good"));
    }
}

/// One scrape: the body, or `None` if nothing listens; a 200 in the exposition's type.
fn scrape(addr: &str) -> Option<String> {
    let (head, body) = prom::get(addr)?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    Some(body)
}

#[test]
fn metrics_during_a_transfer_are_well_formed_and_grow() {
    let dir = tempfile::tempdir().unwrap();
    let data = random(2_500_000, 9);
    let src = dir.path().join("m.bin");
    std::fs::write(&src, &data).unwrap();
    let port = free_udp().port();
    let listen = format!("127.0.0.1:{port}");
    let (rm, sm) = (
        format!("127.0.0.1:{}", free_tcp().port()),
        format!("127.0.0.1:{}", free_tcp().port()),
    );
    let recv = spawn(&[
        "recv",
        "--insecure",
        "--listen",
        &listen,
        "-o",
        dir.path().join("o.bin").to_str().unwrap(),
        "--json",
        "--metrics",
        &rm,
    ]);
    std::thread::sleep(Duration::from_millis(300));
    // 2.5 MB at 10 Mb/s: about 2 s to scrape in.
    let send = spawn(&[
        "send",
        "--insecure",
        src.to_str().unwrap(),
        "--to",
        &listen,
        "--mode",
        "reliable",
        "--rate",
        "10mbit",
        "--json",
        "--metrics",
        &sm,
    ]);
    let mut recv_scrapes = Vec::new();
    let mut send_scrapes = Vec::new();
    let t = Instant::now();
    let mut send = Some(send);
    while t.elapsed() < Duration::from_secs(30) && recv_scrapes.len() < 200 {
        if let Some(b) = scrape(&rm) {
            recv_scrapes.push(prom::parse(&b, "aerotp_").by_series());
        }
        if let Some(b) = scrape(&sm) {
            send_scrapes.push(prom::parse(&b, "aerotp_").by_series());
        }
        let done = send.as_mut().unwrap().child().try_wait().unwrap().is_some();
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let s = json_of(
        &wait_bounded(send.take().unwrap().take(), Duration::from_secs(60)),
        "send",
    );
    json_of(&wait_bounded(recv.take(), Duration::from_secs(60)), "recv");
    assert!(
        recv_scrapes.len() >= 3,
        "only {} scrapes of recv",
        recv_scrapes.len()
    );
    assert!(
        send_scrapes.len() >= 3,
        "only {} scrapes of send",
        send_scrapes.len()
    );
    let get = |m: &BTreeMap<String, f64>, k: &str| *m.get(k).unwrap_or_else(|| panic!("no {k}"));
    let (first, last) = (&recv_scrapes[0], recv_scrapes.last().unwrap());
    assert!(get(last, "aerotp_bytes_delivered_total") > get(first, "aerotp_bytes_delivered_total"));
    assert!(
        get(last, "aerotp_udp_datagrams_received_total")
            > get(first, "aerotp_udp_datagrams_received_total")
    );
    let (first, last) = (&send_scrapes[0], send_scrapes.last().unwrap());
    assert!(get(last, "aerotp_tpdus_sent_total") > get(first, "aerotp_tpdus_sent_total"));
    assert!(get(last, "aerotp_tpdus_sent_total") <= u(&s["tpdus_sent"]) as f64);
    // Counters never go down from one scrape to the next.
    for w in send_scrapes.windows(2).chain(recv_scrapes.windows(2)) {
        for (k, v) in &w[0] {
            if k.split('{').next().unwrap().ends_with("_total") {
                assert!(w[1].get(k).is_some_and(|n| n >= v), "{k} went down");
            }
        }
    }
    // A live connection shows its gauges, with its labels.
    assert!(send_scrapes.iter().any(|m| m
        .keys()
        .any(|k| k.starts_with("aerotp_srtt_seconds{connection="))));
    assert!(recv_scrapes
        .iter()
        .any(|m| get(m, "aerotp_connections") >= 1.0));
}

fn expect_error(args: &[&str], needle: &str) {
    let out = wait_bounded(
        bin()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn unwritable_capture_and_busy_metrics_address_fail_before_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    let bad: PathBuf = dir.path().join("no-such-dir/c.pcapng");
    let bad = bad.to_str().unwrap();
    let msg = format!("cannot create capture file {bad}");
    // A UDP "receiver" that counts what reaches it: nothing may.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let to = sink.local_addr().unwrap().to_string();
    expect_error(
        &[
            "send",
            "--insecure",
            f.to_str().unwrap(),
            "--to",
            &to,
            "--mode",
            "reliable",
            "--pcap",
            bad,
        ],
        &msg,
    );
    let l = format!("127.0.0.1:{}", free_udp().port());
    expect_error(&["recv", "--insecure", "--listen", &l, "--pcap", bad], &msg);
    expect_error(&["link", "--listen", &l, "--to", &to, "--pcap", bad], &msg);
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    expect_error(
        &[
            "send",
            "--insecure",
            f.to_str().unwrap(),
            "--to",
            &to,
            "--mode",
            "reliable",
            "--metrics",
            &busy,
        ],
        &format!("--metrics {busy}: cannot listen"),
    );
    expect_error(
        &["recv", "--insecure", "--listen", &l, "--metrics", &busy],
        "--metrics",
    );
    let mut b = [0u8; 2048];
    assert!(
        sink.recv_from(&mut b).is_err(),
        "a datagram was sent before the error"
    );
}
