//! Unit tests of the route tables: the rate meter, eviction, and incarnations.

use super::*;
use crate::erasure::ErasureMode;

fn key(port: u16) -> RouteKey {
    (SocketAddr::from(([10, 0, 0, 1], 4000)), port, 9)
}

fn route(port: u16) -> DatagramRoute {
    DatagramRoute {
        erasure: Some(ErasureSetting {
            mode: ErasureMode::Ratio(1.5),
            ..ErasureSetting::OFF
        }),
        ..DatagramRoute::plain(key(port).0, port, 9, 0, 1400)
    }
}

#[test]
fn the_meter_reports_the_route_s_rate_on_a_coarse_grid() {
    let mut m = RateMeter::new();
    assert_eq!(m.rate_bps(), 1 << 20, "1 Mb/s assumed, on the grid");
    // 1000 bytes every 10 ms: 800 kb/s.
    for i in 0..100u64 {
        m.on_send(Duration::from_millis(10 * i), 1000);
    }
    let r = m.rate_bps() as f64;
    assert!((800e3 / 1.2..800e3 * 1.2).contains(&r), "{r}");
    assert_eq!(m.mean_len(), 1000);
    // Jitter of a few per cent leaves the reported rate where it was.
    let before = m.rate_bps();
    for i in 100..130u64 {
        m.on_send(
            Duration::from_millis(10 * i + i % 2),
            1000 + (i % 3) as usize * 10,
        );
    }
    assert_eq!(m.rate_bps(), before);
}

#[test]
fn the_least_recently_used_sending_route_is_forgotten_first() {
    let mut s = SendRoutes::new(1, 2);
    for (t, port) in [(0u64, 1u16), (1, 2)] {
        s.open(key(port), 1, 7, &route(port));
        s.on_sent(Duration::from_millis(t), &key(port), &route(port), b"x");
    }
    // Route 1 used again: route 2 is now the oldest.
    s.on_sent(Duration::from_millis(5), &key(1), &route(1), b"y");
    s.open(key(3), 1, 7, &route(3));
    let open = |p: u16| s.is_open_as(&key(p), &route(p));
    assert!(open(1) && open(3) && !open(2));
    assert_eq!(
        s.number(&key(1)),
        Some((1, 2)),
        "route 1 kept its numbering"
    );
}

#[test]
fn a_restart_under_the_same_tag_far_behind_starts_over() {
    let mut r = RecvRoutes::new(1, 4, 1500);
    // Sources up to 2000 under tag 5.
    for seq in 1500..2000u32 {
        assert!(r
            .on_source(Duration::ZERO, key(1), 5, seq, b"old")
            .is_some());
    }
    // Within the window, a copy is a copy.
    assert!(r
        .on_source(Duration::ZERO, key(1), 5, 1999, b"old")
        .is_none());
    // The sender starts again at 0 under the same tag: not a copy, and the route starts over
    // (so 0 is now known and its copy is one).
    assert!(r.on_source(Duration::ZERO, key(1), 5, 0, b"new").is_some());
    assert!(r.on_source(Duration::ZERO, key(1), 5, 0, b"new").is_none());
    assert!(r.on_source(Duration::ZERO, key(1), 5, 1, b"new").is_some());
}

#[test]
fn a_new_tag_forgets_the_old_incarnation() {
    let mut r = RecvRoutes::new(1, 4, 1500);
    assert!(r.on_source(Duration::ZERO, key(1), 5, 10, b"a").is_some());
    assert!(r.on_source(Duration::ZERO, key(1), 5, 10, b"a").is_none());
    assert!(r.on_source(Duration::ZERO, key(1), 6, 10, b"b").is_some());
    assert_eq!(r.len(), 1);
}

#[test]
fn large_mtus_shrink_the_route_limit_to_the_byte_budget() {
    let small = RecvRoutes::new(1, 32, 1500);
    let big = RecvRoutes::new(1, 32, 65_507);
    let per_big = ErasureRx::worst_case_bytes(65_507, ErasureSetting::OFF.max_window);
    assert_eq!(
        small.limit(),
        32.min(RECEIVE_ROUTES_BYTES / ErasureRx::worst_case_bytes(1500, 512))
    );
    assert!(big.limit() >= 1 && big.limit() * per_big <= RECEIVE_ROUTES_BYTES.max(per_big));
    assert!(big.limit() < small.limit());
}
