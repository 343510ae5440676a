//! The sending and receiving sides together, without a connection: sources dropped at will,
//! repairs carried over, what comes back compared byte for byte.

use super::*;
use aerotp_wire::Report;
use std::time::Duration;

fn body(seq: u64) -> Vec<u8> {
    (0..(100 + seq as usize % 900))
        .map(|i| (i as u64 * 31 + seq) as u8)
        .collect()
}

fn fixed(ratio: f64) -> ErasureSetting {
    ErasureSetting {
        mode: ErasureMode::Ratio(ratio),
        ..crate::error_control::ErrorControl::for_mode(aerotp_wire::Mode::QuasiReliable).erasure
    }
}

/// Sends `n` sources through `tx`, dropping those `lose` picks (repairs too), and returns
/// what `rx` rebuilt, in order of rebuilding, with the repairs sent.
fn exchange(
    tx: &mut ErasureTx,
    rx: &mut ErasureRx,
    n: u64,
    lose: impl Fn(u64) -> bool,
) -> (Vec<Rebuilt>, usize) {
    let mut rebuilt = Vec::new();
    let mut wire = 0u64;
    let mut repairs = 0;
    let now = Duration::ZERO;
    tx.update(now, Duration::from_millis(20), 5_000_000, 1500);
    for seq in 0..n {
        let flags = if seq + 1 == n {
            Flags::AFIN
        } else {
            Flags::empty()
        };
        let b = body(seq);
        tx.on_data_sent(now, seq, flags, &b);
        if !lose(wire) {
            rebuilt.extend(rx.on_source(seq as u32, flags, &b));
        }
        wire += 1;
        let idle = seq + 1 == n;
        while let Some(r) = tx.poll_repair(now + Duration::from_secs(1), idle) {
            repairs += 1;
            if !lose(wire) {
                rebuilt.extend(rx.on_repair(&r));
            }
            wire += 1;
        }
    }
    (rebuilt, repairs)
}

#[test]
fn every_lost_source_comes_back_exact_at_a_fixed_ratio() {
    let mut tx = ErasureTx::new(fixed(1.25), 1500, 42);
    let mut rx = ErasureRx::new(1500, 512, true);
    // Lose every 13th wire symbol (about 7.7 %), repairs included.
    let (rebuilt, repairs) = exchange(&mut tx, &mut rx, 2000, |w| w % 13 == 5);
    assert!(
        (450..=560).contains(&repairs),
        "{repairs} repairs for 2000 at 1.25"
    );
    let lost: Vec<u64> = (0..2000 + repairs as u64).filter(|w| w % 13 == 5).collect();
    assert!(!lost.is_empty());
    assert!(rebuilt.len() >= 140, "rebuilt {}", rebuilt.len());
    for r in &rebuilt {
        assert_eq!(
            r.body,
            body(u64::from(r.seq)),
            "TPDU {} rebuilt wrong",
            r.seq
        );
    }
    let last = rebuilt.iter().find(|r| r.flags.contains(Flags::AFIN));
    if let Some(l) = last {
        assert_eq!(l.seq, 1999);
    }
}

#[test]
fn auto_sends_nothing_on_a_clean_link_and_rises_with_reported_loss() {
    let setting =
        crate::error_control::ErrorControl::for_mode(aerotp_wire::Mode::Unreliable).erasure;
    let mut tx = ErasureTx::new(setting, 1500, 1);
    let t = |ms: u64| Duration::from_millis(ms);
    tx.update(t(0), t(20), 5_000_000, 1500);
    assert!(!tx.active(), "unreliable assumes no loss until told");
    for seq in 0..100 {
        tx.on_data_sent(t(1), seq, Flags::empty(), &body(seq));
    }
    assert!(tx.poll_repair(t(2), true).is_none());
    tx.on_report(&Report {
        seen: 1000,
        wire_lost: 50,
        bursts: 50,
        ..Default::default()
    });
    tx.update(t(500), t(20), 5_000_000, 1500);
    assert!(tx.active());
    assert!(
        tx.stats.ratio > 1.05 && tx.stats.ratio <= 1.5,
        "{}",
        tx.stats.ratio
    );
    assert_eq!(tx.body_reserve(), REPAIR_OVERHEAD);
    // A long clean stretch: protection falls back to nothing.
    for i in 1..=20u32 {
        tx.on_report(&Report {
            seen: 1000 + i * 2000,
            wire_lost: 50,
            bursts: 50,
            ..Default::default()
        });
        tx.update(t(500 + 200 * u64::from(i)), t(20), 5_000_000, 1500);
    }
    assert!(!tx.active(), "ratio {}", tx.stats.ratio);
    assert_eq!(tx.body_reserve(), 0);
}

#[test]
fn retransmitting_modes_repair_only_on_long_paths() {
    let setting =
        crate::error_control::ErrorControl::for_mode(aerotp_wire::Mode::HybridNackMack).erasure;
    let mut tx = ErasureTx::new(setting, 1500, 1);
    let lossy = Report {
        seen: 1000,
        wire_lost: 20,
        bursts: 20,
        ..Default::default()
    };
    tx.on_report(&lossy);
    tx.update(Duration::ZERO, Duration::from_millis(20), 5_000_000, 1500);
    assert!(!tx.active(), "a 20 ms round trip retransmits instead");
    tx.update(
        Duration::from_secs(1),
        Duration::from_secs(1),
        5_000_000,
        1500,
    );
    assert!(tx.active(), "a 1 s round trip repairs");
    assert!(tx.stats.ratio < 1.25, "{}", tx.stats.ratio);
}

#[test]
fn the_tail_is_flushed_when_the_data_pauses_and_after_the_afin() {
    let mut tx = ErasureTx::new(fixed(1.1), 1500, 3);
    let t = |ms: u64| Duration::from_millis(ms);
    tx.update(t(0), t(20), 5_000_000, 1500);
    tx.on_data_sent(t(0), 0, Flags::empty(), &body(0));
    // Protection just started: one repair at once, so the receiver knows to wait for them.
    assert!(tx.poll_repair(t(0), false).is_some());
    assert!(tx.poll_repair(t(0), false).is_none());
    tx.on_data_sent(t(0), 1, Flags::empty(), &body(1));
    // Not before half the delay bound, and not while data is waiting.
    assert!(tx.poll_repair(t(100), true).is_none());
    assert_eq!(tx.next_repair_time(), Some(t(250)));
    assert!(tx.poll_repair(t(300), false).is_none());
    assert!(tx.poll_repair(t(300), true).is_some());
    while tx.poll_repair(t(300), true).is_some() {}
    tx.on_data_sent(t(400), 2, Flags::AFIN, &body(2));
    assert_eq!(
        tx.next_repair_time(),
        Some(t(400)),
        "at once after the AFIN"
    );
    assert!(tx.poll_repair(t(400), true).is_some());
    // Sources out of order (ASYN copies, retransmissions) are not sources.
    let before = tx.stats.repairs_sent;
    tx.on_data_sent(t(500), 1, Flags::empty(), &body(1));
    assert_eq!(tx.stats.repairs_sent, before);
}

#[test]
fn a_garbage_repair_is_refused_and_counted() {
    let mut rx = ErasureRx::new(1500, 512, true);
    assert!(rx.on_repair(&[]).is_empty());
    assert!(rx
        .on_repair(&[2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9])
        .is_empty());
    let mut junk = vec![2u8, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4];
    junk.extend_from_slice(&[0, 1, 0, 0]);
    let _ = rx.on_repair(&junk);
    assert_eq!(rx.stats.repairs_received, 3);
    assert!(rx.stats.repairs_refused >= 2);
}

/// quasi-reliable starts at the assumed 1 % loss; when the first report shows 10 %, the
/// sources already in the window get the repairs they lacked at once, and a 10 % loss of
/// the first window is rebuilt whole.
#[test]
fn a_loss_learned_late_is_caught_up_for_the_window_already_sent() {
    let setting =
        crate::error_control::ErrorControl::for_mode(aerotp_wire::Mode::QuasiReliable).erasure;
    let mut tx = ErasureTx::new(setting, 1500, 3);
    // quasi-reliable repairs from the start, so its receiver records sources from the first.
    let mut rx = ErasureRx::new(1500, 512, true);
    let t = |ms: u64| Duration::from_millis(ms);
    tx.update(t(0), t(20), 5_000_000, 1500);
    assert!(tx.active(), "quasi-reliable assumes 1 % from the start");
    let low = tx.stats.ratio;
    let mut sent_repairs = Vec::new();
    let drain = |tx: &mut ErasureTx, at: u64, out: &mut Vec<Vec<u8>>| {
        while let Some(r) = tx.poll_repair(t(at), false) {
            out.push(r);
        }
    };
    // 40 sources at the weak strength; every tenth is lost.
    for seq in 0..40u64 {
        tx.on_data_sent(t(1), seq, Flags::empty(), &body(seq));
        if seq % 10 != 3 {
            rx.on_source(seq as u32, Flags::empty(), &body(seq));
        }
        drain(&mut tx, 1, &mut sent_repairs);
    }
    let before = sent_repairs.len();
    // The first report: 10 % loss.
    tx.on_report(&Report {
        seen: 40,
        wire_lost: 4,
        bursts: 4,
        ..Default::default()
    });
    tx.update(t(500), t(20), 5_000_000, 1500);
    assert!(
        tx.stats.ratio >= 2.0 * low - 1.0,
        "{} after {low}",
        tx.stats.ratio
    );
    drain(&mut tx, 500, &mut sent_repairs);
    assert!(tx.stats.catch_up_repairs > 0, "catch-up owed");
    assert!(sent_repairs.len() > before, "caught up at once");
    let mut rebuilt = Vec::new();
    for r in &sent_repairs {
        rebuilt.extend(rx.on_repair(r));
    }
    let got: Vec<u32> = rebuilt.iter().map(|r| r.seq).collect();
    for lost in [3u32, 13, 23, 33] {
        assert!(got.contains(&lost), "TPDU {lost} rebuilt: {got:?}");
    }
}

/// An outage: 120 sources in a row never arrive, at a strength whose window repairs could
/// rebuild only a few. The first report after it tells of all 120, and the repairs they lack
/// are owed at once over every source the encoder holds: each lost TPDU comes back. Without
/// the report-driven catch-up (the ratio alone) most of the outage stays lost.
#[test]
fn an_outage_reported_after_it_is_caught_up_whole() {
    let setting = ErasureSetting {
        max_delay: Duration::from_secs(3),
        ..crate::error_control::ErrorControl::for_mode(aerotp_wire::Mode::QuasiReliable).erasure
    };
    let mut tx = ErasureTx::new(setting, 1500, 9);
    let mut rx = ErasureRx::new(1500, 512, true);
    let t = |ms: u64| Duration::from_millis(ms);
    // A steady 1 % loss is what the strength was chosen for.
    tx.on_report(&Report {
        seen: 1000,
        wire_lost: 10,
        bursts: 10,
        ..Default::default()
    });
    tx.update(t(0), t(20), 5_000_000, 1500);
    assert!(tx.active(), "quasi-reliable repairs at 1 % loss");
    let per_window = tx.stats.window as f64 * (tx.stats.ratio - 1.0);
    assert!(per_window < 60.0, "{:?}", tx.stats);
    let mut repairs = Vec::new();
    let lost = 100..220u64;
    for seq in 0..300u64 {
        tx.on_data_sent(t(1), seq, Flags::empty(), &body(seq));
        let in_outage = lost.contains(&seq);
        if !in_outage {
            rx.on_source(seq as u32, Flags::empty(), &body(seq));
        }
        while let Some(r) = tx.poll_repair(t(1), false) {
            if !in_outage {
                repairs.push(r);
            }
        }
    }
    let mut rebuilt: Vec<u32> = repairs
        .iter()
        .flat_map(|r| rx.on_repair(r))
        .map(|r| r.seq)
        .collect();
    let before = tx.stats.catch_up_repairs;
    // The report after the outage: 120 more lost.
    tx.on_report(&Report {
        seen: 1300,
        wire_lost: 130,
        bursts: 11,
        ..Default::default()
    });
    assert!(tx.stats.catch_up_repairs - before >= 120, "{:?}", tx.stats);
    while let Some(r) = tx.poll_repair(t(600), false) {
        rebuilt.extend(rx.on_repair(&r).into_iter().map(|r| r.seq));
    }
    for seq in lost {
        assert!(rebuilt.contains(&(seq as u32)), "TPDU {seq} not rebuilt");
    }
    // A report with only the steady loss owes nothing more.
    let owed = tx.stats.catch_up_repairs;
    tx.on_report(&Report {
        seen: 1400,
        wire_lost: 131,
        bursts: 12,
        ..Default::default()
    });
    assert_eq!(tx.stats.catch_up_repairs, owed);
}
