//! The connectionless runs: plain UDP and AeroTP's datagram mode, paced at the link rate.

use std::time::Duration;

use aerotp_link::mix_seed;
use aerotp_pair::Links;
use aerotp_proto::{DatagramRoute, Endpoint, EndpointConfig};
use std::collections::HashMap;

use super::app::payload;
use super::net::links;
use super::queue::record_queues;
use super::result::{finish_common, result_base, secs};
use super::tap::{addr_receiver, addr_sender, tap_datagram, Dir, Tap, TapPoint, PORT};
use super::RunResult;
use crate::scenario::{datagram_parity, Scenario, SimMode, IP_UDP_OVERHEAD};

/// UDP baseline and AeroTP datagram mode: the application sends MTU-sized datagrams paced at
/// the link rate (counting the 28 B IPv4/UDP header), no connection, no feedback. With
/// `erasure` set to a ratio, datagram mode repairs across datagrams (docs/spec.md §7,
/// "Datagram routes"): repairs share the link's pace with the data, and the route's tail
/// flush runs at the deadline the endpoint reports.
pub(super) fn run_paced_datagrams(s: &Scenario, seed: u64, tap: Option<&mut dyn Tap>) -> RunResult {
    let data = payload(s.size, mix_seed(seed, 0));
    let mut run = PacedRun::new(s, seed, &data, tap);
    let mut now = Duration::ZERO;
    loop {
        let engine_due = !run.udp && run.a.poll_timeout().is_some_and(|t| t <= now);
        if now >= run.next_send && (run.sent < run.chunks.len() || engine_due) {
            if let Some(len) = run.send_next(now) {
                run.count_sent(len, now, s.rate_bps);
            }
        }
        let Some(next) = run.next_event(now) else {
            break;
        };
        let next = next.max(now);
        if next > s.cap {
            now = s.cap;
            break;
        }
        now = next;
        run.receive(now, s.timeline);
        while run.b.poll_event().is_some() {}
    }
    run.result(now, data.len())
}

/// Tag of a datagram on the link that is no chunk's first copy (a repair).
const REPAIR_TAG: u64 = u64::MAX;

/// A paced datagram run: the two endpoints (used in datagram mode), the links, the chunks of
/// the application's data and what has been sent and received of them.
struct PacedRun<'d, 't> {
    /// Plain UDP (no engine) rather than AeroTP's datagram mode.
    udp: bool,
    route: DatagramRoute,
    a: Endpoint,
    b: Endpoint,
    net: Links,
    tap: Option<&'t mut dyn Tap>,
    chunks: Vec<&'d [u8]>,
    /// Rebuilt datagrams arrive carrying no tag of their own: they are known by their bytes.
    index: HashMap<&'d [u8], usize>,
    buf: Vec<u8>,
    /// When the link's pace lets the next datagram go.
    next_send: Duration,
    /// Chunks sent.
    sent: usize,
    send_times: Vec<Duration>,
    arrivals: Arrivals,
    r: RunResult,
}

/// What has arrived of the chunks, and when.
struct Arrivals {
    got: Vec<bool>,
    delay_sum: f64,
    delay_n: u64,
    first: Option<Duration>,
    last_delivery: Option<Duration>,
}

impl<'d, 't> PacedRun<'d, 't> {
    fn new(s: &Scenario, seed: u64, data: &'d [u8], tap: Option<&'t mut dyn Tap>) -> Self {
        let net = links(s, seed);
        let mut r = result_base(seed);
        let udp = s.mode == SimMode::Udp;
        let parity = if udp { 0 } else { datagram_parity(s) };
        r.fec_parity = parity;
        let route = DatagramRoute {
            erasure: if udp { None } else { datagram_erasure(s) },
            ..DatagramRoute::plain(addr_receiver(), PORT, PORT, parity, s.mtu)
        };
        let a = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3));
        let b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4));
        let chunk = if udp {
            s.mtu
        } else {
            a.max_datagram_payload(&route).unwrap_or(0).max(1)
        };
        let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
        let index = chunks.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        PacedRun {
            udp,
            route,
            a,
            b,
            net,
            tap,
            index,
            buf: Vec::with_capacity(s.mtu),
            next_send: Duration::ZERO,
            sent: 0,
            send_times: Vec::with_capacity(chunks.len()),
            arrivals: Arrivals {
                got: vec![false; chunks.len()],
                delay_sum: 0.0,
                delay_n: 0,
                first: None,
                last_delivery: None,
            },
            chunks,
            r,
        }
    }

    /// Sends the next datagram: plain UDP, the next chunk; datagram mode, what the engine
    /// has due (a repair), else the next chunk. Its length, if one went.
    fn send_next(&mut self, now: Duration) -> Option<usize> {
        if self.udp {
            let chunk = self.chunks[self.sent];
            self.net
                .send(Dir::Forward, now, chunk.to_vec(), self.sent as u64);
            tap_datagram(&mut self.tap, TapPoint::Sent, now, Dir::Forward, chunk);
            self.send_times.push(now);
            self.sent += 1;
            return Some(chunk.len());
        }
        let a = &mut self.a;
        a.handle_timeout(now);
        self.buf.clear();
        let mut tag = REPAIR_TAG;
        let mut t = a.poll_transmit(now, &mut self.buf);
        if t.is_none() && self.sent < self.chunks.len() {
            a.send_datagram_with(now, &self.route, self.chunks[self.sent])
                .expect("chunk fits the MTU");
            self.send_times.push(now);
            tag = self.sent as u64;
            self.sent += 1;
            t = a.poll_transmit(now, &mut self.buf);
        }
        t.map(|t| {
            let bytes = &self.buf[..t.len];
            // The tag names the chunk for the delay figure (no header field does).
            self.net.send(Dir::Forward, now, bytes.to_vec(), tag);
            tap_datagram(&mut self.tap, TapPoint::Sent, now, Dir::Forward, bytes);
            t.len
        })
    }

    /// Counts a datagram of `len` bytes sent and paces the next at the link's rate.
    fn count_sent(&mut self, len: usize, now: Duration, rate_bps: u64) {
        self.r.wire_bytes_forward += (len + IP_UDP_OVERHEAD) as u64;
        self.r.datagrams_sent += 1;
        let ser = (len + IP_UDP_OVERHEAD) as u128 * 8 * 1_000_000_000;
        let ser = ser.div_ceil(u128::from(rate_bps));
        self.next_send = now + Duration::from_nanos(ser as u64);
    }

    /// The next time something happens: an arrival, a send, the engine's timer.
    fn next_event(&self, now: Duration) -> Option<Duration> {
        let engine_next = if self.udp {
            None
        } else {
            self.a.poll_timeout()
        };
        let more = self.sent < self.chunks.len() || engine_next.is_some_and(|t| t <= now);
        [
            self.net.next_arrival(),
            more.then_some(self.next_send),
            engine_next
                .filter(|&t| t > now)
                .map(|t| t.max(self.next_send)),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Takes the datagrams arriving at `now` and counts the chunks delivered (each once).
    fn receive(&mut self, now: Duration, timeline: bool) {
        while let Some(d) = self.net.recv(Dir::Forward, now) {
            tap_datagram(
                &mut self.tap,
                TapPoint::Arrived,
                now,
                Dir::Forward,
                &d.packet,
            );
            self.arrivals.first.get_or_insert(now);
            let mut arrived = Vec::new();
            if self.udp {
                let i = d.tag as usize;
                if d.packet == self.chunks[i] {
                    arrived.push(i);
                }
            } else {
                self.b.handle_datagram(now, addr_sender(), &d.packet);
                while let Some(m) = self.b.take_datagram() {
                    arrived.extend(self.index.get(m.data.as_slice()));
                }
            }
            for i in arrived {
                self.delivered(i, now, timeline);
            }
        }
    }

    /// Chunk `i` arrived at `now`: counted, with its delay, unless it had already.
    fn delivered(&mut self, i: usize, now: Duration, timeline: bool) {
        let (got, r) = (&mut self.arrivals, &mut self.r);
        if got.got[i] {
            return;
        }
        got.got[i] = true;
        r.delivered_bytes += self.chunks[i].len() as u64;
        got.last_delivery = Some(now);
        got.delay_sum += secs(now - self.send_times[i]);
        got.delay_n += 1;
        if timeline {
            r.timeline.push((secs(now), r.delivered_bytes));
        }
    }

    /// The run's result, the loop having stopped at `now`.
    fn result(self, now: Duration, data_len: usize) -> RunResult {
        let (mut r, got) = (self.r, self.arrivals);
        r.elapsed_s = secs(now);
        r.setup_delay_s = got.first.map(secs);
        r.tpdus_lost = got.got.iter().filter(|g| !**g).count() as u64;
        r.tpdus_rebuilt = self.b.stats.datagrams_rebuilt;
        // Sources the link lost: those rebuilt and those never delivered.
        r.wire_lost = r.tpdus_rebuilt + r.tpdus_lost;
        r.repairs_sent = self.a.stats.datagram_repairs_sent;
        r.data_tpdus = self.chunks.len() as u64;
        r.complete = r.delivered_bytes == data_len as u64;
        if got.delay_n > 0 {
            r.mean_delay_s = Some(got.delay_sum / got.delay_n as f64);
        }
        record_queues(&mut r, &self.net);
        finish_common(&mut r, self.send_times.first().copied(), got.last_delivery);
        r
    }
}

/// The scenario's repair for datagram mode: a fixed ratio, or none (validated: `auto` is
/// refused for datagram mode, which has no reports to adapt to).
fn datagram_erasure(s: &Scenario) -> Option<aerotp_proto::ErasureSetting> {
    aerotp_proto::datagram_repair(&s.erasure).ok().flatten()
}
