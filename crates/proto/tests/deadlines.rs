//! The deadline contract over a grid of links: every deadline `poll_timeout` reports is one
//! that `handle_timeout` acts on, so a driver that jumps to it always makes progress, and
//! every transfer ends within a bounded number of events.
//!
//! Contract checked at every step: after `handle_timeout(now)` and draining
//! `poll_transmit(now)`, `poll_timeout()` is `None` or later than `now`. A deadline at or
//! before `now` that survives `handle_timeout` is a livelock: the driver would wake at the
//! same instant forever (issue: 2.4 kb/s, 1.5 s, MTU 256 spun on the linger deadline while
//! the AFINACK waited for its pacer slot).

use std::net::SocketAddr;
use std::time::Duration;

use aerotp_link::{LinkConfig, Path};
use aerotp_pair::{Advance, Links, Pair, Quiet};
use aerotp_proto::{
    CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Event, FecSetting, Mode, RadioSignal,
    RateControl,
};

const PORT: u16 = 7000;
/// Most loop iterations a run may take. A 6 kB transfer needs a few hundred; thousands
/// leave room for loss recovery with backoff, and a livelock is caught long before.
const MAX_STEPS: u64 = 100_000;

struct Outcome {
    sender: Option<CloseOutcome>,
    /// (TPDUs sent, TPDUs retransmitted) by the sender.
    sent_retx: (u64, u64),
    delivered: usize,
    steps: u64,
    end: Duration,
}

fn run(mode: Mode, rate: u64, delay: Duration, mtu: usize, loss: f64, seed: u64) -> Outcome {
    run_sized(
        mode,
        rate,
        delay,
        mtu,
        loss,
        seed,
        6_000,
        Duration::ZERO,
        RateControl::Fixed,
        &[],
    )
}

#[allow(clippy::too_many_arguments)] // one flat list of the link's and engine's knobs per run
fn run_sized(
    mode: Mode,
    rate: u64,
    delay: Duration,
    mtu: usize,
    loss: f64,
    seed: u64,
    size: usize,
    jitter: Duration,
    control: RateControl,
    radio: &[(Duration, RadioSignal)],
) -> Outcome {
    let mut radio: Vec<(Duration, RadioSignal)> = radio.to_vec();
    let link = LinkConfig {
        rate_bps: rate,
        delay,
        loss,
        jitter,
        allow_reorder: !jitter.is_zero(),
        per_packet_overhead: 28,
        protected_prefix: 28,
        queue_bytes: 1 << 20,
        ..LinkConfig::default()
    };
    let links = Links::single(
        Path::new(vec![link.clone()], seed).unwrap(),
        Path::new(vec![link], seed ^ 0xABCD).unwrap(),
    );
    // Discovered: under a cap of ten times the link's rate, which it must find.
    let cfg = ConnectionConfig {
        rate_bps: if control == RateControl::Discover {
            rate * 10
        } else {
            rate
        },
        rate_control: control,
        mtu,
        per_packet_overhead: 28,
        fec: FecSetting::Off,
        ..ConnectionConfig::with_mode(mode)
    };
    cfg.validate().unwrap();
    let (sa, sb) = (
        SocketAddr::from(([10, 0, 0, 1], 9000)),
        SocketAddr::from(([10, 0, 0, 2], 9000)),
    );
    // The driver the simulator runs on; this test adds the contract's checks to each turn.
    let mut pair = Pair::new(
        Endpoint::new(EndpointConfig::default(), seed),
        Endpoint::new(EndpointConfig::default(), seed + 1),
        links,
        sa,
        sb,
    );
    pair.b.listen(PORT, cfg.clone()).unwrap();
    let ch = pair.a.connect(Duration::ZERO, sb, PORT, cfg).unwrap();
    let data: Vec<u8> = (0..size as u32).map(|i| (i * 7 + 3) as u8).collect();
    let (mut written, mut closed, mut rx, mut rx_closed) = (0, false, None, false);
    let mut sender = None;
    let mut receiver_done = false;
    let mut delivered = 0usize;
    let mut steps = 0;
    let mut sent_retx = (0, 0);
    while steps < MAX_STEPS {
        steps += 1;
        let now = pair.now;
        // What the sender's radio says, at its times (toward the receiver's address).
        while let Some(i) = radio.iter().position(|&(at, _)| at <= now) {
            let (_, signal) = radio.remove(i);
            pair.a.radio(now, sb.ip(), signal);
        }
        let (a, b) = (&mut pair.a, &mut pair.b);
        if written < data.len() {
            written += a.write(ch, &data[written..]).unwrap_or(0);
        }
        if written == data.len() && !closed {
            a.close(ch).unwrap();
            closed = true;
        }
        if let Some(st) = a.stats(ch) {
            sent_retx = (st.sender.tpdus_sent, st.sender.tpdus_retransmitted);
        }
        while let Some(e) = a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    sender = Some(o);
                }
            }
        }
        while let Some(e) = b.poll_event() {
            match e {
                Event::Accepted(h) => rx = Some(h),
                Event::Closed(h, _) if Some(h) == rx => receiver_done = true,
                _ => {}
            }
        }
        if let Some(h) = rx {
            while let Ok(Some(c)) = b.read_chunk(h) {
                // The lossy modes skip what they lost, so only the fully reliable ones
                // must deliver the file's bytes in order.
                if aerotp_proto::ErrorControl::for_mode(mode).delivers_everything() {
                    assert_eq!(
                        data.get(delivered..delivered + c.data.len()),
                        Some(&c.data[..]),
                        "{mode:?} {rate} b/s {delay:?} MTU {mtu} loss {loss}: bytes out of order"
                    );
                }
                delivered += c.data.len();
            }
            if !rx_closed && b.at_eof(h) {
                let _ = b.close(h);
                rx_closed = true;
            }
        }
        pair.transmit(&mut Quiet);
        for (side, t) in [
            ("sender", pair.a.poll_timeout()),
            ("receiver", pair.b.poll_timeout()),
        ] {
            if let Some(t) = t {
                assert!(
                    t > now || steps == 1,
                    "{mode:?} {rate} b/s {delay:?} MTU {mtu} loss {loss}: the {side} reports \
                     deadline {t:?} at {now:?} after handling it (nothing acts on it): {:?}",
                    pair.a.describe(ch)
                );
            }
        }
        if sender.is_some() && (receiver_done || rx.is_none()) {
            break;
        }
        let wake = radio.iter().map(|&(at, _)| at).min();
        if pair.advance(&mut Quiet, wake, Duration::MAX) == Advance::Idle {
            break;
        }
        let (now, a, b) = (pair.now, &mut pair.a, &mut pair.b);
        // Idempotent: handling the same instant again changes nothing the driver can see.
        let (ta, tb) = (a.poll_timeout(), b.poll_timeout());
        a.handle_timeout(now);
        b.handle_timeout(now);
        assert_eq!(
            (a.poll_timeout(), b.poll_timeout()),
            (ta, tb),
            "{mode:?} {rate} b/s {delay:?} MTU {mtu} loss {loss}: handle_timeout at {now:?} \
             is not idempotent"
        );
    }
    Outcome {
        sender,
        sent_retx,
        delivered,
        steps,
        end: pair.now,
    }
}

#[test]
fn every_reported_deadline_acts_and_every_transfer_ends() {
    let modes = [
        Mode::Reliable,
        Mode::NearReliable,
        Mode::HybridNack,
        Mode::HybridNackMack,
        Mode::QuasiReliable,
        Mode::Unreliable,
    ];
    let mut seed = 1;
    for mode in modes {
        for rate in [2_400u64, 64_000, 5_000_000] {
            for delay_ms in [0u64, 10, 1_500] {
                for mtu in [128usize, 256, 400, 1500] {
                    for loss in [0.0, 0.1] {
                        seed += 1;
                        let delay = Duration::from_millis(delay_ms);
                        let o = run(mode, rate, delay, mtu, loss, seed);
                        let what =
                            format!("{mode:?} {rate} b/s {delay_ms} ms MTU {mtu} loss {loss}");
                        assert!(
                            o.steps < MAX_STEPS,
                            "{what}: no end after {} steps",
                            o.steps
                        );
                        let Some(end) = o.sender else {
                            panic!(
                                "{what}: the sender never closed ({} steps, {:?})",
                                o.steps, o.end
                            )
                        };
                        if aerotp_proto::ErrorControl::for_mode(mode).delivers_everything() {
                            assert_eq!(end, CloseOutcome::Finished { confirmed: true }, "{what}");
                            assert_eq!(o.delivered, 6_000, "{what}");
                        }
                    }
                }
            }
        }
    }
}

/// On a clean path of any length nothing is lost, so every retransmission is needless. Before
/// the first round-trip sample the timeout is a guess (300 ms): it may resend one probe per
/// backed-off timeout, never the first flight (which once cost 493 TPDUs of 10 MB at 600 ms).
#[test]
fn a_clean_long_path_costs_no_needless_retransmissions() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        for delay_ms in [600u64, 3_000] {
            let size = 1_500_000;
            let o = run_sized(
                mode,
                5_000_000,
                Duration::from_millis(delay_ms),
                1500,
                0.0,
                9,
                size,
                Duration::ZERO,
                RateControl::Fixed,
                &[],
            );
            let what = format!("{mode:?} {delay_ms} ms");
            assert_eq!(
                o.sender,
                Some(CloseOutcome::Finished { confirmed: true }),
                "{what}"
            );
            assert_eq!(o.delivered, size, "{what}");
            let (sent, retx) = o.sent_retx;
            assert!(
                retx * 100 <= sent,
                "{what}: {retx} of {sent} TPDUs retransmitted on a lossless path (at most 1 %)"
            );
        }
    }
}

/// Reordering is not loss: with up to 35 ms of jitter that reorders (a TPDU is 2.4 ms at
/// 5 Mb/s, so by up to 15 places), the packet-count rule is switched off once reordering is
/// seen and the time rule's window widens with each needless retransmission. Before, about
/// 420 of 690 TPDUs were resent at 25 ms of jitter.
#[test]
fn reordering_is_not_taken_for_loss() {
    for mode in [Mode::Reliable, Mode::HybridNackMack] {
        for jitter_ms in [5u64, 25, 35] {
            let size = 1_500_000;
            let o = run_sized(
                mode,
                5_000_000,
                Duration::from_millis(10),
                1500,
                0.0,
                11,
                size,
                Duration::from_millis(jitter_ms),
                RateControl::Fixed,
                &[],
            );
            let what = format!("{mode:?} jitter {jitter_ms} ms");
            assert_eq!(o.delivered, size, "{what}");
            let (sent, retx) = o.sent_retx;
            assert!(
                retx * 100 <= 5 * sent,
                "{what}: {retx} of {sent} TPDUs retransmitted with no loss (at most 5 %)"
            );
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// The contract (checked at every step inside `run_sized`: a reported deadline acts, and
    /// `handle_timeout` is idempotent) over random links, modes and sizes, with each mode's
    /// default erasure repair; and every transfer ends.
    #[test]
    fn the_deadline_contract_holds_on_random_links(
        mode_i in 0usize..6,
        rate in proptest::sample::select(vec![2_400u64, 64_000, 1_000_000, 5_000_000]),
        delay_ms in 0u64..2_000,
        mtu in 128usize..1500,
        loss in 0.0f64..0.3,
        jitter_ms in 0u64..50,
        size in 1usize..20_000,
        seed in 0u64..1_000_000,
    ) {
        let mode = [
            Mode::Reliable,
            Mode::NearReliable,
            Mode::HybridNack,
            Mode::HybridNackMack,
            Mode::QuasiReliable,
            Mode::Unreliable,
        ][mode_i];
        let o = run_sized(
            mode,
            rate,
            Duration::from_millis(delay_ms),
            mtu,
            loss,
            seed,
            size,
            Duration::from_millis(jitter_ms),
            RateControl::Fixed,
            &[],
        );
        proptest::prop_assert!(o.steps < MAX_STEPS, "no end after {} steps", o.steps);
        proptest::prop_assert!(o.sender.is_some(), "the sender never closed");
        if aerotp_proto::ErrorControl::for_mode(mode).delivers_everything() {
            proptest::prop_assert_eq!(o.delivered, size);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The same contract with the rate discovered (docs/rate.md), in the modes that discover
    /// it: the window and the model's pacing changes must never leave a deadline that
    /// nothing acts on, and every transfer ends and delivers everything. From 9.6 kb/s; not
    /// yet over 2.4 kb/s links at random or 30 % loss and more: there the first flight, sent
    /// at the cap, queues longer than the first timeouts, and needless retransmissions can
    /// outlive the receiver's set-up (docs/results/rate.md, "Left"; one such case, fixed, is
    /// `a_slow_first_flight_does_not_outlive_the_receivers_set_up`).
    #[test]
    fn the_deadline_contract_holds_with_a_discovered_rate(
        hybrid in proptest::bool::ANY,
        rate in proptest::sample::select(vec![9_600u64, 64_000, 1_000_000, 5_000_000]),
        delay_ms in 0u64..2_000,
        mtu in 128usize..1500,
        loss in 0.0f64..0.3,
        jitter_ms in 0u64..50,
        size in 1usize..200_000,
        seed in 0u64..1_000_000,
    ) {
        let mode = if hybrid { Mode::HybridNackMack } else { Mode::Reliable };
        let o = run_sized(
            mode,
            rate,
            Duration::from_millis(delay_ms),
            mtu,
            loss,
            seed,
            size,
            Duration::from_millis(jitter_ms),
            RateControl::Discover,
            &[],
        );
        proptest::prop_assert!(o.steps < MAX_STEPS, "no end after {} steps", o.steps);
        proptest::prop_assert_eq!(o.sender, Some(CloseOutcome::Finished { confirmed: true }));
        proptest::prop_assert_eq!(o.delivered, size);
    }
}

/// Found by the property test above over 2.4 kb/s: ten 806-byte TPDUs of the first flight
/// are 27 s in the bottleneck's queue, the receiver's ECHO waited behind them, the receiver
/// dropped its half-open connection at its 30 s set-up timeout, and the sender took the new
/// one the next TPDU opened for a restart and reset. The receiver now keeps a half-open
/// connection whose peer keeps sending intact data (up to four set-up timeouts).
#[test]
fn a_slow_first_flight_does_not_outlive_the_receivers_set_up() {
    let o = run_sized(
        Mode::Reliable,
        2_400,
        Duration::from_millis(132),
        806,
        0.162_812_878_227_388_16,
        249_914,
        5_982,
        Duration::ZERO,
        RateControl::Discover,
        &[],
    );
    assert_eq!(o.sender, Some(CloseOutcome::Finished { confirmed: true }));
    assert_eq!(o.delivered, 5_982);
}

/// A radio's word (`RadioSignal`) at random times: `(time in ms, kind, rate)`; the last
/// ones say the destination is up and restart it, so every transfer can end.
fn radio_schedule(events: &[(u64, u8, u64)]) -> Vec<(Duration, RadioSignal)> {
    let mut out: Vec<(Duration, RadioSignal)> = events
        .iter()
        .map(|&(at, kind, rate)| {
            let s = match kind {
                0 => RadioSignal::Rate(rate),
                1 => RadioSignal::RateUnknown,
                2 => RadioSignal::Latency(Duration::from_millis(rate % 3_000)),
                3 => RadioSignal::Down,
                4 => RadioSignal::Up,
                5 => RadioSignal::Pause,
                _ => RadioSignal::Restart,
            };
            (Duration::from_millis(at), s)
        })
        .collect();
    let end = out.iter().map(|&(at, _)| at).max().unwrap_or_default();
    out.push((end + Duration::from_millis(1), RadioSignal::Up));
    out.push((end + Duration::from_millis(1), RadioSignal::Restart));
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The same contract while a radio speaks (`RadioSignal`: rate, latency, down, up,
    /// pause, restart at random times), fixed or discovered: a held path must leave no
    /// deadline that nothing acts on, and every transfer ends once the radio lets it.
    #[test]
    fn the_deadline_contract_holds_while_a_radio_speaks(
        hybrid in proptest::bool::ANY,
        discover in proptest::bool::ANY,
        rate in proptest::sample::select(vec![64_000u64, 1_000_000, 5_000_000]),
        delay_ms in 0u64..500,
        loss in 0.0f64..0.1,
        size in 1usize..100_000,
        seed in 0u64..1_000_000,
        events in proptest::collection::vec((0u64..8_000, 0u8..7, 10_000u64..20_000_000), 0..8),
    ) {
        let mode = if hybrid { Mode::HybridNackMack } else { Mode::Reliable };
        let control = if discover { RateControl::Discover } else { RateControl::Fixed };
        let o = run_sized(
            mode,
            rate,
            Duration::from_millis(delay_ms),
            1500,
            loss,
            seed,
            size,
            Duration::ZERO,
            control,
            &radio_schedule(&events),
        );
        proptest::prop_assert!(o.steps < MAX_STEPS, "no end after {} steps", o.steps);
        proptest::prop_assert_eq!(o.sender, Some(CloseOutcome::Finished { confirmed: true }));
        proptest::prop_assert_eq!(o.delivered, size);
    }
}
