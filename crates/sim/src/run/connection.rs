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
pub(super) fn run_connection(s: &Scenario, seed: u64, mut tap: Option<&mut dyn Tap>) -> RunResult {
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
    // The receiver's feedback budget is a share of what its return links carry.
    let reverse_rate: u64 = (0..s.network.paths.len())
        .map(|i| s.network.paths[i].reverse_config(0).rate_bps)
        .sum();
    let listen_cfg = aerotp_proto::ConnectionConfig {
        return_rate_bps: Some(reverse_rate.max(1000)),
        ..cfg.clone()
    };
    pair.b.listen(PORT, listen_cfg).expect("validated config");
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

    let mut radio = super::radio::RadioFeed::new(s, engine_paths);
    let mut r = result_base(seed);
    let mut written = 0usize;
    let mut closed = false;
    let mut rx = RxState::default();
    let mut intact = true;
    let mut sender_close: Option<CloseOutcome> = None;
    let mut last_delivery: Option<Duration> = None;
    // Messages whose last byte has reached the server application / responses the client has.
    let mut done = 0usize;
    let mut server_got = 0usize;
    let mut srv_released = 0usize; // responses the server has released
    let mut srv_written = 0usize;
    let mut client_got = 0usize;
    let mut watch = Watch {
        tap: tap.take(),
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
        if rx.events(b, now, &mut r) {
            // The connection read so far closed unproven (the listener's set-up timeout: its
            // challenge went unanswered, e.g. into a dropped call) and the peer's TPDUs
            // opened another: as `aerotp recv`, which commits nothing before proof, the
            // receiving application drops what it read and reads the new one from its start.
            intact = true;
            server_got = 0;
            r.delivered_bytes = 0;
            r.timeline.clear();
            last_delivery = None;
            done = 0;
            r.message_delays.clear();
            srv_released = 0;
            srv_written = 0;
        }
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
        watch.rx_handle = rx.handle;
        pair.transmit(&mut watch);
        if sender_close.is_some() && rx.closed_event {
            break;
        }
        // Advance virtual time to the next event.
        let next_message =
            (released < msgs.len() && !(rr && back_to_back)).then(|| msgs[released].0);
        let wake = [next_message, radio.next_at()].into_iter().flatten().min();
        if pair.advance(&mut watch, wake, s.cap) != Advance::Moved {
            break;
        }
    }

    let now = pair.now;
    let (a, b) = (&pair.a, &pair.b);
    r.elapsed_s = secs(now);
    r.wire_bytes_forward = watch.wire_bytes_forward;
    r.wire_bytes_reverse = watch.wire_bytes_reverse;
    r.datagrams_sent = watch.datagrams_sent;
    let confirmed = matches!(
        sender_close,
        Some(CloseOutcome::Finished { confirmed: true })
    );
    r.sender_close = sender_close.as_ref().map(close_name).unwrap_or_default();
    let all = intact && server_got == data.len() && client_got == responses.len();
    r.complete = all && (!s.mode.is_fully_reliable() || confirmed);
    r.spurious_retransmissions = watch.copies.spurious();
    engine_figures(&mut r, a, ch, b, rx.handle);
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
    finish_common(&mut r, watch.first_send, last_delivery);
    r
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
