//! Validation of the keys added for bursts, random outages and traces: each bad value is
//! refused by `Link::new` with the key's name, the value and what is accepted.

use std::time::Duration;

use aerotp_link::{GilbertElliott, Link, LinkConfig, RandomOutage, Trace};

fn refused(cfg: LinkConfig) -> String {
    Link::new(cfg, 1).unwrap_err().to_string()
}

fn with_burst(ge: GilbertElliott) -> LinkConfig {
    LinkConfig {
        burst: Some(ge),
        ..LinkConfig::default()
    }
}

fn with_outage(mean_up: Duration, down_min: Duration, down_max: Duration) -> LinkConfig {
    LinkConfig {
        random_outage: Some(RandomOutage {
            mean_up,
            down_min,
            down_max,
            seed: None,
        }),
        ..LinkConfig::default()
    }
}

#[test]
fn bad_values_name_the_key_and_the_range() {
    let us = Duration::from_micros;
    let timed = |g, b| GilbertElliott::timed(g, b, 1.0);
    for (cfg, needles) in [
        (
            with_burst(timed(us(0), us(10))),
            vec!["burst.good_time", "positive"],
        ),
        (
            with_burst(timed(us(10), Duration::from_nanos(500))),
            vec!["burst.bad_time", "500ns", "at least 1us"],
        ),
        (
            with_burst(GilbertElliott {
                ber_bad: Some(1.0),
                ..timed(us(10), us(10))
            }),
            vec!["burst.ber_bad", "is 1", "[0, 1)"],
        ),
        (
            with_burst(GilbertElliott {
                ber_good: Some(-0.1),
                ..timed(us(10), us(10))
            }),
            vec!["burst.ber_good", "-0.1"],
        ),
        (
            with_burst(GilbertElliott {
                good_packets: Some(0.5),
                bad_packets: Some(2.0),
                ..GilbertElliott::per_packet(0.0, 0.0, 1.0)
            }),
            vec!["burst.good_packets", "0.5", "at least 1"],
        ),
        (
            with_burst(GilbertElliott {
                good_packets: Some(5.0),
                ..GilbertElliott::per_packet(0.0, 0.0, 1.0)
            }),
            vec!["burst.bad_packets", "missing"],
        ),
        (
            with_burst(GilbertElliott {
                good_packets: Some(5.0),
                bad_packets: Some(2.0),
                ..timed(us(10), us(10))
            }),
            vec!["burst", "exactly one"],
        ),
        (
            with_outage(Duration::ZERO, us(5), us(6)),
            vec!["random_outage.mean_up", "is 0"],
        ),
        (
            with_outage(Duration::from_nanos(10), us(5), us(6)),
            vec!["random_outage.mean_up", "at least 1us"],
        ),
        (
            with_outage(us(5), Duration::from_nanos(10), us(6)),
            vec!["random_outage.down_min", "at least 1us"],
        ),
        (
            with_outage(us(5), us(7), us(6)),
            vec!["random_outage.down_min", "down_min <= down_max"],
        ),
        (
            LinkConfig {
                trace: Some(Trace::default()),
                ..LinkConfig::default()
            },
            vec!["trace", "no rows"],
        ),
    ] {
        let e = refused(cfg);
        for n in needles {
            assert!(e.contains(n), "{e:?} lacks {n:?}");
        }
    }
}

#[test]
fn smallest_accepted_periods_run() {
    // 1 us sojourns are accepted and a second of traffic over them completes.
    let cfg = LinkConfig {
        rate_bps: 1_000_000_000,
        burst: Some(GilbertElliott::timed(
            Duration::from_micros(1),
            Duration::from_micros(1),
            0.5,
        )),
        ..with_outage(
            Duration::from_micros(1),
            Duration::from_micros(1),
            Duration::from_micros(2),
        )
    };
    let mut link = Link::new(cfg, 2).unwrap();
    for k in 0..1000u64 {
        link.send(Duration::from_millis(k), vec![0; 10]);
    }
    let s = link.stats();
    assert!(s.lost_outage > 100 && s.lost_outage < 900, "{s:?}");
    assert!(s.random_outages > 100_000, "{s:?}");
}
