//! The silence bound that `send --silence-timeout` and `recv --idle-timeout` set, in virtual
//! time: the engine (`aerotp_proto`, which reads no clock) between two endpoints joined by a
//! 10 ms path that can go down or lose its receiver. A sender whose receiver dies stops at
//! exactly the bound after the last thing it heard; an outage shorter than the bound (less the
//! engine's 2 s probe spacing) is ridden out and the transfer completes; a longer one ends it
//! with `IdleTimeout`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

use aerotp_proto::{CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Event, Mode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 9000))
}

/// What happens to the path.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Both directions drop everything in [from, from + len).
    Outage { from: Duration, len: Duration },
    /// The receiver's process dies at this time: it neither reads nor answers again.
    ReceiverDies(Duration),
}

/// A datagram on the path: (arrival, sequence, to the receiver?, bytes).
type InFlight = (Duration, u64, bool, Vec<u8>);

/// Runs a 2 MB transfer at 5 Mb/s (about 3.4 s clean) with `bound` as the sender's idle
/// timeout; returns how the sender's connection ended, when, and when it last heard anything.
fn run(mode: Mode, bound: Duration, fault: Fault) -> (CloseOutcome, Duration, Duration) {
    let mut cfg = ConnectionConfig::with_mode(mode);
    cfg.rate_bps = 5_000_000;
    cfg.idle_timeout = bound;
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    let mut rcfg = cfg.clone();
    rcfg.idle_timeout = Duration::from_secs(3600);
    b.listen(7, rcfg).unwrap();
    let ch = a.connect(Duration::ZERO, addr(2), 7, cfg).unwrap();
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let delay = ms(10);
    let mut heap: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let (mut now, mut seq, mut written) = (Duration::ZERO, 0u64, 0usize);
    let mut last_heard = Duration::ZERO;
    let mut accepted = Vec::new();
    let mut closed = false;
    let mut buf = vec![0u8; 65536];
    let down = |t: Duration| match fault {
        Fault::Outage { from, len } => t >= from && t < from + len,
        Fault::ReceiverDies(_) => false,
    };
    let dead = |t: Duration| matches!(fault, Fault::ReceiverDies(d) if t >= d);
    // Bounded in virtual time (120 s) and in steps.
    for _ in 0..5_000_000u32 {
        if written < data.len() {
            written += a.write(ch, &data[written..]).unwrap_or(0);
            if written == data.len() {
                a.close(ch).unwrap();
            }
        }
        while let Some(e) = a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    return (o, now, last_heard);
                }
            }
        }
        if !dead(now) {
            while let Some(e) = b.poll_event() {
                if let Event::Accepted(h) = e {
                    accepted.push(h);
                }
            }
            for &h in &accepted {
                while b.read(h, &mut buf).unwrap_or(0) > 0 {}
                if b.at_eof(h) && !closed {
                    b.close(h).unwrap();
                    closed = true;
                }
            }
        }
        let mut out = Vec::new();
        loop {
            out.clear();
            if a.poll_transmit(now, &mut out).is_none() {
                break;
            }
            if !down(now) {
                seq += 1;
                heap.push(Reverse((now + delay, seq, true, out.clone())));
            }
        }
        if !dead(now) {
            loop {
                out.clear();
                if b.poll_transmit(now, &mut out).is_none() {
                    break;
                }
                if !down(now) {
                    seq += 1;
                    heap.push(Reverse((now + delay, seq, false, out.clone())));
                }
            }
        }
        let next = [
            heap.peek().map(|r| r.0 .0),
            a.poll_timeout(),
            (!dead(now)).then(|| b.poll_timeout()).flatten(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        now = now.max(next);
        assert!(now < Duration::from_secs(120), "{mode:?} {fault:?}: no end");
        while heap.peek().is_some_and(|r| r.0 .0 <= now) {
            let Reverse((_, _, to_b, d)) = heap.pop().unwrap();
            if to_b {
                if !dead(now) {
                    b.handle_datagram(now, addr(1), &d);
                }
            } else {
                last_heard = now;
                a.handle_datagram(now, addr(2), &d);
            }
        }
        a.handle_timeout(now);
        if !dead(now) {
            b.handle_timeout(now);
        }
    }
    panic!("{mode:?} {fault:?}: the sender's connection never ended");
}

const MODES: [Mode; 3] = [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack];

#[test]
fn a_sender_whose_receiver_dies_stops_at_its_bound() {
    for mode in MODES {
        // The CLI's shortest bound (10 s) and a longer one.
        for bound in [ms(10_000), ms(30_000)] {
            let (o, at, heard) = run(mode, bound, Fault::ReceiverDies(ms(1000)));
            assert_eq!(o, CloseOutcome::IdleTimeout, "{mode:?} {bound:?}");
            // Heard until the receiver died (one path delay later at most; near-reliable's
            // cumulative ACKs come every 64 TPDUs or 200 ms, so its last one may be that old)…
            assert!(heard <= ms(1010) && heard > ms(790), "{mode:?}: {heard:?}");
            // …and stopped the bound after that, to the millisecond: never sooner, never later.
            let silent = at - heard;
            assert!(
                silent >= bound && silent <= bound + ms(1),
                "{mode:?}: stopped {silent:?} into the silence (bound {bound:?})"
            );
        }
    }
}

/// The engine probes a silent peer at most 2 s apart (docs/design.md, outage detection) and
/// nothing else is heard until a probe is answered, so the bound must leave room for one probe
/// interval after the outage: an outage up to bound − 2 s − one round trip is ridden out.
const PROBE_SPACING: Duration = Duration::from_secs(2);

#[test]
fn outages_shorter_than_the_bound_are_ridden_out_and_longer_ones_end_it() {
    for mode in MODES {
        for bound in [ms(10_000), ms(20_000)] {
            let len = bound - PROBE_SPACING - ms(100);
            let (o, _, _) = run(
                mode,
                bound,
                Fault::Outage {
                    from: ms(1000),
                    len,
                },
            );
            assert_eq!(
                o,
                CloseOutcome::Finished { confirmed: true },
                "{mode:?}: a {len:?} outage under a {bound:?} bound"
            );
            let (o, at, heard) = run(
                mode,
                bound,
                Fault::Outage {
                    from: ms(1000),
                    len: bound + ms(1000),
                },
            );
            assert_eq!(o, CloseOutcome::IdleTimeout, "{mode:?}: a longer outage");
            assert!(
                at - heard >= bound && at <= heard + bound + ms(1),
                "{mode:?}: {at:?}"
            );
        }
    }
}
