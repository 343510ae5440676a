//! One source TCP connection terminated by the ingress in user space (docs/gateway.md §TCP
//! reliable: end-to-end semantics).
//!
//! Source → destination: every in-order byte is handed to the flow at once (the AeroTP
//! session sends it), but the acknowledgement number we send is the flow's *confirmed*
//! offset — what the egress confirmed written to the destination — never more. The source
//! keeps unconfirmed bytes in its own send buffer and resends them; those we already took are
//! dropped. The window we advertise puts the right edge at `confirmed + window`, so the flow
//! never holds more than `window` unconfirmed bytes. The source's FIN is acknowledged when
//! the egress confirmed the destination's end (its AFINACK).
//!
//! Destination → source: an ordinary sender, bounded by a 256 KiB send buffer and the
//! source's window; go-back-N on a retransmission timeout (no congestion control: the
//! source is one hop away on the ingress's own network; no SACK, no timestamps, no fast
//! retransmit — not offered in our SYN-ACK, so the source does not use them).
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

use super::packet::{self, Out, Segment, ACK, FIN, PSH, RST, SYN};
use super::tun::Tun;
use crate::flow::{Flow, UserSink};

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

/// Where a connection's segments go: the TUN device (a capture in the unit tests).
pub trait Wire: Send + Sync + std::fmt::Debug {
    fn send(&self, packet: &[u8]);
}

impl Wire for Tun {
    fn send(&self, packet: &[u8]) {
        Tun::send(self, packet)
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
    /// The handshake completed: attach a flow, then give the segment again.
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
    flow: Option<Arc<Flow>>,
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
    /// A connection for the source's SYN `s`: answers it with our SYN-ACK.
    pub fn accept(s: &Segment<'_>, iss: u32, window: u64, tun: Arc<dyn Wire>, mtu: usize) -> Conn {
        let v6 = s.src.is_ipv6();
        let our_mss = (mtu.saturating_sub(if v6 { 60 } else { 40 })).clamp(536, 65_495) as u16;
        let default_mss = if v6 { 1220 } else { 536 };
        let mss = usize::from(s.mss.unwrap_or(default_mss).clamp(88, our_mss));
        let scaled = s.wscale.is_some();
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
            window: if scaled {
                window.min(u64::from(u16::MAX) << WSCALE)
            } else {
                window.min(u64::from(u16::MAX))
            },
            taken: 0,
            fin_in: false,
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
        let c = Conn {
            tcb: Mutex::new(tcb),
            tun,
            room: Notify::new(),
            wake: Notify::new(),
            reset_asked: AtomicBool::new(false),
            fin_asked: AtomicBool::new(false),
        };
        c.lock().send_syn_ack(&*c.tun);
        c
    }

    fn lock(&self) -> MutexGuard<'_, Tcb> {
        self.tcb.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn tuple(&self) -> Tuple {
        self.lock().t
    }

    /// The flow the connection feeds (after the handshake).
    pub fn set_flow(&self, flow: Arc<Flow>) {
        self.lock().flow = Some(flow);
        self.wake.notify_one();
    }

    pub fn flow(&self) -> Option<Arc<Flow>> {
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
}

impl Tcb {
    fn out<'a>(&self, seq: u32, flags: u8, payload: &'a [u8]) -> Out<'a> {
        let (ack, window) = self.ack_now();
        Out {
            src: self.t.dst,
            dst: self.t.src,
            seq,
            ack,
            flags,
            window,
            syn_opts: None,
            payload,
        }
    }

    fn send_syn_ack(&self, tun: &dyn Wire) {
        let o = Out {
            src: self.t.dst,
            dst: self.t.src,
            seq: self.iss,
            ack: self.irs.wrapping_add(1),
            flags: SYN | ACK,
            window: self.window.min(u64::from(u16::MAX)) as u16,
            syn_opts: Some((self.our_mss, (self.our_shift > 0).then_some(self.our_shift))),
            payload: &[],
        };
        tun.send(&packet::build(&o));
    }

    fn send_rst(&self, tun: &dyn Wire) {
        let o = self.out(self.snd_seq(self.nxt), RST | ACK, &[]);
        tun.send(&packet::build(&o));
    }

    /// Sequence number of our byte `off`.
    fn snd_seq(&self, off: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(off as u32)
    }

    /// What the egress confirmed: bytes at the destination, and whether its end too.
    fn confirmed(&self) -> (u64, bool) {
        match &self.flow {
            Some(f) => {
                let st = f.lock();
                (st.base.min(self.taken), st.peer_fin && self.fin_in)
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
        match self.phase {
            Phase::Closed => return Event::None,
            Phase::TimeWait(_) => {
                if s.has(FIN) {
                    self.send_ack(tun);
                }
                return Event::None;
            }
            Phase::SynRcvd => {
                if s.has(RST) {
                    self.phase = Phase::Closed;
                } else if s.has(SYN) && s.seq == self.irs {
                    self.send_syn_ack(tun);
                } else if s.has(ACK) && s.ack == self.iss.wrapping_add(1) {
                    self.phase = Phase::Open;
                    self.deadline = None;
                    self.rto = RTO_INIT;
                    return Event::Established;
                }
                return Event::None;
            }
            Phase::Open => {}
        }
        let rcv = self.irs.wrapping_add(1).wrapping_add(self.taken as u32);
        let off = seq_off(s.seq, rcv);
        if s.has(RST) {
            // Accepted anywhere from what is confirmed to the window's right edge.
            if off >= -(self.window as i64) && off <= self.window as i64 {
                if let Some(f) = &self.flow {
                    f.reset("the source reset its TCP connection".into(), true);
                }
                self.phase = Phase::Closed;
                room.notify_waiters();
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
        let len = s.payload.len() as i64;
        if len > 0 || s.has(FIN) {
            if off > 0 {
                // Beyond what we have (an earlier segment lost): say where we are.
                self.send_ack(tun);
                return Event::None;
            }
            let skip = (-off) as usize;
            if skip < s.payload.len() && !self.fin_in {
                let new = &s.payload[skip..];
                let took = self.flow.as_ref().map_or(0, |f| f.take_source(new));
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
        }
        Event::None
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
                .min(self.mss as u64)
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
            Phase::SynRcvd => {
                let due = self.deadline.unwrap_or(now);
                if now < due {
                    return Some(due);
                }
                self.timeouts += 1;
                if self.timeouts > 5 {
                    self.phase = Phase::Closed;
                    return None;
                }
                self.send_syn_ack(tun);
                self.rto = (self.rto * 2).min(RTO_MAX);
                self.deadline = Some(now + self.rto);
                return self.deadline;
            }
            Phase::Open => {}
        }
        if let Some(f) = &self.flow {
            let reset = f.lock().reset.is_some();
            if reset {
                self.send_rst(tun);
                self.phase = Phase::Closed;
                room.notify_waiters();
                return None;
            }
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
            frx = conn.flow().map(|f| f.changed.subscribe());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Budget, FlowInit};
    use crate::frame::Class;
    use crate::store::Custody;

    /// Captures what a connection sends.
    #[derive(Debug, Default)]
    struct Capture(Mutex<Vec<Vec<u8>>>);

    impl Wire for Capture {
        fn send(&self, packet: &[u8]) {
            self.0.lock().unwrap().push(packet.to_vec());
        }
    }

    impl Capture {
        /// (seq, ack, flags, payload length) of each captured segment, taken.
        fn take(&self) -> Vec<(u32, u32, u8, usize)> {
            let v = std::mem::take(&mut *self.0.lock().unwrap());
            v.iter()
                .map(|p| {
                    let s = packet::parse(p).expect("we send valid segments");
                    (s.seq, s.ack, s.flags, s.payload.len())
                })
                .collect()
        }
    }

    const IRS: u32 = 0xFFFF_FF00; // wraps within the test
    const ISS: u32 = 1000;

    fn seg(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        packet::build(&Out {
            src: "10.78.0.2:40000".parse().unwrap(),
            dst: "10.77.0.2:8500".parse().unwrap(),
            seq,
            ack,
            flags,
            window: 512,
            syn_opts: (flags & SYN != 0).then_some((1460, Some(7))),
            payload,
        })
    }

    fn give(c: &Conn, p: &[u8]) -> Event {
        c.on_segment(&packet::parse(p).unwrap())
    }

    /// A connection past its handshake, with its flow (64 KiB window) and capture.
    fn open() -> (Conn, Arc<Flow>, Arc<Capture>) {
        let cap = Arc::new(Capture::default());
        let syn = seg(IRS, 0, SYN, &[]);
        let c = Conn::accept(
            &packet::parse(&syn).unwrap(),
            ISS,
            65_536,
            cap.clone(),
            1500,
        );
        let synack = cap.take();
        assert_eq!(synack, vec![(ISS, IRS.wrapping_add(1), SYN | ACK, 0)]);
        let ack = seg(IRS.wrapping_add(1), ISS + 1, ACK, &[]);
        assert_eq!(give(&c, &ack), Event::Established);
        let init = FlowInit::new(1, Class::Bulk, "x".into(), Custody::mem(0), 65_536);
        let flow = Flow::new(init, Budget::new(1 << 30));
        c.set_flow(flow.clone());
        assert_eq!(give(&c, &ack), Event::None);
        (c, flow, cap)
    }

    #[tokio::test]
    async fn bytes_are_forwarded_at_once_and_acknowledged_only_when_confirmed() {
        let (c, flow, cap) = open();
        let data = vec![7u8; 1000];
        give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK | PSH, &data));
        assert_eq!(flow.lock().end, 1000, "taken into the flow at once");
        // Nothing acknowledged beyond the SYN: the egress has confirmed nothing.
        assert!(cap.take().iter().all(|s| s.1 == IRS.wrapping_add(1)));
        // A resend of the same bytes: answered with where we stand, not taken twice.
        give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK | PSH, &data));
        assert_eq!(flow.lock().end, 1000);
        assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1), ACK, 0)]);
        // A segment beyond a gap is not taken.
        give(&c, &seg(IRS.wrapping_add(2001), ISS + 1, ACK, &data));
        assert_eq!(flow.lock().end, 1000);
        cap.take();
        // The egress confirms 600: exactly that is acknowledged.
        flow.confirm(600, false).await.unwrap();
        c.pump();
        assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(601), ACK, 0)]);
        // The FIN: taken, acknowledged only once the egress confirmed the end.
        give(&c, &seg(IRS.wrapping_add(1001), ISS + 1, ACK | FIN, &[]));
        assert!(flow.lock().fin);
        flow.confirm(1000, false).await.unwrap();
        c.pump();
        assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1001), ACK, 0)]);
        flow.confirm(1000, true).await.unwrap();
        c.pump();
        assert_eq!(cap.take(), vec![(ISS + 1, IRS.wrapping_add(1002), ACK, 0)]);
    }

    #[tokio::test]
    async fn the_window_bounds_what_is_taken_and_a_rst_resets_the_flow() {
        let (c, flow, cap) = open();
        // The advertised window: 65,536 >> 7.
        give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &[]));
        let big = vec![1u8; 40_000];
        give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &big));
        give(&c, &seg(IRS.wrapping_add(40_001), ISS + 1, ACK, &big));
        assert_eq!(
            flow.lock().end,
            65_536,
            "no more than the window unconfirmed"
        );
        assert!(cap.take().iter().all(|s| s.1 == IRS.wrapping_add(1)));
        give(&c, &seg(IRS.wrapping_add(65_537), ISS + 1, RST, &[]));
        assert!(flow.lock().reset.is_some());
        assert_eq!(c.pump(), None, "closed");
    }

    #[tokio::test]
    async fn the_reverse_direction_is_sent_resent_and_acknowledged() {
        let (c, _flow, cap) = open();
        // The source's window: 512 << 7 = 64 KiB.
        give(&c, &seg(IRS.wrapping_add(1), ISS + 1, ACK, &[]));
        assert_eq!(c.push(&[9u8; 3000]), 3000);
        let sent = cap.take();
        let data: Vec<_> = sent.iter().filter(|s| s.3 > 0).collect();
        assert_eq!(data.len(), 3, "{sent:?}");
        assert_eq!((data[0].0, data[0].3), (ISS + 1, 1460));
        assert_eq!((data[2].0, data[2].3), (ISS + 1 + 2920, 80));
        // No acknowledgement within the timeout: everything again from the first byte.
        std::thread::sleep(RTO_INIT + Duration::from_millis(20));
        c.pump();
        let again = cap.take();
        assert_eq!(again.first().map(|s| (s.0, s.3)), Some((ISS + 1, 1460)));
        // An acknowledgement of all of it (sent before the timeout) still counts.
        give(&c, &seg(IRS.wrapping_add(1), ISS + 3001, ACK, &[]));
        c.finish();
        c.pump();
        let fin = cap.take();
        assert!(
            fin.iter().any(|s| s.2 & FIN != 0 && s.0 == ISS + 3001),
            "the FIN after the 3000 bytes: {fin:?}"
        );
    }
}
