//! The connectionless runs: plain UDP and AeroTP's datagram mode, paced at the link rate.

use std::time::Duration;

use aerotp_link::mix_seed;
use aerotp_proto::{Endpoint, EndpointConfig};

use super::app::payload;
use super::net::links;
use super::result::{finish_common, result_base, secs};
use super::tap::{addr_receiver, addr_sender, tap_datagram, Dir, Tap, TapPoint, PORT};
use super::RunResult;
use crate::scenario::{datagram_parity, Scenario, SimMode, IP_UDP_OVERHEAD};

/// UDP baseline and AeroTP datagram mode: the application sends MTU-sized datagrams paced at
/// the link rate (counting the 28 B IPv4/UDP header), no connection, no feedback.
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
                net.send(Dir::Forward, now, chunks[sent].to_vec(), sent as u64);
                chunks[sent].len()
            } else {
                a.send_datagram(addr_receiver(), PORT, PORT, chunks[sent], parity, s.mtu)
                    .expect("chunk fits the MTU");
                buf.clear();
                let t = a.poll_transmit(now, &mut buf).expect("queued datagram");
                // The datagram carries its index in no header field: tag it for the delay.
                net.send(Dir::Forward, now, buf.clone(), sent as u64);
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
        while let Some(d) = net.recv(Dir::Forward, now) {
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
