//! The endpoint target: the fuzz input is a script run against two endpoints, A and an honest
//! peer B, joined by a lossy, reordering "link" the script controls, while an attacker (the
//! script too) injects raw and well-formed forged datagrams into A.
//!
//! Invariants checked after every step:
//! * nothing panics;
//! * the deadline contract (docs/design.md, "Deadlines"): after `handle_timeout(now)` and
//!   draining `poll_transmit(now)`, `poll_timeout()` is `None` or later than `now` — at the
//!   latest after a few catch-up rounds when the script jumped far ahead (a driver that woke
//!   late calls again at once; one that never gets past `now` is a livelock);
//! * every datagram an endpoint sends is a well-formed TPDU within the MTU in force, whose
//!   control body parses;
//! * no connection delivers a chunk larger than a TPDU body can be at the MTU in force;
//! * connections never exceed `max_connections`, events never exceed their bound;
//! * the heap the script holds stays under a bound in bytes derived from the configuration
//!   (per connection: send buffer plus receive window × MTU; plus fixed tables), when the
//!   [`crate::CountingAlloc`] is installed.

use crate::deadline::TwoEnds;
use crate::packet::{addr, build_datagram};
use crate::script::Script;
use aerotp_fec as fec;
use aerotp_proto::{
    max_body, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, FecSetting, Mode,
};
use aerotp_wire::{parse_tpdu, ControlBody, Flags, Header, OVERHEAD};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

const PORT: u16 = 7000;
const MAX_CONNECTIONS: usize = 6;
const MAX_EVENTS: usize = 256;
const MAX_DATAGRAMS: usize = 16;
/// Datagrams the script's link holds per direction (a full link drops, as a router does).
const LINK_QUEUE: usize = 256;
/// Most datagrams taken from one endpoint at one instant before the step gives up checking
/// the deadline (the pacer bounds bursts far below this).
const DRAIN_LIMIT: usize = 4096;
/// Most script steps per input (inputs are at most a few kB, so this is never the limit in
/// practice; it bounds the loop regardless).
const MAX_STEPS: usize = 20_000;
const SEND_BUFFER: usize = 64 << 10;
const RECV_WINDOW: u32 = 64;
/// Heap for the fixed tables (peer FEC hints, tombstones, control queue, events) and the
/// script's own link queues, on top of the per-connection bound.
const FIXED_HEAP: usize = 8 << 20;

/// Checks a datagram an endpoint sent: a TPDU within `mtu` whose CRC, parity trailer and
/// control body are exactly what docs/spec.md says.
pub fn check_emitted(dg: &[u8], mtu: usize) {
    assert!(
        dg.len() <= mtu,
        "sent {} bytes over the MTU {mtu}",
        dg.len()
    );
    let t = parse_tpdu(dg).expect("the engine sent a TPDU that does not parse");
    assert!(t.body_ok, "the engine sent a TPDU with a bad CRC");
    let protected = OVERHEAD + t.body.len();
    if t.header.fec == 0 {
        assert_eq!(dg.len(), protected, "bytes after the CRC without FEC");
    } else {
        let l = fec::Layout::for_datagram(dg.len(), t.header.fec)
            .expect("parity trailer does not match the announced FEC");
        assert_eq!(
            l.protected_len, protected,
            "parity trailer of the wrong length"
        );
    }
    check_body(t.header.flags, t.body);
}

/// Checks a TPDU body the engine wrote (plain, or the clear body inside an envelope): a
/// repair header and symbol, a CHALLENGE, an ECHO or a control body, as its flags say; data
/// bodies are the application's.
pub fn check_body(flags: aerotp_wire::Flags, b: &[u8]) {
    if flags.is_repair() {
        // docs/spec.md §7: an 18-byte repair header (code 1 or 2, reserved 0) and exactly
        // `symbol_bytes` of symbol.
        assert!(b.len() >= 18, "repair TPDU shorter than its header");
        assert!(
            matches!(b[0], 1 | 2) && b[1] == 0,
            "bad repair header {:?}",
            &b[..2]
        );
        let sym = u16::from_be_bytes([b[16], b[17]]) as usize;
        assert_eq!(b.len(), 18 + sym, "repair symbol of the wrong length");
    } else if flags.is_challenge() {
        // docs/spec.md §9: kind 0 or 1, the echoed timestamp, a 16-byte cookie.
        aerotp_wire::Challenge::parse(b).expect("the engine sent a bad CHALLENGE");
    } else if flags.is_echo() {
        aerotp_wire::Echo::parse(b).expect("the engine sent a bad ECHO");
    } else if !flags.is_data() {
        ControlBody::parse(flags, b).expect("the engine sent a bad control body");
    }
}

/// Takes every pending event (bounded), remembering connections that appear.
pub fn drain_events(ep: &mut Endpoint, handles: &mut Vec<ConnectionHandle>) {
    // Per-connection queues hold at most 64 events each, the endpoint's `MAX_EVENTS`.
    let limit = MAX_EVENTS + 64 * (MAX_CONNECTIONS + 1) + 1;
    let mut n = 0;
    while let Some(e) = ep.poll_event() {
        n += 1;
        assert!(n <= limit, "events without end");
        if let Event::Accepted(h) | Event::Connected(h) = e {
            if !handles.contains(&h) {
                handles.push(h);
            }
        }
    }
}

struct World {
    a: Endpoint,
    b: Endpoint,
    a_hs: Vec<ConnectionHandle>,
    b_hs: Vec<ConnectionHandle>,
    to_a: VecDeque<(SocketAddr, Vec<u8>)>,
    to_b: VecDeque<(SocketAddr, Vec<u8>)>,
    now: Duration,
    cfg: ConnectionConfig,
    out: Vec<u8>,
    a_read: usize,
    b_read: usize,
}

fn a_addr() -> SocketAddr {
    addr(1, 9000)
}
fn b_addr() -> SocketAddr {
    addr(2, 9000)
}
/// A's and B's addresses on a second path (docs/spec.md §9, "several paths"): what goes to
/// one arrives from the other.
fn a2_addr() -> SocketAddr {
    addr(5, 9000)
}
fn b2_addr() -> SocketAddr {
    addr(6, 9000)
}

fn push(q: &mut VecDeque<(SocketAddr, Vec<u8>)>, from: SocketAddr, dg: &[u8]) {
    if q.len() < LINK_QUEUE {
        q.push_back((from, dg.to_vec()));
    }
}

impl World {
    /// Sends what A and B have at `now` into the link (checking each datagram).
    /// Returns false when an endpoint hit [`DRAIN_LIMIT`].
    fn pump(&mut self) -> bool {
        let mut complete = true;
        for side in [true, false] {
            let (ep, q, me, peer, me2, peer2) = if side {
                (
                    &mut self.a,
                    &mut self.to_b,
                    a_addr(),
                    b_addr(),
                    a2_addr(),
                    b2_addr(),
                )
            } else {
                (
                    &mut self.b,
                    &mut self.to_a,
                    b_addr(),
                    a_addr(),
                    b2_addr(),
                    a2_addr(),
                )
            };
            let mut n = 0;
            loop {
                self.out.clear();
                let Some(t) = ep.poll_transmit(self.now, &mut self.out) else {
                    break;
                };
                assert_eq!(t.len, self.out.len());
                check_emitted(&self.out, self.cfg.mtu);
                if t.remote == peer {
                    push(q, me, &self.out);
                } else if t.remote == peer2 {
                    push(q, me2, &self.out);
                }
                n += 1;
                if n >= DRAIN_LIMIT {
                    complete = false;
                    break;
                }
            }
        }
        complete
    }

    fn handle(hs: &[ConnectionHandle], sel: u8) -> Option<ConnectionHandle> {
        (!hs.is_empty()).then(|| hs[usize::from(sel) % hs.len()])
    }

    /// Delivers up to `n` datagrams from one direction of the link, each possibly dropped,
    /// damaged, duplicated or taken out of order as the script says.
    fn deliver(&mut self, s: &mut Script, to_a: bool) {
        let first = s.u8();
        let n = first % 16 + 1;
        // The high bit: what is delivered arrives as one GRO train per sender, as the runtime
        // hands it over (`Endpoint::handle_train`, cut at the first datagram's length).
        let as_train = first & 0x80 != 0;
        let mut train: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
        // One byte per datagram, taken whether or not the link holds that many, so the rest
        // of the script does not shift with the queue's length.
        let hows = s.bytes(usize::from(n));
        for &how in hows {
            let q = if to_a { &mut self.to_a } else { &mut self.to_b };
            let item = if how & 0x10 != 0 {
                q.pop_back()
            } else {
                q.pop_front()
            };
            let Some((from, mut dg)) = item else {
                break;
            };
            match how & 0x0F {
                0 => continue, // lost
                1 if !dg.is_empty() => {
                    let pos = usize::from(s.u16()) % dg.len();
                    dg[pos] ^= s.u8() | 1;
                }
                2 => push(q, from, &dg), // duplicated: a copy comes later
                _ => {}
            }
            if as_train {
                train.push((from, dg));
                continue;
            }
            let ep = if to_a { &mut self.a } else { &mut self.b };
            ep.handle_datagram(self.now, from, &dg);
        }
        let ep = if to_a { &mut self.a } else { &mut self.b };
        for group in train.chunk_by(|x, y| x.0 == y.0) {
            let stride = group[0].1.len();
            let buf: Vec<u8> = group.iter().flat_map(|(_, d)| d.iter().copied()).collect();
            ep.handle_train(self.now, group[0].0, &bytes::Bytes::from(buf), stride);
        }
    }

    /// A datagram built from script fields so it passes the checks: the ports, tag and mode
    /// of a live connection or raw values, any flags and sequence number, a body from the
    /// script or a large filler, then optional damage.
    fn forge(&self, s: &mut Script) -> (SocketAddr, Vec<u8>) {
        let sel = s.u8();
        let remote = if sel & 1 == 1 {
            b_addr()
        } else {
            addr(3 + (sel >> 1) % 3, 9000 + u16::from(sel >> 4))
        };
        let port_of = |ep: &Endpoint, hs: &[ConnectionHandle], i: u8| {
            Self::handle(hs, i)
                .and_then(|h| ep.peer(h))
                .map(|p| (p.local_port, p.remote_port, p.tag, p.mode))
        };
        let k = s.u8();
        let known = match k % 4 {
            // B's side of a connection: B's local port → A's local port.
            0 => port_of(&self.b, &self.b_hs, k >> 2),
            // A's side, reversed: the peer's port → A's local port.
            1 => port_of(&self.a, &self.a_hs, k >> 2).map(|(l, r, t, m)| (r, l, t, m)),
            _ => None,
        };
        let (src_port, dst_port, tag, mode) = match (known, k % 4) {
            (Some(x), _) => x,
            (None, 2) => (s.u16(), PORT, s.u8(), self.cfg.mode),
            (None, _) => (s.u16(), s.u16(), s.u8(), self.cfg.mode),
        };
        let m = s.u8();
        let mode = if m < 128 {
            mode
        } else {
            Mode::ALL[usize::from(m) % Mode::ALL.len()]
        };
        let tag = if s.u8() < 192 { tag } else { s.u8() };
        let flags = Flags(s.u8());
        let seq = if s.u8() & 1 == 0 {
            u32::from(s.u16())
        } else {
            s.u32()
        };
        let timestamp = s.u32();
        let f = s.u8();
        // Parity up to 63 here: raw datagrams (op 0) cover every value of the fec byte.
        let fec = if f < 192 { 0 } else { f & 0x3F };
        let blen = s.u16();
        let filler;
        let body: &[u8] = if blen & 0x8000 != 0 {
            // Bodies up to the 16-bit limit: far above any MTU, as an attacker may send.
            let n = usize::from(blen & 0x7FFF) * 2;
            filler = (0..n).map(|i| i as u8).collect::<Vec<u8>>();
            &filler
        } else {
            s.bytes(usize::from(blen) % 512)
        };
        let header = Header {
            mode,
            flags,
            src_port,
            dst_port,
            seq,
            timestamp,
            fec,
            tag,
            len: 0,
        };
        let mut dg = build_datagram(header, body);
        for _ in 0..s.u8() % 4 {
            if dg.is_empty() {
                break;
            }
            let pos = usize::from(s.u16()) % dg.len();
            dg[pos] ^= s.u8();
        }
        (remote, dg)
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
            // `write` takes what `writable` promised, never more.
            assert_eq!(w, n.min(room), "write took {w} of {n} with room for {room}");
        }
        assert!(ep.writable(h) <= SEND_BUFFER, "send buffer over its size");
    }

    fn read(&mut self, s: &mut Script, on_a: bool) {
        let (ep, hs) = if on_a {
            (&mut self.a, &self.a_hs)
        } else {
            (&mut self.b, &self.b_hs)
        };
        let Some(h) = Self::handle(hs, s.u8()) else {
            return;
        };
        let limit = max_body(self.cfg.mtu, 0);
        let chunked = s.u8() & 1 == 0;
        let read = if on_a {
            &mut self.a_read
        } else {
            &mut self.b_read
        };
        for _ in 0..256 {
            if chunked {
                match ep.read_chunk(h) {
                    Ok(Some(d)) => {
                        *read += d.data.len();
                        assert!(
                            d.data.len() <= limit,
                            "delivered a {}-byte chunk: no TPDU body can exceed {limit} bytes \
                         at the MTU {}",
                            d.data.len(),
                            self.cfg.mtu
                        )
                    }
                    _ => break,
                }
            } else {
                let mut buf = [0u8; 4096];
                match ep.read(h, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        assert!(n <= buf.len());
                        *read += n;
                    }
                }
            }
        }
    }

    fn lifecycle(&mut self, s: &mut Script, on_a: bool) {
        let (ep, hs) = if on_a {
            (&mut self.a, &mut self.a_hs)
        } else {
            (&mut self.b, &mut self.b_hs)
        };
        let sel = s.u8();
        let Some(h) = Self::handle(hs, sel) else {
            return;
        };
        match s.u8() % 4 {
            0 => {
                let _ = ep.close(h);
            }
            1 => {
                let _ = ep.abort(h, "script abort");
            }
            2 => {
                ep.release(h);
                hs.retain(|x| *x != h);
            }
            _ => {
                // Another path: the peer's second address (or, one time in four, one that
                // never answers).
                let to = match (s.u8() % 4, on_a) {
                    (0, _) => addr(7, 9000),
                    (_, true) => b2_addr(),
                    (_, false) => a2_addr(),
                };
                let _ = ep.add_path(self.now, h, to);
            }
        }
    }

    fn connect(&mut self, s: &mut Script) {
        let sel = s.u8();
        let mut cfg = self.cfg.clone();
        cfg.mode = Mode::ALL[usize::from(sel >> 1) % (Mode::ALL.len() - 1)];
        let (ep, hs, to) = if sel & 1 == 0 {
            (&mut self.a, &mut self.a_hs, b_addr())
        } else {
            (&mut self.b, &mut self.b_hs, a_addr())
        };
        if let Ok(h) = ep.connect(self.now, to, PORT, cfg) {
            hs.push(h);
        }
    }

    fn datagram(&mut self, s: &mut Script) {
        let n = usize::from(s.u16()) % 2048;
        let parity = s.u8() % 32;
        let data = vec![0x5A; n];
        let before = self.a.poll_timeout();
        // Half the routes repair, at a ratio the script picks (docs/spec.md §7, "Datagram
        // routes"); the source port picks one of four routes.
        let how = s.u8();
        let erasure = (how & 1 == 1).then(|| aerotp_proto::ErasureSetting {
            mode: aerotp_proto::ErasureMode::Ratio(1.0 + f64::from(how >> 1) / 64.0 + 0.01),
            ..aerotp_proto::ErasureSetting::OFF
        });
        let route = aerotp_proto::DatagramRoute {
            erasure,
            ..aerotp_proto::DatagramRoute::plain(
                b_addr(),
                1 + u16::from(how >> 6),
                2,
                parity,
                self.cfg.mtu,
            )
        };
        match self.a.send_datagram_with(self.now, &route, &data) {
            Ok(()) => assert_eq!(self.a.poll_timeout(), Some(Duration::ZERO)),
            Err(_) => assert_eq!(self.a.poll_timeout(), before),
        }
        let mut taken = 0;
        while let Some(m) = self.b.take_datagram() {
            taken += 1;
            assert!(taken <= MAX_DATAGRAMS, "datagram queue over its bound");
            assert!(m.data.len() <= self.cfg.mtu);
        }
        let (routes, bytes) = self.b.repair_routes();
        assert!(routes <= 32, "{routes} receiving repair routes held");
        assert!(bytes <= 64 << 20, "{bytes} bytes of repair decoders held");
    }

    fn check_bounds(&mut self, heap_base: Option<isize>) {
        drain_events(&mut self.a, &mut self.a_hs);
        drain_events(&mut self.b, &mut self.b_hs);
        for ep in [&self.a, &self.b] {
            assert!(ep.connection_count() <= MAX_CONNECTIONS);
            // New addresses being validated: one a peer's TPDUs came from, and the paths this
            // end asked for, per connection: at most MAX_PATHS together (docs/spec.md §9).
            assert!(ep.paths_pending() <= ep.connection_count() * aerotp_proto::MAX_PATHS);
        }
        if let (Some(base), Some(now)) = (heap_base, crate::heap_live_bytes()) {
            let per_conn = SEND_BUFFER + RECV_WINDOW as usize * self.cfg.mtu;
            let bound = 2 * MAX_CONNECTIONS * per_conn + FIXED_HEAP;
            let used = now - base;
            assert!(
                used <= bound as isize,
                "heap grew by {used} bytes, over the bound of {bound} \
                 ({MAX_CONNECTIONS} connections × (send buffer {SEND_BUFFER} + window \
                 {RECV_WINDOW} × MTU {}) per endpoint + {FIXED_HEAP} fixed)",
                self.cfg.mtu
            );
        }
    }
}

/// What a script did, so tests can check that the seed scripts reach deep states (a script
/// that never gets a connection up tests little).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptSummary {
    pub steps: usize,
    /// Connections A accepted or completed (handles it learnt from events).
    pub a_connections: usize,
    /// Application bytes A and B read.
    pub a_read: usize,
    pub b_read: usize,
    /// Datagrams A and B took in.
    pub a_datagrams_in: u64,
    pub b_datagrams_in: u64,
}

/// See the module documentation.
pub fn target_proto_endpoint(data: &[u8]) {
    run_endpoint_script(data);
}

/// Runs one script (see the module documentation), checking every invariant.
pub fn run_endpoint_script(data: &[u8]) -> ScriptSummary {
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
    ScriptSummary {
        steps,
        a_connections: w.a_hs.len(),
        a_read: w.a_read,
        b_read: w.b_read,
        a_datagrams_in: w.a.stats.datagrams_in,
        b_datagrams_in: w.b.stats.datagrams_in,
    }
}

impl World {
    /// The world the script's head (mode, MTU, FEC) describes: both ends listening, each
    /// connecting to the other.
    fn from_script_head(s: &mut Script) -> World {
        let mode = Mode::ALL[usize::from(s.u8()) % (Mode::ALL.len() - 1)];
        let mtu = [256, 576, 1500][usize::from(s.u8()) % 3];
        let fec =
            [FecSetting::Off, FecSetting::Parity(8), FecSetting::Auto][usize::from(s.u8()) % 3];
        let cfg = ConnectionConfig {
            mtu,
            fec,
            send_buffer: Some(SEND_BUFFER),
            recv_window: RECV_WINDOW,
            // Short enough that the script's time jumps reach them.
            idle_timeout: Duration::from_secs(120),
            close_timeout: Duration::from_secs(10),
            ..ConnectionConfig::with_mode(mode)
        };
        cfg.validate().expect("the target's own config is valid");
        // `..default()` although every field is set today: bounds the engine grows later keep
        // their defaults instead of breaking this target's build.
        #[allow(clippy::needless_update)]
        let ecfg = EndpointConfig {
            max_connections: MAX_CONNECTIONS,
            max_events: MAX_EVENTS,
            max_datagrams: MAX_DATAGRAMS,
            ..EndpointConfig::default()
        };
        let mut w = World {
            a: Endpoint::new(ecfg.clone(), 11),
            b: Endpoint::new(ecfg, 12),
            a_hs: Vec::new(),
            b_hs: Vec::new(),
            to_a: VecDeque::new(),
            to_b: VecDeque::new(),
            now: Duration::ZERO,
            cfg: cfg.clone(),
            out: Vec::new(),
            a_read: 0,
            b_read: 0,
        };
        w.a.listen(PORT, cfg.clone()).expect("valid listener");
        w.b.listen(PORT, cfg.clone()).expect("valid listener");
        let hb = w.b.connect(w.now, a_addr(), PORT, cfg.clone());
        w.b_hs.extend(hb);
        let ha = w.a.connect(w.now, b_addr(), PORT, cfg);
        w.a_hs.extend(ha);
        w
    }

    /// One step of the script.
    fn step(&mut self, s: &mut Script) {
        match s.u8() % 14 {
            0 => {
                let sel = s.u8();
                let from = if sel & 1 == 1 {
                    b_addr()
                } else {
                    addr(3, 9000 + u16::from(sel))
                };
                let n = usize::from(s.u16()) % 2048;
                let dg = s.bytes(n);
                self.a.handle_datagram(self.now, from, dg);
            }
            1 => {
                let (from, dg) = self.forge(s);
                self.a.handle_datagram(self.now, from, &dg);
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
            3 => self.deliver(s, true),
            4 => self.deliver(s, false),
            5 => {
                self.pump();
            }
            6 => self.write(s, true),
            7 => self.write(s, false),
            8 => self.read(s, true),
            9 => self.read(s, false),
            10 => self.lifecycle(s, true),
            11 => self.lifecycle(s, false),
            12 => self.connect(s),
            _ => self.datagram(s),
        }
    }

    /// Lets the script's world run down: a bounded number of deadline jumps, checking the
    /// contract at each (this is where timers that never settle show up).
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
}

impl TwoEnds for World {
    fn ends(&mut self) -> (&mut Endpoint, &mut Endpoint, Duration) {
        (&mut self.a, &mut self.b, self.now)
    }
    fn pump_link(&mut self) -> bool {
        self.pump()
    }
}
