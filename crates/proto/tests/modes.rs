//! End-to-end behaviour of every transfer mode over the virtual network.

mod harness;

use aerotp_proto::{CloseOutcome, ConnectionConfig, ErasureSetting, FecSetting, Mode};
use harness::{pattern, transfer, Impair};
use proptest::prelude::*;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn cfg(mode: Mode) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 5_000_000,
        ..ConnectionConfig::with_mode(mode)
    }
}

#[test]
fn reliable_clean_link_delivers_everything_at_line_rate() {
    let data = pattern(200_000, 1);
    let o = transfer(
        cfg(Mode::Reliable),
        &data,
        Impair {
            delay: ms(10),
            ..Default::default()
        },
        1,
        Duration::from_secs(30),
    );
    assert!(
        o.received == data,
        "received {} of {} bytes",
        o.received.len(),
        data.len()
    );
    assert_eq!(
        o.sender_close,
        Some(CloseOutcome::Finished { confirmed: true })
    );
    assert!(matches!(
        o.receiver_close,
        Some(CloseOutcome::Finished { .. })
    ));
    // 200 kB at 5 Mb/s with ~3 % overhead takes about 0.33 s; allow for the close handshake.
    let accepted = o.accepted_at.unwrap();
    assert!(
        accepted >= ms(10) && accepted < ms(14),
        "setup {accepted:?}"
    );
}

#[test]
fn every_reliable_mode_survives_loss_corruption_reordering_and_duplicates() {
    let data = pattern(120_000, 2);
    let imp = Impair {
        delay: ms(10),
        jitter: ms(4),
        loss: 0.05,
        ber: 2e-5,
        dup: 0.02,
        outage: None,
    };
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let o = transfer(cfg(mode), &data, imp, 3, Duration::from_secs(120));
        assert_eq!(o.received.len(), data.len(), "{mode}");
        assert!(o.received == data, "{mode}: bytes differ");
        assert_eq!(
            o.sender_close,
            Some(CloseOutcome::Finished { confirmed: true }),
            "{mode}"
        );
    }
}

#[test]
fn quasi_reliable_fec_corrects_bit_errors_without_acks() {
    let data = pattern(150_000, 4);
    let mut c = cfg(Mode::QuasiReliable);
    c.fec = FecSetting::Words(16);
    let o = transfer(
        c,
        &data,
        Impair {
            delay: ms(10),
            ber: 1e-4,
            ..Default::default()
        },
        4,
        Duration::from_secs(30),
    );
    // With 64 parity bytes per TPDU, residual loss at 1e-4 is tiny: expect all or nearly all.
    assert!(
        o.received.len() as f64 >= 0.99 * data.len() as f64,
        "{}",
        o.received.len()
    );
}

#[test]
fn unreliable_mode_loses_what_the_link_loses() {
    let data = pattern(150_000, 5);
    // Without erasure repair (crates/proto/tests/erasure.rs has it): what is lost stays lost.
    let mut c = cfg(Mode::Unreliable);
    c.erasure = Some(ErasureSetting::OFF);
    let o = transfer(
        c,
        &data,
        Impair {
            delay: ms(5),
            loss: 0.1,
            ..Default::default()
        },
        5,
        Duration::from_secs(30),
    );
    let frac = o.received.len() as f64 / data.len() as f64;
    assert!(frac > 0.8 && frac < 0.97, "{frac}");
    assert!(
        matches!(
            o.sender_close,
            Some(CloseOutcome::Finished { confirmed: false })
        ),
        "{:?}",
        o.sender_close
    );
}

#[test]
fn hybrid_nack_repairs_corruption_but_not_loss() {
    let data = pattern(150_000, 6);
    let mut c = cfg(Mode::HybridNack);
    c.fec = FecSetting::Off;
    // NACKs against nothing: erasure repair (which would rebuild the quasi-reliable run's
    // losses too) is tested in crates/proto/tests/erasure.rs.
    c.erasure = Some(ErasureSetting::OFF);
    // Corruption only: every corrupted TPDU is NACKed and resent.
    // A weak code (one symbol per codeword) leaves about 1 % of TPDUs uncorrected: the NACKs
    // get them back, where quasi-reliable with the same code loses them.
    c.fec = FecSetting::Parity(2);
    let imp = Impair {
        delay: ms(10),
        ber: 3e-5,
        ..Default::default()
    };
    let hybrid = transfer(c.clone(), &data, imp, 6, Duration::from_secs(30));
    let quasi = transfer(
        ConnectionConfig {
            mode: Mode::QuasiReliable,
            ..c.clone()
        },
        &data,
        imp,
        6,
        Duration::from_secs(30),
    );
    assert!(
        quasi.received.len() < data.len(),
        "quasi lost nothing: the test link is too clean"
    );
    assert!(hybrid.received.len() > quasi.received.len());
    assert!(
        hybrid.received.len() as f64 > 0.995 * data.len() as f64,
        "{}",
        hybrid.received.len()
    );
    // Pure loss: nothing to NACK, data is missing.
    c.fec = FecSetting::Off;
    let o = transfer(
        c,
        &data,
        Impair {
            delay: ms(10),
            loss: 0.05,
            ..Default::default()
        },
        6,
        Duration::from_secs(30),
    );
    assert!(o.received.len() < data.len());
}

#[test]
fn setup_delay_at_20_percent_loss_stays_within_5_percent_of_loss_free() {
    // The papers' set-up: 10 Mb/s, 5 ms. Redundant short ASYNs establish the receiver one
    // propagation delay after connect even when the first copies are lost.
    let data = pattern(20_000, 7);
    let mean_setup = |loss: f64| {
        let mut total = Duration::ZERO;
        for seed in 0..100 {
            let c = ConnectionConfig {
                rate_bps: 10_000_000,
                ..cfg(Mode::Reliable)
            };
            let o = transfer(
                c,
                &data,
                Impair {
                    delay: ms(5),
                    loss,
                    ..Default::default()
                },
                seed,
                Duration::from_secs(30),
            );
            assert!(
                o.received == data,
                "seed {seed}: received {} bytes",
                o.received.len()
            );
            total += o.accepted_at.unwrap();
        }
        total / 100
    };
    let clean = mean_setup(0.0);
    let lossy = mean_setup(0.2);
    assert!(
        clean >= ms(5) && clean < Duration::from_micros(5100),
        "{clean:?}"
    );
    assert!(
        lossy.as_secs_f64() <= clean.as_secs_f64() * 1.05,
        "{clean:?} -> {lossy:?}"
    );
}

#[test]
fn reliable_survives_an_outage_and_resumes_quickly() {
    let data = pattern(1_000_000, 8);
    let imp = Impair {
        delay: ms(10),
        outage: Some((ms(500), ms(10_500))),
        ..Default::default()
    };
    let o = transfer(cfg(Mode::Reliable), &data, imp, 8, Duration::from_secs(60));
    assert!(o.received == data, "received {} bytes", o.received.len());
    // 1 MB takes ~1.7 s at 5 Mb/s; the outage adds 10 s; the link is found again within one
    // probe interval (by then backed off to its 2 s bound) plus a round trip.
    assert!(
        o.last_byte_at < Duration::from_millis(1_700 + 10_000 + 2_000 + 300),
        "{:?}",
        o.last_byte_at
    );
}

/// A receiver that restarts mid-transfer (its endpoint replaced by a fresh one on the same
/// address) is recognised by the sender within about a round trip of its next TPDU, in every
/// fully reliable mode, instead of after the idle timeout; and the listener's new connection
/// is reset too, so nothing is left open.
#[test]
fn a_restarted_receiver_resets_the_connection_at_once() {
    use aerotp_proto::{Endpoint, EndpointConfig, Event};
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let imp = Impair {
            delay: ms(10),
            ..Default::default()
        };
        let mut net = harness::Net::new(3, imp);
        net.b.listen(7, cfg(mode)).unwrap();
        let ch = net
            .a
            .connect(Duration::ZERO, harness::addr_b(), 7, cfg(mode))
            .unwrap();
        let data = pattern(2_000_000, 3);
        let (mut written, mut restarted_at, mut closed) = (0, None, None);
        let mut accepted = Vec::new();
        let mut buf = vec![0u8; 65536];
        let mut steps = 0u32;
        while net.now < Duration::from_secs(30) && closed.is_none() && steps < 2_000_000 {
            steps += 1;
            if written < data.len() {
                written += net.a.write(ch, &data[written..]).unwrap_or(0);
            }
            while let Some(e) = net.a.poll_event() {
                if let Event::Closed(h, o) = e {
                    if h == ch {
                        closed = Some((net.now, o));
                    }
                }
            }
            while let Some(e) = net.b.poll_event() {
                if let Event::Accepted(h) = e {
                    accepted.push(h);
                }
            }
            for &h in &accepted {
                while net.b.read(h, &mut buf).unwrap_or(0) > 0 {}
            }
            if restarted_at.is_none() && net.now >= ms(1000) {
                accepted.clear();
                net.b = Endpoint::new(EndpointConfig::default(), 99);
                net.b.listen(7, cfg(mode)).unwrap();
                restarted_at = Some(net.now);
            }
            if !net.step() {
                break;
            }
        }
        let restarted_at = restarted_at.expect("the transfer lasts past 1 s");
        let Some((at, CloseOutcome::Reset(why))) = closed else {
            panic!("{mode:?}: sender not reset: {closed:?}");
        };
        assert!(why.contains("peer restarted"), "{mode:?}: {why}");
        // The sender first sees silence, then probes every 250 ms; the new listener answers
        // the first probe.
        assert!(
            at - restarted_at < ms(1500),
            "{mode:?}: reset {:?} after the restart",
            at - restarted_at
        );
        // The listener's new connection (opened by the sender's probe) is reset as well.
        let mut listener_closed = None;
        for _ in 0..1000 {
            while let Some(e) = net.b.poll_event() {
                if let Event::Closed(_, o) = e {
                    listener_closed = Some(o);
                }
            }
            if listener_closed.is_some() || !net.step() {
                break;
            }
        }
        assert_eq!(
            accepted.len(),
            1,
            "{mode:?}: the probe opened one connection"
        );
        assert!(
            matches!(listener_closed, Some(CloseOutcome::Reset(_))),
            "{mode:?}: listener's connection: {listener_closed:?}"
        );
    }
}

proptest! {
    // A fixed seed keeps CI deterministic; set PROPTEST_CASES (and change the seed) to explore.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0xAE20),
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn reliable_modes_deliver_exactly_the_bytes_written(
        seed in any::<u64>(),
        mode_idx in 0usize..3,
        loss in 0.0f64..0.15,
        ber in prop_oneof![Just(0.0), 1e-6f64..5e-5],
        dup in 0.0f64..0.05,
        jitter_ms in 0u64..8,
        len in 1usize..60_000,
    ) {
        let mode = [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack][mode_idx];
        let data = pattern(len, seed);
        let imp = Impair { delay: ms(10), jitter: ms(jitter_ms), loss, ber, dup, outage: None };
        let o = transfer(cfg(mode), &data, imp, seed, Duration::from_secs(300));
        prop_assert_eq!(o.received.len(), data.len());
        prop_assert!(o.received == data);
        prop_assert_eq!(o.sender_close, Some(CloseOutcome::Finished { confirmed: true }));
    }
}

#[test]
#[ignore = "debugging aid: prints a timeline"]
fn timeline() {
    let seed = 564605024930982662;
    let data = pattern(10165, seed);
    let imp = Impair {
        delay: ms(10),
        jitter: ms(5),
        loss: 0.14662220565862222,
        ..Default::default()
    };
    harness::debug_timeline(
        cfg(Mode::HybridNackMack),
        &data,
        imp,
        seed,
        Duration::from_secs(300),
    );
}

#[test]
#[ignore = "measurement aid: prints goodput per mode at BER 1e-4"]
fn goodput_at_high_ber() {
    let data = pattern(1_000_000, 9);
    for (mode, fec) in [
        (Mode::Reliable, FecSetting::Off),
        (Mode::Reliable, FecSetting::Auto),
        (Mode::HybridNackMack, FecSetting::Auto),
        (Mode::NearReliable, FecSetting::Auto),
        (Mode::QuasiReliable, FecSetting::Auto),
        (Mode::HybridNack, FecSetting::Auto),
    ] {
        for ber in [1e-5, 1e-4] {
            let mut c = cfg(mode);
            c.fec = fec;
            let imp = Impair {
                delay: ms(10),
                ber,
                ..Default::default()
            };
            let o = transfer(c, &data, imp, 11, Duration::from_secs(120));
            let gp = o.received.len() as f64 * 8.0 / o.last_byte_at.as_secs_f64();
            eprintln!(
                "{mode} {fec:?} ber={ber}: {} bytes, {:.3} Mb/s, intact={}, sender {:?}",
                o.received.len(),
                gp / 1e6,
                o.received == data,
                o.sender_stats.as_ref().map(|s| (
                    s.sender.tpdus_sent,
                    s.sender.tpdus_retransmitted,
                    s.sender.timeouts,
                    s.sender.nacks_received,
                    s.fec_parity
                ))
            );
        }
    }
}

/// A 30-minute outage 8 s into a 10 MB transfer at BER 0: every byte arrives, and what the
/// sender spends into the dead link (data before it suspects the outage, then PROBEs backing
/// off to one every 2 s) stays within 1 % of the transfer in each fully reliable mode (the
/// engine issue's figure: `timers::pause_after`'s gap rule and near-reliable's ACK every 16).
#[test]
fn a_half_hour_outage_costs_at_most_one_percent_of_the_transfer() {
    let data = pattern(10_000_000, 30);
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let imp = Impair {
            delay: ms(10),
            outage: Some((ms(8_000), ms(1_808_000))),
            ..Default::default()
        };
        let o = transfer(cfg(mode), &data, imp, 9, Duration::from_secs(3_600));
        assert!(
            o.received == data,
            "{mode}: received {} bytes",
            o.received.len()
        );
        eprintln!("{mode}: {} bytes sent into the outage", o.outage_bytes);
        assert!(
            o.outage_bytes <= data.len() as u64 / 100,
            "{mode}: {} bytes sent into the outage, over 1 % of {}",
            o.outage_bytes,
            data.len()
        );
    }
}

/// A receiver whose reorder buffer may hold only 30 kB of out-of-order bodies (about 20
/// TPDUs) behind 5 % loss: it never holds more, drops what does not fit, and every fully
/// reliable mode still delivers every byte (the dropped TPDUs are resent).
#[test]
fn a_byte_bounded_reorder_buffer_holds_its_bound_and_loses_nothing() {
    let data = pattern(400_000, 31);
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        let c = ConnectionConfig {
            reorder_bytes: 30_000,
            ..cfg(mode)
        };
        let imp = Impair {
            delay: ms(10),
            loss: 0.05,
            ..Default::default()
        };
        let o = transfer(c, &data, imp, 12, Duration::from_secs(120));
        assert!(
            o.received == data,
            "{mode}: received {} bytes",
            o.received.len()
        );
        assert!(
            o.max_reorder_held <= 30_000 + 1_500,
            "{mode}: held {} bytes out of order",
            o.max_reorder_held
        );
        assert!(
            o.max_reorder_held > 10_000,
            "{mode}: the bound was reached: {}",
            o.max_reorder_held
        );
    }
}
