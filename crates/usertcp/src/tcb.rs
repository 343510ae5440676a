//! One source TCP connection terminated by the ingress in user space (docs/gateway.md §TCP
//! reliable: end-to-end semantics).
//!
//! Source → destination: every in-order byte is handed to the flow at once (the AeroTP
//! session sends it), but the acknowledgement number we send is the flow's *confirmed*
//! offset — what the egress confirmed written to the destination — never more. The source
//! keeps unconfirmed bytes in its own send buffer and resends them; those we already took are
//! dropped. The window we advertise puts the right edge at `confirmed + window`, so the flow
//! never holds more than `window` unconfirmed bytes. Segments beyond a hole are kept
//! (`reasm`, bounded) until it fills, and reported as SACK blocks to a source that offered
//! SACK. The source's FIN is acknowledged when the egress confirmed the destination's end
//! (its AFINACK). A source that offered timestamps gets them (`stamps`: each acknowledgement
//! echoes the TSval of the segment that delivered the byte at its left edge), and one that
//! offered SACK gets D-SACK blocks for the bytes it sent twice (`dsack`): both let it undo a
//! retransmission timeout that fired while an air repair held our acknowledgement back.
//!
//! Destination → source: an ordinary sender, bounded by a 256 KiB send buffer and the
//! source's window; go-back-N on a retransmission timeout (no congestion control: the
//! source is one hop away on the ingress's own network; no RTT measurement, no fast
//! retransmit, and the source's SACK blocks are not used: our direction needs none of it on
//! one hop).
//!
//! Written by hand, not with smoltcp: smoltcp's sockets acknowledge every byte they accept
//! into their receive buffer, which is exactly what reliable mode must not do; bending it
//! would mean parsing every segment ourselves anyway and feeding it to smoltcp late. What
//! remains of a TCP once the receive side is ours (handshake, a bounded sender, RST, FIN) is
//! this file (docs/results/gw.md has the measurement behind the choice).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::dsack::Dups;
use super::flow::{Carrier, UserSink};
use super::packet::{self, Out, Segment, ACK, FIN, PSH, RST, SYN};
use super::reasm::{Inserted, Pool, Reasm};
use super::stamps::Stamps;
use aerotp_tun::AsyncTun;

/// Our window-scale shift (offered when the source offers scaling).
pub const WSCALE: u8 = 7;
/// Bytes of the destination's direction held for the source (unacknowledged or unsent).
pub const SEND_BUF: usize = 256 * 1024;
const RTO_INIT: Duration = Duration::from_millis(300);
const RTO_MAX: Duration = Duration::from_secs(30);
/// Retransmission timeouts in a row without progress before the connection is given up.
const MAX_TIMEOUTS: u32 = 12;
/// How long a closed connection answers a resent FIN (a short TIME-WAIT).
const TIME_WAIT: Duration = Duration::from_secs(2);
/// At most one acknowledgement per this period answers segments we already had.
const DUP_ACK_GAP: Duration = Duration::from_millis(50);
/// Option bytes the timestamps take in every segment (two NOPs, kind, length, 8 bytes).
const TS_LEN: usize = 12;

/// Where a connection's segments go: the TUN device (a capture in the unit tests).
pub trait Wire: Send + Sync + std::fmt::Debug {
    fn send(&self, packet: &[u8]);
}

/// The ingress's TUN device. A full queue drops the segment: TCP resends.
impl Wire for AsyncTun {
    fn send(&self, packet: &[u8]) {
        if let Err(e) = AsyncTun::send(self, packet) {
            tracing::debug!(error = %e, "TUN write dropped a segment");
        }
    }
}

/// A connection's addresses: the source application's, and the destination it addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tuple {
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// The live connections of the user-space TCP.
pub type Table = Mutex<HashMap<Tuple, Arc<Conn>>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The source's SYN unanswered until the flow's AeroTP connection is up ([`Conn::up`])
    /// or the deadline, whichever is first.
    SynHeld,
    /// Our SYN-ACK sent, the source's ACK of it not yet here.
    SynRcvd,
    Open,
    /// Closed, answering resent FINs until the instant.
    TimeWait(Instant),
    Closed,
}

/// What a segment did that the caller must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    None,
    /// The handshake completed: give the segment again (it may carry data).
    Established,
}

#[derive(Debug)]
struct Tcb {
    t: Tuple,
    phase: Phase,
    /// The source's initial sequence number, and ours.
    irs: u32,
    iss: u32,
    peer_shift: u8,
    our_shift: u8,
    /// Largest segment we send; our MSS (what we announce).
    mss: usize,
    our_mss: u16,
    /// The flow's window (most unconfirmed bytes).
    window: u64,
    /// Source → destination: bytes handed to the flow, in order; the source's FIN taken.
    taken: u64,
    fin_in: bool,
    /// The source offered SACK (and our SYN-ACK permitted it).
    sack_ok: bool,
    /// Out-of-order bytes beyond `taken`.
    reasm: Reasm,
    /// The source offered timestamps (and our SYN-ACK answered with them): the TSvals.
    stamps: Option<Stamps>,
    /// Duplicates to report as D-SACK (only when `sack_ok`).
    dups: Dups,
    /// The stream offset our last acknowledgement named (RFC 7323's `Last.ACK.sent`).
    edge: u64,
    /// The acknowledgement and window we last sent.
    sent_ack: Option<(u32, u16)>,
    last_dup_ack: Option<Instant>,
    /// Destination → source: acknowledged, next to send, the bytes from `una` on.
    una: u64,
    nxt: u64,
    /// The most ever sent (`nxt` goes back to `una` on a timeout; acknowledgements of what
    /// was sent before it still count), and whether our FIN ever went.
    max: u64,
    fin_ever: bool,
    buf: VecDeque<u8>,
    fin_out: bool,
    fin_sent: bool,
    fin_acked: bool,
    peer_wnd: u64,
    rto: Duration,
    deadline: Option<Instant>,
    timeouts: u32,
    flow: Option<Arc<dyn Carrier>>,
}

/// A connection: its state, the TUN it answers through, and what wakes its driver.
#[derive(Debug)]
pub struct Conn {
    tcb: Mutex<Tcb>,
    tun: Arc<dyn Wire>,
    room: Notify,
    pub wake: Notify,
    reset_asked: AtomicBool,
    fin_asked: AtomicBool,
}

fn seq_off(seq: u32, base: u32) -> i64 {
    i64::from(seq.wrapping_sub(base) as i32)
}

impl Conn {
    /// A connection for the source's SYN `s`, not answered yet (`Conn::hold`).
    /// Out-of-order bytes are kept up to the window, and within `pool`.
    fn from_syn(
        s: &Segment<'_>,
        iss: u32,
        window: u64,
        tun: Arc<dyn Wire>,
        mtu: usize,
        pool: Arc<Pool>,
    ) -> Conn {
        let v6 = s.src.is_ipv6();
        let our_mss = (mtu.saturating_sub(if v6 { 60 } else { 40 })).clamp(536, 65_495) as u16;
        let default_mss = if v6 { 1220 } else { 536 };
        let mss = usize::from(s.mss.unwrap_or(default_mss).clamp(88, our_mss));
        let scaled = s.wscale.is_some();
        let window = if scaled {
            window.min(u64::from(u16::MAX) << WSCALE)
        } else {
            window.min(u64::from(u16::MAX))
        };
        // One TSval range per segment of the window (at the smallest MSS Linux sends).
        let ts_cap = (window as usize / 512).clamp(64, 32_768);
        let stamps =
            s.ts.map(|(val, _)| Stamps::new(val, iss.rotate_left(16), ts_cap));
        let tcb = Tcb {
            t: Tuple {
                src: s.src,
                dst: s.dst,
            },
            phase: Phase::SynRcvd,
            irs: s.seq,
            iss,
            peer_shift: s.wscale.unwrap_or(0).min(14),
            our_shift: if scaled { WSCALE } else { 0 },
            mss,
            our_mss,
            window,
            taken: 0,
            fin_in: false,
            sack_ok: s.sack_ok,
            reasm: Reasm::new(window as usize, pool),
            stamps,
            dups: Dups::default(),
            edge: 0,
            sent_ack: None,
            last_dup_ack: None,
            una: 0,
            nxt: 0,
            max: 0,
            fin_ever: false,
            buf: VecDeque::new(),
            fin_out: false,
            fin_sent: false,
            fin_acked: false,
            peer_wnd: u64::from(s.window),
            rto: RTO_INIT,
            deadline: Some(Instant::now() + RTO_INIT),
            timeouts: 0,
            flow: None,
        };
        Conn {
            tcb: Mutex::new(tcb),
            tun,
            room: Notify::new(),
            wake: Notify::new(),
            reset_asked: AtomicBool::new(false),
            fin_asked: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tcb> {
        self.tcb.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn tuple(&self) -> Tuple {
        self.lock().t
    }

    /// The flow the connection feeds (after the handshake).
    pub fn set_flow(&self, flow: Arc<dyn Carrier>) {
        self.lock().flow = Some(flow);
        self.wake.notify_one();
    }

    pub fn flow(&self) -> Option<Arc<dyn Carrier>> {
        self.lock().flow.clone()
    }

    /// Aborts the connection from our side (no flow could be made): a RST to the source.
    pub fn refuse(&self) {
        let mut t = self.lock();
        t.send_rst(&*self.tun);
        t.phase = Phase::Closed;
    }

    /// Takes one segment of the source.
    pub fn on_segment(&self, s: &Segment<'_>) -> Event {
        let mut t = self.lock();
        let ev = t.on_segment(s, &*self.tun, &self.room);
        if ev == Event::None {
            t.pump(&*self.tun, &self.room, Instant::now());
        }
        ev
    }

    /// Sends what is due (acknowledgements, data, retransmissions, the FIN, a RST) and says
    /// when to be called again; `None`: the connection is over, forget it.
    pub fn pump(&self) -> Option<Instant> {
        let mut t = self.lock();
        if self.reset_asked.load(Ordering::Acquire) && t.phase != Phase::Closed {
            t.send_rst(&*self.tun);
            t.phase = Phase::Closed;
            self.room.notify_waiters();
        }
        if self.fin_asked.load(Ordering::Acquire) {
            t.fin_out = true;
        }
        t.pump(&*self.tun, &self.room, Instant::now())
    }
}

impl UserSink for Conn {
    fn push(&self, d: &[u8]) -> usize {
        let n = {
            let mut t = self.lock();
            if !matches!(t.phase, Phase::Open) || t.fin_out {
                // Gone: the bytes cannot reach the source; say so by taking them (the flow is
                // being reset by whoever closed the connection).
                return d.len();
            }
            let n = d.len().min(SEND_BUF - t.buf.len());
            t.buf.extend(&d[..n]);
            if n > 0 {
                t.pump(&*self.tun, &self.room, Instant::now());
            }
            n
        };
        n
    }

    fn room(&self) -> &Notify {
        &self.room
    }

    fn finish(&self) {
        self.fin_asked.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn reset(&self) {
        self.reset_asked.store(true, Ordering::Release);
        self.wake.notify_one();
        self.room.notify_waiters();
    }

    fn up(&self) {
        Conn::up(self);
    }
}

impl Tcb {
    /// Our segment `seq` with `flags` and `payload`, acknowledging what is confirmed; its
    /// SACK blocks (a D-SACK first) and timestamps are then reported, and its acknowledgement
    /// is the new left edge.
    fn out<'a>(&mut self, seq: u32, flags: u8, payload: &'a [u8]) -> Out<'a> {
        let (ack, window) = self.ack_now();
        let edge = self.confirmed().0;
        let irs = self.irs;
        let rcv = |off: u64| irs.wrapping_add(1).wrapping_add(off as u32);
        let mut sack = Vec::new();
        if self.sack_ok && flags & RST == 0 {
            if let Some((l, r)) = self.dups.report(edge) {
                sack.push((rcv(l), rcv(r)));
            }
            if self.reasm.held() > 0 {
                sack.extend(
                    self.reasm
                        .blocks()
                        .into_iter()
                        .map(|(l, r)| (rcv(l), rcv(r))),
                );
            }
        }
        // The echo is for the edge the source last heard of (`Last.ACK.sent`); then the edge
        // moves to this acknowledgement.
        let ts = self.stamps.as_mut().map(|st| {
            let echo = st.echo(self.edge);
            st.advance(edge);
            (st.now(), echo)
        });
        self.edge = edge;
        Out {
            src: self.t.dst,
            dst: self.t.src,
            seq,
            ack,
            flags,
            window,
            syn_opts: None,
            sack,
            ts,
            payload,
        }
    }

    fn send_rst(&mut self, tun: &dyn Wire) {
        let o = self.out(self.snd_seq(self.nxt), RST | ACK, &[]);
        tun.send(&packet::build(&o));
    }

    /// Payload bytes per segment we send: the MSS less the timestamps every segment carries
    /// when they are in use (the MSS counts no options, RFC 9293 §3.7.1).
    fn data_mss(&self) -> usize {
        if self.stamps.is_some() {
            self.mss.saturating_sub(TS_LEN).max(1)
        } else {
            self.mss
        }
    }

    /// Sequence number of our byte `off`.
    fn snd_seq(&self, off: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(off as u32)
    }

    /// What the egress confirmed: bytes at the destination, and whether its end too.
    fn confirmed(&self) -> (u64, bool) {
        match &self.flow {
            Some(f) => {
                let (base, peer_fin) = f.confirmed();
                (base.min(self.taken), peer_fin && self.fin_in)
            }
            None => (0, false),
        }
    }

    /// The acknowledgement number and window to send now: the confirmed offset, never the
    /// bytes merely taken; the right edge at confirmed + window.
    fn ack_now(&self) -> (u32, u16) {
        let (c, fin) = self.confirmed();
        let ack = self
            .irs
            .wrapping_add(1)
            .wrapping_add(c as u32)
            .wrapping_add(u32::from(fin));
        let wnd = (self.window >> self.our_shift).min(u64::from(u16::MAX)) as u16;
        (ack, wnd)
    }

    fn send_ack(&mut self, tun: &dyn Wire) {
        let o = self.out(self.snd_seq(self.nxt), ACK, &[]);
        self.sent_ack = Some((o.ack, o.window));
        tun.send(&packet::build(&o));
    }

    fn on_segment(&mut self, s: &Segment<'_>, tun: &dyn Wire, room: &Notify) -> Event {
        let now = Instant::now();
        if let Some(ev) = self.on_segment_unopened(s, tun, room) {
            return ev;
        }
        let rcv = self.irs.wrapping_add(1).wrapping_add(self.taken as u32);
        let off = seq_off(s.seq, rcv);
        if s.has(RST) {
            // Accepted anywhere from what is confirmed to the window's right edge.
            if off >= -(self.window as i64) && off <= self.window as i64 {
                self.source_reset(room);
            }
            return Event::None;
        }
        if s.has(SYN) {
            // A resent SYN: our state stands; the acknowledgement below says where we are.
            self.send_ack(tun);
            return Event::None;
        }
        if s.has(ACK) {
            self.take_ack(s, now, room);
        }
        // The segment's stream offset (negative: older than the stream, ignored).
        let seg_off = u64::try_from(self.taken as i64 + off).ok();
        let tsval = s.ts.map(|(val, _)| val);
        if let (Some(st), Some(at), Some(val)) = (self.stamps.as_mut(), seg_off, tsval) {
            st.seen(at, val, self.edge);
        }
        let len = s.payload.len() as i64;
        if len > 0 || s.has(FIN) {
            self.take_payload(s, off, seg_off, tun, now);
        }
        Event::None
    }

    /// A segment before the connection is open (or after): what it does, if the phase
    /// decides; `None` when open.
    fn on_segment_unopened(
        &mut self,
        s: &Segment<'_>,
        tun: &dyn Wire,
        room: &Notify,
    ) -> Option<Event> {
        match self.phase {
            Phase::Closed => Some(Event::None),
            Phase::TimeWait(_) => {
                if s.has(FIN) {
                    self.send_ack(tun);
                }
                Some(Event::None)
            }
            Phase::SynHeld => {
                // A resent SYN waits for the same answer; nothing else is valid before it.
                if s.has(RST) {
                    self.source_reset(room);
                }
                Some(Event::None)
            }
            Phase::SynRcvd => {
                if s.has(RST) {
                    self.source_reset(room);
                } else if s.has(SYN) && s.seq == self.irs {
                    self.send_syn_ack(tun);
                } else if s.has(ACK) && s.ack == self.iss.wrapping_add(1) {
                    self.phase = Phase::Open;
                    self.deadline = None;
                    self.rto = RTO_INIT;
                    return Some(Event::Established);
                }
                Some(Event::None)
            }
            Phase::Open => None,
        }
    }

    /// Takes the payload (and FIN) of segment `s`, `off` bytes from what we have taken
    /// (`seg_off`: its stream offset, if not older than the stream): the new bytes go to the
    /// flow, bytes beyond are kept out of order, bytes we had are reported (D-SACK) or
    /// answered with an acknowledgement.
    fn take_payload(
        &mut self,
        s: &Segment<'_>,
        off: i64,
        seg_off: Option<u64>,
        tun: &dyn Wire,
        now: Instant,
    ) {
        let tsval = s.ts.map(|(val, _)| val);
        if off > 0 {
            // Beyond what we have (an earlier segment lost): kept, and an immediate
            // acknowledgement says where we are (with the SACK blocks).
            self.keep_out_of_order(s, off as u64);
            self.send_ack(tun);
            return;
        }
        let skip = (-off) as usize;
        if let Some(at) = seg_off.filter(|_| self.sack_ok && skip > 0) {
            // Bytes we had: a D-SACK once our acknowledgement is past them.
            self.dups.add(at, at + skip.min(s.payload.len()) as u64);
        }
        if skip < s.payload.len() && !self.fin_in {
            let new = &s.payload[skip..];
            let took = self.flow.as_ref().map_or(0, |f| f.take_source(new));
            if let (Some(st), Some(val)) = (self.stamps.as_mut(), tsval) {
                st.took(self.taken, self.taken + took as u64, val);
            }
            self.taken += took as u64;
            if took == new.len() && s.has(FIN) {
                self.fin_in = true;
                if let Some(f) = &self.flow {
                    f.source_fin();
                }
            }
        } else if skip == s.payload.len() && s.has(FIN) && !self.fin_in {
            self.fin_in = true;
            if let Some(f) = &self.flow {
                f.source_fin();
            }
        } else if self.last_dup_ack.is_none_or(|t| now >= t + DUP_ACK_GAP) {
            // Everything in it taken already (the source resends what we have not
            // acknowledged: the egress has not confirmed it yet).
            self.last_dup_ack = Some(now);
            self.send_ack(tun);
        }
        self.deliver_held();
    }

    /// Keeps the bytes of segment `s`, `off` bytes beyond `taken`, up to the advertised
    /// right edge (and its FIN, if every byte of it is held).
    fn keep_out_of_order(&mut self, s: &Segment<'_>, off: u64) {
        if self.fin_in || self.flow.is_none() {
            return;
        }
        let at = self.taken + off;
        let edge = self.confirmed().0 + self.window;
        let n = (s.payload.len() as u64).min(edge.saturating_sub(at)) as usize;
        let inserted = (n > 0).then(|| self.reasm.insert(at, &s.payload[..n]));
        let kept = inserted != Some(Inserted::Full);
        match inserted {
            // All of it held already: the source sent it twice.
            Some(Inserted::Held(0)) if self.sack_ok => self.dups.add_held(at, at + n as u64),
            Some(Inserted::Held(_)) => {
                if let (Some(st), Some((val, _))) = (self.stamps.as_mut(), s.ts) {
                    st.took(at, at + n as u64, val);
                }
            }
            _ => {}
        }
        if kept && s.has(FIN) && n == s.payload.len() {
            self.reasm.fin = Some(at + n as u64);
        }
    }

    /// Hands the flow what is held from `taken` on (a hole filled), then the source's FIN
    /// if it came out of order and every byte before it is taken.
    fn deliver_held(&mut self) {
        if self.reasm.held() == 0 && self.reasm.fin.is_none() {
            return;
        }
        self.reasm.advance(self.taken);
        let Some(f) = self.flow.clone() else { return };
        while !self.fin_in {
            let Some(p) = self.reasm.front(self.taken) else {
                break;
            };
            let took = f.take_source(p);
            let whole = took == p.len();
            self.taken += took as u64;
            self.reasm.advance(self.taken);
            if !whole {
                break;
            }
        }
        if !self.fin_in && self.reasm.fin == Some(self.taken) {
            self.fin_in = true;
            f.source_fin();
        }
    }

    /// The source's acknowledgement of our direction, and its window.
    fn take_ack(&mut self, s: &Segment<'_>, now: Instant, room: &Notify) {
        self.peer_wnd = u64::from(s.window) << self.peer_shift;
        let fin_out = u64::from(self.fin_ever && !self.fin_acked);
        let outstanding = self.max - self.una + fin_out;
        let d = u64::from(s.ack.wrapping_sub(self.snd_seq(self.una)));
        if d == 0 || d > outstanding {
            return;
        }
        let bytes = d.min(self.max - self.una);
        self.buf.drain(..bytes as usize);
        self.una += bytes;
        self.nxt = self.nxt.max(self.una);
        if d > bytes {
            self.fin_acked = true;
            self.fin_sent = true;
        }
        self.rto = RTO_INIT;
        self.timeouts = 0;
        self.deadline =
            (self.max > self.una || (self.fin_ever && !self.fin_acked)).then_some(now + self.rto);
        room.notify_waiters();
    }

    /// Sends what the source's window lets out of the send buffer, then the FIN when due
    /// (`probe`: a zero window after a timeout lets one byte out).
    fn send_due(&mut self, tun: &dyn Wire, now: Instant, probe: bool) {
        let end = self.una + self.buf.len() as u64;
        let wnd = if probe {
            1
        } else {
            self.peer_wnd.min(SEND_BUF as u64)
        };
        let mut sent_any = false;
        while self.nxt < end && self.nxt - self.una < wnd {
            let n = (end - self.nxt)
                .min(self.data_mss() as u64)
                .min(wnd - (self.nxt - self.una)) as usize;
            let from = (self.nxt - self.una) as usize;
            let data: Vec<u8> = self.buf.range(from..from + n).copied().collect();
            let o = self.out(self.snd_seq(self.nxt), ACK | PSH, &data);
            self.sent_ack = Some((o.ack, o.window));
            tun.send(&packet::build(&o));
            self.nxt += n as u64;
            self.max = self.max.max(self.nxt);
            sent_any = true;
        }
        if self.fin_out && !self.fin_sent && self.nxt == end && !self.fin_acked {
            let o = self.out(self.snd_seq(self.nxt), FIN | ACK, &[]);
            self.sent_ack = Some((o.ack, o.window));
            tun.send(&packet::build(&o));
            self.fin_sent = true;
            self.fin_ever = true;
            sent_any = true;
        }
        if sent_any && self.deadline.is_none() {
            self.deadline = Some(now + self.rto);
        }
    }

    /// Sends what is due; the next instant to be called, `None` when over.
    fn pump(&mut self, tun: &dyn Wire, room: &Notify, now: Instant) -> Option<Instant> {
        match self.phase {
            Phase::Closed => return None,
            Phase::TimeWait(until) => return (now < until).then_some(until),
            Phase::SynHeld | Phase::SynRcvd | Phase::Open => {}
        }
        if let Some(f) = &self.flow {
            let reset = f.is_reset();
            if reset {
                // A held SYN too: the RST acknowledges it, so the source's connect() is
                // refused.
                self.send_rst(tun);
                self.phase = Phase::Closed;
                room.notify_waiters();
                return None;
            }
        }
        if matches!(self.phase, Phase::SynHeld | Phase::SynRcvd) {
            return self.pump_handshake(tun, now);
        }
        let mut probe = false;
        if self.deadline.is_some_and(|d| now >= d) {
            self.timeouts += 1;
            if self.timeouts > MAX_TIMEOUTS {
                tracing::info!(src = %self.t.src, "user-space TCP: the source stopped answering; reset");
                if let Some(f) = &self.flow {
                    f.reset("the source stopped acknowledging".into(), true);
                }
                self.send_rst(tun);
                self.phase = Phase::Closed;
                room.notify_waiters();
                return None;
            }
            // Go back to the first unacknowledged byte.
            self.nxt = self.una;
            if !self.fin_acked {
                self.fin_sent = false;
            }
            self.rto = (self.rto * 2).min(RTO_MAX);
            self.deadline = None;
            probe = self.peer_wnd == 0;
        }
        self.send_due(tun, now, probe);
        if self.sent_ack != Some(self.ack_now()) {
            self.send_ack(tun);
        }
        let (_, fin_confirmed) = self.confirmed();
        if fin_confirmed && self.fin_acked {
            let until = now + TIME_WAIT;
            self.phase = Phase::TimeWait(until);
            return Some(until);
        }
        Some(self.deadline.unwrap_or(now + Duration::from_secs(1)))
    }
}

/// Drives `conn` until it is over: on the flow's changes (confirmations, resets), its own
/// wake-ups (a FIN or RST asked for) and its timers; then removes it from `table`.
pub async fn drive(conn: Arc<Conn>, table: Arc<Table>) {
    let mut frx = None;
    while let Some(next) = conn.pump() {
        if frx.is_none() {
            frx = conn.flow().map(|f| f.changes());
        }
        let sleep = tokio::time::sleep_until(next.into());
        match frx.as_mut() {
            Some(rx) => tokio::select! {
                _ = rx.changed() => {}
                _ = conn.wake.notified() => {}
                _ = sleep => {}
            },
            None => tokio::select! {
                _ = conn.wake.notified() => {}
                _ = sleep => {}
            },
        }
    }
    let t = conn.tuple();
    table.lock().unwrap_or_else(|e| e.into_inner()).remove(&t);
}

mod handshake;
#[cfg(test)]
mod tests;
