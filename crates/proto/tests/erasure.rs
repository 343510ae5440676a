//! Erasure coding across TPDUs, end to end in virtual time: lost TPDUs rebuilt from repair
//! TPDUs without a round trip, counted apart from retransmissions, adapting to the loss.

mod harness;

use aerotp_proto::{ConnectionConfig, ConnectionStats, ErasureMode, ErasureSetting, Mode};
use harness::{addr_b, pattern, Impair, Net};
use std::time::Duration;

struct Run {
    received: Vec<u8>,
    tx: ConnectionStats,
    rx: ConnectionStats,
    last_byte_at: Duration,
}

/// One transfer of `data` with both ends' statistics; stops at `limit` of virtual time.
fn run(cfg: ConnectionConfig, data: &[u8], imp: Impair, seed: u64, limit: Duration) -> Run {
    let mut net = Net::new(seed, imp);
    net.b.listen(7, cfg.clone()).unwrap();
    let ch = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    let (mut written, mut closed, mut rx) = (0, false, None);
    let mut received = Vec::new();
    let mut last_byte_at = Duration::ZERO;
    let mut buf = vec![0u8; 65536];
    let mut rx_stats = None;
    for _ in 0..5_000_000u64 {
        if net.now >= limit {
            break;
        }
        if written < data.len() {
            written += net.a.write(ch, &data[written..]).unwrap_or(0);
        } else if !closed {
            net.a.close(ch).unwrap();
            closed = true;
        }
        while net.a.poll_event().is_some() {}
        while let Some(e) = net.b.poll_event() {
            if let aerotp_proto::Event::Accepted(h) = e {
                rx = Some(h);
            }
        }
        if let Some(h) = rx {
            while let Ok(n @ 1..) = net.b.read(h, &mut buf) {
                received.extend_from_slice(&buf[..n]);
                last_byte_at = net.now;
            }
            rx_stats = net.b.stats(h).or(rx_stats);
            if net.b.at_eof(h) && received.len() == data.len() {
                break;
            }
        }
        if !net.step() {
            break;
        }
    }
    Run {
        received,
        tx: net.a.stats(ch).expect("sender stats"),
        rx: rx_stats.expect("the receiver accepted"),
        last_byte_at,
    }
}

fn quasi(rate: u64) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: rate,
        ..ConnectionConfig::with_mode(Mode::QuasiReliable)
    }
}

#[test]
fn quasi_reliable_rebuilds_ten_percent_random_loss_at_a_fixed_ratio() {
    let data = pattern(1_500_000, 1);
    let imp = Impair {
        delay: Duration::from_millis(10),
        loss: 0.10,
        ..Default::default()
    };
    let mut cfg = quasi(5_000_000);
    cfg.erasure = Some(ErasureSetting {
        mode: ErasureMode::Ratio(1.25),
        ..aerotp_proto::ErrorControl::for_mode(Mode::QuasiReliable).erasure
    });
    let r = run(cfg, &data, imp, 7, Duration::from_secs(30));
    let rx = &r.rx.receiver;
    assert!(r.tx.erasure_tx.repairs_sent > 0);
    assert!(
        rx.wire_lost > 80,
        "10 % of about 1100 TPDUs lost: {}",
        rx.wire_lost
    );
    assert_eq!(
        rx.tpdus_retransmitted_in, 0,
        "quasi-reliable never retransmits"
    );
    assert_eq!(rx.tpdus_rebuilt, rx.wire_lost, "every loss rebuilt");
    assert_eq!(rx.tpdus_lost, 0);
    assert!(r.received == data, "every byte delivered intact");
    // Repairs: about a quarter of the data TPDUs, plus the tail.
    let ratio = (r.tx.sender.tpdus_sent + r.tx.erasure_tx.repairs_sent) as f64
        / r.tx.sender.tpdus_sent as f64;
    assert!(ratio < 1.32, "wire/data ratio {ratio}");
    // Recovered within the delay bound (500 ms) plus the path.
    assert!(
        r.last_byte_at < Duration::from_secs(4),
        "{:?}",
        r.last_byte_at
    );
}

#[test]
fn quasi_reliable_auto_delivers_every_byte_at_two_percent_loss() {
    let data = pattern(1_000_000, 2);
    let imp = Impair {
        delay: Duration::from_millis(10),
        loss: 0.02,
        ..Default::default()
    };
    for seed in 1..=3 {
        let r = run(quasi(5_000_000), &data, imp, seed, Duration::from_secs(30));
        let rx = &r.rx.receiver;
        assert!(rx.wire_lost > 0, "seed {seed}: the link lost nothing?");
        assert_eq!(rx.tpdus_lost, 0, "seed {seed}: {rx:?}");
        assert!(r.received == data, "seed {seed}: every byte intact");
        let e = &r.tx.erasure_tx;
        assert!(e.loss_estimate > 0.01 && e.loss_estimate < 0.05, "{e:?}");
        let overhead = e.repair_bytes as f64 / data.len() as f64;
        assert!(
            overhead < 0.15,
            "seed {seed}: repair bytes {overhead:.3} of the data"
        );
    }
}

#[test]
fn hybrid_nack_mack_on_a_long_path_rebuilds_losses_and_finishes_sooner_than_without() {
    let data = pattern(2_000_000, 3);
    let imp = Impair {
        delay: Duration::from_millis(500),
        loss: 0.02,
        ..Default::default()
    };
    let cfg = ConnectionConfig {
        rate_bps: 5_000_000,
        ..ConnectionConfig::with_mode(Mode::HybridNackMack)
    };
    let r = run(cfg.clone(), &data, imp, 5, Duration::from_secs(60));
    assert!(r.received == data, "every byte delivered intact");
    let rx = &r.rx.receiver;
    // Repair starts once the round trip is known long and a report shows loss (about a
    // second in); from then on losses are rebuilt.
    assert!(
        rx.tpdus_rebuilt >= 5,
        "rebuilt {} retransmitted {}",
        rx.tpdus_rebuilt,
        rx.tpdus_retransmitted_in
    );
    // Off: every loss waits for a retransmission.
    let off = ConnectionConfig {
        erasure: Some(ErasureSetting::OFF),
        ..cfg
    };
    let o = run(off, &data, imp, 5, Duration::from_secs(60));
    assert!(o.received == data);
    assert_eq!(o.rx.receiver.tpdus_rebuilt, 0);
    assert!(
        r.last_byte_at < o.last_byte_at,
        "with repairs {:?}, without {:?}",
        r.last_byte_at,
        o.last_byte_at
    );
}
