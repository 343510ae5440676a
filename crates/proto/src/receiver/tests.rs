//! Unit tests of `receiver`.

use super::*;
use aerotp_wire::{Mode, OVERHEAD};

/// A receiver with the error control of `cfg`'s mode, as a connection builds it.
fn receiver(cfg: &ConnectionConfig) -> Receiver {
    Receiver::new(ErrorControl::for_mode(cfg.mode), cfg)
}

fn rx(mode: Mode) -> Receiver {
    receiver(&ConnectionConfig {
        mode,
        recv_window: 64,
        mack_count: 4,
        ack_every: 8,
        ack_delay: Some(Duration::from_millis(10)),
        crc_check: true,
        min_hole_timeout: Duration::from_millis(30),
        initial_rtt: Duration::from_millis(50),
        ..ConnectionConfig::default()
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn reorders_and_delivers_in_order() {
    let mut r = rx(Mode::Reliable);
    r.on_data(ms(0), 1, 0, Bytes::from(b"bb".to_vec()), false);
    assert!(!r.readable());
    r.on_data(ms(1), 0, 0, Bytes::from(b"aa".to_vec()), false);
    r.on_data(ms(2), 2, 0, Bytes::from(b"cc".to_vec()), true);
    let mut buf = [0u8; 16];
    let n = r.read(&mut buf);
    assert_eq!(&buf[..n], b"aabbcc");
    assert!(r.at_eof());
    assert!(
        !r.on_data(ms(3), 1, 0, Bytes::from(b"bb".to_vec()), false),
        "duplicate"
    );
}

#[test]
fn mack_after_count_in_order_and_at_once_on_a_new_gap() {
    let mut r = rx(Mode::Reliable);
    // In order: aggregated until mack_count (4) TPDUs.
    for s in [0u32, 1, 2] {
        r.on_data(ms(0), s, 0, Bytes::from(vec![1]), false);
        assert!(r.poll_feedback(ms(0)).is_none());
    }
    r.on_data(ms(0), 3, 0, Bytes::from(vec![1]), false);
    let m = r.poll_feedback(ms(0)).unwrap().mack.unwrap();
    assert_eq!((m.ack.cum, m.entries.len()), (4, 0));
    // A new gap (5 missing) is reported at once, the out-of-order arrival as a range.
    r.on_data(ms(1), 6, 0, Bytes::from(vec![1]), false);
    let m = r.poll_feedback(ms(1)).unwrap().mack.unwrap();
    assert_eq!(m.ack.cum, 4);
    assert_eq!(m.ranges, vec![(6, 7)]);
    assert!(
        m.entries.is_empty(),
        "an entry inside a range is not repeated"
    );
    // Filling in behind the gap is not a new gap: aggregated again.
    r.on_data(ms(2), 7, 0, Bytes::from(vec![1]), false);
    assert!(r.poll_feedback(ms(2)).is_none());
    assert!(m.max_delay > 0);
}

#[test]
fn mack_timer_flushes_partial_aggregate() {
    let mut r = rx(Mode::HybridNackMack);
    r.on_data(ms(0), 0, 0, Bytes::from(vec![1]), false);
    assert!(r.poll_feedback(ms(5)).is_none());
    assert_eq!(r.feedback_deadline(), Some(ms(10)));
    assert!(r.poll_feedback(ms(10)).unwrap().mack.is_some());
}

#[test]
fn corrupted_tpdu_is_nacked_in_nack_modes_only() {
    let mut r = rx(Mode::HybridNack);
    r.on_corrupted(ms(0), 3, 0, Bytes::from(vec![]), false);
    assert_eq!(r.poll_feedback(ms(0)).unwrap().nack.unwrap().seqs, vec![3]);
    let mut q = rx(Mode::QuasiReliable);
    q.on_corrupted(ms(0), 3, 0, Bytes::from(vec![]), false);
    assert!(q.poll_feedback(ms(0)).is_none());
}

#[test]
fn near_reliable_snacks_gaps_as_ranges() {
    let mut r = rx(Mode::NearReliable);
    r.on_data(ms(0), 0, 0, Bytes::from(vec![1]), false);
    r.on_data(ms(0), 3, 0, Bytes::from(vec![1]), false);
    r.on_data(ms(0), 6, 0, Bytes::from(vec![1]), false);
    let fb = r.poll_feedback(ms(0)).unwrap();
    assert_eq!(fb.snack.unwrap().ranges, vec![(1, 3), (4, 6)]);
}

#[test]
fn lossy_mode_skips_holes_after_timeout_and_counts_them() {
    let mut r = rx(Mode::QuasiReliable);
    r.on_data(ms(0), 0, 0, Bytes::from(b"a".to_vec()), false);
    r.on_data(ms(1), 3, 0, Bytes::from(b"d".to_vec()), false);
    assert_eq!(r.hole_deadline(), Some(ms(31)));
    r.on_hole_timeout(ms(20));
    assert_eq!(r.stats.tpdus_lost, 0);
    r.on_hole_timeout(ms(31));
    assert_eq!(r.stats.tpdus_lost, 2);
    let mut buf = [0u8; 4];
    let n = r.read(&mut buf);
    assert_eq!(&buf[..n], b"ad");
}

#[test]
fn reliable_mode_never_skips() {
    let mut r = rx(Mode::Reliable);
    r.on_data(ms(0), 2, 0, Bytes::from(b"c".to_vec()), false);
    assert_eq!(r.hole_deadline(), None);
    r.on_hole_timeout(ms(10_000));
    assert!(!r.readable());
}

#[test]
fn a_full_aggregate_is_split_to_fit_the_mtu() {
    let mut r = receiver(&ConnectionConfig {
        mode: Mode::Reliable,
        recv_window: 1024,
        mack_count: 365,
        ack_delay: Some(Duration::from_millis(10)),
        ..ConnectionConfig::default()
    });
    // 365 out-of-order arrivals, every other TPDU missing: 365 blocks of one.
    for s in (1..=729u32).step_by(2) {
        r.on_data(ms(0), s, 1, Bytes::from(vec![1]), false);
    }
    let first = r.poll_feedback(ms(0)).unwrap().mack.unwrap();
    // The first, nearly MTU-sized, used the budget's burst: the rest waits for it.
    let at = r.feedback_deadline().unwrap();
    assert!(at > ms(0));
    assert!(r.poll_feedback(at - Duration::from_micros(1)).is_none());
    let second = r.poll_feedback(at).unwrap().mack.unwrap();
    // The newest blocks as ranges in both, the other arrivals as entries once.
    assert_eq!(first.ranges.len(), MAX_MACK_RANGES);
    assert_eq!(first.ranges[0], (729, 730));
    assert_eq!(second.ranges, first.ranges);
    let mut seen: Vec<u32> = first
        .entries
        .iter()
        .chain(&second.entries)
        .copied()
        .collect();
    seen.extend(first.ranges.iter().map(|r| r.0));
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (1..=729u32).step_by(2).collect::<Vec<_>>());
    let mut out = Vec::new();
    ControlBody {
        mack: Some(first),
        ..Default::default()
    }
    .emit(&mut out)
    .unwrap();
    assert!(OVERHEAD + out.len() + 12 <= 1500, "{}", out.len());
}

#[test]
fn ranges_survive_a_lost_mack() {
    let mut r = rx(Mode::Reliable);
    r.on_data(ms(0), 0, 0, Bytes::from(vec![1]), false);
    r.on_data(ms(0), 2, 0, Bytes::from(vec![1]), false);
    r.on_data(ms(0), 3, 0, Bytes::from(vec![1]), false);
    let lost = r.poll_feedback(ms(0)).unwrap().mack.unwrap();
    assert_eq!(lost.ranges, vec![(2, 4)]);
    // That MACK is lost; the next (after a later arrival) still reports 2 and 3.
    r.on_data(ms(20), 5, 0, Bytes::from(vec![1]), false);
    let next = r.poll_feedback(ms(20)).unwrap().mack.unwrap();
    assert_eq!(next.ack.cum, 1);
    assert_eq!(next.ranges, vec![(5, 6), (2, 4)]);
}

#[test]
fn sparse_traffic_is_acknowledged_at_once() {
    // No fixed ack delay: a TPDU every 100 ms has no aggregate to wait for.
    let mut r = receiver(&ConnectionConfig::default());
    for i in 0..20u32 {
        let t = ms(100 * u64::from(i));
        r.on_data(t, i, 0, Bytes::from(vec![1; 100]), false);
        assert_eq!(r.feedback_deadline(), Some(t), "TPDU {i}");
        assert!(r.poll_feedback(t).unwrap().mack.is_some());
    }
}

#[test]
fn feedback_is_held_to_its_share_of_a_thin_return_link() {
    // 5 Mb/s forward, 10 kb/s back, 10 %: about 1 kb/s of feedback. A TPDU every 2.4 ms
    // with a gap every tenth (each gap asks for a MACK at once) for 20 s.
    let mut r = receiver(&ConnectionConfig {
        return_rate_bps: Some(10_000),
        ..ConnectionConfig::default()
    });
    let mut bytes = 0usize;
    let mut sent = 0u32;
    let mut seq = 0u32;
    let step = Duration::from_micros(2400);
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(20) {
        seq += if seq % 10 == 9 { 2 } else { 1 };
        r.on_data(now, seq, 0, Bytes::from(vec![1; 1400]), false);
        if r.feedback_deadline().is_some_and(|d| d <= now) {
            let fb = r.poll_feedback(now).expect("a deadline that has come acts");
            let mut out = Vec::new();
            fb.emit(&mut out).unwrap();
            bytes += out.len() + OVERHEAD + 28;
            sent += 1;
        }
        now += step;
    }
    // The share, plus the bucket's burst (300 B) and one TPDU sent on credit (< 400 B).
    let bps = bytes as f64 * 8.0 / 20.0;
    assert!(
        bps <= 1000.0 + (300.0 + 400.0) * 8.0 / 20.0,
        "{bps} b/s of feedback"
    );
    assert!(sent >= 10, "{sent} feedback TPDUs");
    // The hold the MACKs report covers the spacing, so the sender's timeout does too.
    assert!(r.max_delay_ms() >= 500, "{}", r.max_delay_ms());
}

#[test]
fn beyond_window_is_refused() {
    let mut r = rx(Mode::Reliable);
    assert!(!r.on_data(ms(0), 64, 0, Bytes::from(vec![1]), false));
    assert_eq!(r.stats.tpdus_beyond_window, 1);
}

#[test]
fn out_of_order_bytes_are_bounded_per_connection_and_per_endpoint() {
    // Each 1000-byte body costs 1064 bytes (body and bookkeeping).
    let cost = tpdu_cost(1_000);
    let cfg = ConnectionConfig {
        mode: Mode::Reliable,
        recv_window: 1024,
        reorder_bytes: 3 * cost + 100,
        ..ConnectionConfig::default()
    };
    let shared = ReorderBudget::new(5 * cost + 100);
    let (mut a, mut b) = (receiver(&cfg), receiver(&cfg));
    a.set_reorder_budget(shared.clone());
    b.set_reorder_budget(shared.clone());
    let body = || vec![7u8; 1_000];
    // Connection a: three bodies past a hole fit its bound, the fourth does not.
    for seq in 1..=4 {
        a.on_data(ms(seq.into()), seq, 0, Bytes::from(body()), false);
    }
    assert_eq!(a.held_bytes(), 3 * cost);
    assert_eq!(a.stats.tpdus_dropped_memory, 1);
    // Connection b: the endpoint has room for two more.
    for seq in 1..=3 {
        b.on_data(ms(seq.into()), seq, 0, Bytes::from(body()), false);
    }
    assert_eq!(b.held_bytes(), 2 * cost);
    assert_eq!(b.stats.tpdus_dropped_memory, 1);
    assert_eq!(shared.used(), 5 * cost);
    // The awaited TPDU fits while the application has read everything (the endpoint's bound
    // overshot by that one TPDU at most); what it unblocks moves to the unread queue, still
    // charged until the application reads it.
    assert!(a.on_data(ms(10), 0, 0, Bytes::from(body()), false));
    assert_eq!(a.held_bytes(), 0);
    assert_eq!(a.charged_bytes(), 4 * cost);
    assert_eq!(shared.used(), 6 * cost);
    let mut buf = vec![0u8; 10_000];
    assert_eq!(
        a.read(&mut buf),
        4_000,
        "TPDUs 0-3 delivered; 4 was dropped, not delivered"
    );
    assert_eq!(shared.used(), 2 * cost);
    // The dropped TPDU, resent, is taken now that there is room.
    assert!(a.on_data(ms(11), 4, 0, Bytes::from(body()), false));
    // Data in order that the application does not read counts too: the connection's bound
    // stops it (7 in order, 8 behind it).
    for seq in 5..=8 {
        a.on_data(ms(seq.into()), seq, 0, Bytes::from(body()), false);
    }
    assert_eq!(a.charged_bytes(), 3 * cost);
    assert_eq!(a.ready_bytes(), 3_000);
    assert_eq!(a.stats.tpdus_dropped_memory, 3);
    // Reading part of a chunk gives back its bytes; the whole chunk, its bookkeeping too.
    assert_eq!(a.read(&mut buf[..500]), 500);
    assert_eq!(a.charged_bytes(), 3 * cost - 500);
    assert_eq!(shared.used(), 2 * cost + 3 * cost - 500);
    assert_eq!(a.read(&mut buf[..500]), 500);
    assert_eq!(a.charged_bytes(), 2 * cost);
    // A released connection gives its bytes back, out of order and unread alike.
    drop(b);
    assert_eq!(shared.used(), 2 * cost);
    drop(a);
    assert_eq!(shared.used(), 0);
}

/// Connections whose peers' addresses are unproven hold together at most the endpoint's pool
/// for them, in order and unread or out of order, each also within its own bound; once
/// proven, a connection gives its share of the pool back and holds to its own bound.
#[test]
fn unproven_connections_share_a_bounded_pool() {
    let cfg = ConnectionConfig {
        mode: Mode::Reliable,
        recv_window: 4096,
        ..ConnectionConfig::default()
    };
    let pool = 1 << 20;
    let shared = ReorderBudget::with_unproven(64 << 20, pool);
    let (mut a, mut b) = (receiver(&cfg), receiver(&cfg));
    for r in [&mut a, &mut b] {
        r.set_reorder_budget(shared.clone());
        r.set_unproven(true);
    }
    // Each sends the pool's worth twice over: together they fill it, and no more.
    let n = 2 * pool / 1400;
    for seq in 0..n as u32 {
        for r in [&mut a, &mut b] {
            r.on_data(ms(1), seq, 0, Bytes::from(vec![1u8; 1400]), false);
        }
        assert!(shared.unproven().used() <= pool + tpdu_cost(1400), "{seq}");
    }
    let held = a.charged_bytes() + b.charged_bytes();
    assert!(held > pool - tpdu_cost(1400), "the pool filled: {held}");
    assert!(held <= pool + tpdu_cost(1400), "{held}");
    assert!(a.stats.tpdus_dropped_memory + b.stats.tpdus_dropped_memory > n as u64);
    // Proven: its share goes back, and it takes what its own bound allows again.
    let a_held = a.charged_bytes();
    a.set_unproven(false);
    assert_eq!(shared.unproven().used(), b.charged_bytes());
    for seq in n as u32..n as u32 + 100 {
        assert!(a.on_data(ms(2), seq, 0, Bytes::from(vec![1u8; 1400]), false));
    }
    assert_eq!(a.charged_bytes(), a_held + 100 * tpdu_cost(1400));
    // Released unproven: its share goes back too.
    drop(b);
    assert_eq!(shared.unproven().used(), 0);
}

/// A body that is a slice of a shared receive buffer stays one only when delivered at once
/// to an application that keeps up on a proven connection; otherwise it is copied out.
#[test]
fn a_shared_body_held_for_long_is_copied_out_of_its_buffer() {
    let buffer = Bytes::from(vec![9u8; 65_536]);
    let inside = |b: &Bytes| {
        let p = b.as_ptr() as usize;
        let q = buffer.as_ptr() as usize;
        p >= q && p < q + buffer.len()
    };
    let mut r = rx(Mode::Reliable);
    let body = || buffer.slice(1000..2400);
    assert!(
        inside(&r.resident(0, body(), true)),
        "in order: kept as a slice"
    );
    assert!(
        !inside(&r.resident(1, body(), true)),
        "out of order: copied"
    );
    assert!(
        inside(&r.resident(0, body(), false)),
        "not shared: left alone"
    );
    r.set_unproven(true);
    assert!(!inside(&r.resident(0, body(), true)), "unproven: copied");
    r.set_unproven(false);
    // An application that lags: beyond SLICE_UNREAD_BYTES unread, copies.
    let mut seq = 0u32;
    while r.unread_bytes() < super::memory::SLICE_UNREAD_BYTES {
        let b = r.resident(seq, body(), true);
        assert!(inside(&b));
        r.on_data(ms(1), seq, 0, b, false);
        seq += 1;
    }
    assert!(!inside(&r.resident(seq, body(), true)));
}

/// A long gap in the stream (an outage) is reported at once; a short one waits for the
/// report interval. A sender repairing across TPDUs owes catch-up repairs for the gap, and
/// the data it sends while the report waits pushes the lost TPDUs out of its encoder.
#[test]
fn a_long_gap_is_reported_at_once_a_short_one_at_the_interval() {
    let mut r = rx(Mode::QuasiReliable);
    r.want_reports();
    for seq in 0..3u32 {
        r.on_quality(12_000, Quality::Clean, 0);
        r.on_data(ms(u64::from(seq)), seq, 0, Bytes::from(vec![1; 100]), false);
    }
    // The first report goes out on its own timer (50 ms after data starts).
    let first = r.poll_feedback(ms(60)).and_then(|b| b.report);
    assert!(first.is_some(), "the first report");
    // A short gap (seq 3..=5 missing): nothing before the interval.
    r.on_quality(12_000, Quality::Clean, 0);
    r.on_data(ms(61), 6, 0, Bytes::from(vec![1; 100]), false);
    assert!(
        r.poll_feedback(ms(62)).and_then(|b| b.report).is_none(),
        "a gap of 3 waits for the interval"
    );
    // A long gap (7..=30 missing, 24 TPDUs): reported at the arrival that shows it.
    r.on_quality(12_000, Quality::Clean, 0);
    r.on_data(ms(63), 31, 0, Bytes::from(vec![1; 100]), false);
    assert_eq!(r.feedback_deadline(), Some(ms(63)), "due at once");
    let report = r.poll_feedback(ms(63)).and_then(|b| b.report);
    assert!(report.is_some_and(|rep| rep.wire_lost >= 27), "{report:?}");
}

/// The connection hands the receiver what it learns of a datagram and reads the counters:
/// corrections counted, the bit error rate measured, the link loss and held bytes filled in.
#[test]
fn the_counters_are_written_by_the_receiver_and_read_whole() {
    let mut r = rx(Mode::Reliable);
    r.on_quality(12_000, Quality::Clean, 0);
    r.on_quality(
        12_000,
        Quality::Corrected {
            bits: 5,
            symbols: 3,
        },
        16,
    );
    r.on_oversized();
    assert!(r.measured_ber() > 0.0);
    r.record_trace();
    r.on_data(ms(0), 0, 0, Bytes::from(vec![1; 10]), false);
    // 1 and 2 lost on the link; 3 waits in the reorder buffer.
    r.on_data(ms(1), 3, 0, Bytes::from(vec![1; 10]), false);
    let s = r.stats();
    assert_eq!(
        (s.tpdus_corrected, s.bits_corrected, s.tpdus_oversized),
        (1, 5, 1)
    );
    assert_eq!((s.tpdus_received, r.tpdus_received()), (2, 2));
    assert_eq!((s.wire_lost, s.wire_bursts), (2, 1));
    assert_eq!(s.reorder_bytes_held, r.held_bytes() as u64);
    assert!(s.reorder_bytes_held > 0);
    assert_eq!(r.trace(), Some(&[(0, ms(0), 10)][..]));
}
