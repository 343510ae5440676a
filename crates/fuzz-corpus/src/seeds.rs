//! Valid inputs to start each corpus from: datagrams of short simulated transfers in every
//! mode (encoded by the engine itself), control bodies, FEC codewords, endpoint scripts that
//! carry a transfer to its end, gateway streams and a well-formed custody store.
//! `cargo run -p aerotp-fuzz-corpus --example seed -- fuzz/corpus` writes them.

use crate::packet::addr;
use aerotp_fec as fec;
use aerotp_gw::frame::{Class, Dest, Open, Resumed};
use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Event, FecSetting, Mode};
use aerotp_wire::{parse_tpdu, Ack, ControlBody, Flags, Header, Mack, Nack, Report, Snack};
use std::collections::VecDeque;
use std::time::Duration;

/// Every datagram of a `size`-byte transfer from A to B over a clean link, in the order sent
/// (both directions). Bounded in steps; the transfer need not finish for the seeds to be
/// useful, and normally does.
pub fn transfer_datagrams(mode: Mode, fec: FecSetting, size: usize) -> Vec<Vec<u8>> {
    let cfg = ConnectionConfig {
        fec,
        mtu: 1500,
        ..ConnectionConfig::with_mode(mode)
    };
    let (aa, ba) = (addr(1, 9000), addr(2, 9000));
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    b.listen(7000, cfg.clone()).expect("valid config");
    let mut now = Duration::ZERO;
    let h = a.connect(now, ba, 7000, cfg).expect("connect");
    let data: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
    let mut written = 0;
    let mut closed = false;
    let mut all = Vec::new();
    let mut out = Vec::new();
    let mut link: VecDeque<(bool, Duration, Vec<u8>)> = VecDeque::new();
    for _ in 0..20_000 {
        if written < data.len() {
            written += a.write(h, &data[written..]).unwrap_or(0);
        } else if !closed {
            let _ = a.close(h);
            closed = true;
        }
        loop {
            out.clear();
            let Some(t) = a.poll_transmit(now, &mut out) else {
                break;
            };
            all.push(out.clone());
            link.push_back((true, now + Duration::from_millis(5), out.clone()));
            let _ = t;
        }
        loop {
            out.clear();
            let Some(t) = b.poll_transmit(now, &mut out) else {
                break;
            };
            all.push(out.clone());
            link.push_back((false, now + Duration::from_millis(5), out.clone()));
            let _ = t;
        }
        while let Some(e) = b.poll_event() {
            if let Event::Readable(x) | Event::Accepted(x) = e {
                let mut buf = [0u8; 4096];
                while b.read(x, &mut buf).unwrap_or(0) > 0 {}
            }
        }
        while a.poll_event().is_some() {}
        let next = [
            a.poll_timeout(),
            b.poll_timeout(),
            link.front().map(|x| x.1),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(t) = next else { break };
        now = now.max(t);
        while link.front().is_some_and(|x| x.1 <= now) {
            let (to_b, _, dg) = link.pop_front().expect("front exists");
            if to_b {
                b.handle_datagram(now, aa, &dg);
            } else {
                a.handle_datagram(now, ba, &dg);
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        if closed && a.connection_count() > 0 && a.state(h).is_none() {
            break;
        }
    }
    all
}

/// A few datagrams of each connection mode, with and without FEC, plus a datagram-mode
/// message; at most `per_mode` from each transfer, spread over it.
fn sample_datagrams(per_mode: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (mode, fec) in [
        (Mode::Reliable, FecSetting::Off),
        (Mode::NearReliable, FecSetting::Off),
        (Mode::QuasiReliable, FecSetting::Parity(8)),
        (Mode::HybridNack, FecSetting::Parity(4)),
        (Mode::HybridNackMack, FecSetting::Auto),
        (Mode::Unreliable, FecSetting::Off),
    ] {
        let all = transfer_datagrams(mode, fec, 12_000);
        let step = (all.len() / per_mode).max(1);
        // Keep every control TPDU kind and a spread of the data TPDUs.
        let mut kinds = Vec::new();
        for (i, d) in all.iter().enumerate() {
            let Ok(t) = parse_tpdu(d) else { continue };
            let f = t.header.flags.0;
            if !kinds.contains(&f) || i % step == 0 {
                kinds.push(f);
                out.push(d.clone());
            }
        }
    }
    let mut ep = Endpoint::new(EndpointConfig::default(), 3);
    ep.send_datagram(addr(2, 9000), 1, 2, b"telemetry record", 8, 1500)
        .expect("fits");
    let mut dg = Vec::new();
    if ep.poll_transmit(Duration::ZERO, &mut dg).is_some() {
        out.push(dg);
    }
    out
}

/// A control body with every part, and each part alone.
fn control_bodies() -> Vec<(Flags, Vec<u8>)> {
    let ack = Ack {
        cum: 1000,
        delivered: 1_400_000,
        window: 4096,
    };
    let full = ControlBody {
        ack: None,
        mack: Some(Mack {
            ack,
            ts_echo: 123_456,
            ack_delay: 15,
            max_delay: 40,
            entries: vec![1002, 1003, 1007],
            ranges: vec![(1010, 1014), (1005, 1006)],
        }),
        nack: Some(Nack {
            seqs: vec![1001, 1005],
        }),
        snack: Some(Snack {
            ranges: vec![(1001, 1002), (1004, 1007)],
        }),
        report: Some(Report {
            ber_ppb: 10_000,
            tpdus: 5000,
            lost: 3,
            seen: 5200,
            wire_lost: 120,
            bursts: 40,
        }),
        reset: None,
    };
    let parts = [
        full.clone(),
        ControlBody {
            ack: Some(ack),
            ..Default::default()
        },
        ControlBody {
            reset: Some("connection refused: no listener on that port".into()),
            ..Default::default()
        },
        ControlBody {
            nack: full.nack.clone(),
            ..Default::default()
        },
        ControlBody {
            snack: full.snack.clone(),
            report: full.report,
            ..Default::default()
        },
    ];
    parts
        .into_iter()
        .map(|c| {
            let mut b = Vec::new();
            c.emit(&mut b).expect("small lists");
            (c.flags(), b)
        })
        .collect()
}

/// Endpoint scripts (see `endpoint.rs` for the opcodes) that run a transfer in each mode:
/// B writes, both sides pump and deliver, time moves on, then B closes, and an attacker
/// injects a forged TPDU on the live connection.
fn endpoint_scripts() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for mode in 0..6u8 {
        for (mtu, fec) in [(2u8, 0u8), (1, 1), (2, 2)] {
            let mut s = vec![mode, mtu, fec];
            for round in 0..12u8 {
                // write on B's connection 0: 3000 bytes
                s.extend_from_slice(&[7, 0, 0x0B, 0xB8]);
                s.push(5); // pump
                s.extend_from_slice(&[4, 15]);
                s.extend_from_slice(&[0x0F; 16]); // deliver up to 16 to B as they are
                s.extend_from_slice(&[2, 1, 5]); // 5 ms
                s.push(5);
                s.extend_from_slice(&[3, 15]);
                s.extend_from_slice(&[0x0F; 16]); // and to A
                                                  // A reads, chunked, on both its connections (its own to B, and B's)
                s.extend_from_slice(&[8, 0, 0, 8, 1, 0]);
                if round == 6 {
                    // a forged data TPDU on B's connection to A, spoofed from B's address
                    s.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 8]);
                    s.extend_from_slice(b"forged!!");
                    s.push(0);
                }
            }
            s.extend_from_slice(&[11, 0, 0]); // B closes
            for _ in 0..6 {
                s.extend_from_slice(&[5, 4, 15]);
                s.extend_from_slice(&[0x0F; 16]);
                s.extend_from_slice(&[3, 15]);
                s.extend_from_slice(&[0x0F; 16]);
                s.extend_from_slice(&[2, 2, 0, 200]); // 200 ms
            }
            s.extend_from_slice(&[2, 3, 0, 200]); // 200 s: idle timeouts
            out.push(s);
        }
    }
    out
}

/// One round of the keyed scripts' honest transfer: A writes 3000 bytes on its first
/// connection, both directions are delivered as they are, 5 ms pass, B reads.
fn keyed_round(s: &mut Vec<u8>) {
    s.extend_from_slice(&[6, 0, 0x0B, 0xB8]); // A writes 3000 bytes
    s.push(5); // pump
    s.extend_from_slice(&[4, 15]);
    s.extend_from_slice(&[0x0F; 16]); // deliver up to 16 to B as they are
    s.extend_from_slice(&[2, 1, 5]); // 5 ms
    s.push(5);
    s.extend_from_slice(&[3, 15]);
    s.extend_from_slice(&[0x0F; 16]); // and to A
    s.extend_from_slice(&[9, 0, 0]); // B reads its first connection, chunked
}

/// Seeds of `proto_endpoint_keyed`, by kind: `transfer` (a 36 kB transfer A → B, then A
/// closes), `replay` (the same, then B restarts with A cut off and the attacker replays the
/// whole recording to the new B), `live` (a restart with A still there, which writes on),
/// `forged` (keyless and keyed forged RST and AFIN from recordings, in window) and
/// `parity` (high-parity datagrams from A's address during the transfer). Each in the six
/// connected modes; options byte: bit 0 no key, bit 1 encrypt.
pub fn keyed_scripts() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for kind in ["transfer", "replay", "live", "forged", "parity"] {
        for mode in 0..6u8 {
            let opts = match (kind, mode % 3) {
                ("forged", 0) => 1, // keyless
                (_, 0) => 2,        // keyed, encrypted
                (_, 1) => 0,        // keyed, in clear
                _ => 2 | (1 << 2),  // encrypted, max_half_open 4
            };
            let mut s = vec![mode, mode % 3, mode % 3, opts];
            s.extend((1..=12u8).map(|i| i.wrapping_mul(17).wrapping_add(mode))); // A's nonce seed
            s.extend((1..=12u8).map(|i| i.wrapping_mul(29).wrapping_add(mode))); // B's
            for round in 0..12u8 {
                keyed_round(&mut s);
                if kind == "forged" && round == 6 {
                    forged_controls(&mut s, opts);
                }
                if kind == "parity" && round % 3 == 1 {
                    // Parity 254, 64 and 16 on recorded datagrams of A's, some damaged.
                    s.extend_from_slice(&[13, 253, 0, round, 3]);
                    s.extend_from_slice(&[13, 63, 0, round + 1, 0]);
                    s.extend_from_slice(&[13, 15, 0, round + 2, 7]);
                }
            }
            match kind {
                "replay" => replay_to_restarted_b(&mut s),
                "live" => {
                    s.extend_from_slice(&[14, 0]); // B restarts, A carries on
                    for round in 0..6u8 {
                        keyed_round(&mut s);
                        // and the attacker replays what A sent before
                        s.extend_from_slice(&[12, 0, round * 8, 0x07, 0]);
                    }
                }
                _ => {}
            }
            close_and_run_down(&mut s);
            out.push((kind, s));
        }
    }
    out
}

/// From recording 5 and 9: a RST (0x40) and an AFIN (0x02), fields changed (flags, sequence
/// number near the recorded one), into A from B's address and into B from A's. (Flags,
/// sequence number and a new body: a RST's reason, an AFIN's none.) `opts` bit 0: no key.
fn forged_controls(s: &mut Vec<u8>, opts: u8) {
    let mut rst = Vec::new();
    ControlBody {
        reset: Some("forged".into()),
        ..Default::default()
    }
    .emit(&mut rst)
    .expect("a RST body");
    // Keyed, the body goes into a sealed-looking envelope: key id 3, encrypted, the recorded
    // nonce moved ahead by 7, a tag of 0xAA.
    let envelope: &[u8] = if opts & 1 == 0 {
        &[3, 1, 0, 7, 0xAA]
    } else {
        &[]
    };
    s.extend_from_slice(&[1, 1, 0, 0, 5, 19, 0x40, 17, rst.len() as u8]);
    s.extend_from_slice(&rst);
    s.extend_from_slice(envelope);
    s.extend_from_slice(&[1, 1, 0, 0, 7, 19, 0x40, 16, rst.len() as u8]);
    s.extend_from_slice(&rst);
    s.extend_from_slice(envelope);
    s.extend_from_slice(&[1, 0, 0, 0, 9, 19, 0x02, 16, 0]);
    s.extend_from_slice(envelope);
}

/// B restarts with A cut off, and the attacker replays the whole recording to the new B;
/// then time passes beyond the set-up timeout.
fn replay_to_restarted_b(s: &mut Vec<u8>) {
    s.extend_from_slice(&[14, 1]); // B restarts, A is cut off
    for start in (0..512u16).step_by(16) {
        let [hi, lo] = start.to_be_bytes();
        // 16 recorded datagrams from `start`, each into its destination.
        s.extend_from_slice(&[12, hi, lo, 0x0F, 0]);
        s.push(5);
        s.extend_from_slice(&[3, 15]);
        s.extend_from_slice(&[0x0F; 16]);
        s.extend_from_slice(&[9, 0, 0, 9, 1, 0]);
        s.extend_from_slice(&[2, 1, 20]);
    }
    s.extend_from_slice(&[2, 3, 0, 10]); // 10 s: past the set-up timeout
}

/// A closes its first connection; the datagrams are exchanged and read for a while, then
/// time passes to the idle timeouts.
fn close_and_run_down(s: &mut Vec<u8>) {
    s.extend_from_slice(&[10, 0, 0]); // A closes its first connection
    for _ in 0..6 {
        s.extend_from_slice(&[5, 4, 15]);
        s.extend_from_slice(&[0x0F; 16]);
        s.extend_from_slice(&[3, 15]);
        s.extend_from_slice(&[0x0F; 16]);
        s.extend_from_slice(&[9, 0, 0]);
        s.extend_from_slice(&[2, 2, 0, 200]); // 200 ms
    }
    s.extend_from_slice(&[2, 3, 0, 200]); // 200 s: idle timeouts
}

fn gw_streams() -> Vec<Vec<u8>> {
    let open = Open {
        class: Class::Telemetry,
        custody: true,
        resume: true,
        flow_id: 0x0102_0304_0506_0708,
        in_delivered: 77,
        dest: Dest::Addr("10.0.0.1:80".parse().expect("address")),
        port: None,
    };
    let named = Open {
        custody: false,
        resume: false,
        flow_id: 0,
        in_delivered: 0,
        dest: Dest::Name("ground.example".into(), 3),
        port: Some(3),
        ..open.clone()
    };
    let mut out = Vec::new();
    for (sel, rec) in [(1u8, open.encode()), (3, named.encode())] {
        let mut s = vec![sel, 0, 80];
        s.extend_from_slice(&rec);
        s.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        out.push(s);
    }
    let mut answer = vec![2u8, 0, 1];
    answer.extend_from_slice(
        &Resumed {
            delivered: 1 << 20,
            fin: true,
        }
        .encode(),
    );
    out.push(answer);
    out
}

/// A store directory script (see `gw.rs`): meta, confirmed, fin and two segments.
fn store_scripts() -> Vec<Vec<u8>> {
    let rec = |kind: u8, body: &[u8]| {
        let mut r = vec![kind];
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    };
    let meta = b"aerotp-gw flow v1\n0000000000000001\n2\n10.0.0.1:80\n\n";
    let mut full = rec(0, meta);
    full.extend(rec(1, b"100"));
    // segment at 0, 4000 bytes; segment at 4000, 1000 bytes
    let mut seg = vec![3u8];
    seg.extend_from_slice(&4000u16.to_be_bytes());
    seg.extend_from_slice(&0u16.to_be_bytes());
    seg.extend((0..4000u32).map(|i| i as u8));
    full.extend(seg);
    let mut seg = vec![3u8];
    seg.extend_from_slice(&1000u16.to_be_bytes());
    seg.extend_from_slice(&4000u16.to_be_bytes());
    seg.extend((0..1000u32).map(|i| (i * 3) as u8));
    full.extend(seg);
    full.extend(rec(2, b"5000"));
    full.push(0);
    let mut minimal = rec(1, b"0");
    minimal.push(1); // generated meta
    vec![full, minimal]
}

/// Seeds per target, by the names in [`crate::TARGETS`].
pub fn all() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let dgs = sample_datagrams(8);
    let headers: Vec<Vec<u8>> = dgs.iter().map(|d| d[..20.min(d.len())].to_vec()).collect();
    let mut control: Vec<Vec<u8>> = control_bodies()
        .into_iter()
        .map(|(f, b)| [&[f.0][..], &b].concat())
        .collect();
    for d in &dgs {
        if let Ok(t) = parse_tpdu(d) {
            if !t.header.flags.is_data() {
                control.push([&[t.header.flags.0][..], t.body].concat());
            }
        }
    }
    let mut fec_seeds = Vec::new();
    for d in dgs.iter().take(12) {
        let Ok(t) = parse_tpdu(d) else { continue };
        if t.header.fec > 0 {
            let mut bad = d.clone();
            bad[3] ^= 0x40;
            fec_seeds.push([&[t.header.fec, 0][..], &bad].concat());
        }
        for p in [2u8, 16] {
            let region = &d[..(24 + t.body.len()).min(d.len())];
            let mut s = vec![p, 1];
            s.extend_from_slice(&(region.len() as u16 - 1).to_be_bytes());
            s.extend_from_slice(region);
            s.extend_from_slice(&[0, 5, 0xFF, 0, 40, 0x01]);
            fec_seeds.push(s);
        }
    }
    let mut codec: Vec<Vec<u8>> = dgs.iter().map(|d| [&[0u8][..], d].concat()).collect();
    for d in dgs.iter().take(8) {
        if let Ok(t) = parse_tpdu(d) {
            let h: Header = t.header;
            let mut s = vec![1u8, h.mode as u8, h.flags.0];
            s.extend_from_slice(&h.src_port.to_be_bytes());
            s.extend_from_slice(&7000u16.to_be_bytes());
            s.extend_from_slice(&h.seq.to_be_bytes());
            s.extend_from_slice(&h.timestamp.to_be_bytes());
            s.extend_from_slice(&[h.fec, h.tag]);
            let body = &t.body[..t.body.len().min(255)];
            s.push(body.len() as u8);
            s.extend_from_slice(body);
            codec.push(s);
        }
    }
    let mut one = vec![0u8; 8];
    let _ = fec::encode(4, &mut one);
    fec_seeds.push([&[4u8, 0][..], &one].concat());
    vec![
        ("wire_header", headers),
        ("wire_control", control),
        ("wire_tpdu", dgs.clone()),
        ("fec_decode", fec_seeds),
        ("proto_codec", codec),
        ("proto_endpoint", endpoint_scripts()),
        (
            "proto_endpoint_keyed",
            keyed_scripts().into_iter().map(|(_, s)| s).collect(),
        ),
        ("gw_frame", gw_streams()),
        ("gw_store", store_scripts()),
    ]
}
