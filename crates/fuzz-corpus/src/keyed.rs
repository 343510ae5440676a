//! The keyed endpoint target (issue 39): two endpoints with a pre-shared key (or, one input
//! bit, none), an honest transfer from A to B over a link the script controls, and an
//! on-path attacker that records every datagram on the link and
//!
//! * replays any of them later, into their destination, from their own source or another
//!   address, one by one or as a GRO train — also after B has been replaced by a fresh
//!   endpoint with the same key (a "restart"; one bit of the restart cuts A off the network
//!   for good, so that everything B's new life hears from A's address is a replay);
//! * forges TPDUs: recorded ones with header fields (RST, AFIN, sequence number, timestamp),
//!   envelope or body changed and every check (HEC, CRC-32C, parity) recomputed, or built from
//!   nothing with a sealed-looking envelope; keyless, that is a blind-but-in-window forger of
//!   RSTs and AFINs (`reset_guard`);
//! * sends datagrams with high parity (up to 254) from A's address: recorded ones re-encoded,
//!   or forged, which cost FEC decoding before anything can refuse them (`decode_budget`).
//!
//! Invariants checked after every step, besides "no panic":
//! * the deadline contract and the bounds of `proto_endpoint` (well-formed TPDUs within the
//!   MTU — with a key each sealed with the endpoint's key id, in clear or encrypted as
//!   configured, its clear body parsing; chunks within a TPDU body; `write` takes
//!   `min(len, writable)`; connections, events and heap bounded);
//! * **no connection is proven on B by replays**: a connection B accepted is proven
//!   (`Endpoint::is_proven`) only if a datagram A sent in B's current life, with that
//!   connection's ports and tag, reached B. After a restart that cut A off, nothing on B is
//!   ever proven. A proven connection has A's address as its address (finding K1 in
//!   docs/results/fuzz.md, fixed: it kept the address a replay opened it from, with A's as
//!   a second path; and K2, fixed: a copy of A's fresh first TPDU from another address
//!   opened it there proven at once), and once proven it stays proven;
//! * bytes B's application reads are counted as proven only when read from a connection that
//!   is proven at that moment and passes the check above (`KeyedSummary`);
//! * with a key, the counters account for every datagram: `datagrams_in = undecodable +
//!   auth_verified + auth_dropped()`; without one, nothing is verified or refused but what
//!   carries an AUTH bit (`auth_unexpected`).

mod attack;
mod checks;
mod datagram;
mod forge;

pub use attack::check_sealed;

use crate::deadline::TwoEnds;
use crate::packet::addr;
use crate::script::Script;
use aerotp_proto::{
    max_body, AuthConfig, AuthKey, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig,
    EndpointStats, FecSetting, KeySet, Mode, KEY_LEN,
};
use aerotp_wire::{Header, AUTH_OVERHEAD, NONCE_LEN};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

const PORT: u16 = 7000;
const MAX_CONNECTIONS: usize = 6;
const MAX_EVENTS: usize = 256;
const MAX_DATAGRAMS: usize = 16;
/// Datagrams the link holds per direction (a full link drops).
const LINK_QUEUE: usize = 256;
/// Datagrams the attacker's recording keeps (a ring: the oldest go first).
const RECORDED: usize = 1024;
const DRAIN_LIMIT: usize = 4096;
const MAX_STEPS: usize = 20_000;
/// Lives of B per script (restarts bound the work an input can ask for).
const MAX_LIVES: u32 = 16;
const SEND_BUFFER: usize = 64 << 10;
const RECV_WINDOW: u32 = 64;
const FIXED_HEAP: usize = 8 << 20;
/// Largest datagram the high-parity step builds (parity 254 on a few hundred protected bytes
/// already takes tens of kB; decoding cost grows with it).
const HIGH_PARITY_MAX: usize = 8 << 10;
const KEY_ID: u8 = 3;
const SECRET: [u8; KEY_LEN] = [0x5C; KEY_LEN];
/// Short enough that the script's time jumps reach it.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

fn a_addr() -> SocketAddr {
    addr(1, 9000)
}
fn b_addr() -> SocketAddr {
    addr(2, 9000)
}

/// (source port, destination port, tag) of a TPDU: which connection it speaks for.
type ConnKey = (u16, u16, u8);

/// A datagram on the link or in the attacker's recording.
#[derive(Clone)]
struct Sent {
    from: SocketAddr,
    /// Sent by A (to B); otherwise by B (to A).
    by_a: bool,
    /// B's life in which it was sent.
    life: u32,
    /// Its header's ports and tag, read when it was sent.
    key: Option<ConnKey>,
    dg: Vec<u8>,
}

fn key_of(dg: &[u8]) -> Option<ConnKey> {
    Header::parse_any(dg)
        .ok()
        .map(|(h, _)| (h.src_port, h.dst_port, h.tag))
}

fn endpoint_config(
    keyed: Option<bool>,
    nonce_seed: [u8; NONCE_LEN],
    half_open: usize,
) -> EndpointConfig {
    // `..default()`: see the same in `endpoint.rs`.
    #[allow(clippy::needless_update)]
    EndpointConfig {
        max_connections: MAX_CONNECTIONS,
        max_events: MAX_EVENTS,
        max_datagrams: MAX_DATAGRAMS,
        auth: keyed.map(|encrypt| AuthConfig {
            keys: KeySet {
                current: AuthKey::new(KEY_ID, SECRET).expect("a valid key id"),
                previous: None,
            },
            encrypt,
            nonce_seed,
        }),
        setup_timeout: SETUP_TIMEOUT,
        max_half_open: half_open,
        ..EndpointConfig::default()
    }
}

/// What a keyed script did, so tests can check that the seeds reach the states they are for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyedSummary {
    pub steps: usize,
    /// Lives of B after the first (restarts).
    pub restarts: u32,
    /// Connections B accepted, over all its lives, and those of them seen proven.
    pub b_accepted: usize,
    pub b_proven: usize,
    /// Connections B accepted after a restart that cut A off (replays and forgeries only).
    pub b_accepted_after_cut: usize,
    /// Application bytes B read from connections proven at the time, and from unproven ones.
    pub b_read_proven: usize,
    pub b_read_unproven: usize,
    pub a_read: usize,
    /// Recorded datagrams the attacker replayed, and B's refusals of replays (all lives).
    pub replayed: usize,
    pub b_auth_replayed: u64,
    /// TPDUs B verified (all lives): a replay to a restarted B verifies (it forgot the window).
    pub b_auth_verified: u64,
    /// FEC decodes B skipped for the decode budgets (all lives).
    pub b_fec_budget_refused: u64,
    /// RSTs the connections still held at the end challenged, and AFINACKs they took for an
    /// AFIN never sent (no key: `reset_guard`; `ConnectionStats::resets`).
    pub resets_challenged: u64,
    pub forged_fins: u64,
}

struct World {
    a: Endpoint,
    b: Endpoint,
    a_hs: Vec<ConnectionHandle>,
    b_hs: Vec<ConnectionHandle>,
    /// Connections B opened itself (proven by construction).
    b_own: Vec<ConnectionHandle>,
    /// Connections of B seen proven (once proven, stays proven).
    b_seen_proven: Vec<ConnectionHandle>,
    /// All connections B accepted in this life, counted once.
    b_known: Vec<ConnectionHandle>,
    to_a: VecDeque<Sent>,
    to_b: VecDeque<Sent>,
    recorded: Vec<Sent>,
    next_record: usize,
    /// Ports and tags of datagrams A sent in B's current life that reached B.
    live: Vec<ConnKey>,
    now: Duration,
    cfg: ConnectionConfig,
    keyed: Option<bool>,
    half_open: usize,
    b_nonce: [u8; NONCE_LEN],
    life: u32,
    /// A is off the network (since a restart that cut it off).
    a_cut: bool,
    out: Vec<u8>,
    sum: KeyedSummary,
    /// B's counters of its earlier lives.
    b_past: EndpointStats,
}

fn push(q: &mut VecDeque<Sent>, s: Sent) {
    if q.len() < LINK_QUEUE {
        q.push_back(s);
    }
}

impl World {
    fn new_b(&self) -> Endpoint {
        // Each life its own nonce seed and endpoint seed (the cookie secret), as a restarted
        // process draws them from the OS.
        let mut n = self.b_nonce;
        for (i, x) in self.life.to_be_bytes().iter().enumerate() {
            n[i] ^= x.wrapping_mul(0x9D);
            n[4 + i] ^= *x;
        }
        let mut b = Endpoint::new(
            endpoint_config(self.keyed, n, self.half_open),
            12 + 0x1_0000 * u64::from(self.life),
        );
        b.listen(PORT, self.cfg.clone()).expect("valid listener");
        b
    }

    fn mtu_body(&self) -> usize {
        let room = if self.keyed.is_some() {
            self.cfg.mtu - AUTH_OVERHEAD
        } else {
            self.cfg.mtu
        };
        max_body(room, 0)
    }

    fn check_out(&self, dg: &[u8]) {
        match self.keyed {
            Some(encrypt) => check_sealed(dg, self.cfg.mtu, encrypt),
            None => crate::endpoint::check_emitted(dg, self.cfg.mtu),
        }
    }

    fn record(&mut self, s: &Sent) {
        if self.recorded.len() < RECORDED {
            self.recorded.push(s.clone());
        } else {
            self.recorded[self.next_record] = s.clone();
            self.next_record = (self.next_record + 1) % RECORDED;
        }
    }

    /// What A and B send at `now` goes on the link (and into the recording), checked.
    fn pump(&mut self) -> bool {
        let mut complete = true;
        for side_a in [true, false] {
            let mut n = 0;
            loop {
                self.out.clear();
                let ep = if side_a { &mut self.a } else { &mut self.b };
                let Some(t) = ep.poll_transmit(self.now, &mut self.out) else {
                    break;
                };
                assert_eq!(t.len, self.out.len());
                self.check_out(&self.out);
                n += 1;
                if n >= DRAIN_LIMIT {
                    complete = false;
                    break;
                }
                let (peer, me) = if side_a {
                    (b_addr(), a_addr())
                } else {
                    (a_addr(), b_addr())
                };
                // A cut off sends into nothing; what goes to other addresses (challenges of
                // addresses the attacker spoofed) is the attacker's and not replayed here.
                if t.remote != peer || (side_a && self.a_cut) {
                    continue;
                }
                let s = Sent {
                    from: me,
                    by_a: side_a,
                    life: self.life,
                    key: key_of(&self.out),
                    dg: self.out.clone(),
                };
                self.record(&s);
                push(
                    if side_a {
                        &mut self.to_b
                    } else {
                        &mut self.to_a
                    },
                    s,
                );
            }
        }
        complete
    }

    fn handle(hs: &[ConnectionHandle], sel: u8) -> Option<ConnectionHandle> {
        (!hs.is_empty()).then(|| hs[usize::from(sel) % hs.len()])
    }

    /// Hands `items` to B (or A), one by one or as GRO trains per source, noting which of
    /// A's datagrams of this life reached B.
    fn arrive(&mut self, to_b: bool, items: Vec<(SocketAddr, Sent)>, as_train: bool) {
        if !to_b && self.a_cut {
            return;
        }
        if to_b {
            for (_, s) in &items {
                if s.by_a && s.life == self.life {
                    if let Some(k) = s.key {
                        if !self.live.contains(&k) {
                            self.live.push(k);
                        }
                    }
                }
            }
        }
        let ep = if to_b { &mut self.b } else { &mut self.a };
        if !as_train {
            for (from, s) in &items {
                ep.handle_datagram(self.now, *from, &s.dg);
            }
            return;
        }
        for group in items.chunk_by(|x, y| x.0 == y.0) {
            let stride = group[0].1.dg.len();
            let buf: Vec<u8> = group
                .iter()
                .flat_map(|(_, s)| s.dg.iter().copied())
                .collect();
            ep.handle_train(self.now, group[0].0, &bytes::Bytes::from(buf), stride);
        }
    }

    /// Up to 16 datagrams from one direction of the link, each lost, damaged, duplicated or
    /// taken out of order as the script says (as in `proto_endpoint`).
    fn deliver(&mut self, s: &mut Script, to_b: bool) {
        let first = s.u8();
        let n = first % 16 + 1;
        let as_train = first & 0x80 != 0;
        let hows = s.bytes(usize::from(n));
        let mut items = Vec::new();
        for &how in hows {
            let q = if to_b { &mut self.to_b } else { &mut self.to_a };
            let item = if how & 0x10 != 0 {
                q.pop_back()
            } else {
                q.pop_front()
            };
            let Some(mut it) = item else { break };
            match how & 0x0F {
                0 => continue,
                1 if !it.dg.is_empty() => {
                    let pos = usize::from(s.u16()) % it.dg.len();
                    it.dg[pos] ^= s.u8() | 1;
                }
                2 => push(q, it.clone()),
                _ => {}
            }
            items.push((it.from, it));
        }
        self.arrive(to_b, items, as_train);
    }

    fn write(&mut self, s: &mut Script, on_a: bool) {
        let (ep, hs) = if on_a {
            (&mut self.a, &self.a_hs)
        } else {
            (&mut self.b, &self.b_hs)
        };
        let sel = s.u8();
        let n = usize::from(s.u16()) % (16 << 10);
        let Some(h) = Self::handle(hs, sel) else {
            return;
        };
        let data: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        let room = ep.writable(h);
        if let Ok(w) = ep.write(h, &data) {
            assert_eq!(w, n.min(room), "write took {w} of {n} with room for {room}");
        }
        assert!(ep.writable(h) <= SEND_BUFFER, "send buffer over its size");
    }

    fn read(&mut self, s: &mut Script, on_a: bool) {
        let sel = s.u8();
        let chunked = s.u8() & 1 == 0;
        let limit = self.mtu_body();
        let Some(h) = Self::handle(if on_a { &self.a_hs } else { &self.b_hs }, sel) else {
            return;
        };
        for _ in 0..256 {
            let ep = if on_a { &mut self.a } else { &mut self.b };
            let n = if chunked {
                match ep.read_chunk(h) {
                    Ok(Some(d)) => {
                        assert!(
                            d.data.len() <= limit,
                            "delivered a {}-byte chunk: no TPDU body can exceed {limit} bytes \
                             at the MTU {}",
                            d.data.len(),
                            self.cfg.mtu
                        );
                        d.data.len()
                    }
                    _ => break,
                }
            } else {
                let mut buf = [0u8; 4096];
                match ep.read(h, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                }
            };
            if on_a {
                self.sum.a_read += n;
            } else if self.b.is_proven(h) {
                // Counted as proven only after the same check as every step's.
                self.check_proven(h);
                self.sum.b_read_proven += n;
            } else {
                self.sum.b_read_unproven += n;
            }
        }
    }

    fn lifecycle(&mut self, s: &mut Script) {
        let sel = s.u8();
        let on_a = sel & 1 == 0;
        let (ep, hs) = if on_a {
            (&mut self.a, &mut self.a_hs)
        } else {
            (&mut self.b, &mut self.b_hs)
        };
        let Some(h) = Self::handle(hs, sel >> 1) else {
            return;
        };
        match s.u8() % 3 {
            0 => {
                let _ = ep.close(h);
            }
            1 => {
                let _ = ep.abort(h, "script abort");
            }
            _ => {
                ep.release(h);
                hs.retain(|x| *x != h);
                if !on_a {
                    self.b_own.retain(|x| *x != h);
                    self.b_seen_proven.retain(|x| *x != h);
                }
            }
        }
    }

    fn connect(&mut self, s: &mut Script) {
        let sel = s.u8();
        let mut cfg = self.cfg.clone();
        cfg.mode = Mode::ALL[usize::from(sel >> 1) % (Mode::ALL.len() - 1)];
        if sel & 1 == 0 {
            if let Ok(h) = self.a.connect(self.now, b_addr(), PORT, cfg) {
                self.a_hs.push(h);
            }
        } else if let Ok(h) = self.b.connect(self.now, a_addr(), PORT, cfg) {
            self.b_hs.push(h);
            self.b_own.push(h);
        }
    }

    /// B is replaced by a fresh endpoint with the same key (its connections, replay windows
    /// and freshness marks gone); what is in flight to it may arrive at the new one.
    fn restart(&mut self, s: &mut Script) {
        let how = s.u8();
        if self.life + 1 >= MAX_LIVES {
            return;
        }
        self.life += 1;
        self.sum.restarts += 1;
        self.a_cut |= how & 1 == 1;
        if how & 2 != 0 {
            self.to_b.clear();
        }
        add_stats(&mut self.b_past, &self.b.stats);
        self.b = self.new_b();
        self.b_hs.clear();
        self.b_own.clear();
        self.b_seen_proven.clear();
        self.b_known.clear();
        self.live.clear();
    }
}

fn add_stats(sum: &mut EndpointStats, s: &EndpointStats) {
    sum.auth_replayed += s.auth_replayed;
    sum.auth_verified += s.auth_verified;
    sum.fec_budget_refused += s.fec_budget_refused;
}

/// See the module documentation.
pub fn target_proto_endpoint_keyed(data: &[u8]) {
    run_keyed_script(data);
}

/// Runs one keyed script (see the module documentation), checking every invariant.
///
/// The input: mode, MTU, FEC, a byte of options (bit 0: no key; bit 1: encrypt; bits 2–3:
/// `max_half_open` 1, 4 or 128), A's nonce seed (12 bytes), B's (12 bytes; each later life of
/// B varies it), then steps.
pub fn run_keyed_script(data: &[u8]) -> KeyedSummary {
    let heap_base = crate::heap_live_bytes();
    let mut s = Script::new(data);
    let mut w = World::from_script_head(&mut s);
    let mut steps = 0;
    while !s.is_empty() && steps < MAX_STEPS {
        steps += 1;
        w.step(&mut s);
        w.check_bounds(heap_base);
    }
    w.settle(heap_base);
    w.summary(steps)
}

impl World {
    /// The world the script's head (mode, MTU, FEC, options, the nonce seeds) describes: A
    /// listening and connecting to B.
    fn from_script_head(s: &mut Script) -> World {
        let mode = Mode::ALL[usize::from(s.u8()) % (Mode::ALL.len() - 1)];
        let mtu = [256, 576, 1500][usize::from(s.u8()) % 3];
        let fec =
            [FecSetting::Off, FecSetting::Parity(8), FecSetting::Auto][usize::from(s.u8()) % 3];
        let opts = s.u8();
        let keyed = (opts & 1 == 0).then_some(opts & 2 != 0);
        let half_open = [1, 4, 128, 128][usize::from(opts >> 2) % 4];
        let mut a_nonce = [0u8; NONCE_LEN];
        a_nonce.iter_mut().for_each(|x| *x = s.u8());
        let mut b_nonce = [0u8; NONCE_LEN];
        b_nonce.iter_mut().for_each(|x| *x = s.u8());
        if b_nonce[..4] == a_nonce[..4] {
            // Two endpoints sharing a key need distinct instances (docs/security.md, "Nonces").
            b_nonce[0] ^= 0x80;
        }
        let cfg = ConnectionConfig {
            mtu,
            fec,
            send_buffer: Some(SEND_BUFFER),
            recv_window: RECV_WINDOW,
            idle_timeout: Duration::from_secs(120),
            close_timeout: Duration::from_secs(10),
            ..ConnectionConfig::with_mode(mode)
        };
        cfg.validate().expect("the target's own config is valid");
        let a = Endpoint::new(endpoint_config(keyed, a_nonce, half_open), 11);
        let mut w = World {
            b: Endpoint::new(EndpointConfig::default(), 0),
            a,
            a_hs: Vec::new(),
            b_hs: Vec::new(),
            b_own: Vec::new(),
            b_seen_proven: Vec::new(),
            b_known: Vec::new(),
            to_a: VecDeque::new(),
            to_b: VecDeque::new(),
            recorded: Vec::new(),
            next_record: 0,
            live: Vec::new(),
            now: Duration::ZERO,
            cfg: cfg.clone(),
            keyed,
            half_open,
            b_nonce,
            life: 0,
            a_cut: false,
            out: Vec::new(),
            sum: KeyedSummary::default(),
            b_past: EndpointStats::default(),
        };
        w.b = w.new_b();
        w.a.listen(PORT, cfg.clone()).expect("valid listener");
        let ha = w.a.connect(w.now, b_addr(), PORT, cfg);
        w.a_hs.extend(ha);
        w
    }

    /// One step of the script.
    fn step(&mut self, s: &mut Script) {
        match s.u8() % 15 {
            0 => {
                let sel = s.u8();
                let n = usize::from(s.u16()) % 2048;
                let dg = s.bytes(n).to_vec();
                let (to_b, from) = match sel % 4 {
                    0 => (true, a_addr()),
                    1 => (false, b_addr()),
                    2 => (true, World::attacker_addr(sel >> 2)),
                    _ => (false, World::attacker_addr(sel >> 2)),
                };
                let ep = if to_b { &mut self.b } else { &mut self.a };
                ep.handle_datagram(self.now, from, &dg);
            }
            1 => {
                let (to_b, from, dg) = self.forge(s);
                let ep = if to_b { &mut self.b } else { &mut self.a };
                ep.handle_datagram(self.now, from, &dg);
            }
            2 => {
                let k = s.u8();
                self.now += match k % 4 {
                    0 => Duration::from_micros(u64::from(s.u8())),
                    1 => Duration::from_millis(u64::from(s.u8())),
                    2 => Duration::from_millis(u64::from(s.u16())),
                    _ => Duration::from_secs(u64::from(s.u16() % 3600)),
                };
                self.advance();
            }
            3 => self.deliver(s, false),
            4 => self.deliver(s, true),
            5 => {
                self.pump();
            }
            6 => self.write(s, true),
            7 => self.write(s, false),
            8 => self.read(s, true),
            9 => self.read(s, false),
            10 => self.lifecycle(s),
            11 => self.connect(s),
            12 => self.replay(s),
            13 => {
                let dg = self.high_parity(s);
                self.b.handle_datagram(self.now, a_addr(), &dg);
            }
            _ => self.restart(s),
        }
    }

    /// After the script: up to 64 timer deadlines run, everything on the link delivered
    /// after each, the bounds checked.
    fn settle(&mut self, heap_base: Option<isize>) {
        const ALL_AS_THEY_ARE: [u8; 17] = [
            15, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F,
            0x0F, 0x0F,
        ];
        for _ in 0..64 {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            self.advance();
            self.deliver(&mut Script::new(&ALL_AS_THEY_ARE), true);
            self.deliver(&mut Script::new(&ALL_AS_THEY_ARE), false);
            self.check_bounds(heap_base);
        }
    }

    /// What the script did, over B's lives.
    fn summary(mut self, steps: usize) -> KeyedSummary {
        add_stats(&mut self.b_past, &self.b.stats);
        let mut sum = self.sum;
        for (ep, hs) in [(&self.a, &self.a_hs), (&self.b, &self.b_hs)] {
            for r in hs.iter().filter_map(|h| ep.stats(*h)).map(|c| c.resets) {
                sum.resets_challenged += r.challenged;
                sum.forged_fins += r.forged_fins;
            }
        }
        sum.steps = steps;
        sum.b_auth_replayed = self.b_past.auth_replayed;
        sum.b_auth_verified = self.b_past.auth_verified;
        sum.b_fec_budget_refused = self.b_past.fec_budget_refused;
        sum
    }
}

impl TwoEnds for World {
    fn ends(&mut self) -> (&mut Endpoint, &mut Endpoint, Duration) {
        (&mut self.a, &mut self.b, self.now)
    }
    fn pump_link(&mut self) -> bool {
        self.pump()
    }
}
