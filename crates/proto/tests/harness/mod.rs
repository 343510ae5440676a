//! A two-endpoint virtual network for the engine's tests: delay, jitter (reordering), loss,
//! bit flips and duplication, all from a seeded generator, in virtual time.

#![allow(dead_code)]

pub mod filtered;

use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default)]
pub struct Impair {
    pub delay: Duration,
    pub jitter: Duration,
    pub loss: f64,
    pub ber: f64,
    pub dup: f64,
    /// Outage window [start, end): everything sent in it is lost.
    pub outage: Option<(Duration, Duration)>,
}

/// A datagram in flight: arrival time, tiebreak counter, direction (to b?), bytes.
type InFlight = Reverse<(Duration, u64, bool, Vec<u8>)>;

#[derive(Debug)]
pub struct Net {
    pub a: Endpoint,
    pub b: Endpoint,
    pub now: Duration,
    heap: BinaryHeap<InFlight>,
    rng: Pcg64Mcg,
    pub imp: Impair,
    n: u64,
    pub wire_bytes: u64,
    /// Bytes a sent toward b while the link was out, with 28 bytes of IP/UDP per datagram.
    pub outage_bytes_to_b: u64,
    /// The most out-of-order bytes b held at once (its endpoint's reorder budget).
    pub max_reorder_held_b: usize,
    stalled: u32,
    /// Datagrams from b to a that this says to drop are lost (a filter by content).
    pub drop_to_a: Option<fn(&[u8]) -> bool>,
}

pub fn addr_a() -> SocketAddr {
    "10.0.0.1:9000".parse().unwrap()
}
pub fn addr_b() -> SocketAddr {
    "10.0.0.2:9000".parse().unwrap()
}

impl Net {
    pub fn new(seed: u64, imp: Impair) -> Net {
        Net {
            a: Endpoint::new(EndpointConfig::default(), seed),
            b: Endpoint::new(EndpointConfig::default(), seed ^ 0x5555),
            now: Duration::ZERO,
            heap: BinaryHeap::new(),
            rng: Pcg64Mcg::seed_from_u64(seed.wrapping_mul(31) + 7),
            imp,
            n: 0,
            wire_bytes: 0,
            outage_bytes_to_b: 0,
            max_reorder_held_b: 0,
            stalled: 0,
            drop_to_a: None,
        }
    }

    fn impair_and_queue(&mut self, mut d: Vec<u8>, to_b: bool) {
        self.wire_bytes += d.len() as u64;
        if let Some((s, e)) = self.imp.outage {
            if self.now >= s && self.now < e {
                if to_b {
                    self.outage_bytes_to_b += d.len() as u64 + 28;
                }
                return;
            }
        }
        if self.rng.gen_bool(self.imp.loss.clamp(0.0, 1.0)) {
            return;
        }
        if self.imp.ber > 0.0 {
            for byte in d.iter_mut() {
                for bit in 0..8 {
                    if self.rng.gen_bool(self.imp.ber) {
                        *byte ^= 1 << bit;
                    }
                }
            }
        }
        let copies = if self.rng.gen_bool(self.imp.dup.clamp(0.0, 1.0)) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter = if self.imp.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_nanos(self.rng.gen_range(0..self.imp.jitter.as_nanos() as u64))
            };
            self.n += 1;
            self.heap.push(Reverse((
                self.now + self.imp.delay + jitter,
                self.n,
                to_b,
                d.clone(),
            )));
        }
    }

    /// Sends what is due, then advances to the next event. Returns false when nothing is left.
    pub fn step(&mut self) -> bool {
        self.max_reorder_held_b = self.max_reorder_held_b.max(self.b.reorder_bytes_held());
        let mut buf = Vec::new();
        while let Some(t) = self.a.poll_transmit(self.now, &mut buf) {
            assert_eq!(t.remote, addr_b());
            self.impair_and_queue(buf.clone(), true);
        }
        while let Some(t) = self.b.poll_transmit(self.now, &mut buf) {
            assert_eq!(t.remote, addr_a());
            if self.drop_to_a.is_some_and(|drop| drop(&buf)) {
                continue;
            }
            self.impair_and_queue(buf.clone(), false);
        }
        let next = [
            self.heap.peek().map(|r| r.0 .0),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { return false };
        // An engine that keeps asking to be woken at a time that has passed without doing
        // anything would spin a real runtime at 100 % CPU.
        if next <= self.now {
            self.stalled += 1;
            assert!(
                self.stalled < 10_000,
                "engine livelock at {:?}: a:{:?} b:{:?}",
                self.now,
                self.a.poll_timeout(),
                self.b.poll_timeout()
            );
        } else {
            self.stalled = 0;
        }
        self.now = self.now.max(next);
        while self.heap.peek().is_some_and(|r| r.0 .0 <= self.now) {
            let Reverse((_, _, to_b, d)) = self.heap.pop().unwrap();
            if to_b {
                self.b.handle_datagram(self.now, addr_a(), &d);
            } else {
                self.a.handle_datagram(self.now, addr_b(), &d);
            }
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

#[derive(Debug)]
pub struct Outcome {
    pub received: Vec<u8>,
    pub sender_close: Option<CloseOutcome>,
    pub receiver_close: Option<CloseOutcome>,
    pub accepted_at: Option<Duration>,
    pub finished_at: Duration,
    /// When the last byte reached the receiving application.
    pub last_byte_at: Duration,
    pub wire_bytes: u64,
    /// `Net::outage_bytes_to_b`: what the sender spent into the outage.
    pub outage_bytes: u64,
    /// `Net::max_reorder_held_b`.
    pub max_reorder_held: usize,
    pub sender_stats: Option<aerotp_proto::ConnectionStats>,
}

/// One transfer of `data` from a to b; both sides close after the data; stops at `limit`.
pub fn transfer(
    cfg: ConnectionConfig,
    data: &[u8],
    imp: Impair,
    seed: u64,
    limit: Duration,
) -> Outcome {
    let mut net = Net::new(seed, imp);
    let listen_cfg = ConnectionConfig {
        mode: cfg.mode,
        ..cfg.clone()
    };
    net.b.listen(7, listen_cfg).unwrap();
    let ch = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    let mut written = 0;
    let mut closed = false;
    let mut rx_handle: Option<ConnectionHandle> = None;
    let mut out = Outcome {
        received: Vec::new(),
        sender_close: None,
        receiver_close: None,
        accepted_at: None,
        finished_at: Duration::ZERO,
        last_byte_at: Duration::ZERO,
        wire_bytes: 0,
        outage_bytes: 0,
        max_reorder_held: 0,
        sender_stats: None,
    };
    let mut rx_closed = false;
    let mut buf = vec![0u8; 65536];
    let mut steps = 0u64;
    while net.now < limit && steps < 5_000_000 {
        steps += 1;
        if written < data.len() {
            written += net.a.write(ch, &data[written..]).unwrap_or(0);
        }
        if written == data.len() && !closed {
            net.a.close(ch).unwrap();
            closed = true;
        }
        while let Some(e) = net.a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    out.sender_close = Some(o);
                }
            }
        }
        while let Some(e) = net.b.poll_event() {
            match e {
                Event::Accepted(h) => {
                    rx_handle = Some(h);
                    out.accepted_at.get_or_insert(net.now);
                }
                Event::Closed(_, o) => out.receiver_close = Some(o),
                _ => {}
            }
        }
        if let Some(h) = rx_handle {
            loop {
                match net.b.read(h, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        out.received.extend_from_slice(&buf[..n]);
                        out.last_byte_at = net.now;
                    }
                }
            }
            if !rx_closed && net.b.at_eof(h) {
                let _ = net.b.close(h);
                rx_closed = true;
            }
        }
        if out.sender_close.is_some() && out.receiver_close.is_some() {
            break;
        }
        if !net.step() {
            break;
        }
    }
    out.finished_at = net.now;
    out.wire_bytes = net.wire_bytes;
    out.outage_bytes = net.outage_bytes_to_b;
    out.max_reorder_held = net.max_reorder_held_b;
    out.sender_stats = net.a.stats(ch);
    out
}

pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut r = Pcg64Mcg::seed_from_u64(seed);
    (0..n).map(|_| r.gen()).collect()
}

/// Prints a timeline of one transfer (debugging aid for failing tests).
pub fn debug_timeline(cfg: ConnectionConfig, data: &[u8], imp: Impair, seed: u64, limit: Duration) {
    let mut net = Net::new(seed, imp);
    net.b.listen(7, cfg.clone()).unwrap();
    let ch = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    let mut written = 0;
    let mut rx = None;
    let mut got = 0usize;
    let mut buf = vec![0u8; 65536];
    let mut last_print = Duration::ZERO;
    while net.now < limit {
        if written < data.len() {
            written += net.a.write(ch, &data[written..]).unwrap_or(0);
            if written == data.len() {
                net.a.close(ch).unwrap();
            }
        }
        while let Some(e) = net.b.poll_event() {
            if let Event::Accepted(h) = e {
                rx = Some(h);
            }
        }
        while net.a.poll_event().is_some() {}
        if let Some(h) = rx {
            while let Ok(n) = net.b.read(h, &mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
            if net.b.at_eof(h) {
                let _ = net.b.close(h);
            }
        }
        if net.now >= last_print + Duration::from_millis(50) {
            last_print = net.now;
            let s = net.a.stats(ch);
            eprintln!(
                "{:?} got={} state={:?} stats={:?}",
                net.now,
                got,
                net.a.state(ch),
                s.map(|s| (
                    s.sender.tpdus_sent,
                    s.sender.tpdus_retransmitted,
                    s.sender.timeouts,
                    s.sender.probes,
                    s.outages,
                    s.srtt,
                    s.rto,
                    s.receiver.macks_sent,
                ))
            );
        }
        if !net.step() {
            break;
        }
    }
    eprintln!("A: {}", net.a.describe(ch).unwrap_or_default());
    if let Some(h) = rx {
        eprintln!("B: {}", net.b.describe(h).unwrap_or_default());
    }
    eprintln!(
        "sender: {:#?}",
        net.a.stats(ch).map(|s| (s.sender, s.receiver))
    );
    if let Some(h) = rx {
        eprintln!(
            "receiver: {:#?} eof={}",
            net.b.stats(h).map(|s| s.receiver),
            net.b.at_eof(h)
        );
    }
    eprintln!("a: {:?}\nb: {:?}", net.a.stats, net.b.stats);
}
