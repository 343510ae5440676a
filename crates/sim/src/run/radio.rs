//! A radio beside the sender that says each forward link's rate as it changes, as a DLEP
//! modem does with Current Data Rate (Transmit) (docs/dlep.md): `Scenario::radio_follows_trace`.
//! The announcements are the link's own trace rows, at their times, so the figure is the
//! engine's answer to a radio that is exactly right and on time.

use super::tap::{addr_receiver, path_addrs, tap_radio, Tap};
use crate::scenario::Scenario;
use aerotp_proto::{Endpoint, RadioSignal};
use std::net::IpAddr;
use std::time::Duration;

/// The radio's announcements, in time order, and the next one due.
#[derive(Debug, Default)]
pub(super) struct RadioFeed {
    events: Vec<(Duration, IpAddr, u64)>,
    next: usize,
}

impl RadioFeed {
    /// Each path's forward rate over the run: its trace's rows (each cycle of a repeating one,
    /// up to the scenario's cap), or its configured rate once at the start. `engine_paths`:
    /// the engine has a path per link (each announced to its own address); otherwise there
    /// is one path (the scenario's validation refuses the radio over links striped below the
    /// engine).
    pub fn new(s: &Scenario, engine_paths: bool) -> RadioFeed {
        if !s.radio_follows_trace {
            return RadioFeed::default();
        }
        let mut events = Vec::new();
        for (i, p) in s.network.paths.iter().enumerate() {
            let peer = if engine_paths {
                path_addrs(i).1.ip()
            } else {
                addr_receiver().ip()
            };
            let configured = p.forward.rate_bps;
            let Some(trace) = p.forward.trace.as_ref().filter(|t| !t.rows.is_empty()) else {
                events.push((Duration::ZERO, peer, configured));
                continue;
            };
            let period = trace.period();
            let mut start = Duration::ZERO;
            'cycles: loop {
                for row in &trace.rows {
                    let at = start + row.at;
                    if at > s.cap {
                        break 'cycles;
                    }
                    events.push((at, peer, row.rate_bps.unwrap_or(configured)));
                }
                if !trace.repeat || period.is_zero() {
                    break;
                }
                start += period;
            }
        }
        events.sort_by_key(|e| e.0);
        RadioFeed { events, next: 0 }
    }

    /// Says what is due by `now` to the sender's endpoint, then shows `tap` every change the
    /// sender's engine applied since the last call (these, and those replayed to a path
    /// added since, at the engine's time of each: `--qlog` writes them).
    pub fn apply(&mut self, now: Duration, sender: &mut Endpoint, tap: &mut Option<&mut dyn Tap>) {
        while let Some(&(at, peer, rate)) = self.events.get(self.next) {
            if at > now {
                break;
            }
            sender.radio(now, peer, RadioSignal::Rate(rate));
            self.next += 1;
        }
        tap_radio(tap, "sender", sender);
    }

    /// When the next announcement is due.
    pub fn next_at(&self) -> Option<Duration> {
        self.events.get(self.next).map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use crate::run::run_once;
    use crate::scenario::Scenario;
    use aerotp_link::{LinkConfig, Network, Trace, TraceRow};
    use aerotp_proto::RateControl;
    use std::time::Duration;

    /// A 5 Mb/s link that steps to 1 Mb/s at 2 s and back at 6 s, 150 kB of queue.
    fn steps() -> Scenario {
        let row = |s, r| TraceRow {
            at: Duration::from_secs(s),
            rate_bps: Some(r),
            ..TraceRow::default()
        };
        let link = LinkConfig {
            rate_bps: 5_000_000,
            delay: Duration::from_millis(10),
            queue_bytes: 150_000,
            trace: Some(Trace {
                file: None,
                repeat: false,
                rows: vec![row(0, 5_000_000), row(2, 1_000_000), row(6, 5_000_000)],
            }),
            ..LinkConfig::default()
        };
        Scenario {
            network: Network::single(link, None),
            size: 4_000_000,
            ..Scenario::default()
        }
    }

    #[test]
    fn a_radio_that_follows_the_link_keeps_its_queue_short() {
        for control in [RateControl::Fixed, RateControl::Discover] {
            let s = Scenario {
                rate_control: control,
                ..steps()
            };
            let blind = run_once(&s, 1);
            let told = run_once(
                &Scenario {
                    radio_follows_trace: true,
                    ..s.clone()
                },
                1,
            );
            assert!(told.complete && blind.complete, "{control:?}");
            let p99 = told.queue_delay_forward.p99();
            assert!(
                p99 < Duration::from_millis(20),
                "{control:?}: queue p99 {p99:?} with the radio"
            );
            assert_eq!(told.queue_drops_forward, 0, "{control:?}");
            // Fixed at 5 Mb/s, the blind sender fills the 150 kB queue in the 1 Mb/s phase.
            if control == RateControl::Fixed {
                assert!(blind.queue_delay_forward.p99() > Duration::from_millis(500));
            }
            assert!(told.wire_bytes_forward <= blind.wire_bytes_forward);
        }
    }

    /// Keeps the radio changes a run shows its tap.
    #[derive(Default)]
    struct Radios(Vec<(String, aerotp_proto::RadioChange)>);

    impl crate::run::tap::Tap for Radios {
        fn datagram(
            &mut self,
            _: crate::run::tap::TapPoint,
            _: Duration,
            _: std::net::SocketAddr,
            _: std::net::SocketAddr,
            _: &[u8],
        ) {
        }
        fn radio(&mut self, side: &str, change: &aerotp_proto::RadioChange) {
            self.0.push((side.to_owned(), *change));
        }
    }

    #[test]
    fn the_tap_sees_each_rate_the_radio_puts_in_force_at_its_time() {
        use aerotp_proto::{RadioSignal, RateReason};
        let s = Scenario {
            radio_follows_trace: true,
            ..steps()
        };
        let mut tap = Radios::default();
        let r = crate::run::run_once_tapped(&s, 1, &mut tap);
        assert!(r.complete);
        let said: Vec<(Duration, RadioSignal)> =
            tap.0.iter().map(|(_, c)| (c.at, c.signal)).collect();
        // The 5 Mb/s said at 0 reaches the connection when it opens (at 0 too); then the
        // trace's steps, each at its row's time.
        let rate = |b| RadioSignal::Rate(b);
        assert_eq!(
            said,
            [
                (Duration::ZERO, rate(5_000_000)),
                (Duration::from_secs(2), rate(1_000_000)),
                (Duration::from_secs(6), rate(5_000_000)),
            ],
            "{:?}",
            tap.0
        );
        for (side, c) in &tap.0 {
            assert_eq!(side, "sender");
            assert_eq!(c.path, 0, "{c:?}");
            let RadioSignal::Rate(said) = c.signal else {
                unreachable!()
            };
            assert!(c.rate_bps <= said, "{c:?}");
            // The scenario's fixed 5 Mb/s is the radio's 5 Mb/s: the radio binds below it.
            if said < 5_000_000 {
                assert_eq!(c.rate_reason, RateReason::Radio, "{c:?}");
            }
            assert_eq!(c.remote, crate::run::tap::addr_receiver(), "{c:?}");
        }
        // Without a tap the changes are taken all the same (none held to the engine's bound).
        let untapped = run_once(&s, 1);
        assert_eq!(untapped.elapsed_s, r.elapsed_s);
    }

    #[test]
    fn a_radio_is_refused_where_it_has_no_path_to_speak_to() {
        use crate::scenario::{SimMode, Striping};
        let base = Scenario {
            radio_follows_trace: true,
            ..steps()
        };
        assert!(base.validate().is_ok());
        let striped = Scenario {
            network: Network {
                paths: vec![base.network.paths[0].clone(), base.network.paths[0].clone()],
                ..base.network.clone()
            },
            striping: Striping::Below,
            ..base.clone()
        };
        let udp = Scenario {
            mode: SimMode::Udp,
            ..base.clone()
        };
        for bad in [striped, udp] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains("radio"), "{e}");
        }
    }
}
