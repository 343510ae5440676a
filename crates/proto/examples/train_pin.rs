//! What receive memory hostile GRO trains keep resident against what the endpoint charges
//! (issue 39, item 2; docs/results/security.md). 32 peers that never prove their address
//! send trains (`Endpoint::handle_train`, 64 kB buffers as `aerotp_net` hands them over) to
//! an application that never reads: (a) trains of 1-byte bodies, every one in order; (b)
//! trains of full 1400-byte bodies of which one is new and the rest copies of it. Prints the
//! process's resident memory growth and the endpoint's charged bytes after each, and the cost
//! of copying a body out against slicing it.
//!
//! `cargo run --release -p aerotp-proto --example train_pin -- tiny|dup|copy` (one case per
//! process, so that one case's freed memory does not hide the next one's growth)

use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
use aerotp_wire::{Flags, Header};
use bytes::Bytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const PEERS: usize = 32;
const BUFFER: usize = 65_536;

fn rss_bytes() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn tpdu(peer: usize, seq: u32, body: usize) -> Vec<u8> {
    let h = Header {
        mode: Mode::Reliable,
        flags: if seq == 0 {
            Flags::ASYN
        } else {
            Flags::empty()
        },
        src_port: 40_000 + peer as u16,
        dst_port: 7,
        seq,
        timestamp: seq.max(1),
        fec: 0,
        tag: 1,
        len: 0,
    };
    let mut out = Vec::new();
    aerotp_wire::emit_tpdu(h, &vec![peer as u8; body], &mut out).unwrap();
    out
}

/// Feeds `trains` trains per peer; `make(peer, train)` gives a train's datagrams.
fn run(name: &str, trains: u32, make: impl Fn(usize, u32) -> Vec<Vec<u8>>) {
    let mut e = Endpoint::new(EndpointConfig::default(), 7);
    e.listen(7, ConnectionConfig::with_mode(Mode::Reliable))
        .unwrap();
    let before = rss_bytes();
    let now = Duration::from_millis(1);
    for t in 0..trains {
        for p in 0..PEERS {
            let from = SocketAddr::from(([10, 9, 0, p as u8 + 1], 5000));
            let datagrams = make(p, t);
            let stride = datagrams[0].len();
            let mut buf = Vec::with_capacity(BUFFER);
            for d in &datagrams {
                buf.extend_from_slice(d);
            }
            e.handle_train(now, from, &Bytes::from(buf), stride);
        }
        while e.poll_event().is_some() {}
    }
    let grew = rss_bytes().saturating_sub(before);
    println!(
        "{name}: {} trains of {BUFFER} B buffers: resident +{:.1} MB, charged {:.1} MB, \
         connections {}",
        trains as usize * PEERS,
        grew as f64 / 1e6,
        e.reorder_bytes_held() as f64 / 1e6,
        e.connection_count()
    );
}

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    if case == "tiny" {
        tiny();
    } else if case == "dup" {
        dup();
    } else {
        copy_cost();
    }
}

fn tiny() {
    // (a) 1-byte bodies: each datagram 29 bytes (header 20, body 1, CRC 4, no parity... as
    // emitted), as many as fit in a buffer, every one new and in order.
    let per = BUFFER / tpdu(0, 1, 1).len();
    run("1-byte bodies", 60, |p, t| {
        (0..per as u32)
            .map(|k| tpdu(p, t * per as u32 + k, 1))
            .collect()
    });
}

fn dup() {
    // (b) one new 1400-byte body per train, the other 43 copies of it (duplicates).
    let per = BUFFER / tpdu(0, 1, 1400).len();
    run("1 new 1400-byte body of 44", 60, |p, t| {
        (0..per).map(|_| tpdu(p, t, 1400)).collect()
    });
}

fn copy_cost() {
    // The copy a body costs against a slice of its buffer.
    let buf = Bytes::from(vec![1u8; BUFFER]);
    for len in [1usize, 100, 1023, 1400] {
        let n = 2_000_000;
        let t0 = Instant::now();
        for i in 0..n {
            let off = (i * 1499) % (BUFFER - len);
            std::hint::black_box(Bytes::copy_from_slice(&buf[off..off + len]));
        }
        let copy = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        for i in 0..n {
            let off = (i * 1499) % (BUFFER - len);
            std::hint::black_box(buf.slice(off..off + len));
        }
        let slice = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("body {len:>4} B: copy {copy:.1} ns, slice {slice:.1} ns");
    }
}
