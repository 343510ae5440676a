//! A discovered rate (docs/rate.md) through what the link does to it: an outage must not
//! leave the window shut (what the outage swallowed is resent and leaves the flight), and
//! the transfer ends with every byte.

mod harness;

use aerotp_proto::{CloseOutcome, ConnectionConfig, Mode, RateControl, RateReason};
use harness::{pattern, transfer, Impair};
use std::time::Duration;

fn discovered(mode: Mode) -> ConnectionConfig {
    ConnectionConfig {
        rate_bps: 5_000_000,
        rate_control: RateControl::Discover,
        ..ConnectionConfig::with_mode(mode)
    }
}

#[test]
fn an_outage_does_not_shut_the_window() {
    for mode in [Mode::Reliable, Mode::HybridNackMack] {
        for (start, end) in [(1u64, 26u64), (2, 4)] {
            let data = pattern(3_000_000, 5);
            let imp = Impair {
                delay: Duration::from_millis(10),
                outage: Some((Duration::from_secs(start), Duration::from_secs(end))),
                ..Impair::default()
            };
            let o = transfer(discovered(mode), &data, imp, 7, Duration::from_secs(120));
            let what = format!("{mode:?}, outage {start}-{end} s");
            assert_eq!(
                o.sender_close,
                Some(CloseOutcome::Finished { confirmed: true }),
                "{what}"
            );
            assert!(
                o.received == data,
                "{what}: {} of {} bytes",
                o.received.len(),
                data.len()
            );
            // 3 MB at the 5 Mb/s cap is 4.8 s; the outage adds its length and a probe interval.
            let took = o.last_byte_at.as_secs_f64();
            assert!(
                took < (end - start) as f64 + 8.0,
                "{what}: last byte at {took:.1} s"
            );
            let s = o.sender_stats.expect("sender stats");
            assert_eq!(s.rate_reason, RateReason::Capped, "{what}");
        }
    }
}
