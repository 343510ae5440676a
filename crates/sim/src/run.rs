//! One simulated transfer: two endpoints of the engine (or a plain UDP sender) joined by the
//! link model, driven in virtual time by a discrete-event loop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_link::{Delivery, Path};
use aerotp_proto::{CloseOutcome, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode};
use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::scenario::{Scenario, SimMode, IP_UDP_OVERHEAD};
use crate::workload::Workload;

const PORT: u16 = 7000;
/// Upper bound of loop iterations per run: a guard against a livelock (never reached in
/// practice: a 1 MB transfer takes a few thousand).
const MAX_STEPS: u64 = 50_000_000;

fn addr_sender() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 9000))
}
fn addr_receiver() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 9000))
}

/// Where a capture hook saw a datagram: as an endpoint sent it (before the link) or as it
/// arrived at the other endpoint (after the link: possibly corrupted, reordered or never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapPoint {
    Sent,
    Arrived,
}

/// A capture hook (`aerotp sim --pcap`): called with every datagram either endpoint sends and
/// every datagram the link delivers, in virtual time. It cannot change the run: it sees copies.
pub trait Tap {
    fn datagram(
        &mut self,
        point: TapPoint,
        at: Duration,
        src: SocketAddr,
        dst: SocketAddr,
        bytes: &[u8],
    );
}

/// Independent seeds from one seed and a stream number (the one definition lives in
/// `aerotp_link`; its test pins the outputs this simulator has always used).
pub use aerotp_link::mix_seed;

/// What one run measured. Times are seconds of virtual time since the connect call (t = 0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub seed: u64,
    /// All bytes delivered in order and intact (and, for the fully reliable modes, the
    /// sender's close confirmed), before the cap.
    pub complete: bool,
    /// Bytes the receiving application got.
    pub delivered_bytes: u64,
    /// delivered × 8 / (last delivery − first send); 0 if nothing was delivered.
    pub goodput_bps: f64,
    /// Mean one-way application-to-application delay per TPDU (datagram for udp/datagram):
    /// in-order delivery time − first transmission time. None if nothing was delivered.
    pub mean_delay_s: Option<f64>,
    /// Bytes on the wire in both directions (datagrams + 28 B IPv4/UDP each) − delivered.
    pub overhead_bytes: i64,
    /// Bytes on the wire in both directions (datagrams + 28 B IPv4/UDP each).
    pub wire_bytes: u64,
    /// From the connect call until the receiver accepted the connection (udp/datagram: until
    /// the first datagram arrived). None if it never happened.
    pub setup_delay_s: Option<f64>,
    /// Virtual time at which the run ended (both ends closed, or the cap).
    pub elapsed_s: f64,
    /// Time of the last delivery to the receiving application.
    pub last_delivery_s: Option<f64>,
    /// Datagrams the sender sent (data and control).
    pub datagrams_sent: u64,
    /// TPDUs the sender retransmitted (the engine's `tpdus_retransmitted`).
    pub retransmissions: u64,
    /// Retransmissions of a TPDU an earlier copy of which (sent before this retransmission)
    /// arrived intact at the receiver (CRC good as received or after FEC), whenever it
    /// arrived: retransmissions that were not needed.
    pub spurious_retransmissions: u64,
    /// Bytes on the wire sender → receiver (datagrams + 28 B each), all paths.
    pub wire_bytes_forward: u64,
    /// Bytes on the wire receiver → sender (datagrams + 28 B each), all paths.
    pub wire_bytes_reverse: u64,
    /// Per message of a non-bulk workload, in message order: delivery of its last byte −
    /// the time the application wrote it (request-response: the response's last byte − the
    /// request's write). Messages not delivered are absent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_delays: Vec<f64>,
    /// TPDUs whose bit errors FEC corrected at the receiver.
    pub tpdus_corrected: u64,
    /// TPDUs the receiver gave up on (lossy modes) or datagrams lost (udp/datagram).
    pub tpdus_lost: u64,
    /// FEC parity bytes per codeword in use at the end of the run (0 = none).
    pub fec_parity: u8,
    /// How the sender's connection ended ("" for udp/datagram or if it did not).
    pub sender_close: String,
    /// Cumulative bytes delivered over time, (seconds, bytes), if the scenario asked for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(f64, u64)>,
}

/// The file content of a run: reproducible pseudo-random bytes.
fn payload(size: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; size];
    Pcg64Mcg::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// Parity per codeword for datagram mode (no feedback, so `auto` means the strength for the
/// engine's initial BER assumption).
pub fn datagram_parity(s: &Scenario) -> u8 {
    aerotp_proto::datagram_parity(s.fec_setting(), s.mtu, &s.connection_config())
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn close_name(o: &CloseOutcome) -> String {
    match o {
        CloseOutcome::Finished { confirmed: true } => "finished-confirmed".into(),
        CloseOutcome::Finished { confirmed: false } => "finished".into(),
        CloseOutcome::CloseTimeout => "close-timeout".into(),
        CloseOutcome::IdleTimeout => "idle-timeout".into(),
        CloseOutcome::Reset(r) => format!("reset: {r}"),
        CloseOutcome::Aborted => "aborted".into(),
    }
}

/// Runs one transfer with `seed`. The scenario must be valid (`Scenario::validate`).
/// Same scenario + same seed = the same result, bit for bit.
pub fn run_once(s: &Scenario, seed: u64) -> RunResult {
    run_inner(s, seed, None)
}

/// [`run_once`] with a capture hook: the same result, and `tap` sees every datagram sent and
/// every datagram delivered by the link.
pub fn run_once_tapped(s: &Scenario, seed: u64, tap: &mut dyn Tap) -> RunResult {
    run_inner(s, seed, Some(tap))
}

fn run_inner(s: &Scenario, seed: u64, tap: Option<&mut dyn Tap>) -> RunResult {
    match s.mode {
        SimMode::Aero(Mode::Datagram) | SimMode::Udp => run_paced_datagrams(s, seed, tap),
        SimMode::Aero(_) => run_connection(s, seed, tap),
    }
}

/// Smooth weighted round robin (as nginx and Linux teql spread packets): each pick adds every
/// path's weight to its credit, takes the path with the most credit and charges it the total.
/// Over any window the picks follow the weights as closely as whole packets allow.
#[derive(Debug)]
struct RoundRobin {
    weights: Vec<i128>,
    credit: Vec<i128>,
}

impl RoundRobin {
    fn new(weights: impl Iterator<Item = u64>) -> RoundRobin {
        let weights: Vec<i128> = weights.map(i128::from).collect();
        RoundRobin {
            credit: vec![0; weights.len()],
            weights,
        }
    }

    fn pick(&mut self) -> usize {
        if self.weights.len() == 1 {
            return 0;
        }
        let total: i128 = self.weights.iter().sum();
        let mut best = 0;
        for i in 0..self.weights.len() {
            self.credit[i] += self.weights[i];
            if self.credit[i] > self.credit[best] {
                best = i;
            }
        }
        self.credit[best] -= total;
        best
    }
}

/// The network: per path a forward and a reverse `Path` (the papers' LAN hops around the
/// path's impaired link, or the link alone). The engine has no multipath scheduler yet, so
/// the driver spreads the sender's datagrams over the paths in proportion to their forward
/// rates and the receiver's over the reverse links in proportion to the reverse rates.
struct Net {
    fwd: Vec<Path>,
    rev: Vec<Path>,
    fwd_rr: RoundRobin,
    rev_rr: RoundRobin,
}

/// Seed streams of path `i`: path 0 keeps the streams of the single-link simulator (1, 2) so
/// its results are unchanged; the others take their own. The path-level random outage's
/// schedule seed is shared by both directions of the path.
fn path_seeds(seed: u64, i: usize) -> (u64, u64, u64) {
    let i = i as u64;
    let (f, r) = if i == 0 {
        (1, 2)
    } else {
        (100 + 2 * i, 101 + 2 * i)
    };
    (mix_seed(seed, f), mix_seed(seed, r), mix_seed(seed, 50 + i))
}

impl Net {
    fn new(s: &Scenario, seed: u64) -> Net {
        let (mut fwd, mut rev) = (Vec::new(), Vec::new());
        for i in 0..s.network.paths.len() {
            let (fs, rs, os) = path_seeds(seed, i);
            fwd.push(Path::new(s.hops(i, true, os), fs).expect("validated scenario"));
            rev.push(Path::new(s.hops(i, false, os), rs).expect("validated scenario"));
        }
        let paths = &s.network.paths;
        Net {
            fwd_rr: RoundRobin::new(paths.iter().map(|p| p.forward.rate_bps)),
            rev_rr: RoundRobin::new(paths.iter().map(|p| p.reverse_config(0).rate_bps)),
            fwd,
            rev,
        }
    }

    fn send_fwd(&mut self, now: Duration, packet: Vec<u8>, tag: u64) {
        let i = self.fwd_rr.pick();
        self.fwd[i].send_tagged(now, packet, tag);
    }

    fn send_rev(&mut self, now: Duration, packet: Vec<u8>) {
        let i = self.rev_rr.pick();
        self.rev[i].send(now, packet);
    }

    fn recv_fwd(&mut self, now: Duration) -> Option<Delivery> {
        self.fwd.iter_mut().find_map(|p| p.recv_delivery(now))
    }

    fn recv_rev(&mut self, now: Duration) -> Option<Delivery> {
        self.rev.iter_mut().find_map(|p| p.recv_delivery(now))
    }

    fn next_arrival(&self) -> Option<Duration> {
        self.fwd
            .iter()
            .chain(&self.rev)
            .filter_map(Path::next_arrival)
            .min()
    }
}

/// Tag of a datagram the sender puts on the wire: bit 32 set for a data TPDU, its FEC parity
/// in bits 40-47, which copy of its TPDU it is in bits 48-63 (0 = the first), and its
/// sequence number below (read from the header while it is intact, so the receiver side
/// knows which TPDU arrived even if bits flip on the way).
const DATA_TAG: u64 = 1 << 32;

fn tag_of(datagram: &[u8]) -> u64 {
    match aerotp_wire::Header::parse(datagram) {
        Ok(h) if h.flags.is_data() => DATA_TAG | u64::from(h.fec) << 40 | u64::from(h.seq),
        _ => 0,
    }
}

/// Copies of each data TPDU, for spurious retransmissions: how many were sent, and the first
/// copy that arrived intact.
#[derive(Default)]
struct Copies {
    /// Per wire TPDU number: (copies sent, index of the earliest copy that arrived intact).
    seqs: HashMap<u32, (u16, Option<u16>)>,
    /// Retransmissions as (TPDU number, copy index).
    retransmitted: Vec<(u32, u16)>,
}

impl Copies {
    /// Numbers a data TPDU's copy; returns (copy index, whether an earlier copy was sent).
    fn sent(&mut self, seq: u32) -> (u16, bool) {
        let e = self.seqs.entry(seq).or_insert((0, None));
        let k = e.0;
        e.0 = e.0.saturating_add(1);
        (k, k > 0)
    }

    fn arrived_intact(&mut self, seq: u32, copy: u16) {
        if let Some(e) = self.seqs.get_mut(&seq) {
            e.1 = Some(e.1.map_or(copy, |c| c.min(copy)));
        }
    }

    fn needs_check(&self, seq: u32, copy: u16) -> bool {
        self.seqs
            .get(&seq)
            .is_some_and(|e| e.1.is_none_or(|c| c > copy))
    }

    /// Retransmissions whose TPDU had an earlier copy arrive intact.
    fn spurious(&self) -> u64 {
        self.retransmitted
            .iter()
            .filter(|(seq, k)| matches!(self.seqs.get(seq), Some((_, Some(c))) if c < k))
            .count() as u64
    }
}

/// Whether a delivered data TPDU arrived intact: its CRC checks as received, or after the FEC
/// decoding the receiver does (with the parity it was sent with). The driver checks this
/// itself rather than reading the engine's counters, whose snapshot costs far more than a CRC.
fn usable(datagram: &[u8], parity: u8, scratch: &mut Vec<u8>) -> bool {
    if matches!(aerotp_wire::parse_tpdu(datagram), Ok(t) if t.body_ok) {
        return true;
    }
    if parity == 0 {
        return false;
    }
    scratch.clear();
    scratch.extend_from_slice(datagram);
    aerotp_fec::decode(parity, scratch).is_ok()
        && matches!(aerotp_wire::parse_tpdu(scratch), Ok(t) if t.body_ok && t.header.fec == parity)
}

/// Which way a datagram goes: sender to receiver, or back.
#[derive(Clone, Copy)]
enum Dir {
    Forward,
    Reverse,
}

/// Shows the tap, if any, a datagram at `point`, with the addresses of its direction.
fn tap_datagram(
    tap: &mut Option<&mut dyn Tap>,
    point: TapPoint,
    now: Duration,
    dir: Dir,
    bytes: &[u8],
) {
    let Some(tap) = tap.as_deref_mut() else {
        return;
    };
    let (from, to) = match dir {
        Dir::Forward => (addr_sender(), addr_receiver()),
        Dir::Reverse => (addr_receiver(), addr_sender()),
    };
    tap.datagram(point, now, from, to, bytes);
}

/// An application read `chunk`: counts it as delivered and moves `got` (bytes read so far)
/// past it. True when it is exactly the bytes of `expected` at that offset; false for wrong
/// bytes or bytes beyond the end.
fn take_chunk(chunk: &[u8], expected: &[u8], got: &mut usize, r: &mut RunResult) -> bool {
    let intact = expected.get(*got..*got + chunk.len()) == Some(chunk);
    *got += chunk.len();
    r.delivered_bytes += chunk.len() as u64;
    intact
}

fn result_base(seed: u64) -> RunResult {
    RunResult {
        seed,
        complete: false,
        delivered_bytes: 0,
        goodput_bps: 0.0,
        mean_delay_s: None,
        overhead_bytes: 0,
        wire_bytes: 0,
        setup_delay_s: None,
        elapsed_s: 0.0,
        last_delivery_s: None,
        datagrams_sent: 0,
        retransmissions: 0,
        spurious_retransmissions: 0,
        wire_bytes_forward: 0,
        wire_bytes_reverse: 0,
        message_delays: Vec::new(),
        tpdus_corrected: 0,
        tpdus_lost: 0,
        fec_parity: 0,
        sender_close: String::new(),
        timeline: Vec::new(),
    }
}

fn finish_common(r: &mut RunResult, first_send: Option<Duration>, last_delivery: Option<Duration>) {
    r.wire_bytes = r.wire_bytes_forward + r.wire_bytes_reverse;
    r.overhead_bytes = r.wire_bytes as i64 - r.delivered_bytes as i64;
    r.last_delivery_s = last_delivery.map(secs);
    if let (Some(f), Some(l)) = (first_send, last_delivery) {
        if l > f && r.delivered_bytes > 0 {
            r.goodput_bps = r.delivered_bytes as f64 * 8.0 / secs(l - f);
        }
    }
}

/// An AeroTP connection from the sender's endpoint to the receiver's listening endpoint.
fn run_connection(s: &Scenario, seed: u64, mut tap: Option<&mut dyn Tap>) -> RunResult {
    let msgs = s.workload.messages(s.size);
    let total: usize = msgs.iter().map(|m| m.1).sum();
    let data = payload(total, mix_seed(seed, 0));
    // Request-response: the server's answers, their own reproducible bytes.
    let (resp_len, back_to_back) = match s.workload {
        Workload::RequestResponse {
            response, interval, ..
        } => (response, interval.is_none()),
        _ => (0, false),
    };
    let rr = resp_len > 0;
    let responses = payload(
        resp_len * if rr { msgs.len() } else { 0 },
        mix_seed(seed, 5),
    );
    // End offset of each message in the client's stream.
    let ends: Vec<usize> = msgs
        .iter()
        .scan(0, |o, m| {
            *o += m.1;
            Some(*o)
        })
        .collect();
    // When each message was released to the engine (None = not yet).
    let mut released_at: Vec<Option<Duration>> = vec![None; msgs.len()];
    let mut released = 0usize; // messages released
    let cfg = s.connection_config();
    let mut net = Net::new(s, seed);
    let mut a = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3));
    let mut b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4));
    // The receiver's feedback budget is a share of what its return links carry.
    let reverse_rate: u64 = (0..s.network.paths.len())
        .map(|i| s.network.paths[i].reverse_config(0).rate_bps)
        .sum();
    let listen_cfg = aerotp_proto::ConnectionConfig {
        return_rate_bps: Some(reverse_rate.max(1000)),
        ..cfg.clone()
    };
    b.listen(PORT, listen_cfg).expect("validated config");
    let mut now = Duration::ZERO;
    let ch = a
        .connect(now, addr_receiver(), PORT, cfg)
        .expect("validated config");

    let mut r = result_base(seed);
    let mut written = 0usize;
    let mut closed = false;
    let mut rx = RxState::default();
    let mut intact = true;
    let mut sender_close: Option<CloseOutcome> = None;
    let mut first_send: Option<Duration> = None;
    let mut last_delivery: Option<Duration> = None;
    let mut buf = Vec::with_capacity(s.mtu);
    let mut steps = 0u64;
    // Messages whose last byte has reached the server application / responses the client has.
    let mut done = 0usize;
    let mut server_got = 0usize;
    let mut srv_released = 0usize; // responses the server has released
    let mut srv_written = 0usize;
    let mut client_got = 0usize;
    let mut copies = Copies::default();
    let mut retx_seen = 0u64;
    let mut scratch = Vec::with_capacity(s.mtu);

    loop {
        steps += 1;
        // Sending application: releases each message at its time (a request-response client
        // without an interval: when the previous response is in), writes what the send
        // buffer takes, and closes once everything is written.
        while released < msgs.len() {
            let due = if rr && back_to_back {
                released == 0 || client_got >= released * resp_len
            } else {
                msgs[released].0 <= now
            };
            if !due {
                break;
            }
            released_at[released] = Some(now);
            released += 1;
        }
        let limit = if released == 0 { 0 } else { ends[released - 1] };
        if written < limit {
            written += a.write(ch, &data[written..limit]).unwrap_or(0);
        }
        if released == msgs.len() && written == data.len() && !closed {
            let _ = a.close(ch);
            closed = true;
        }
        while let Some(e) = a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    sender_close = Some(o);
                }
            }
        }
        rx.events(&mut b, now, &mut r);
        // Receiving application: reads as data arrives, checks it, closes at end of file
        // (request-response: answers each whole request, closes after the last answer).
        if let Some(h) = rx.handle {
            while let Ok(Some(chunk)) = b.read_chunk(h) {
                if chunk.data.is_empty() {
                    continue;
                }
                intact &= take_chunk(&chunk.data, &data, &mut server_got, &mut r);
                last_delivery = Some(now);
                if s.timeline {
                    r.timeline.push((secs(now), r.delivered_bytes));
                }
                while !rr && done < ends.len() && server_got >= ends[done] {
                    if let Some(at) = released_at[done] {
                        r.message_delays.push(secs(now.saturating_sub(at)));
                    }
                    done += 1;
                }
            }
            if rr {
                while srv_released < msgs.len() && server_got >= ends[srv_released] {
                    srv_released += 1;
                }
                let limit = srv_released * resp_len;
                if srv_written < limit {
                    srv_written += b.write(h, &responses[srv_written..limit]).unwrap_or(0);
                }
            }
            let answered = !rr || srv_written == responses.len();
            if !rx.closed && answered && b.at_eof(h) {
                let _ = b.close(h);
                rx.closed = true;
            }
        }
        // Request-response client: reads the answers.
        if rr {
            while let Ok(Some(chunk)) = a.read_chunk(ch) {
                if chunk.data.is_empty() {
                    continue;
                }
                intact &= take_chunk(&chunk.data, &responses, &mut client_got, &mut r);
                last_delivery = Some(now);
                while done < msgs.len() && client_got >= (done + 1) * resp_len {
                    if let Some(at) = released_at[done] {
                        r.message_delays.push(secs(now.saturating_sub(at)));
                    }
                    done += 1;
                }
            }
        }
        // Both endpoints transmit what is due now.
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            first_send.get_or_insert(now);
            r.wire_bytes_forward += (t.len + IP_UDP_OVERHEAD) as u64;
            r.datagrams_sent += 1;
            let mut tag = tag_of(&buf[..t.len]);
            if tag & DATA_TAG != 0 {
                let (k, again) = copies.sent(tag as u32);
                tag |= u64::from(k) << 48;
                // A data TPDU sent before is a retransmission or one of the opening ASYN
                // copies; the engine's retransmission counter tells which (read only then:
                // it is dear).
                if again {
                    let retx = a.stats(ch).map_or(0, |st| st.sender.tpdus_retransmitted);
                    if retx > retx_seen {
                        copies.retransmitted.push((tag as u32, k));
                    }
                    retx_seen = retx;
                }
            }
            tap_datagram(&mut tap, TapPoint::Sent, now, Dir::Forward, &buf[..t.len]);
            net.send_fwd(now, buf.clone(), tag);
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            r.wire_bytes_reverse += (t.len + IP_UDP_OVERHEAD) as u64;
            tap_datagram(&mut tap, TapPoint::Sent, now, Dir::Reverse, &buf[..t.len]);
            net.send_rev(now, buf.clone());
        }
        if sender_close.is_some() && rx.closed_event {
            break;
        }
        if steps >= MAX_STEPS {
            break;
        }
        // Advance virtual time to the next event.
        let next_message =
            (released < msgs.len() && !(rr && back_to_back)).then(|| msgs[released].0);
        let next = [
            net.next_arrival(),
            a.poll_timeout(),
            b.poll_timeout(),
            next_message,
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        let next = next.max(now);
        if next > s.cap {
            now = s.cap;
            break;
        }
        now = next;
        while let Some(d) = net.recv_fwd(now) {
            let (seq, copy) = (d.tag as u32, (d.tag >> 48) as u16);
            if d.tag & DATA_TAG != 0
                && copies.needs_check(seq, copy)
                && usable(&d.packet, (d.tag >> 40) as u8, &mut scratch)
            {
                copies.arrived_intact(seq, copy);
            }
            tap_datagram(&mut tap, TapPoint::Arrived, now, Dir::Forward, &d.packet);
            b.handle_datagram(now, addr_sender(), &d.packet);
        }
        while let Some(d) = net.recv_rev(now) {
            tap_datagram(&mut tap, TapPoint::Arrived, now, Dir::Reverse, &d.packet);
            a.handle_datagram(now, addr_receiver(), &d.packet);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
    }

    r.elapsed_s = secs(now);
    let confirmed = matches!(
        sender_close,
        Some(CloseOutcome::Finished { confirmed: true })
    );
    r.sender_close = sender_close.as_ref().map(close_name).unwrap_or_default();
    let all = intact && server_got == data.len() && client_got == responses.len();
    r.complete = all && (!s.mode.is_fully_reliable() || confirmed);
    r.spurious_retransmissions = copies.spurious();
    if let Some(st) = a.stats(ch) {
        r.retransmissions = st.sender.tpdus_retransmitted;
        r.fec_parity = st.fec_parity;
    }
    if let Some(h) = rx.handle {
        if let Some(st) = b.stats(h) {
            r.tpdus_corrected = st.receiver.tpdus_corrected;
            r.tpdus_lost = st.receiver.tpdus_lost;
        }
        // One-way delay per TPDU: join first-send times and in-order delivery times.
        let sent: HashMap<u64, Duration> = a
            .connection(ch)
            .and_then(|c| c.send_trace.as_ref())
            .map(|t| t.iter().copied().collect())
            .unwrap_or_default();
        if let Some(trace) = b.connection(h).and_then(|c| c.delivery_trace()) {
            let (mut sum, mut n) = (0.0, 0u64);
            for &(seq, at, bytes) in trace {
                if bytes == 0 {
                    continue;
                }
                if let Some(&t0) = sent.get(&seq) {
                    sum += secs(at.saturating_sub(t0));
                    n += 1;
                }
            }
            if n > 0 {
                r.mean_delay_s = Some(sum / n as f64);
            }
        }
    }
    if s.workload == Workload::Bulk {
        r.message_delays.clear();
    }
    finish_common(&mut r, first_send, last_delivery);
    r
}

/// The receiving endpoint's connection as the driver sees it.
#[derive(Default)]
struct RxState {
    handle: Option<ConnectionHandle>,
    /// The receiving application has closed its side.
    closed: bool,
    /// The engine reported the connection closed.
    closed_event: bool,
}

impl RxState {
    /// Takes the receiver's events: the accept (set-up delay) and the close.
    fn events(&mut self, b: &mut Endpoint, now: Duration, r: &mut RunResult) {
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) if self.handle.is_none() => {
                    self.handle = Some(h);
                    r.setup_delay_s = Some(secs(now));
                }
                Event::Closed(h, _) if Some(h) == self.handle => self.closed_event = true,
                _ => {}
            }
        }
    }
}

/// UDP baseline and AeroTP datagram mode: the application sends MTU-sized datagrams paced at
/// the link rate (counting the 28 B IPv4/UDP header), no connection, no feedback.
fn run_paced_datagrams(s: &Scenario, seed: u64, mut tap: Option<&mut dyn Tap>) -> RunResult {
    let data = payload(s.size, mix_seed(seed, 0));
    let mut net = Net::new(s, seed);
    let mut r = result_base(seed);
    let udp = s.mode == SimMode::Udp;
    let parity = if udp { 0 } else { datagram_parity(s) };
    r.fec_parity = parity;
    let chunk = if udp {
        s.mtu
    } else {
        aerotp_proto::max_body(s.mtu, parity)
    };
    let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
    let mut a = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3));
    let mut b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4));
    let mut buf = Vec::with_capacity(s.mtu);
    let mut now = Duration::ZERO;
    let mut next_send = Duration::ZERO;
    let mut sent = 0usize;
    let mut send_times: Vec<Duration> = Vec::with_capacity(chunks.len());
    let (mut delay_sum, mut delay_n) = (0.0, 0u64);
    let mut first_arrival: Option<Duration> = None;
    let mut last_delivery: Option<Duration> = None;
    let mut got = vec![false; chunks.len()];

    loop {
        if sent < chunks.len() && now >= next_send {
            let len = if udp {
                net.send_fwd(now, chunks[sent].to_vec(), sent as u64);
                chunks[sent].len()
            } else {
                a.send_datagram(addr_receiver(), PORT, PORT, chunks[sent], parity, s.mtu)
                    .expect("chunk fits the MTU");
                let t = a.poll_transmit(now, &mut buf).expect("queued datagram");
                // The datagram carries its index in no header field: tag it for the delay.
                net.send_fwd(now, buf.clone(), sent as u64);
                t.len
            };
            let bytes: &[u8] = if udp { chunks[sent] } else { &buf[..len] };
            tap_datagram(&mut tap, TapPoint::Sent, now, Dir::Forward, bytes);
            send_times.push(now);
            r.wire_bytes_forward += (len + IP_UDP_OVERHEAD) as u64;
            r.datagrams_sent += 1;
            let ser = (len + IP_UDP_OVERHEAD) as u128 * 8 * 1_000_000_000;
            let ser = ser.div_ceil(u128::from(s.rate_bps));
            next_send = now + Duration::from_nanos(ser as u64);
            sent += 1;
        }
        let next = [
            net.next_arrival(),
            (sent < chunks.len()).then_some(next_send),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        let next = next.max(now);
        if next > s.cap {
            now = s.cap;
            break;
        }
        now = next;
        while let Some(d) = net.recv_fwd(now) {
            let i = d.tag as usize;
            tap_datagram(&mut tap, TapPoint::Arrived, now, Dir::Forward, &d.packet);
            let ok = if udp {
                d.packet == chunks[i]
            } else {
                b.handle_datagram(now, addr_sender(), &d.packet);
                let mut ok = false;
                while let Some(m) = b.take_datagram() {
                    ok = m.data == chunks[i];
                }
                ok
            };
            first_arrival.get_or_insert(now);
            if ok && !got[i] {
                got[i] = true;
                r.delivered_bytes += chunks[i].len() as u64;
                last_delivery = Some(now);
                delay_sum += secs(now - send_times[i]);
                delay_n += 1;
                if s.timeline {
                    r.timeline.push((secs(now), r.delivered_bytes));
                }
            }
        }
        while b.poll_event().is_some() {}
    }
    r.elapsed_s = secs(now);
    r.setup_delay_s = first_arrival.map(secs);
    r.tpdus_lost = got.iter().filter(|g| !**g).count() as u64;
    r.complete = r.delivered_bytes == data.len() as u64;
    if delay_n > 0 {
        r.mean_delay_s = Some(delay_sum / delay_n as f64);
    }
    finish_common(&mut r, send_times.first().copied(), last_delivery);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_chunk_checks_each_read_at_its_offset() {
        let expected = b"abcdef";
        let mut r = result_base(1);
        let mut got = 0;
        assert!(take_chunk(b"ab", expected, &mut got, &mut r));
        assert!(!take_chunk(b"xd", expected, &mut got, &mut r));
        assert!(take_chunk(b"ef", expected, &mut got, &mut r));
        // Past the end: counted, but not intact.
        assert!(!take_chunk(b"g", expected, &mut got, &mut r));
        assert_eq!((got, r.delivered_bytes), (7, 7));
    }
}
