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
        ("gw_frame", gw_streams()),
        ("gw_store", store_scripts()),
    ]
}
