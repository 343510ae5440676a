//! The connectionless runs: plain UDP and AeroTP's datagram mode, paced at the link rate.

use std::time::Duration;

use aerotp_link::mix_seed;
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
pub(super) fn run_paced_datagrams(
    s: &Scenario,
    seed: u64,
    mut tap: Option<&mut dyn Tap>,
) -> RunResult {
    let data = payload(s.size, mix_seed(seed, 0));
    let mut net = links(s, seed);
    let mut r = result_base(seed);
    let udp = s.mode == SimMode::Udp;
    let parity = if udp { 0 } else { datagram_parity(s) };
    r.fec_parity = parity;
    let route = DatagramRoute {
        erasure: if udp { None } else { datagram_erasure(s) },
        ..DatagramRoute::plain(addr_receiver(), PORT, PORT, parity, s.mtu)
    };
    let mut a = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3));
    let mut b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4));
    let chunk = if udp {
        s.mtu
    } else {
        a.max_datagram_payload(&route).unwrap_or(0).max(1)
    };
    let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
    // Rebuilt datagrams arrive carrying no tag of their own: they are known by their bytes.
    let index: HashMap<&[u8], usize> = chunks.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let mut buf = Vec::with_capacity(s.mtu);
    let mut now = Duration::ZERO;
    let mut next_send = Duration::ZERO;
    let mut sent = 0usize;
    let mut send_times: Vec<Duration> = Vec::with_capacity(chunks.len());
    let (mut delay_sum, mut delay_n) = (0.0, 0u64);
    let mut first_arrival: Option<Duration> = None;
    let mut last_delivery: Option<Duration> = None;
    let mut got = vec![false; chunks.len()];
    // Tag of a datagram on the link that is no chunk's first copy (a repair).
    const REPAIR_TAG: u64 = u64::MAX;

    loop {
        let engine_due = !udp && a.poll_timeout().is_some_and(|t| t <= now);
        if now >= next_send && (sent < chunks.len() || engine_due) {
            let sent_len = if udp {
                net.send(Dir::Forward, now, chunks[sent].to_vec(), sent as u64);
                tap_datagram(&mut tap, TapPoint::Sent, now, Dir::Forward, chunks[sent]);
                send_times.push(now);
                sent += 1;
                Some(chunks[sent - 1].len())
            } else {
                a.handle_timeout(now);
                buf.clear();
                let mut tag = REPAIR_TAG;
                let mut t = a.poll_transmit(now, &mut buf);
                if t.is_none() && sent < chunks.len() {
                    a.send_datagram_with(now, &route, chunks[sent])
                        .expect("chunk fits the MTU");
                    send_times.push(now);
                    tag = sent as u64;
                    sent += 1;
                    t = a.poll_transmit(now, &mut buf);
                }
                t.map(|t| {
                    // The tag names the chunk for the delay figure (no header field does).
                    net.send(Dir::Forward, now, buf[..t.len].to_vec(), tag);
                    tap_datagram(&mut tap, TapPoint::Sent, now, Dir::Forward, &buf[..t.len]);
                    t.len
                })
            };
            if let Some(len) = sent_len {
                r.wire_bytes_forward += (len + IP_UDP_OVERHEAD) as u64;
                r.datagrams_sent += 1;
                let ser = (len + IP_UDP_OVERHEAD) as u128 * 8 * 1_000_000_000;
                let ser = ser.div_ceil(u128::from(s.rate_bps));
                next_send = now + Duration::from_nanos(ser as u64);
            }
        }
        let engine_next = if udp { None } else { a.poll_timeout() };
        let more = sent < chunks.len() || engine_next.is_some_and(|t| t <= now);
        let next = [
            net.next_arrival(),
            more.then_some(next_send),
            engine_next.filter(|&t| t > now).map(|t| t.max(next_send)),
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
        while let Some(d) = net.recv(Dir::Forward, now) {
            tap_datagram(&mut tap, TapPoint::Arrived, now, Dir::Forward, &d.packet);
            first_arrival.get_or_insert(now);
            let mut arrived = Vec::new();
            if udp {
                let i = d.tag as usize;
                if d.packet == chunks[i] {
                    arrived.push(i);
                }
            } else {
                b.handle_datagram(now, addr_sender(), &d.packet);
                while let Some(m) = b.take_datagram() {
                    arrived.extend(index.get(m.data.as_slice()));
                }
            }
            for i in arrived {
                if got[i] {
                    continue;
                }
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
    r.tpdus_rebuilt = b.stats.datagrams_rebuilt;
    // Sources the link lost: those rebuilt and those never delivered.
    r.wire_lost = r.tpdus_rebuilt + r.tpdus_lost;
    r.repairs_sent = a.stats.datagram_repairs_sent;
    r.data_tpdus = chunks.len() as u64;
    r.complete = r.delivered_bytes == data.len() as u64;
    if delay_n > 0 {
        r.mean_delay_s = Some(delay_sum / delay_n as f64);
    }
    record_queues(&mut r, &net);
    finish_common(&mut r, send_times.first().copied(), last_delivery);
    r
}

/// The scenario's repair for datagram mode: a fixed ratio, or none (validated: `auto` is
/// refused for datagram mode, which has no reports to adapt to).
fn datagram_erasure(s: &Scenario) -> Option<aerotp_proto::ErasureSetting> {
    aerotp_proto::datagram_repair(&s.erasure).ok().flatten()
}
