//! Two endpoints for the engine's tests on the driver the simulator runs on
//! (`aerotp_pair::Pair` over `aerotp_link` paths): delay, jitter (reordering), loss, bit
//! flips, duplication and an outage, all from seeded generators, in virtual time.

#![allow(dead_code)]

pub mod by_hand;
pub mod filtered;

use aerotp_link::{LinkConfig, Outage, Path};
use aerotp_pair::{Advance, Dir, Links, Observer, Pair};
use aerotp_proto::{
    CloseOutcome, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::net::SocketAddr;
use std::time::Duration;

/// A connection as the gateways run one: 10 Mb/s, with confirmed delivery (the acknowledgement
/// waits for the application's confirmation, at least `CONFIRM_WAIT`, so a peer's echo,
/// written at once, goes ahead of it).
pub fn confirmed(mode: aerotp_proto::Mode) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 10_000_000,
        confirm_delivery: true,
        ..ConnectionConfig::with_mode(mode)
    }
}

/// The impairments of both directions, as a test states them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Impair {
    pub delay: Duration,
    /// Extra delay drawn uniformly in `[0, jitter]`; datagrams may overtake each other.
    pub jitter: Duration,
    pub loss: f64,
    pub ber: f64,
    pub dup: f64,
    /// Outage window [start, end): everything sent in it is lost.
    pub outage: Option<(Duration, Duration)>,
}

/// A link so fast that only the engine's own pacing spaces datagrams (1 Pbit/s: a 1500-byte
/// datagram takes 12 ps), with room for any flight.
pub fn ideal_link(delay: Duration) -> LinkConfig {
    LinkConfig {
        rate_bps: 1_000_000_000_000_000,
        delay,
        queue_bytes: u64::MAX / 2,
        queue_packets: u32::MAX,
        max_in_flight: u32::MAX,
        ..LinkConfig::default()
    }
}

impl Impair {
    /// One direction of the link model for these impairments.
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig {
            jitter: self.jitter,
            allow_reorder: true,
            ber: self.ber,
            loss: self.loss,
            duplicate: self.dup,
            outages: self
                .outage
                .map(|(start, end)| Outage {
                    start,
                    duration: end - start,
                })
                .into_iter()
                .collect(),
            ..ideal_link(self.delay)
        }
    }
}

/// Two endpoints over one impaired path each way; derefs to the `Pair` (`net.a`, `net.b`,
/// `net.now`).
#[derive(Debug)]
pub struct Net {
    pub pair: Pair,
    pub wire_bytes: u64,
    /// Bytes a sent toward b while the link was out, with 28 bytes of IP/UDP per datagram.
    pub outage_bytes_to_b: u64,
    /// The most out-of-order bytes b held at once (its endpoint's reorder budget).
    pub max_reorder_held_b: usize,
    /// Datagrams from b to a that this says to drop are lost (a filter by content).
    pub drop_to_a: Option<fn(&[u8]) -> bool>,
}

impl std::ops::Deref for Net {
    type Target = Pair;
    fn deref(&self) -> &Pair {
        &self.pair
    }
}

impl std::ops::DerefMut for Net {
    fn deref_mut(&mut self) -> &mut Pair {
        &mut self.pair
    }
}

pub fn addr_a() -> SocketAddr {
    "10.0.0.1:9000".parse().unwrap()
}
pub fn addr_b() -> SocketAddr {
    "10.0.0.2:9000".parse().unwrap()
}

/// What `Net` counts of the datagrams sent, and its filter.
struct Counting<'n> {
    wire_bytes: &'n mut u64,
    outage_bytes_to_b: &'n mut u64,
    drop_to_a: Option<fn(&[u8]) -> bool>,
    forward_up: bool,
}

impl Observer for Counting<'_> {
    fn sent(&mut self, _: Duration, dir: Dir, datagram: &[u8], _: &Endpoint) -> Option<u64> {
        *self.wire_bytes += datagram.len() as u64;
        match dir {
            Dir::Forward if !self.forward_up => {
                *self.outage_bytes_to_b += datagram.len() as u64 + 28;
            }
            Dir::Reverse if self.drop_to_a.is_some_and(|drop| drop(datagram)) => return None,
            _ => {}
        }
        Some(0)
    }
}

impl Net {
    pub fn new(seed: u64, imp: Impair) -> Net {
        let link_seed = seed.wrapping_mul(31).wrapping_add(7);
        let path = |s| Path::new(vec![imp.link_config()], s).expect("valid test link");
        Net {
            pair: Pair::new(
                Endpoint::new(EndpointConfig::default(), seed),
                Endpoint::new(EndpointConfig::default(), seed ^ 0x5555),
                Links::single(path(link_seed), path(link_seed ^ 1)),
                addr_a(),
                addr_b(),
            ),
            wire_bytes: 0,
            outage_bytes_to_b: 0,
            max_reorder_held_b: 0,
            drop_to_a: None,
        }
    }

    /// Sends what is due, then advances to the next event. Returns false when nothing is left.
    /// Fails the test on an engine livelock (`aerotp_pair::STALL_LIMIT`).
    pub fn step(&mut self) -> bool {
        self.max_reorder_held_b = self
            .max_reorder_held_b
            .max(self.pair.b.reorder_bytes_held());
        let forward_up = self.pair.links.is_up(Dir::Forward, self.pair.now);
        let mut counting = Counting {
            wire_bytes: &mut self.wire_bytes,
            outage_bytes_to_b: &mut self.outage_bytes_to_b,
            drop_to_a: self.drop_to_a,
            forward_up,
        };
        self.pair.step(&mut counting, None, Duration::MAX) == Advance::Moved
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
