//! One simulated transfer: two endpoints of the engine (or a plain UDP sender) joined by the
//! link model, driven in virtual time by a discrete-event loop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_link::Path;
use aerotp_proto::{
    CloseOutcome, ConnectionHandle, Endpoint, EndpointConfig, Event, FecSetting, Mode,
};
use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::scenario::{Scenario, SimMode, IP_UDP_OVERHEAD};

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

/// SplitMix64 finaliser: independent seeds from one seed and a stream number.
pub fn mix_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

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
    pub retransmissions: u64,
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
    let cfg = s.connection_config();
    match s.fec_setting() {
        FecSetting::Off => 0,
        FecSetting::Parity(p) => p,
        FecSetting::Words(w) => aerotp_fec::parity_for_words(w, s.mtu),
        FecSetting::Auto => {
            aerotp_fec::auto::parity_for_target(cfg.fec_initial_ber, s.mtu, cfg.fec_target_loss)
        }
    }
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
    match s.mode {
        SimMode::Aero(Mode::Datagram) | SimMode::Udp => run_paced_datagrams(s, seed),
        SimMode::Aero(_) => run_connection(s, seed),
    }
}

/// The two directions of the network.
struct Net {
    fwd: Path,
    rev: Path,
}

impl Net {
    fn new(s: &Scenario, seed: u64) -> Net {
        let fwd = Path::new(s.hops(), mix_seed(seed, 1)).expect("validated scenario");
        let rev = Path::new(s.hops(), mix_seed(seed, 2)).expect("validated scenario");
        Net { fwd, rev }
    }
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
        tpdus_corrected: 0,
        tpdus_lost: 0,
        fec_parity: 0,
        sender_close: String::new(),
        timeline: Vec::new(),
    }
}

fn finish_common(r: &mut RunResult, first_send: Option<Duration>, last_delivery: Option<Duration>) {
    r.overhead_bytes = r.wire_bytes as i64 - r.delivered_bytes as i64;
    r.last_delivery_s = last_delivery.map(secs);
    if let (Some(f), Some(l)) = (first_send, last_delivery) {
        if l > f && r.delivered_bytes > 0 {
            r.goodput_bps = r.delivered_bytes as f64 * 8.0 / secs(l - f);
        }
    }
}

/// An AeroTP connection from the sender's endpoint to the receiver's listening endpoint.
fn run_connection(s: &Scenario, seed: u64) -> RunResult {
    let data = payload(s.size, mix_seed(seed, 0));
    let cfg = s.connection_config();
    let mut net = Net::new(s, seed);
    let mut a = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 3));
    let mut b = Endpoint::new(EndpointConfig::default(), mix_seed(seed, 4));
    b.listen(PORT, cfg.clone()).expect("validated config");
    let mut now = Duration::ZERO;
    let ch = a
        .connect(now, addr_receiver(), PORT, cfg)
        .expect("validated config");

    let mut r = result_base(seed);
    let mut written = 0usize;
    let mut closed = false;
    let mut rx: Option<ConnectionHandle> = None;
    let mut rx_closed = false;
    let mut intact = true;
    let mut sender_close: Option<CloseOutcome> = None;
    let mut receiver_closed = false;
    let mut first_send: Option<Duration> = None;
    let mut last_delivery: Option<Duration> = None;
    let mut buf = Vec::with_capacity(s.mtu);
    let mut steps = 0u64;

    loop {
        steps += 1;
        // Sending application: writes the whole file as the send buffer allows, then closes.
        if written < data.len() {
            written += a.write(ch, &data[written..]).unwrap_or(0);
        }
        if written == data.len() && !closed {
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
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) if rx.is_none() => {
                    rx = Some(h);
                    r.setup_delay_s = Some(secs(now));
                }
                Event::Closed(h, _) if Some(h) == rx => receiver_closed = true,
                _ => {}
            }
        }
        // Receiving application: reads as data arrives, closes at end of file.
        if let Some(h) = rx {
            while let Ok(Some(chunk)) = b.read_chunk(h) {
                if chunk.data.is_empty() {
                    continue;
                }
                let off = r.delivered_bytes as usize;
                if data.get(off..off + chunk.data.len()) != Some(&chunk.data[..]) {
                    intact = false;
                }
                r.delivered_bytes += chunk.data.len() as u64;
                last_delivery = Some(now);
                if s.timeline {
                    r.timeline.push((secs(now), r.delivered_bytes));
                }
            }
            if !rx_closed && b.at_eof(h) {
                let _ = b.close(h);
                rx_closed = true;
            }
        }
        // Both endpoints transmit what is due now.
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            first_send.get_or_insert(now);
            r.wire_bytes += (t.len + IP_UDP_OVERHEAD) as u64;
            r.datagrams_sent += 1;
            net.fwd.send(now, buf.clone());
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            r.wire_bytes += (t.len + IP_UDP_OVERHEAD) as u64;
            net.rev.send(now, buf.clone());
        }
        if sender_close.is_some() && receiver_closed {
            break;
        }
        if steps >= MAX_STEPS {
            break;
        }
        // Advance virtual time to the next event.
        let next = [
            net.fwd.next_arrival(),
            net.rev.next_arrival(),
            a.poll_timeout(),
            b.poll_timeout(),
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
        while let Some(p) = net.fwd.recv(now) {
            b.handle_datagram(now, addr_sender(), &p);
        }
        while let Some(p) = net.rev.recv(now) {
            a.handle_datagram(now, addr_receiver(), &p);
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
    let all = intact && r.delivered_bytes == data.len() as u64;
    r.complete = all && (!s.mode.is_fully_reliable() || confirmed);
    if let Some(st) = a.stats(ch) {
        r.retransmissions = st.sender.tpdus_retransmitted;
        r.fec_parity = st.fec_parity;
    }
    if let Some(h) = rx {
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
    finish_common(&mut r, first_send, last_delivery);
    r
}

/// UDP baseline and AeroTP datagram mode: the application sends MTU-sized datagrams paced at
/// the link rate (counting the 28 B IPv4/UDP header), no connection, no feedback.
fn run_paced_datagrams(s: &Scenario, seed: u64) -> RunResult {
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
                net.fwd.send_tagged(now, chunks[sent].to_vec(), sent as u64);
                chunks[sent].len()
            } else {
                a.send_datagram(addr_receiver(), PORT, PORT, chunks[sent], parity, s.mtu)
                    .expect("chunk fits the MTU");
                let t = a.poll_transmit(now, &mut buf).expect("queued datagram");
                // The datagram carries its index in no header field: tag it for the delay.
                net.fwd.send_tagged(now, buf.clone(), sent as u64);
                t.len
            };
            send_times.push(now);
            r.wire_bytes += (len + IP_UDP_OVERHEAD) as u64;
            r.datagrams_sent += 1;
            let ser = (len + IP_UDP_OVERHEAD) as u128 * 8 * 1_000_000_000;
            let ser = ser.div_ceil(u128::from(s.rate_bps));
            next_send = now + Duration::from_nanos(ser as u64);
            sent += 1;
        }
        let next = [
            net.fwd.next_arrival(),
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
        while let Some(d) = net.fwd.recv_delivery(now) {
            let i = d.tag as usize;
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
