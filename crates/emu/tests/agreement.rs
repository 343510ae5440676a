//! The same scenario file through the simulator's model (`aerotp_link::Link` in virtual
//! time) and through the real-time relay on loopback gives the same impairments: loss, BER,
//! loss-burst length, outage timing and one-way delay, measured the same way at the
//! receiver, agree within 5 %; and both agree with the model's own expectation.
//!
//! Method (docs/results/link.md): a paced, numbered stream (200 B every 4 ms for 15 s) goes
//! through a relay built from the scenario exactly as `aerotp link` builds it (path seed,
//! shared outage seed, 28 B of virtual IPv4/UDP header). The receiver records every datagram
//! with its arrival time and its flipped bits. The same sends, at the times the sender made
//! them (relative to the relay's epoch), are fed to a `Link` with the same config and seed
//! in virtual time, and its deliveries are measured by the same function.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use aerotp_emu::{outage_seed, path_seed, Relay, RelayConfig};
use aerotp_link::{Link, LinkConfig, Network};

/// The scenario under test: every impairment the figure names, on one path.
const SCENARIO: &str = r#"
description = "sim-vs-relay agreement: bursts with their own BER, random loss, random outages, jitter"
[[path]]
name = "agreement"
random_outage = { mean_up = "3s", down_min = "300ms", down_max = "500ms" }
[path.forward]
rate_bps = "1mbit"
delay = "100ms"
jitter = "4ms"
ber = 2e-5
loss = 0.02
burst = { good_time = "500ms", bad_time = "100ms", loss_bad = 0.3, ber_bad = 5e-4 }
"#;

const SEED: u64 = 3;
const HEADER: u32 = 28;
const PAYLOAD: usize = 200;
const INTERVAL: Duration = Duration::from_millis(4);
const RUN: Duration = Duration::from_secs(15);
/// A loss run spanning at least this long is an outage (a burst-loss run of that length,
/// 38 consecutive losses at loss_bad 0.3, has probability ~1e-20).
const OUTAGE_MIN: Duration = Duration::from_millis(150);

/// Payload of datagram `seq`: the sequence number repeated 50 times, so it is recovered by
/// a bitwise majority however a few bits flipped.
fn payload(seq: u32) -> Vec<u8> {
    seq.to_be_bytes().repeat(PAYLOAD / 4)
}

/// (sequence number, bits that differ from what was sent).
fn decode(p: &[u8]) -> Option<(u32, u32)> {
    if p.len() != PAYLOAD {
        return None;
    }
    let mut seq = 0u32;
    for bit in 0..32 {
        let ones = p
            .chunks(4)
            .filter(|c| (u32::from_be_bytes([c[0], c[1], c[2], c[3]]) >> bit) & 1 == 1)
            .count();
        if ones * 2 > PAYLOAD / 4 {
            seq |= 1 << bit;
        }
    }
    let flips = p
        .iter()
        .zip(payload(seq))
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    Some((seq, flips))
}

/// What the receiver saw, measured identically for the relay and the model.
#[derive(Debug)]
struct Measure {
    sent: usize,
    received: usize,
    loss: f64,
    flips: u64,
    ber: f64,
    /// Mean length (packets) of the runs of consecutive losses that are not outages.
    burst_len: f64,
    bursts: usize,
    /// Outages seen at the receiver: (send time of the first lost, of the next received).
    outages: Vec<(Duration, Duration)>,
    delay_mean: Duration,
    delay_p50: Duration,
}

/// `sends[k]` = send time of datagram k; `got` = seq → (arrival, flipped bits).
fn measure(sends: &[Duration], got: &BTreeMap<u32, (Duration, u32)>) -> Measure {
    let received = got.len();
    let flips: u64 = got.values().map(|(_, f)| u64::from(*f)).sum();
    let bits = received as u64 * PAYLOAD as u64 * 8;
    let mut delays: Vec<Duration> = got
        .iter()
        .map(|(seq, (at, _))| at.saturating_sub(sends[*seq as usize]))
        .collect();
    delays.sort();
    let mut runs: Vec<(usize, usize)> = Vec::new(); // [first lost, first received after)
    let mut k = 0;
    while k < sends.len() {
        if got.contains_key(&(k as u32)) {
            k += 1;
            continue;
        }
        let start = k;
        while k < sends.len() && !got.contains_key(&(k as u32)) {
            k += 1;
        }
        runs.push((start, k));
    }
    let mut outages = Vec::new();
    let mut burst_total = 0;
    let mut bursts = 0;
    for (a, b) in runs {
        // A run still open at the end of the stream ends at its last send.
        let end = sends.get(b).copied().unwrap_or(sends[sends.len() - 1]);
        if end - sends[a] >= OUTAGE_MIN {
            outages.push((sends[a], end));
        } else {
            burst_total += b - a;
            bursts += 1;
        }
    }
    Measure {
        sent: sends.len(),
        received,
        loss: 1.0 - received as f64 / sends.len() as f64,
        flips,
        ber: flips as f64 / bits as f64,
        burst_len: burst_total as f64 / bursts.max(1) as f64,
        bursts,
        outages,
        delay_mean: delays.iter().sum::<Duration>() / delays.len().max(1) as u32,
        delay_p50: delays[delays.len() / 2],
    }
}

/// The forward link of path 0 as `aerotp link --scenario` builds it, and its seed.
fn relay_link() -> (LinkConfig, u64) {
    let net = Network::from_toml_str(SCENARIO, Path::new("agreement.toml"), Path::new("."))
        .expect("the scenario parses");
    let seed = path_seed(SEED, 0);
    let mut c = net.paths[0].forward_config(outage_seed(seed));
    c.per_packet_overhead = HEADER;
    c.protected_prefix = HEADER;
    (c, seed)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

#[test]
fn sim_and_relay_give_the_same_impairments() {
    let (link_cfg, seed) = relay_link();

    // --- The relay, on loopback, from the scenario. ---
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let to = receiver.local_addr().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), to, link_cfg.clone());
    config.seed = seed;
    config.stats_interval = None;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (relay_addr, epoch, task) = rt.block_on(async {
        let mut relay = Relay::bind(config).await.unwrap();
        let addr: SocketAddr = relay.local_addr().unwrap();
        let epoch = Instant::now();
        relay.set_epoch(tokio::time::Instant::from_std(epoch));
        let task = tokio::spawn(relay.run(async {
            stop_rx.await.ok();
        }));
        (addr, epoch, task)
    });

    let count = (RUN.as_nanos() / INTERVAL.as_nanos()) as u32;
    let recv_thread = std::thread::spawn(move || {
        let mut got: BTreeMap<u32, (Duration, u32)> = BTreeMap::new();
        let mut buf = [0u8; 2048];
        let deadline = Instant::now() + RUN + Duration::from_secs(2);
        while Instant::now() < deadline {
            match receiver.recv(&mut buf) {
                Ok(n) => {
                    let at = Instant::now() - epoch;
                    match decode(&buf[..n]) {
                        Some((seq, flips)) if seq < count => {
                            got.entry(seq).or_insert((at, flips));
                        }
                        other => panic!("undecodable datagram of {n} B: {other:?}"),
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("receiver: {e}"),
            }
        }
        got
    });

    // Paced sender: datagram k at epoch + 10 ms + k × 4 ms (absolute schedule, no drift).
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut sends = Vec::with_capacity(count as usize);
    for k in 0..count {
        let due = epoch + Duration::from_millis(10) + INTERVAL * k;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        sends.push(Instant::now() - epoch);
        sender.send_to(&payload(k), relay_addr).unwrap();
    }
    let got_relay = recv_thread.join().unwrap();
    stop_tx.send(()).unwrap();
    let relay_stats = rt.block_on(task).unwrap().unwrap();
    assert_eq!(relay_stats.forward.offered_packets, u64::from(count));

    // --- The model in virtual time: the same sends at the same times, same seed. ---
    let mut model = Link::new(link_cfg.clone(), seed).unwrap();
    let mut got_model: BTreeMap<u32, (Duration, u32)> = BTreeMap::new();
    for (k, t) in sends.iter().enumerate() {
        model.send_tagged(*t, payload(k as u32), k as u64);
    }
    while let Some(d) = model.recv_delivery(Duration::MAX) {
        let (seq, flips) = decode(&d.packet).unwrap();
        got_model.entry(seq).or_insert((d.arrival, flips));
    }
    let sim = measure(&sends, &got_model);
    let real = measure(&sends, &got_relay);
    eprintln!("model: {sim:?}\nrelay: {real:?}");
    eprintln!(
        "relay link counters: lost outage {} burst {} random {} header {}, corrupted {}, bits {}",
        relay_stats.forward.lost_outage,
        relay_stats.forward.lost_burst,
        relay_stats.forward.lost_random,
        relay_stats.forward.lost_header_corrupt,
        relay_stats.forward.corrupted_packets,
        relay_stats.forward.bits_flipped
    );

    // --- Relay against model: within 5 %. ---
    assert_eq!(real.sent, sim.sent);
    assert!(
        rel(real.loss, sim.loss) <= 0.05,
        "loss {} vs {}",
        real.loss,
        sim.loss
    );
    assert!(
        rel(real.ber, sim.ber) <= 0.05,
        "BER {} vs {}",
        real.ber,
        sim.ber
    );
    assert!(
        rel(real.bursts as f64, sim.bursts as f64) <= 0.05,
        "loss bursts {} vs {}",
        real.bursts,
        sim.bursts
    );
    assert!(
        rel(real.burst_len, sim.burst_len) <= 0.05,
        "burst length {} vs {}",
        real.burst_len,
        sim.burst_len
    );
    assert!(
        rel(real.delay_mean.as_secs_f64(), sim.delay_mean.as_secs_f64()) <= 0.05,
        "mean one-way delay {:?} vs {:?}",
        real.delay_mean,
        sim.delay_mean
    );
    assert!(
        rel(real.delay_p50.as_secs_f64(), sim.delay_p50.as_secs_f64()) <= 0.05,
        "median one-way delay {:?} vs {:?}",
        real.delay_p50,
        sim.delay_p50
    );
    assert_eq!(real.outages.len(), sim.outages.len(), "outages seen");
    // Outage timing: start and end within 15 ms, 5 % of the shortest outage (300 ms) and
    // a bit under 4 send intervals.
    let tol = Duration::from_millis(15);
    for (r, s) in real.outages.iter().zip(&sim.outages) {
        assert!(
            r.0.abs_diff(s.0) <= tol && r.1.abs_diff(s.1) <= tol,
            "outage {r:?} (relay) vs {s:?} (model)"
        );
    }

    // --- Both against the model's expectation. ---
    // Outages: the schedule the link draws (a function of seed and time only).
    let schedule: Vec<_> = model
        .outage_intervals(RUN)
        .into_iter()
        .filter(|(s, _)| *s > sends[0] && *s + OUTAGE_MIN < sends[sends.len() - 1])
        .collect();
    assert!(
        schedule.len() >= 2,
        "the seed gives outages to check: {schedule:?}"
    );
    for (s, e) in &schedule {
        let seen = real
            .outages
            .iter()
            .find(|(a, _)| a.abs_diff(*s) <= tol)
            .unwrap_or_else(|| panic!("outage {s:?}..{e:?} not seen: {:?}", real.outages));
        assert!(
            seen.1.abs_diff(*e) <= tol,
            "outage {s:?}..{e:?} seen as {seen:?}"
        );
    }
    // Loss and bit errors: each datagram's expected fate from the state it was sent in.
    let bad = model.burst_bad_intervals(RUN + Duration::from_secs(1));
    let in_bad = |t: Duration| bad.iter().any(|(s, e)| *s <= t && t < *e);
    let ge = link_cfg.burst.unwrap();
    let header_bits = f64::from(HEADER * 8);
    let payload_bits = (PAYLOAD * 8) as f64;
    let (mut exp_lost, mut var_lost, mut exp_flips) = (0.0, 0.0, 0.0);
    let all_outages = model.outage_intervals(RUN + Duration::from_secs(1));
    for (k, t) in sends.iter().enumerate() {
        // Lost to an outage if its transmission [t, t + 1.824 ms] meets one.
        let down = all_outages
            .iter()
            .any(|(s, e)| *t < *e && *t + Duration::from_micros(1824) > *s);
        if down {
            exp_lost += 1.0;
            continue;
        }
        let (loss_state, ber) = if in_bad(*t) {
            (ge.loss_bad, ge.ber_bad.unwrap())
        } else {
            (ge.loss_good, link_cfg.ber)
        };
        let survive = (1.0 - link_cfg.loss) * (1.0 - loss_state) * (1.0 - ber).powf(header_bits);
        exp_lost += 1.0 - survive;
        var_lost += survive * (1.0 - survive);
        if got_relay.contains_key(&(k as u32)) {
            exp_flips += payload_bits * ber;
        }
    }
    // Four standard errors: a false alarm about 1 run in 16 000.
    let lost = (real.sent - real.received) as f64;
    eprintln!(
        "expectation: lost {exp_lost:.1} ± {:.1} (seen {lost}), flipped bits {exp_flips:.1} ± {:.1} \
         (seen {}), outages {schedule:?}",
        var_lost.sqrt(),
        exp_flips.sqrt(),
        real.flips
    );
    assert!(
        (lost - exp_lost).abs() <= 4.0 * var_lost.sqrt() + 1.0,
        "lost {lost}, model expects {exp_lost:.1} ± {:.1}",
        var_lost.sqrt()
    );
    // Flips in delivered payloads are Poisson-like with mean exp_flips.
    assert!(
        (real.flips as f64 - exp_flips).abs() <= 4.0 * exp_flips.sqrt(),
        "flipped bits {}, model expects {exp_flips:.1} ± {:.1}",
        real.flips,
        exp_flips.sqrt()
    );
    // One-way delay: 100 ms of propagation + serialisation (228 B at 1 Mb/s = 1.824 ms) at least, and
    // jitter adds at most 4 ms.
    let floor = Duration::from_micros(101_824);
    assert!(sim.delay_p50 >= floor && sim.delay_p50 <= floor + Duration::from_millis(4));
}
