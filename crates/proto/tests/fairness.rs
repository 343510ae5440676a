//! Connections of different endpoints sharing one bottleneck (`aerotp_pair::Dumbbell`), each
//! discovering its rate (docs/rate.md): they converge to equal shares, also when one starts
//! later, and with round trips that differ.

use aerotp_link::{LinkConfig, Path};
use aerotp_pair::{Advance, Dumbbell};
use aerotp_proto::{
    ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event, Mode, RateControl,
};
use std::net::SocketAddr;
use std::time::Duration;

const PORT: u16 = 7000;
const MS: Duration = Duration::from_millis(1);

/// A 5 Mb/s bottleneck, 20 ms one way, a 150 kB drop-tail queue.
fn bottleneck() -> Path {
    let cfg = LinkConfig {
        rate_bps: 5_000_000,
        delay: 20 * MS,
        queue_bytes: 150_000,
        ..LinkConfig::default()
    };
    Path::new(vec![cfg], 1).expect("valid link")
}

/// A reverse path of `delay` one way (uncongested).
fn reverse(delay: Duration, seed: u64) -> Path {
    let cfg = LinkConfig {
        rate_bps: 100_000_000,
        delay,
        queue_bytes: 1 << 24,
        ..LinkConfig::default()
    };
    Path::new(vec![cfg], seed).expect("valid link")
}

struct Run {
    /// Bytes each receiver's application read, per 100 ms bin.
    bins: Vec<Vec<u64>>,
}

impl Run {
    /// Each flow's goodput over [from, to), b/s.
    fn goodputs(&self, from: Duration, to: Duration) -> Vec<f64> {
        let (f, t) = (
            (from.as_millis() / 100) as usize,
            (to.as_millis() / 100) as usize,
        );
        self.bins
            .iter()
            .map(|b| {
                b[f..t.min(b.len())].iter().sum::<u64>() as f64 * 8.0 / (to - from).as_secs_f64()
            })
            .collect()
    }
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has everything.
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

/// Flows of bulk data, flow `i` starting at `starts[i]` with `extra[i]` more one-way delay on
/// its path back; runs `secs` seconds.
fn run(starts: &[Duration], extra: &[Duration], secs: u64) -> Run {
    let mut d = Dumbbell::new(bottleneck());
    let cfg = ConnectionConfig {
        rate_bps: 100_000_000,
        rate_control: RateControl::Discover,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    };
    for (i, &x) in extra.iter().enumerate() {
        let addr = |net: u8| SocketAddr::from(([10, net, 0, i as u8 + 1], 9000));
        let mut b = Endpoint::new(EndpointConfig::default(), 100 + i as u64);
        b.listen(PORT, cfg.clone()).unwrap();
        let a = Endpoint::new(EndpointConfig::default(), 200 + i as u64);
        d.add(a, b, addr(1), addr(2), reverse(20 * MS + x, 300 + i as u64));
    }
    let n = starts.len();
    let mut conns: Vec<Option<ConnectionHandle>> = vec![None; n];
    let mut accepted: Vec<Option<ConnectionHandle>> = vec![None; n];
    let bins_n = (secs * 10) as usize;
    let mut bins = vec![vec![0u64; bins_n]; n];
    let chunk = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 1 << 16];
    let end = Duration::from_secs(secs);
    let mut steps = 0u64;
    while d.now < end && steps < 20_000_000 {
        steps += 1;
        let now = d.now;
        for i in 0..n {
            let f = &mut d.flows[i];
            if conns[i].is_none() && now >= starts[i] {
                conns[i] = Some(f.a.connect(now, f.addr_b, PORT, cfg.clone()).unwrap());
            }
            if let Some(h) = conns[i] {
                while f.a.write(h, &chunk).unwrap_or(0) > 0 {}
            }
            while let Some(e) = f.b.poll_event() {
                if let Event::Accepted(h) = e {
                    accepted[i] = Some(h);
                }
            }
            while f.a.poll_event().is_some() {}
            if let Some(h) = accepted[i] {
                let bin = ((now.as_millis() / 100) as usize).min(bins_n - 1);
                while let Ok(k @ 1..) = f.b.read(h, &mut buf) {
                    bins[i][bin] += k as u64;
                }
            }
        }
        d.transmit();
        let wake = starts.iter().copied().filter(|&s| s > now).min();
        if d.advance(wake, end) != Advance::Moved {
            break;
        }
    }
    Run { bins }
}

#[test]
fn two_connections_converge_to_equal_shares() {
    let r = run(&[Duration::ZERO, Duration::ZERO], &[Duration::ZERO; 2], 20);
    let g = r.goodputs(Duration::from_secs(5), Duration::from_secs(20));
    let j = jain(&g);
    let total: f64 = g.iter().sum();
    eprintln!("two from the start, 5-20 s: Jain {j:.4}, goodputs {g:?}");
    assert!(j >= 0.98, "Jain {j:.3}: {g:?}");
    assert!(total >= 0.9 * 5e6 * 0.96, "together {total:.0} b/s");
}

#[test]
fn a_later_connection_gets_its_share_within_five_seconds() {
    let r = run(
        &[Duration::ZERO, Duration::from_secs(10)],
        &[Duration::ZERO; 2],
        30,
    );
    let g = r.goodputs(Duration::from_secs(15), Duration::from_secs(30));
    let j = jain(&g);
    eprintln!("second at 10 s, 15-30 s: Jain {j:.4}, goodputs {g:?}");
    assert!(
        j >= 0.98,
        "Jain {j:.3} from 5 s after the second started: {g:?}"
    );
}

/// The figure: Jain ≥ 0.9 (0.78 until probes lasted at least the time to send one
/// TPDU more: a short round trip's probe, one round trip at 1.25, carried less than one, and
/// its connection never found its share; docs/results/rate.md, "Shared link").
#[test]
fn four_connections_with_round_trips_from_60_to_640_ms() {
    let extra = [0, 90, 200, 300].map(|ms| ms * MS);
    let r = run(&[Duration::ZERO; 4], &extra, 60);
    let g = r.goodputs(Duration::from_secs(20), Duration::from_secs(60));
    let j = jain(&g);
    eprintln!("four, round trips 60-640 ms, 20-60 s: Jain {j:.4}, goodputs {g:?}");
    assert!(j >= 0.9, "Jain {j:.3}: {g:?}");
}
