//! An AeroTP connection run: the sender's endpoint connects to the receiver's listening
//! endpoint, the applications write and read the workload, the loop advances virtual time.

use std::time::Duration;

use aerotp_link::mix_seed;
use aerotp_pair::{Advance, Delivery, Observer, Pair};
use aerotp_proto::{CloseOutcome, ConnectionHandle, Endpoint, EndpointConfig, Event, MAX_PATHS};

use super::app::{payload, take_chunk};
use super::copies::{tag_of, usable, Copies, DATA_TAG};
use super::net::{forward_outages, links};
use super::path_watch::{PathRun, PathWatch};
use super::queue::record_queues;
use super::result::{close_name, engine_figures, finish_common, result_base, secs, RunResult};
use super::tap::{
    addr_receiver, addr_sender, path_addrs, tap_datagram, tap_engines, Dir, Tap, TapPoint, PORT,
};
use crate::scenario::{Scenario, Striping, IP_UDP_OVERHEAD};
use crate::workload::Workload;

/// What the driver counts of the datagrams on the wire, and the capture tap.
struct Watch<'t> {
    tap: Option<&'t mut dyn Tap>,
    ch: ConnectionHandle,
    /// The sender connection's handle at the receiver, once accepted (for the tap).
    rx_handle: Option<ConnectionHandle>,
    first_send: Option<Duration>,
    wire_bytes_forward: u64,
    wire_bytes_reverse: u64,
    datagrams_sent: u64,
    copies: Copies,
    retx_seen: u64,
    scratch: Vec<u8>,
    /// The sender's path states, when the engine uses several paths.
    paths: Option<PathWatch>,
}

impl Observer for Watch<'_> {
    fn sent(&mut self, now: Duration, dir: Dir, datagram: &[u8], sender: &Endpoint) -> Option<u64> {
        tap_datagram(&mut self.tap, TapPoint::Sent, now, dir, datagram);
        let len = (datagram.len() + IP_UDP_OVERHEAD) as u64;
        if dir == Dir::Reverse {
            self.wire_bytes_reverse += len;
            return Some(0);
        }
        self.first_send.get_or_insert(now);
        self.wire_bytes_forward += len;
        self.datagrams_sent += 1;
        let mut tag = tag_of(datagram);
        if tag & DATA_TAG != 0 {
            let (k, again) = self.copies.sent(tag as u32);
            tag |= u64::from(k) << 48;
            // A data TPDU sent before is a retransmission or one of the opening ASYN copies;
            // the engine's retransmission counter tells which (read only then: it is dear).
            if again {
                let retx = sender
                    .stats(self.ch)
                    .map_or(0, |st| st.sender.tpdus_retransmitted);
                if retx > self.retx_seen {
                    self.copies.retransmitted.push((tag as u32, k));
                }
                self.retx_seen = retx;
            }
        }
        Some(tag)
    }

    fn arrived(&mut self, now: Duration, dir: Dir, d: &Delivery) {
        if dir == Dir::Forward {
            let (seq, copy) = (d.tag as u32, (d.tag >> 48) as u16);
            if d.tag & DATA_TAG != 0
                && self.copies.needs_check(seq, copy)
                && usable(&d.packet, (d.tag >> 40) as u8, &mut self.scratch)
            {
                self.copies.arrived_intact(seq, copy);
            }
        }
        tap_datagram(&mut self.tap, TapPoint::Arrived, now, dir, &d.packet);
    }

    fn stepped(&mut self, now: Duration, a: &Endpoint, b: &Endpoint) {
        if let (Some(w), Some(st)) = (self.paths.as_mut(), a.stats(self.ch)) {
            let index =
                |p: &aerotp_proto::PathStats| (0..MAX_PATHS).find(|&i| path_addrs(i).1 == p.remote);
            w.observe(now, st.paths.iter().filter_map(|p| Some((index(p)?, p.up))));
        }
        tap_engines(
            &mut self.tap,
            now,
            [
                ("sender", a, Some(self.ch)),
                ("receiver", b, self.rx_handle),
            ],
        );
    }
}

/// An AeroTP connection from the sender's endpoint to the receiver's listening endpoint.
pub(super) fn run_connection(s: &Scenario, seed: u64, tap: Option<&mut dyn Tap>) -> RunResult {
    let mut apps = Apps::new(Traffic::new(s, seed), seed, s.timeline);
    let (mut pair, ch, engine_paths) = open_connection(s, seed);
    let mut radio = super::radio::RadioFeed::new(s, engine_paths);
    let mut watch = Watch {
        tap,
        ch,
        rx_handle: None,
        first_send: None,
        wire_bytes_forward: 0,
        wire_bytes_reverse: 0,
        datagrams_sent: 0,
        copies: Copies::default(),
        retx_seen: 0,
        scratch: Vec::with_capacity(s.mtu),
        paths: engine_paths.then(PathWatch::default),
    };
    loop {
        let now = pair.now;
        radio.apply(now, &mut pair.a, &mut watch.tap);
        let (a, b) = (&mut pair.a, &mut pair.b);
        apps.client_writes(a, ch, now);
        apps.receiver_events(b, now);
        apps.server_serves(b, now);
        apps.client_reads(a, ch, now);
        watch.rx_handle = apps.rx.handle;
        pair.transmit(&mut watch);
        if apps.sender_close.is_some() && apps.rx.closed_event {
            break;
        }
        // Advance virtual time to the next event.
        let wake = [apps.next_message(), radio.next_at()]
            .into_iter()
            .flatten()
            .min();
        if pair.advance(&mut watch, wake, s.cap) != Advance::Moved {
            break;
        }
    }
    run_result(s, seed, &pair, watch, apps)
}

/// The two endpoints on their links, the sender connecting to the receiver's listener; the
/// sender's handle, and whether the engine stripes several paths.
fn open_connection(s: &Scenario, seed: u64) -> (Pair, ConnectionHandle, bool) {
    let cfg = s.connection_config();
    let mut pair = Pair::new(
        Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3)),
        Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4)),
        links(s, seed),
        addr_sender(),
        addr_receiver(),
    );
    // Several paths striped by the engine: one address pair per path; the sender opens on
    // path 0 and adds the others (the receiver adds the sender's addresses as they prove
    // themselves).
    let engine_paths = s.network.paths.len() > 1 && s.striping == Striping::Engine;
    if engine_paths {
        pair.set_paths((0..s.network.paths.len()).map(path_addrs).collect());
    }
    pair.b
        .listen(PORT, s.listen_config())
        .expect("validated config");
    let ch = pair
        .a
        .connect(Duration::ZERO, addr_receiver(), PORT, cfg)
        .expect("validated config");
    // The other paths from the start: the first may be down during the set-up (a channel
    // that dropped its call), and the set-up then goes on another.
    for i in (1..s.network.paths.len()).filter(|_| engine_paths) {
        pair.a
            .add_path(Duration::ZERO, ch, path_addrs(i).1)
            .expect("fewer paths than MAX_PATHS (validated)");
    }
    (pair, ch, engine_paths)
}

/// The run's result once the loop has ended: the wire counts, the close, whether every byte
/// arrived intact, the engines' figures, the paths' states and the queues.
fn run_result(s: &Scenario, seed: u64, pair: &Pair, watch: Watch, apps: Apps) -> RunResult {
    let now = pair.now;
    let (a, b) = (&pair.a, &pair.b);
    let mut r = apps.r;
    r.elapsed_s = secs(now);
    r.wire_bytes_forward = watch.wire_bytes_forward;
    r.wire_bytes_reverse = watch.wire_bytes_reverse;
    r.datagrams_sent = watch.datagrams_sent;
    let confirmed = matches!(
        apps.sender_close,
        Some(CloseOutcome::Finished { confirmed: true })
    );
    r.sender_close = apps
        .sender_close
        .as_ref()
        .map(close_name)
        .unwrap_or_default();
    let t = &apps.traffic;
    let all =
        apps.intact && apps.server_got == t.data.len() && apps.client_got == t.responses.len();
    r.complete = all && (!s.mode.is_fully_reliable() || confirmed);
    r.spurious_retransmissions = watch.copies.spurious();
    engine_figures(&mut r, a, watch.ch, b, apps.rx.handle);
    if let Some(w) = &watch.paths {
        r.paths = (0..s.network.paths.len())
            .map(|i| {
                let outages: Vec<_> = forward_outages(s, seed, i, now)
                    .into_iter()
                    .map(|(a, b)| (a, b.min(now)))
                    .collect();
                PathRun::new(&outages, &w.declared(i, now))
            })
            .collect();
    }
    if s.workload == Workload::Bulk {
        r.message_delays.clear();
    }
    record_queues(&mut r, &pair.links);
    finish_common(&mut r, watch.first_send, apps.last_delivery);
    r
}

/// The workload as the two applications see it: the client's messages and their bytes, and
/// the server's answers.
struct Traffic {
    /// When each message is due, and its size.
    msgs: Vec<(Duration, usize)>,
    /// End offset of each message in the client's stream.
    ends: Vec<usize>,
    data: Vec<u8>,
    /// Request-response: the server's answers, their own reproducible bytes.
    responses: Vec<u8>,
    resp_len: usize,
    /// Request-response: each message is answered.
    rr: bool,
    /// A request-response client without an interval: each request goes when the previous
    /// answer is in.
    back_to_back: bool,
}

impl Traffic {
    fn new(s: &Scenario, seed: u64) -> Traffic {
        let msgs = s.workload.messages(s.size);
        let total: usize = msgs.iter().map(|m| m.1).sum();
        let data = payload(total, mix_seed(seed, 0));
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
        let ends: Vec<usize> = msgs
            .iter()
            .scan(0, |o, m| {
                *o += m.1;
                Some(*o)
            })
            .collect();
        Traffic {
            msgs,
            ends,
            data,
            responses,
            resp_len,
            rr,
            back_to_back,
        }
    }
}

/// The sending (client) and receiving (server) applications: what each has released,
/// written and read, and the run's result as they fill it.
struct Apps {
    traffic: Traffic,
    /// Record the delivery timeline.
    timeline: bool,
    r: RunResult,
    rx: RxState,
    messages: MessageClock,
    written: usize,
    closed: bool,
    intact: bool,
    sender_close: Option<CloseOutcome>,
    last_delivery: Option<Duration>,
    server_got: usize,
    /// Responses the server has released.
    srv_released: usize,
    srv_written: usize,
    client_got: usize,
}

impl Apps {
    fn new(traffic: Traffic, seed: u64, timeline: bool) -> Apps {
        Apps {
            messages: MessageClock {
                released_at: vec![None; traffic.msgs.len()],
                released: 0,
                done: 0,
            },
            traffic,
            timeline,
            r: result_base(seed),
            rx: RxState::default(),
            written: 0,
            closed: false,
            intact: true,
            sender_close: None,
            last_delivery: None,
            server_got: 0,
            srv_released: 0,
            srv_written: 0,
            client_got: 0,
        }
    }

    /// Sending application: releases each message at its time (a request-response client
    /// without an interval: when the previous response is in), writes what the send buffer
    /// takes, and closes once everything is written; then takes the sender's close.
    fn client_writes(&mut self, a: &mut Endpoint, ch: ConnectionHandle, now: Duration) {
        let t = &self.traffic;
        let m = &mut self.messages;
        while m.released < t.msgs.len() {
            let due = if t.rr && t.back_to_back {
                m.released == 0 || self.client_got >= m.released * t.resp_len
            } else {
                t.msgs[m.released].0 <= now
            };
            if !due {
                break;
            }
            m.released_at[m.released] = Some(now);
            m.released += 1;
        }
        let limit = if m.released == 0 {
            0
        } else {
            t.ends[m.released - 1]
        };
        if self.written < limit {
            self.written += a.write(ch, &t.data[self.written..limit]).unwrap_or(0);
        }
        if m.released == t.msgs.len() && self.written == t.data.len() && !self.closed {
            let _ = a.close(ch);
            self.closed = true;
        }
        while let Some(e) = a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    self.sender_close = Some(o);
                }
            }
        }
    }

    /// Takes the receiver's events. When the connection read so far closed unproven (the
    /// listener's set-up timeout: its challenge went unanswered, e.g. into a dropped call)
    /// and the peer's TPDUs opened another: as `aerotp recv`, which commits nothing before
    /// proof, the receiving application drops what it read and reads the new one from its
    /// start.
    fn receiver_events(&mut self, b: &mut Endpoint, now: Duration) {
        if self.rx.events(b, now, &mut self.r) {
            self.intact = true;
            self.server_got = 0;
            self.r.delivered_bytes = 0;
            self.r.timeline.clear();
            self.last_delivery = None;
            self.messages.done = 0;
            self.r.message_delays.clear();
            self.srv_released = 0;
            self.srv_written = 0;
        }
    }

    /// Receiving application: reads as data arrives, checks it, closes at end of file
    /// (request-response: answers each whole request, closes after the last answer).
    fn server_serves(&mut self, b: &mut Endpoint, now: Duration) {
        let Some(h) = self.rx.handle else {
            return;
        };
        let t = &self.traffic;
        while let Ok(Some(chunk)) = b.read_chunk(h) {
            if chunk.data.is_empty() {
                continue;
            }
            self.intact &= take_chunk(&chunk.data, &t.data, &mut self.server_got, &mut self.r);
            self.last_delivery = Some(now);
            if self.timeline {
                self.r.timeline.push((secs(now), self.r.delivered_bytes));
            }
            let m = &mut self.messages;
            while !t.rr && m.done < t.ends.len() && self.server_got >= t.ends[m.done] {
                m.message_done(now, &mut self.r);
            }
        }
        if t.rr {
            while self.srv_released < t.msgs.len() && self.server_got >= t.ends[self.srv_released] {
                self.srv_released += 1;
            }
            let limit = self.srv_released * t.resp_len;
            if self.srv_written < limit {
                self.srv_written += b
                    .write(h, &t.responses[self.srv_written..limit])
                    .unwrap_or(0);
            }
        }
        let answered = !t.rr || self.srv_written == t.responses.len();
        if !self.rx.closed && answered && b.at_eof(h) {
            let _ = b.close(h);
            self.rx.closed = true;
        }
    }

    /// Request-response client: reads the answers.
    fn client_reads(&mut self, a: &mut Endpoint, ch: ConnectionHandle, now: Duration) {
        let t = &self.traffic;
        if !t.rr {
            return;
        }
        while let Ok(Some(chunk)) = a.read_chunk(ch) {
            if chunk.data.is_empty() {
                continue;
            }
            self.intact &= take_chunk(&chunk.data, &t.responses, &mut self.client_got, &mut self.r);
            self.last_delivery = Some(now);
            let m = &mut self.messages;
            while m.done < t.msgs.len() && self.client_got >= (m.done + 1) * t.resp_len {
                m.message_done(now, &mut self.r);
            }
        }
    }

    /// When the client releases its next message, if at a known time.
    fn next_message(&self) -> Option<Duration> {
        let t = &self.traffic;
        let released = self.messages.released;
        (released < t.msgs.len() && !(t.rr && t.back_to_back)).then(|| t.msgs[released].0)
    }
}

/// The client's messages: when each was released, how many are released and how many done.
struct MessageClock {
    /// When each message was released to the engine (None = not yet).
    released_at: Vec<Option<Duration>>,
    /// Messages released.
    released: usize,
    /// Messages whose last byte has reached the server application / whose response the
    /// client has.
    done: usize,
}

impl MessageClock {
    /// The next message is done (whole at the server, or answered): its delay is counted.
    fn message_done(&mut self, now: Duration, r: &mut RunResult) {
        if let Some(at) = self.released_at[self.done] {
            r.message_delays.push(secs(now.saturating_sub(at)));
        }
        self.done += 1;
    }
}

/// The receiving endpoint's connection as the driver sees it.
#[derive(Default)]
pub(super) struct RxState {
    pub(super) handle: Option<ConnectionHandle>,
    /// Connections accepted after `handle` (another incarnation opened by the peer's TPDUs
    /// after the listener dropped an unproven one); a few at most.
    later: std::collections::VecDeque<ConnectionHandle>,
    /// The receiving application has closed its side.
    pub(super) closed: bool,
    /// The engine reported the connection closed.
    pub(super) closed_event: bool,
}

impl RxState {
    /// Takes the receiver's events: the accept (set-up delay) and the close. Returns whether
    /// the application moved to another connection because the one it read closed before
    /// its peer was proven.
    pub(super) fn events(&mut self, b: &mut Endpoint, now: Duration, r: &mut RunResult) -> bool {
        let mut moved = false;
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) if self.handle.is_none() => {
                    self.handle = Some(h);
                    r.setup_delay_s = Some(secs(now));
                }
                Event::Accepted(h) => self.later.push_back(h),
                Event::Closed(h, CloseOutcome::SetupTimeout) if Some(h) == self.handle => {
                    // The next connection accepted (now or later) is the one to read.
                    self.handle = self.later.pop_front();
                    self.closed = false;
                    moved = true;
                }
                Event::Closed(h, _) if Some(h) == self.handle => self.closed_event = true,
                Event::Closed(h, _) => self.later.retain(|&x| x != h),
                _ => {}
            }
        }
        moved
    }
}
