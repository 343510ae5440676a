//! The Wireshark dissector (tools/wireshark/aerotp.lua) against captures the simulator writes:
//! all seven modes, with bit errors so FEC parity, corrupted TPDUs, NACKs, SNACKs and
//! retransmissions appear. tshark decodes each capture; every packet must be AeroTP, every
//! TPDU type known, nothing malformed, and the dissector's header-check and CRC verdicts must
//! equal the Rust parser's (crates/wire) on every packet, corrupted ones included. A capture
//! with one header bit flipped must show a failed check; a TPDU on an unusual port must still
//! be found (heuristic).
//!
//! Skipped, with the reason printed, only when tshark is not installed (scripts/lab-deps.sh
//! installs it; CI runs it).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use aerotp_capture::{Capture, SimCapture};
use aerotp_proto::Mode;
use aerotp_sim::{run_once_tapped, Scenario, SimMode, Topology};
use aerotp_wire::{parse_tpdu, ControlBody};
use pcap_file::pcapng::{Block, PcapNgReader};

/// One decoded packet: the fields the test reads, in the order of `FIELDS`.
const FIELDS: [&str; 8] = [
    "frame.interface_id",
    "frame.protocols",
    "aerotp.type",
    "aerotp.hec.status",
    "aerotp.crc.status",
    "_ws.malformed",
    "aerotp.analysis.retransmission",
    "aerotp.fec.codewords",
];

fn tshark(file: &Path, extra: &[&str]) -> Vec<Vec<String>> {
    let all: Vec<&str> = FIELDS.iter().chain(extra).copied().collect();
    aerotp_testkit::tshark::fields(file, &all)
}

/// The UDP payloads of a capture, in order.
fn payloads(file: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapNgReader::new(std::fs::File::open(file).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(b) = r.next_block() {
        if let Block::EnhancedPacket(e) = b.unwrap() {
            let ihl = if e.data[0] >> 4 == 4 { 20 } else { 40 };
            out.push(e.data[ihl + 8..].to_vec());
        }
    }
    out
}

const KNOWN_TYPES: [&str; 16] = [
    "DATA",
    "DATA+ASYN",
    "DATA+AFIN",
    "DATA+ASYN+AFIN",
    "ASYNACK",
    "MACK",
    "ACK",
    "AFINACK",
    "NACK",
    "SNACK",
    "RPT",
    "RST",
    "REPAIR",
    "SOURCE",
    "CHALLENGE",
    "ECHO",
];

/// Whether every part of a (possibly combined, "MACK+NACK") type is a known one.
fn known(t: &str) -> bool {
    KNOWN_TYPES.contains(&t)
        || t.split('+')
            .all(|p| KNOWN_TYPES.contains(&p) && !p.starts_with("DATA"))
}

#[test]
fn every_mode_decodes_in_tshark_and_checks_agree_with_the_parser() {
    if !aerotp_testkit::tshark::required("the dissector test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut types: BTreeSet<String> = BTreeSet::new();
    let (mut retx, mut fec, mut corrupted) = (0usize, 0usize, 0usize);
    let mut mack_ranges = 0usize;
    let mut repairs = 0usize;
    let mut sources = 0usize;
    let mut cookies = 0usize;
    let mut per_mode = BTreeMap::new();
    for mode in Mode::ALL {
        let mut s = Scenario {
            mode: SimMode::Aero(mode),
            size: 150_000,
            topology: Topology::TwoNode,
            ..Scenario::default()
        };
        // Enough bit errors that FEC, NACK/SNACK and retransmissions show in a small transfer.
        s.set("ber", &toml::Value::Float(2e-5)).unwrap();
        if mode == Mode::Unreliable || mode == Mode::Datagram {
            s.set("fec", &toml::Value::String("p8".into())).unwrap();
        }
        // Datagram mode repairs at a fixed ratio: numbered SOURCE datagrams and REPAIRs.
        if mode == Mode::Datagram {
            s.set("erasure", &toml::Value::String("1.25".into()))
                .unwrap();
        }
        // Without parity some TPDUs arrive corrupted, so NACKs and SNACKs show too (FEC auto,
        // these modes' default, would correct nearly all of them at this BER).
        if matches!(mode, Mode::Reliable | Mode::NearReliable | Mode::HybridNack) {
            s.set("fec", &toml::Value::String("off".into())).unwrap();
        }
        s.validate().unwrap();
        let file = dir.path().join(format!("{}.pcapng", mode.name()));
        let mut cap = SimCapture::create(&file).unwrap();
        let r = run_once_tapped(&s, 7, &mut cap);
        let n = cap.finish().unwrap();
        assert!(n > 0, "{mode}: nothing captured");
        let rows = tshark(
            &file,
            &[
                "aerotp.mack.range_count",
                "aerotp.repair.span",
                "aerotp.cookie",
                "aerotp.cid",
            ],
        );
        let data = payloads(&file);
        assert_eq!(rows.len(), data.len(), "{mode}: tshark saw another count");
        for (i, (row, bytes)) in rows.iter().zip(&data).enumerate() {
            let frame = i + 1;
            assert!(
                row[1].contains("aerotp"),
                "{mode} frame {frame}: not decoded as AeroTP: {row:?}"
            );
            assert!(row[5].is_empty(), "{mode} frame {frame}: malformed {row:?}");
            let t = &row[2];
            assert!(known(t), "{mode} frame {frame}: unknown type {t:?}");
            // The dissector's verdicts equal the Rust parser's.
            let parsed = parse_tpdu(bytes);
            let hec_ok = !matches!(parsed, Err(aerotp_wire::WireError::HeaderCheck));
            assert_eq!(row[3] == "good", hec_ok, "{mode} frame {frame}: {row:?}");
            if let Ok(tp) = parsed {
                assert_eq!(
                    row[4] == "good",
                    tp.body_ok,
                    "{mode} frame {frame}: {row:?}"
                );
                // MACK ranges: the dissector reads the count the parser reads.
                let control = ControlBody::parse(tp.header.flags, tp.body).ok();
                if let Some(m) = control.and_then(|c| c.mack).filter(|_| tp.body_ok) {
                    assert_eq!(
                        row[8],
                        m.ranges.len().to_string(),
                        "{mode} frame {frame}: {row:?}"
                    );
                    mack_ranges += m.ranges.len();
                }
                // Repair TPDUs: the span the dissector shows is the repair header's
                // (docs/spec.md §7: body bytes 6..8).
                if mode == Mode::Datagram && tp.header.flags == aerotp_wire::Flags::SOURCE {
                    assert_eq!(t, "SOURCE", "{mode} frame {frame}: {row:?}");
                    sources += 1;
                }
                if tp.header.flags.is_repair() && tp.body_ok {
                    assert_eq!(t, "REPAIR", "{mode} frame {frame}: {row:?}");
                    let span = u16::from_be_bytes([tp.body[6], tp.body[7]]);
                    assert_eq!(row[9], span.to_string(), "{mode} frame {frame}: {row:?}");
                    repairs += 1;
                }
                // Address validation (docs/spec.md §9): the cookie and the connection
                // identifier the dissector shows are the ones the parser reads, in a CHALLENGE
                // and in an ECHO.
                let h = tp.header.flags;
                if (h.is_challenge() || h.is_echo()) && tp.body_ok {
                    let (cookie, cid) = if h.is_echo() {
                        let e = aerotp_wire::Echo::parse(tp.body).unwrap();
                        (e.cookie, e.cid)
                    } else {
                        let c = aerotp_wire::Challenge::parse(tp.body).unwrap();
                        (c.cookie, c.cid)
                    };
                    let hex: String = cookie.iter().map(|b| format!("{b:02x}")).collect();
                    assert_eq!(
                        row[10].replace(':', ""),
                        hex,
                        "{mode} frame {frame}: {row:?}"
                    );
                    assert_eq!(
                        row[11],
                        format!("0x{cid:016x}"),
                        "{mode} frame {frame}: {row:?}"
                    );
                    cookies += 1;
                }
            }
            // What an endpoint sent is intact.
            if row[0] == "0" {
                assert_eq!(row[3], "good", "{mode} frame {frame}: sent with bad HEC");
                assert_eq!(row[4], "good", "{mode} frame {frame}: sent with bad CRC");
            } else if row[3] != "good" || row[4] != "good" {
                corrupted += 1;
            }
            if !row[6].is_empty() {
                retx += 1;
            }
            if !row[7].is_empty() {
                fec += 1;
            }
            types.insert(t.clone());
        }
        per_mode.insert(mode.name(), (n, r.retransmissions));
    }
    eprintln!("packets and engine retransmissions per mode: {per_mode:?}");
    eprintln!("types seen: {types:?}; retransmissions marked {retx}, with FEC {fec}, corrupted arrivals {corrupted}");
    assert!(cookies > 0, "no CHALLENGE or ECHO in any capture");
    for t in [
        "DATA",
        "DATA+ASYN",
        "ASYNACK",
        "MACK",
        "AFINACK",
        "RPT",
        "CHALLENGE",
        "ECHO",
    ] {
        assert!(
            types.iter().any(|x| x == t || x.split('+').any(|p| p == t)),
            "no {t} in any capture: {types:?}"
        );
    }
    assert!(
        types.iter().any(|x| x.split('+').any(|p| p == "NACK")),
        "no NACK in any capture: {types:?}"
    );
    assert!(
        types.iter().any(|x| x.split('+').any(|p| p == "SNACK")),
        "no SNACK: {types:?}"
    );
    assert!(retx > 0, "no retransmission marked");
    assert!(repairs > 0, "no repair TPDU in any capture");
    assert!(
        sources > 0,
        "no numbered datagram (SOURCE) in the datagram-mode capture"
    );
    assert!(mack_ranges > 0, "no MACK carried a received range");
    assert!(fec > 0, "no FEC parity decoded");
    assert!(corrupted > 0, "no corrupted arrival at this BER");
}

#[test]
fn a_flipped_header_bit_shows_a_failed_check_and_odd_ports_are_found() {
    if !aerotp_testkit::tshark::required("the dissector test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Scenario {
        mode: SimMode::Aero(Mode::Reliable),
        size: 5_000,
        topology: Topology::TwoNode,
        ..Scenario::default()
    };
    let clean = dir.path().join("clean.pcapng");
    let mut cap = SimCapture::create(&clean).unwrap();
    run_once_tapped(&s, 1, &mut cap);
    cap.finish().unwrap();
    let first = payloads(&clean).remove(0);
    let flipped = dir.path().join("flipped.pcapng");
    let mut c = Capture::create(&flipped, &["sent"]).unwrap();
    let a: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    // Unassigned ports with no dissector of their own: only the heuristic can find these.
    let (oa, ob): (SocketAddr, SocketAddr) = (
        "10.0.0.1:47001".parse().unwrap(),
        "10.0.0.2:47002".parse().unwrap(),
    );
    c.write(0, Duration::ZERO, a, b, &first).unwrap();
    let mut bad = first.clone();
    bad[7] ^= 0x08; // a sequence-number bit
    c.write(0, Duration::from_millis(1), a, b, &bad).unwrap();
    c.write(0, Duration::from_millis(2), oa, ob, &first)
        .unwrap();
    c.write(0, Duration::from_millis(3), oa, ob, &bad).unwrap();
    c.finish().unwrap();
    let rows = tshark(&flipped, &["_ws.expert.message"]);
    assert_eq!(rows.len(), 4);
    for (i, row) in rows.iter().enumerate() {
        assert!(row[1].contains("aerotp"), "frame {}: {row:?}", i + 1);
        let want = if i % 2 == 0 { "good" } else { "bad" };
        assert_eq!(row[3], want, "frame {}: {row:?}", i + 1);
        if i % 2 == 1 {
            assert!(
                row[8].contains("Header check failed"),
                "frame {}: no expert info: {row:?}",
                i + 1
            );
        }
    }
    // Plain UDP that is not AeroTP stays plain UDP on an odd port.
    let other = dir.path().join("other.pcapng");
    let mut c = Capture::create(&other, &["sent"]).unwrap();
    c.write(0, Duration::ZERO, oa, ob, &[0x55; 64]).unwrap();
    c.finish().unwrap();
    let rows = tshark(&other, &[]);
    assert!(!rows[0][1].contains("aerotp"), "{:?}", rows[0]);
}

/// The datagrams two authenticated endpoints exchange over a perfect link: a short reliable
/// transfer, sealed with key id 5, bodies encrypted or in clear.
fn authenticated_exchange(encrypt: bool) -> Vec<(bool, Vec<u8>)> {
    use aerotp_proto::{
        AuthConfig, AuthKey, ConnectionConfig, Endpoint, EndpointConfig, Event, KeySet,
    };
    let cfg = |seed: u8| EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: AuthKey::new(5, [0x42; 32]).unwrap(),
                previous: None,
            },
            encrypt,
            nonce_seed: [seed; 12],
        }),
        ..EndpointConfig::default()
    };
    let a_addr: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let b_addr: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    let mut a = Endpoint::new(cfg(1), 1);
    let mut b = Endpoint::new(cfg(2), 2);
    b.listen(7, ConnectionConfig::default()).unwrap();
    let h = a
        .connect(Duration::ZERO, b_addr, 7, ConnectionConfig::default())
        .unwrap();
    a.write(h, &[0x5A; 20_000]).unwrap();
    a.close(h).unwrap();
    let mut now = Duration::ZERO;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut rx = None;
    for _ in 0..20_000 {
        loop {
            buf.clear();
            let Some(t) = a.poll_transmit(now, &mut buf) else {
                break;
            };
            b.handle_datagram(now, a_addr, &buf);
            out.push((true, buf.clone()));
            assert_eq!(t.remote, b_addr);
        }
        loop {
            buf.clear();
            let Some(_t) = b.poll_transmit(now, &mut buf) else {
                break;
            };
            a.handle_datagram(now, b_addr, &buf);
            out.push((false, buf.clone()));
        }
        while let Some(e) = b.poll_event() {
            if let Event::Accepted(x) = e {
                rx = Some(x);
            }
        }
        while a.poll_event().is_some() {}
        if let Some(x) = rx {
            let mut sink = [0u8; 4096];
            while let Ok(1..) = b.read(x, &mut sink) {}
            if b.at_eof(x) {
                let _ = b.close(x);
            }
        }
        if a.connection_count() > 0 && a.state(h) == Some(aerotp_proto::State::Closed) {
            break;
        }
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => now = now.max(t),
            None => break,
        }
    }
    assert!(
        out.len() > 10,
        "the exchange produced {} datagrams",
        out.len()
    );
    out
}

#[test]
fn authenticated_tpdus_show_key_id_nonce_and_tag_and_say_they_are_unverified() {
    if !aerotp_testkit::tshark::required("the dissector test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    for encrypt in [false, true] {
        let file = dir.path().join(format!("auth-{encrypt}.pcapng"));
        let mut c = Capture::create(&file, &["sent"]).unwrap();
        let dgrams = authenticated_exchange(encrypt);
        for (i, (a_to_b, d)) in dgrams.iter().enumerate() {
            let (s, t) = if *a_to_b { (a, b) } else { (b, a) };
            c.write(0, Duration::from_micros(i as u64), s, t, d)
                .unwrap();
        }
        c.finish().unwrap();
        let rows = tshark(
            &file,
            &[
                "aerotp.auth",
                "aerotp.auth.key_id",
                "aerotp.auth.encrypted",
                "aerotp.auth.tag",
                "aerotp.auth.pn",
                "aerotp.auth.status",
                "aerotp.mack.count",
                "aerotp.mode",
            ],
        );
        assert_eq!(rows.len(), dgrams.len());
        let mut macks = 0;
        for (i, (row, (_, d))) in rows.iter().zip(&dgrams).enumerate() {
            let frame = i + 1;
            assert!(row[1].contains("aerotp"), "frame {frame}: {row:?}");
            assert!(row[5].is_empty(), "frame {frame}: malformed {row:?}");
            assert!(known(&row[2]), "frame {frame}: type {row:?}");
            assert_eq!(
                (&row[3][..], &row[4][..]),
                ("good", "good"),
                "frame {frame}"
            );
            let (h, authed) = aerotp_wire::Header::parse_any(d).unwrap();
            assert!(authed);
            // Wireshark prints booleans as True/1 depending on version.
            assert!(
                matches!(&row[8][..], "1" | "True"),
                "frame {frame}: {row:?}"
            );
            assert_eq!(row[9], "5", "frame {frame}: key id {row:?}");
            assert_eq!(
                matches!(&row[10][..], "1" | "True"),
                encrypt,
                "frame {frame}: {row:?}"
            );
            // The tag is the envelope's last 16 bytes, before the CRC-32C.
            let n = usize::from(h.len);
            let tag: String = d[20 + n - 16..20 + n]
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            assert_eq!(row[11].replace(':', ""), tag, "frame {frame}");
            let pn = u64::from_be_bytes(d[25..33].try_into().unwrap());
            assert_eq!(row[12], pn.to_string(), "frame {frame}");
            assert!(row[13].contains("not verified"), "frame {frame}: {row:?}");
            assert_eq!(row[15], (h.mode as u8).to_string(), "frame {frame}");
            // Control bodies in clear are still decoded; encrypted ones cannot be.
            if !row[14].is_empty() {
                macks += 1;
            }
        }
        assert_eq!(
            macks > 0,
            !encrypt,
            "MACKs decoded: {macks}, encrypt={encrypt}"
        );
    }
}

#[test]
fn a_gateway_flow_s_open_record_is_decoded_and_its_bytes_follow() {
    if !aerotp_testkit::tshark::required("the dissector test") {
        return;
    }
    use aerotp_wire::{emit_tpdu, Flags, Header};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.pcapng");
    let mut c = Capture::create(&file, &["sent"]).unwrap();
    let a: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    // docs/spec.md §10's examples: a flow intercepted to 10.77.0.2:8000 (dst_port 8000), and
    // one to the egress's default destination with a custody flow id, each with "GET".
    let records: [(&[u8], u16); 2] = [
        (&[0xa2, 0x10, 0x01, 0x0a, 0x4d, 0x00, 0x02], 8000),
        (&[0xa2, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0x12, 0x34], 1),
    ];
    for (i, (rec, port)) in records.iter().enumerate() {
        let mut body = rec.to_vec();
        body.extend_from_slice(b"GET");
        let h = Header {
            mode: Mode::Reliable,
            flags: Flags::ASYN,
            src_port: 40_000,
            dst_port: *port,
            seq: 0,
            timestamp: 1,
            fec: 0,
            tag: 7,
            len: 0,
        };
        let mut d = Vec::new();
        emit_tpdu(h, &body, &mut d).unwrap();
        c.write(0, Duration::from_millis(i as u64), a, b, &d)
            .unwrap();
    }
    c.finish().unwrap();
    let rows = tshark(
        &file,
        &["aerotp.gw.dest", "aerotp.gw.flow_id", "aerotp.data"],
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][8], "10.77.0.2:8000", "{:?}", rows[0]);
    assert_eq!(rows[1][8], "egress default", "{:?}", rows[1]);
    assert_eq!(rows[1][9], "0x0000000000001234", "{:?}", rows[1]);
    for row in &rows {
        assert_eq!(row[5], "", "malformed: {row:?}");
        assert_eq!(
            row[10], "474554",
            "the stream's bytes after the record: {row:?}"
        );
    }
}

/// A RST's timestamp field is the echo of the TPDU it answers (docs/spec.md §4): the
/// dissector names it so; any other TPDU's stays the sender's clock.
#[test]
fn a_reset_shows_its_echoed_timestamp() {
    if !aerotp_testkit::tshark::required("the dissector test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rst.pcapng");
    let mut c = Capture::create(&file, &["sent"]).unwrap();
    let a: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    let header = |flags, timestamp| aerotp_wire::Header {
        mode: Mode::Reliable,
        flags,
        src_port: 7,
        dst_port: 49152,
        seq: 3,
        timestamp,
        fec: 0,
        tag: 9,
        len: 0,
    };
    let mut rst = Vec::new();
    ControlBody {
        reset: Some("bye".into()),
        ..Default::default()
    }
    .emit(&mut rst)
    .unwrap();
    let mut out = Vec::new();
    aerotp_wire::emit_tpdu(header(aerotp_wire::Flags::RST, 123_456), &rst, &mut out).unwrap();
    c.write(0, Duration::ZERO, a, b, &out).unwrap();
    let mut probe = Vec::new();
    let nack = [0u8, 0];
    aerotp_wire::emit_tpdu(header(aerotp_wire::Flags::NACK, 654_321), &nack, &mut probe).unwrap();
    c.write(0, Duration::from_millis(1), b, a, &probe).unwrap();
    c.finish().unwrap();
    let rows = tshark(&file, &["aerotp.rst.ts_echo", "aerotp.timestamp"]);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0][2].as_str(),
            rows[0][8].as_str(),
            rows[0][9].as_str()
        ),
        ("RST", "123456", "")
    );
    assert_eq!((rows[1][8].as_str(), rows[1][9].as_str()), ("", "654321"));
}
