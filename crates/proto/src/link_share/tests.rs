//! Unit tests of `link_share`: the allocation rules and the periodic state.

use super::*;
use TrafficClass::{Bulk, Control, Telemetry};

fn busy(class: TrafficClass) -> Demand {
    Demand {
        class,
        busy: true,
        usage_bps: 0.0,
    }
}

fn idle(class: TrafficClass, usage_bps: f64) -> Demand {
    Demand {
        class,
        busy: false,
        usage_bps,
    }
}

const WEIGHTED: SharePolicy = SharePolicy::Weighted { weights: [8, 4, 1] };

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn classes_parse_and_number() {
    for c in TrafficClass::ALL {
        assert_eq!(c.name().parse::<TrafficClass>(), Ok(c));
        assert_eq!(TrafficClass::from_u8(c as u8), Some(c));
    }
    assert_eq!(TrafficClass::from_u8(3), None);
    let e = "Bulk".parse::<TrafficClass>().unwrap_err();
    assert!(e.contains("control, telemetry or bulk"), "{e}");
    assert_eq!(TrafficClass::default(), Bulk);
}

#[test]
fn config_validation_names_the_bad_value() {
    let ok = LinkShareConfig {
        rate_bps: 5_000_000,
        policy: SharePolicy::default(),
    };
    assert!(ok.validate().is_ok());
    let slow = LinkShareConfig { rate_bps: 10, ..ok };
    assert!(slow.check().unwrap_err().contains("at least 1000"));
    let floor = LinkShareConfig {
        policy: SharePolicy::Strict { floor: 0.7 },
        ..ok
    };
    assert!(floor.check().unwrap_err().contains("[0, 0.5)"));
    let nan = LinkShareConfig {
        policy: SharePolicy::Strict { floor: f64::NAN },
        ..ok
    };
    assert!(nan.validate().is_err());
    let zero = LinkShareConfig {
        policy: SharePolicy::Weighted { weights: [1, 0, 1] },
        ..ok
    };
    assert!(zero.check().unwrap_err().contains("positive weight"));
}

#[test]
fn shares_follow_the_policy() {
    let busy2 = [Control, Bulk];
    assert_eq!(
        share(9_000_000, WEIGHTED, Control, &busy2, false),
        8_000_000
    );
    assert_eq!(share(9_000_000, WEIGHTED, Bulk, &busy2, false), 1_000_000);
    // Alone, a connection gets the whole link.
    assert_eq!(share(9_000_000, WEIGHTED, Bulk, &[], true), 9_000_000);
    let strict = SharePolicy::Strict { floor: 0.01 };
    // The floor is the lower class's, split among its connections.
    let busy3 = [Telemetry, Bulk, Bulk];
    assert_eq!(
        share(10_000_000, strict, Telemetry, &busy3, false),
        9_900_000
    );
    assert_eq!(share(10_000_000, strict, Bulk, &busy3, false), 50_000);
    let two_bulk = [Bulk, Bulk];
    assert_eq!(share(10_000_000, strict, Bulk, &two_bulk, false), 5_000_000);
}

/// Fifty bulk connections are one class: together they get the bulk class's weight or floor,
/// and a control connection keeps the control class's part (per connection, the fifty took
/// the whole link under strict priority and left control 1 kb/s).
#[test]
fn many_connections_of_a_class_share_its_part() {
    let mut busy = vec![Bulk; 50];
    busy.push(Control);
    let w = |c| share(9_000_000, WEIGHTED, c, &busy, false);
    assert_eq!((w(Control), w(Bulk)), (8_000_000, 20_000));
    let strict = SharePolicy::Strict { floor: 0.02 };
    let s = |c| share(5_000_000, strict, c, &busy, false);
    assert_eq!((s(Control), s(Bulk)), (4_900_000, 2_000));
    // An idle control connection is paced as if it were busy beside the fifty: its part.
    assert_eq!(
        share(5_000_000, strict, Control, &busy[..50], true),
        4_900_000
    );
    // 950 idle telemetry connections beside them: each its class's part split 951 ways.
    let t = share(5_000_000, strict, Telemetry, &busy[..50], true);
    assert_eq!(t, 4_900_000);
    let mut many = busy[..50].to_vec();
    many.extend(std::iter::repeat_n(Telemetry, 950));
    assert_eq!(
        share(5_000_000, strict, Telemetry, &many, true),
        4_900_000 / 951
    );
    // Every part together never exceeds the link.
    let sum: u64 = many
        .iter()
        .map(|&c| share(5_000_000, strict, c, &many, false))
        .sum();
    assert!(sum <= 5_000_000, "{sum}");
}

#[test]
fn busy_connections_alone_share_the_whole_link() {
    let d = [busy(Control), busy(Bulk)];
    assert_eq!(
        allocate(9_000_000, WEIGHTED, &d, 0.0).0,
        vec![8_000_000, 1_000_000]
    );
    // Idle connections that send nothing reserve nothing, and may burst at their busy share.
    let d = [busy(Bulk), idle(Telemetry, 0.0)];
    assert_eq!(
        allocate(10_000_000, WEIGHTED, &d, 0.0).0,
        vec![10_000_000, 8_000_000]
    );
}

#[test]
fn what_an_idle_connection_sends_is_kept_from_the_busy_ones() {
    // Telemetry fed at 2 Mb/s (never backlogged) next to a saturating bulk connection: bulk
    // gets the link less 1.25 x 2 Mb/s, so the two together do not exceed the link.
    let d = [busy(Bulk), idle(Telemetry, 2_000_000.0)];
    let r = allocate(10_000_000, WEIGHTED, &d, 0.0).0;
    assert_eq!(r, vec![7_500_000, 8_000_000]);
    assert!(r[0] as f64 + 2_000_000.0 <= 10_000_000.0);
    // The same under strict priority, the idle connection being the higher class.
    let strict = SharePolicy::Strict { floor: 0.02 };
    let r = allocate(10_000_000, strict, &d, 0.0).0;
    assert_eq!(r[0], 7_500_000);
    // An idle lower-class connection reserves at most what it could get (the floor).
    let d = [busy(Control), idle(Bulk, 3_000_000.0)];
    let r = allocate(10_000_000, strict, &d, 0.0).0;
    assert_eq!(r, vec![9_800_000, 200_000]);
}

#[test]
fn datagram_mode_traffic_is_kept_from_the_busy_connections() {
    let d = [busy(Control), busy(Bulk)];
    let strict = SharePolicy::Strict { floor: 0.01 };
    // 0.8 Mb/s of datagrams: 1 Mb/s kept; control gets the rest less bulk's floor (1 % of
    // what is left).
    assert_eq!(
        allocate(10_000_000, strict, &d, 800_000.0).0,
        vec![8_910_000, 90_000]
    );
    // The same through the periodic state: 5,000 bytes in a 50 ms period is 0.8 Mb/s.
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 10_000_000,
        policy: strict,
    });
    assert_eq!(s.deadline(), None, "nothing to share yet");
    s.add(ms(0), 1, Control, 0);
    s.add(ms(0), 2, Bulk, 0);
    s.count_datagram(5_000);
    assert_eq!(
        s.deadline(),
        Some(SHARE_PERIOD),
        "already ticking for the connections"
    );
    let busy = |h| {
        Some(Observed {
            class: if h == 1 { Control } else { Bulk },
            wire_bytes: 0,
            busy: true,
        })
    };
    let changed = s.tick(ms(50), busy);
    assert_eq!(changed, vec![(1, 8_910_000), (2, 90_000)]);
    assert_eq!(s.unpaced_usage_bps, 800_000.0);
}

#[test]
fn datagram_traffic_is_capped_at_its_class_share() {
    let strict = SharePolicy::Strict { floor: 0.02 };
    // A busy control connection: lower classes get the floor; control datagrams share with it.
    assert_eq!(
        class_shares(10_000_000, strict, &[Control]),
        [5_000_000, 200_000, 200_000]
    );
    assert_eq!(
        class_shares(9_000_000, WEIGHTED, &[Bulk]),
        [8_000_000, 7_200_000, 4_500_000]
    );
    // An idle telemetry connection sending 2 Mb/s: datagram traffic shares what it leaves.
    let d = [idle(Telemetry, 2_000_000.0)];
    assert_eq!(
        allocate(10_000_000, WEIGHTED, &d, 0.0).1,
        [7_500_000; 3],
        "nothing busy: datagrams may use the link less the reservation"
    );
    let d = [busy(Bulk), idle(Telemetry, 2_000_000.0)];
    assert_eq!(
        allocate(10_000_000, strict, &d, 0.0).1,
        [7_350_000, 7_350_000, 3_750_000]
    );
    // Nothing busy: any class may use the whole link; that is where a share starts.
    assert_eq!(class_shares(9_000_000, WEIGHTED, &[]), [9_000_000; 3]);
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 10_000_000,
        policy: strict,
    });
    assert_eq!(s.datagram_rate(Bulk), 10_000_000);
    s.count_datagram(100);
    assert_eq!(
        s.deadline(),
        Some(Duration::ZERO),
        "idle until now: starts at once"
    );
    s.tick(ms(0), |_| None);
    assert_eq!(s.deadline(), Some(ms(50)));
    s.tick(ms(50), |_| None);
    assert_eq!(s.datagram_rate(Bulk), 10_000_000);
}

#[test]
fn idle_reservations_never_starve_the_busy_connections() {
    let d = [
        busy(Bulk),
        idle(Control, 9_000_000.0),
        idle(Telemetry, 9_000_000.0),
    ];
    let r = allocate(10_000_000, WEIGHTED, &d, 0.0).0;
    assert_eq!(r[0], 1_000_000, "{r:?}");
}

#[test]
fn usage_rises_at_once_and_decays_over_periods() {
    assert_eq!(next_usage(1_000.0, 5_000.0), 5_000.0);
    let mut u = 5_000_000.0;
    let mut periods = 0;
    while u > 50_000.0 {
        u = next_usage(u, 0.0);
        periods += 1;
    }
    // 0.8^n < 1 %: 21 periods of 50 ms, about a second.
    assert_eq!(periods, 21);
    assert!(next_usage(u, 0.0) < u);
}

#[test]
fn a_new_connection_starts_at_its_busy_share_and_yields_when_a_higher_class_is_busy() {
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 9_000_000,
        policy: WEIGHTED,
    });
    assert_eq!(s.add(ms(0), 7, Bulk, 0), 9_000_000, "alone: the whole link");
    // Bulk is busy at the first recomputation; a control connection then opens.
    // Handle 8's class as its connection holds it.
    let class_of_8 = std::cell::Cell::new(Control);
    let class = |h| if h == 7 { Bulk } else { class_of_8.get() };
    let observe = |h| {
        Some(Observed {
            class: class(h),
            wire_bytes: 0,
            busy: h == 7,
        })
    };
    assert!(
        s.tick(ms(50), observe).is_empty(),
        "alone and busy: no change"
    );
    assert_eq!(s.add(ms(60), 8, Control, 0), 8_000_000);
    // Both busy: 8:1.
    let both = |h| {
        Some(Observed {
            class: class(h),
            wire_bytes: 0,
            busy: true,
        })
    };
    assert_eq!(s.tick(ms(100), both), vec![(7, 1_000_000)]);
    // Control goes quiet (sent nothing): bulk has the link again.
    assert_eq!(s.tick(ms(150), observe), vec![(7, 9_000_000)]);
    // A class change is taken at the next recomputation.
    class_of_8.set(Bulk);
    assert_eq!(s.tick(ms(200), both), vec![(7, 4_500_000), (8, 4_500_000)]);
}

/// A link slower than the configured rate: the classes share what the connections
/// discovered (with room to probe above it), so control keeps its part of the link that
/// is there; the configured rate stays a cap.
#[test]
fn the_classes_share_the_discovered_rate_under_the_configured_one() {
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 9_000_000,
        policy: WEIGHTED,
    });
    s.add(ms(0), 7, Bulk, 0);
    s.add(ms(0), 8, Control, 0);
    let both = |h| {
        Some(Observed {
            class: if h == 7 { Bulk } else { Control },
            wire_bytes: 0,
            busy: true,
        })
    };
    s.tick(ms(50), both);
    assert_eq!(s.total(), 9_000_000);
    // The connections found a 1.8 Mb/s link: 2.25 Mb/s shared 8:1.
    s.set_discovered(Some(1_800_000));
    assert_eq!(s.total(), 2_250_000);
    assert_eq!(s.tick(ms(100), both), vec![(7, 250_000), (8, 2_000_000)]);
    assert_eq!(s.connections_rate(), 2_250_000);
    // Faster than the configured rate: the configured rate caps it; none measured: the
    // configured rate again.
    s.set_discovered(Some(20_000_000));
    assert_eq!(s.total(), 9_000_000);
    s.set_discovered(None);
    assert_eq!(s.total(), 9_000_000);
    s.set_discovered(Some(0));
    assert_eq!(s.total(), 9_000_000);
}

#[test]
fn the_deadline_is_acted_on_and_stops_when_nothing_is_left() {
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 1_000_000,
        policy: WEIGHTED,
    });
    s.add(ms(5), 1, Telemetry, 0);
    assert_eq!(s.deadline(), Some(ms(55)));
    assert!(s.tick(ms(54), |_| None).is_empty());
    assert_eq!(s.deadline(), Some(ms(55)), "not yet due: nothing done");
    s.tick(ms(55), |_| None);
    assert_eq!(s.deadline(), Some(ms(105)));
    s.remove(1);
    s.tick(ms(105), |_| None);
    assert_eq!(
        s.deadline(),
        None,
        "no connection, no datagram traffic: no timer"
    );
    // Datagram traffic keeps the timer until its usage has decayed away.
    s.count_datagram(1_000);
    s.tick(ms(200), |_| None);
    let mut ticks = 0;
    while let Some(t) = s.deadline() {
        s.tick(t, |_| None);
        ticks += 1;
        assert!(ticks < 200, "the timer never stops");
    }
    assert!(ticks > 10, "usage decays over periods, {ticks}");
}

#[test]
fn the_link_is_occupied_at_the_connections_rate_with_at_most_a_burst_of_credit() {
    let mut s = LinkShare::new(LinkShareConfig {
        rate_bps: 1_000_000,
        policy: SharePolicy::default(),
    });
    assert_eq!(s.link_free(), Duration::ZERO);
    // 125,000 bytes at 1 Mb/s: a second on the link.
    s.occupy(ms(0), 125_000);
    assert_eq!(s.link_free(), ms(1000));
    s.occupy(ms(0), 125_000);
    assert_eq!(s.link_free(), ms(2000), "back to back after the first");
    // Idle for eight seconds: only LINK_BURST of credit is kept.
    s.occupy(ms(10_000), 125_000);
    assert_eq!(s.link_free(), ms(11_000) - LINK_BURST);
}
