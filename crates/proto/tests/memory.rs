//! Receive memory bounded in every mode, keyless included (docs/security.md, "State bounded
//! under attack: receive memory"): 32 hostile peers that send in-order data (and data far
//! ahead) on connections they never prove, to an application that never reads them, hold at
//! most the endpoint's pool for unproven peers together (`max_unproven_bytes`), and a
//! legitimate transfer completes meanwhile; a proven
//! connection whose application stops reading holds at most its own `reorder_bytes`, then
//! completes once it reads again. Two endpoints over a 10 ms link (`harness::filtered`);
//! the hostile datagrams are handed to the receiver as if from 32 other addresses.

mod harness;

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode,
};
use aerotp_wire::{Flags, Header};
use harness::{addr_b, filtered};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

const DELAY: Duration = Duration::from_millis(10);
const PORT: u16 = 7;
const HOSTILE: usize = 32;
/// A hostile TPDU's body, and its charge (body and bookkeeping, `reorder_budget::tpdu_cost`).
const BODY: usize = 1400;
const COST: usize = BODY + 160;

fn cfg() -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 20_000_000,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    }
}

fn hostile_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 9, 0, i as u8 + 1], 5000))
}

/// Hostile peer `i`'s data TPDU number `seq` (TPDU 0 is its ASYN).
fn hostile_tpdu(i: usize, seq: u32) -> Vec<u8> {
    let h = Header {
        mode: Mode::Reliable,
        flags: if seq == 0 {
            Flags::ASYN
        } else {
            Flags::empty()
        },
        src_port: 40_000 + i as u16,
        dst_port: PORT,
        seq,
        timestamp: seq.wrapping_mul(1000).max(1),
        fec: 0,
        tag: 1,
        len: 0,
    };
    let mut out = Vec::new();
    aerotp_wire::emit_tpdu(h, &[i as u8; BODY], &mut out).unwrap();
    out
}

/// The receiver's pool for unproven peers: a quarter of what the hostile peers send (1.75 MB
/// each), so that the bound is what stops them.
const POOL: usize = 14 << 20;

/// The endpoint-wide bound the hostile connections can reach together: the pool and, at
/// most, the one TPDU each awaits while its unread queue is empty.
fn hostile_bound() -> usize {
    POOL + HOSTILE * COST
}

#[test]
fn hostile_unproven_connections_hold_a_bounded_amount_and_a_transfer_completes() {
    let a = Endpoint::new(EndpointConfig::default(), 1);
    let b_cfg = EndpointConfig {
        max_unproven_bytes: POOL,
        ..EndpointConfig::default()
    };
    let mut b = Endpoint::new(b_cfg, 2);
    b.listen(PORT, cfg()).unwrap();
    let mut link = filtered::Link::new(a, b, DELAY);
    let data = harness::pattern(5_000_000, 3);
    let h = link
        .a
        .connect(Duration::ZERO, addr_b(), PORT, cfg())
        .unwrap();
    let (mut written, mut got) = (0usize, Vec::new());
    let mut legit: Option<ConnectionHandle> = None;
    let mut hostile: HashSet<ConnectionHandle> = HashSet::new();
    let (mut a_done, mut b_done) = (None, None);
    let (mut peak, mut hostile_peak) = (0usize, 0usize);
    let mut next_seq = 0u32;
    let limit = Duration::from_secs(30);
    while link.now < limit && (a_done.is_none() || b_done.is_none()) {
        let now = link.now;
        // Every millisecond or so each hostile peer sends 4 TPDUs in order and 1 far ahead:
        // 1.4 MB in order and 0.35 MB ahead each, over the first 250 steps.
        if next_seq < 1000 {
            for i in 0..HOSTILE {
                for k in 0..4 {
                    link.b
                        .handle_datagram(now, hostile_addr(i), &hostile_tpdu(i, next_seq + k));
                }
                let ahead = 2000 + next_seq / 4;
                link.b
                    .handle_datagram(now, hostile_addr(i), &hostile_tpdu(i, ahead));
            }
            next_seq += 4;
        }
        while let Some(e) = link.b.poll_event() {
            match e {
                Event::Accepted(c) => {
                    let from = link.b.peer(c).unwrap().remote;
                    if from == harness::addr_a() {
                        legit = Some(c);
                    } else {
                        hostile.insert(c);
                    }
                }
                Event::Closed(c, o) if Some(c) == legit => b_done = Some(o),
                _ => {}
            }
        }
        while let Some(e) = link.a.poll_event() {
            if let Event::Closed(_, o) = e {
                a_done = Some(o);
            }
        }
        if written < data.len() {
            written += link.a.write(h, &data[written..]).unwrap_or(0);
            if written == data.len() {
                link.a.close(h).unwrap();
            }
        }
        // The application reads only the legitimate connection, once proven (as `recv`).
        if let Some(c) = legit.filter(|&c| link.b.is_proven(c)) {
            let mut buf = [0u8; 65536];
            while let Ok(n @ 1..) = link.b.read(c, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            if link.b.at_eof(c) {
                let _ = link.b.close(c);
            }
        }
        peak = peak.max(link.b.reorder_bytes_held());
        let hostile_held: usize = hostile
            .iter()
            .map(|&c| {
                link.b
                    .stats(c)
                    .map_or(0, |s| s.receiver.reorder_bytes_held as usize)
                    + link.b.ready_bytes(c)
            })
            .sum();
        hostile_peak = hostile_peak.max(hostile_held);
        assert!(
            hostile_held <= hostile_bound(),
            "hostile connections hold {hostile_held}"
        );
        link.transmit(|_, _, _| {});
        link.advance_within(limit);
    }
    assert_eq!(
        hostile.len(),
        HOSTILE,
        "every hostile peer got a connection"
    );
    assert!(hostile.iter().all(|&c| !link.b.is_proven(c)));
    // Without the bound each would hold 1.75 MB: 56 MB together.
    let legit_share = cfg().reorder_bytes;
    assert!(
        peak <= hostile_bound() + legit_share,
        "peak {peak} > {} + {legit_share}",
        hostile_bound()
    );
    let unread: usize = hostile.iter().map(|&c| link.b.ready_bytes(c)).sum();
    // Filled: the bound stopped them, not their sending (unread data counts its bodies
    // here, 1,400 of each 1,560 bytes the pool is charged).
    assert!(
        hostile_peak > POOL * BODY / COST - HOSTILE * COST,
        "the hostile peers filled the pool: {hostile_peak}"
    );
    assert!(unread > POOL / 2, "hostile data did arrive: {unread}");
    assert!(
        matches!(a_done, Some(CloseOutcome::Finished { .. })),
        "{a_done:?} {b_done:?}"
    );
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
    eprintln!(
        "figure: {HOSTILE} hostile unproven connections: endpoint receive memory peak {peak} B \
         (bound {} + the legitimate connection's), hostile unread {unread} B; 5 MB transfer \
         finished at {:?}",
        hostile_bound(),
        link.now
    );
}

/// A proven connection whose application stops reading holds at most its own bound
/// (`reorder_bytes`, here 1 MiB), unread data included; it completes once it reads again.
#[test]
fn an_application_that_stops_reading_holds_its_connection_to_its_bound() {
    let c = ConnectionConfig {
        reorder_bytes: 1 << 20,
        ..cfg()
    };
    let a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    b.listen(PORT, c.clone()).unwrap();
    let mut link = filtered::Link::new(a, b, DELAY);
    let data = harness::pattern(8_000_000, 4);
    let h = link.a.connect(Duration::ZERO, addr_b(), PORT, c).unwrap();
    let (mut written, mut got) = (0usize, Vec::new());
    let mut hb = None;
    let (mut peak, mut a_done) = (0usize, None);
    let limit = Duration::from_secs(60);
    while link.now < limit && a_done.is_none() {
        while let Some(e) = link.b.poll_event() {
            if let Event::Accepted(c) = e {
                hb = Some(c);
            }
        }
        while let Some(e) = link.a.poll_event() {
            if let Event::Closed(_, o) = e {
                a_done = Some(o);
            }
        }
        if written < data.len() {
            written += link.a.write(h, &data[written..]).unwrap_or(0);
            if written == data.len() {
                link.a.close(h).unwrap();
            }
        }
        // Not a byte read for the first 5 s; then everything.
        if let Some(c) = hb.filter(|_| link.now >= Duration::from_secs(5)) {
            let mut buf = [0u8; 65536];
            while let Ok(n @ 1..) = link.b.read(c, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            if link.b.at_eof(c) {
                let _ = link.b.close(c);
            }
        }
        if link.now < Duration::from_secs(5) {
            peak = peak.max(link.b.reorder_bytes_held());
        }
        link.transmit(|_, _, _| {});
        link.advance_within(limit);
    }
    assert!(peak <= (1 << 20) + 1500, "peak {peak}");
    assert!(peak > (1 << 20) - 3000, "the bound was reached: {peak}");
    let dropped = link
        .b
        .stats(hb.unwrap())
        .unwrap()
        .receiver
        .tpdus_dropped_memory;
    assert!(dropped > 0);
    assert!(
        matches!(a_done, Some(CloseOutcome::Finished { .. })),
        "{a_done:?}"
    );
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
    eprintln!(
        "figure: unread data held to 1 MiB: peak {peak} B, {dropped} TPDUs refused and resent, \
         8 MB finished at {:?}",
        link.now
    );
}
