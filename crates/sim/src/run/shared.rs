//! Several senders sharing the scenario's links (`aerotp sim --senders N`): N sender
//! endpoints, each connecting to a receiver endpoint of its own; every sender's datagrams go
//! into the scenario's forward links (the same queue at every hop, as one sender's would) and
//! every receiver's into its reverse links. A sender's extra one-way delay sits between it and
//! the shared links, both ways. Each pair's applications are the bulk workload's.

use std::collections::VecDeque;
use std::time::Duration;

use aerotp_link::mix_seed;
use aerotp_pair::{Dir, Links, STALL_LIMIT};
use aerotp_proto::{CloseOutcome, ConnectionHandle, Endpoint, EndpointConfig, Event};
use serde::Serialize;

use super::app::{payload, take_chunk};
use super::connection::RxState;
use super::copies::{tag_of, usable, Copies, DATA_TAG};
use super::net::links;
use super::queue::record_queues;
use super::result::{close_name, engine_figures, finish_common, result_base, secs, RunResult};
use super::tap::{path_addrs, PORT};
use crate::scenario::{Scenario, Senders, IP_UDP_OVERHEAD};

/// Bits of a link tag that carry the datagram's sender (its pair), above the data-TPDU flag
/// of `copies::DATA_TAG` and below the parity: six bits, `MAX_SENDERS` = 64.
const SENDER_SHIFT: u32 = 33;
const SENDER_MASK: u64 = 0x3f;

/// What one sender of a shared run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SenderRun {
    /// When it connected and its extra one-way delay, seconds.
    pub start_s: f64,
    pub extra_delay_s: f64,
    /// Its whole file delivered in order and intact (fully reliable modes: close confirmed).
    pub complete: bool,
    pub delivered_bytes: u64,
    /// delivered × 8 / (its last delivery − its first send).
    pub goodput_bps: f64,
    pub first_send_s: Option<f64>,
    /// Its last delivery to the receiving application.
    pub finish_s: Option<f64>,
    /// From its connect call to its receiver's accept.
    pub setup_delay_s: Option<f64>,
    pub retransmissions: u64,
    pub wire_bytes_forward: u64,
    pub mean_delay_s: Option<f64>,
    /// Its goodput over the run's fairness interval (`SharedRun::jain_interval`), if any.
    pub share_bps: Option<f64>,
}

/// Bytes delivered by `t` (reads at `t` included), from (time, bytes so far) at each read.
fn delivered_by(deliveries: &[(Duration, u64)], t: Duration) -> u64 {
    let k = deliveries.partition_point(|&(at, _)| at <= t);
    if k == 0 {
        0
    } else {
        deliveries[k - 1].1
    }
}

/// One run with several senders: the figures of all of them together (a [`RunResult`] whose
/// sums, queues and span cover every pair), each sender's, and the fairness between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SharedRun {
    pub total: RunResult,
    pub senders: Vec<SenderRun>,
    /// While every sender was active: from `Senders::settle` after the last start to the
    /// first finish (a sender that never completed is active to the run's end), seconds.
    /// None when that is empty.
    pub jain_interval: Option<(f64, f64)>,
    /// Jain's fairness index of the senders' shares over that interval: 1 when equal, 1/N
    /// when one has everything. None without an interval or when nothing was delivered in it.
    pub jain: Option<f64>,
}

/// Jain's fairness index: (Σx)² / (n · Σx²); 1 when all are equal, 1/n when one has all.
/// None for no values or all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

/// One sender, its receiver and what the driver keeps of them.
struct Flow {
    a: Endpoint,
    b: Endpoint,
    start: Duration,
    delay: Duration,
    data: Vec<u8>,
    ch: Option<ConnectionHandle>,
    written: usize,
    closed: bool,
    sender_close: Option<CloseOutcome>,
    rx: RxState,
    got: usize,
    intact: bool,
    r: RunResult,
    deliveries: Vec<(Duration, u64)>,
    first_send: Option<Duration>,
    last_delivery: Option<Duration>,
    copies: Copies,
    retx_seen: u64,
    /// Datagrams on their way from the sender to the shared links (extra delay), and from
    /// them to the sender: (time due, datagram, tag).
    to_links: VecDeque<(Duration, Vec<u8>, u64)>,
    from_links: VecDeque<(Duration, Vec<u8>)>,
}

impl Flow {
    fn done(&self) -> bool {
        self.sender_close.is_some() && self.rx.closed_event
    }

    fn next_event(&self) -> Option<Duration> {
        [
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            self.to_links.front().map(|d| d.0),
            self.from_links.front().map(|d| d.0),
            self.ch.is_none().then_some(self.start),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The applications at `now`: the sender connects at its start, writes the file as the
    /// send buffer takes it and closes once it is written; the receiver reads, checks each
    /// byte and closes at end of file.
    fn applications(&mut self, now: Duration, i: usize, cfg: &aerotp_proto::ConnectionConfig) {
        if self.ch.is_none() && now >= self.start {
            let ch = self
                .a
                .connect(now, path_addrs(i).1, PORT, cfg.clone())
                .expect("validated config");
            self.ch = Some(ch);
        }
        let Some(ch) = self.ch else { return };
        if self.written < self.data.len() {
            self.written += self.a.write(ch, &self.data[self.written..]).unwrap_or(0);
        }
        if self.written == self.data.len() && !self.closed {
            let _ = self.a.close(ch);
            self.closed = true;
        }
        while let Some(e) = self.a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    self.sender_close = Some(o);
                }
            }
        }
        if self.rx.events(&mut self.b, now, &mut self.r) {
            // As in one sender's run: the connection read so far closed unproven and the
            // peer's TPDUs opened another, which the application reads from its start.
            self.intact = true;
            self.got = 0;
            self.r.delivered_bytes = 0;
            self.deliveries.clear();
            self.last_delivery = None;
        }
        let Some(h) = self.rx.handle else { return };
        while let Ok(Some(chunk)) = self.b.read_chunk(h) {
            if chunk.data.is_empty() {
                continue;
            }
            self.intact &= take_chunk(&chunk.data, &self.data, &mut self.got, &mut self.r);
            self.last_delivery = Some(now);
            self.deliveries.push((now, self.r.delivered_bytes));
        }
        if !self.rx.closed && self.b.at_eof(h) {
            let _ = self.b.close(h);
            self.rx.closed = true;
        }
    }

    /// Everything both endpoints have due now: the sender's datagrams into the forward links
    /// (after its extra delay), the receiver's into the reverse links.
    fn transmit(&mut self, now: Duration, i: usize, net: &mut Links, buf: &mut Vec<u8>) {
        let sender = (i as u64) << SENDER_SHIFT;
        loop {
            buf.clear();
            if self.a.poll_transmit(now, buf).is_none() {
                break;
            }
            self.first_send.get_or_insert(now);
            self.r.wire_bytes_forward += (buf.len() + IP_UDP_OVERHEAD) as u64;
            self.r.datagrams_sent += 1;
            let mut tag = tag_of(buf);
            if tag & DATA_TAG != 0 {
                let (k, again) = self.copies.sent(tag as u32);
                tag |= u64::from(k) << 48;
                if again {
                    let retx = self
                        .ch
                        .and_then(|ch| self.a.stats(ch))
                        .map_or(0, |st| st.sender.tpdus_retransmitted);
                    if retx > self.retx_seen {
                        self.copies.retransmitted.push((tag as u32, k));
                    }
                    self.retx_seen = retx;
                }
            }
            if self.delay.is_zero() {
                net.send(Dir::Forward, now, buf.clone(), tag | sender);
            } else {
                self.to_links
                    .push_back((now + self.delay, buf.clone(), tag | sender));
            }
        }
        loop {
            buf.clear();
            if self.b.poll_transmit(now, buf).is_none() {
                break;
            }
            self.r.wire_bytes_reverse += (buf.len() + IP_UDP_OVERHEAD) as u64;
            net.send(Dir::Reverse, now, buf.clone(), sender);
        }
    }

    /// Sender i of `senders` and its receiver, listening with `listen`.
    fn new(
        s: &Scenario,
        senders: &Senders,
        i: usize,
        seed: u64,
        listen: &aerotp_proto::ConnectionConfig,
    ) -> Flow {
        let k = i as u64;
        let mut b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 301 + 2 * k));
        b.listen(PORT, listen.clone()).expect("validated config");
        Flow {
            a: Endpoint::new(EndpointConfig::default(), mix_seed(seed, 300 + 2 * k)),
            b,
            start: senders.starts[i],
            delay: senders.delays[i],
            data: payload(s.size, mix_seed(seed, 200 + k)),
            ch: None,
            written: 0,
            closed: false,
            sender_close: None,
            rx: RxState::default(),
            got: 0,
            intact: true,
            r: result_base(seed),
            deliveries: Vec::new(),
            first_send: None,
            last_delivery: None,
            copies: Copies::default(),
            retx_seen: 0,
            to_links: VecDeque::new(),
            from_links: VecDeque::new(),
        }
    }

    /// The end of the run for this pair: whether its file arrived, what its engines counted.
    /// Returns the number of TPDUs its mean delay is over.
    fn conclude(&mut self, s: &Scenario) -> u64 {
        let confirmed = matches!(
            self.sender_close,
            Some(CloseOutcome::Finished { confirmed: true })
        );
        self.r.complete = self.intact
            && self.got == self.data.len()
            && (!s.mode.is_fully_reliable() || confirmed);
        self.r.sender_close = self
            .sender_close
            .as_ref()
            .map(close_name)
            .unwrap_or_default();
        let n = match self.ch {
            Some(ch) => engine_figures(&mut self.r, &self.a, ch, &self.b, self.rx.handle),
            None => 0,
        };
        self.r.spurious_retransmissions = self.copies.spurious();
        finish_common(&mut self.r, self.first_send, self.last_delivery);
        n
    }
}

/// Runs the senders of `senders` over the links of `s` with `seed`. The scenario and the
/// senders must be valid (`Scenario::validate`, `Senders::validate`). Same inputs, same run.
///
/// Seeds: the links as in one sender's run; sender i's file from stream 200 + i, its endpoint
/// from 300 + 2i and its receiver's from 301 + 2i. Sender i is 10.0.i.1, its receiver
/// 10.0.i.2.
pub fn run_shared(s: &Scenario, senders: &Senders, seed: u64) -> SharedRun {
    let cfg = s.connection_config();
    let listen_cfg = s.listen_config();
    let mut flows: Vec<Flow> = (0..senders.count())
        .map(|i| Flow::new(s, senders, i, seed, &listen_cfg))
        .collect();
    let mut net = links(s, seed);
    let mut buf = Vec::with_capacity(1 << 16);
    let mut scratch = Vec::with_capacity(s.mtu);
    let mut now = Duration::ZERO;
    let mut stalled = 0u32;
    loop {
        // What the senders sent before (their extra delay) enters the links before what
        // they send now.
        for f in &mut flows {
            while f.to_links.front().is_some_and(|d| d.0 <= now) {
                let (_, packet, tag) = f.to_links.pop_front().expect("a front");
                net.send(Dir::Forward, now, packet, tag);
            }
        }
        for (i, f) in flows.iter_mut().enumerate() {
            f.applications(now, i, &cfg);
            f.transmit(now, i, &mut net, &mut buf);
        }
        if flows.iter().all(Flow::done) {
            break;
        }
        let next = flows
            .iter()
            .filter_map(Flow::next_event)
            .chain(net.next_arrival())
            .min();
        let Some(next) = next else { break };
        if next > s.cap {
            now = now.max(s.cap);
            break;
        }
        if next <= now {
            stalled += 1;
            assert!(
                stalled < STALL_LIMIT,
                "engine livelock at {now:?}: {STALL_LIMIT} turns without time moving"
            );
        } else {
            stalled = 0;
            now = next;
        }
        deliver(&mut flows, &mut net, now, &mut scratch);
    }
    finish(s, senders, flows, &net, now, seed)
}

/// Hands every endpoint what has arrived by `now` (a sender's feedback after its extra
/// delay) and runs the timers.
fn deliver(flows: &mut [Flow], net: &mut Links, now: Duration, scratch: &mut Vec<u8>) {
    while let Some(d) = net.recv(Dir::Forward, now) {
        let i = ((d.tag >> SENDER_SHIFT) & SENDER_MASK) as usize;
        let Some(f) = flows.get_mut(i) else { continue };
        let (seq, copy) = (d.tag as u32, (d.tag >> 48) as u16);
        if d.tag & DATA_TAG != 0
            && f.copies.needs_check(seq, copy)
            && usable(&d.packet, (d.tag >> 40) as u8, scratch)
        {
            f.copies.arrived_intact(seq, copy);
        }
        f.b.handle_datagram(now, path_addrs(i).0, &d.packet);
    }
    while let Some(d) = net.recv(Dir::Reverse, now) {
        let i = ((d.tag >> SENDER_SHIFT) & SENDER_MASK) as usize;
        let Some(f) = flows.get_mut(i) else { continue };
        if f.delay.is_zero() {
            f.a.handle_datagram(now, path_addrs(i).1, &d.packet);
        } else {
            f.from_links.push_back((now + f.delay, d.packet));
        }
    }
    for (i, f) in flows.iter_mut().enumerate() {
        while f.from_links.front().is_some_and(|d| d.0 <= now) {
            let (_, packet) = f.from_links.pop_front().expect("a front");
            f.a.handle_datagram(now, path_addrs(i).1, &packet);
        }
        f.a.handle_timeout(now);
        f.b.handle_timeout(now);
    }
}

/// Adds one pair's counts to the run's: sums, the largest parity and delay.
fn add_to(t: &mut RunResult, r: &RunResult) {
    t.complete &= r.complete;
    t.delivered_bytes += r.delivered_bytes;
    t.wire_bytes_forward += r.wire_bytes_forward;
    t.wire_bytes_reverse += r.wire_bytes_reverse;
    t.datagrams_sent += r.datagrams_sent;
    t.retransmissions += r.retransmissions;
    t.spurious_retransmissions += r.spurious_retransmissions;
    t.tpdus_corrected += r.tpdus_corrected;
    t.tpdus_lost += r.tpdus_lost;
    t.wire_lost += r.wire_lost;
    t.tpdus_rebuilt += r.tpdus_rebuilt;
    t.repairs_sent += r.repairs_sent;
    t.data_tpdus += r.data_tpdus;
    t.fec_parity = t.fec_parity.max(r.fec_parity);
    t.max_delay_s = match (t.max_delay_s, r.max_delay_s) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
}

/// The figures of each sender, of all together, and the fairness between them.
fn finish(
    s: &Scenario,
    senders: &Senders,
    flows: Vec<Flow>,
    net: &Links,
    now: Duration,
    seed: u64,
) -> SharedRun {
    let mut total = result_base(seed);
    total.complete = true;
    let (mut delay_sum, mut delay_n) = (0.0, 0u64);
    let (mut first, mut last): (Option<Duration>, Option<Duration>) = (None, None);
    let mut setups = Vec::new();
    let mut ends = Vec::with_capacity(flows.len());
    let mut deliveries = Vec::with_capacity(flows.len());
    let mut runs = Vec::with_capacity(flows.len());
    for mut f in flows {
        let n = f.conclude(s);
        add_to(&mut total, &f.r);
        if let Some(d) = f.r.mean_delay_s {
            delay_sum += d * n as f64;
            delay_n += n;
        }
        first = match (first, f.first_send) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        last = last.max(f.last_delivery);
        // Active from its start to its finish: its last delivery once it is complete, the
        // run's end otherwise.
        ends.push(match (f.r.complete, f.last_delivery) {
            (true, Some(at)) => at,
            _ => now,
        });
        let setup = f.r.setup_delay_s.map(|t| t - secs(f.start));
        setups.extend(setup);
        runs.push(SenderRun {
            start_s: secs(f.start),
            extra_delay_s: secs(f.delay),
            complete: f.r.complete,
            delivered_bytes: f.r.delivered_bytes,
            goodput_bps: f.r.goodput_bps,
            first_send_s: f.r.first_send_s,
            finish_s: f.r.last_delivery_s,
            setup_delay_s: setup,
            retransmissions: f.r.retransmissions,
            wire_bytes_forward: f.r.wire_bytes_forward,
            mean_delay_s: f.r.mean_delay_s,
            share_bps: None,
        });
        deliveries.push(f.deliveries);
    }
    total.elapsed_s = secs(now);
    total.mean_delay_s = (delay_n > 0).then(|| delay_sum / delay_n as f64);
    total.setup_delay_s =
        (!setups.is_empty()).then(|| setups.iter().sum::<f64>() / setups.len() as f64);
    record_queues(&mut total, net);
    finish_common(&mut total, first, last);
    // Every sender is active from the last start to the first finish.
    let from = senders.last_start() + senders.settle;
    let to = ends.into_iter().min().unwrap_or(now);
    let (jain_interval, index) = fairness(&mut runs, &deliveries, from, to);
    SharedRun {
        total,
        senders: runs,
        jain_interval,
        jain: index,
    }
}

/// Each sender's share of (`from`, `to`] (its receiver's reads then, from `deliveries`), the
/// interval in seconds and Jain's index of the shares; nothing if the interval is empty.
fn fairness(
    runs: &mut [SenderRun],
    deliveries: &[Vec<(Duration, u64)>],
    from: Duration,
    to: Duration,
) -> (Option<(f64, f64)>, Option<f64>) {
    if to <= from {
        return (None, None);
    }
    let span = secs(to - from);
    for (r, d) in runs.iter_mut().zip(deliveries) {
        let bytes = delivered_by(d, to) - delivered_by(d, from);
        r.share_bps = Some(bytes as f64 * 8.0 / span);
    }
    let shares: Vec<f64> = runs.iter().filter_map(|r| r.share_bps).collect();
    (Some((secs(from), secs(to))), jain(&shares))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taking_all() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), Some(1.0));
        assert_eq!(jain(&[4.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert!((jain(&[1.0, 3.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn the_sender_travels_in_six_bits_of_the_tag_beside_the_data_fields() {
        let data = DATA_TAG | 0xff << 40 | 0xffff << 48 | 0xffff_ffff;
        assert_eq!(data & (SENDER_MASK << SENDER_SHIFT), 0);
        assert_eq!(
            SENDER_MASK as usize + 1,
            crate::scenario::MAX_SENDERS,
            "one tag value per sender"
        );
    }
}
