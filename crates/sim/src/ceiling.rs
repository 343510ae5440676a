//! The goodput ceiling of a scenario's network: what its forward links can carry in
//! application bytes, the yardstick `goodput_bps` is read against (docs/simulator.md).

use std::time::Duration;

use aerotp_link::{LinkConfig, TraceRow};

use crate::scenario::{Scenario, SimMode, IP_UDP_OVERHEAD};

/// The goodput ceiling of the network at time 0, bit/s: [`ceiling_bps_over`] of the instant
/// 0 (for links without a trace, the ceiling at any time).
pub fn ceiling_bps(s: &Scenario, parity: u8) -> f64 {
    ceiling_bps_over(s, parity, Duration::ZERO, Duration::ZERO)
}

/// The goodput ceiling of the network over `[from, to)`, bit/s: the sum over paths of each
/// forward link's
///
/// `rate_bps × payload / (MTU + 28) × P(a full datagram survives)`
///
/// where payload is the application bytes of a full datagram (UDP: the MTU; AeroTP: the
/// largest TPDU body at the MTU with `parity` bytes of FEC per codeword) and the survival
/// probability is `(1 − loss) · (1 − ber)^(8·28) · (1 − F(ber, MTU, parity))`, F being the
/// probability that the datagram does not decode (`aerotp_fec::auto::tpdu_failure_probability`;
/// without FEC `1 − (1 − ber)^(8·MTU)`, so the survival is `(1 − loss)(1 − ber)^(8(MTU+28))`).
/// A Gilbert–Elliott burst averages the survival over its states (stationary share of Bad,
/// each state's loss and BER); periodic and random outages multiply by the share of time the
/// link is up.
///
/// A link with a trace: the time average over `[from, to)` of that figure with each row's
/// rate, BER and loss in force (an empty cell: the configured value; before the first row:
/// the configured values), so a transfer through a rate step is read against what the link
/// could carry while it ran, not against the configured rate. An empty interval (`to ≤
/// from`) takes the row in force at `from`. Scheduled outages are not counted. See
/// docs/simulator.md.
pub fn ceiling_bps_over(s: &Scenario, parity: u8, from: Duration, to: Duration) -> f64 {
    let wire = (s.mtu + IP_UDP_OVERHEAD) as f64;
    let payload = match s.mode {
        SimMode::Udp => s.mtu,
        SimMode::Aero(_) => aerotp_proto::max_body(s.mtu, parity),
    } as f64;
    s.network
        .paths
        .iter()
        .map(|p| {
            let c = p.forward_config(0);
            let at = |row: Option<&TraceRow>| {
                let rate = row.and_then(|r| r.rate_bps).unwrap_or(c.rate_bps);
                let ber = row.and_then(|r| r.ber).unwrap_or(c.ber);
                let loss = row.and_then(|r| r.loss).unwrap_or(c.loss);
                rate as f64 * payload / wire * survival(&c, ber, loss, s.mtu, parity)
            };
            match &c.trace {
                None => at(None),
                Some(t) if to <= from => at(t.row_at(from)),
                Some(t) => {
                    let sum: f64 = t
                        .spans(from, to)
                        .map(|(a, b, row)| (b - a).as_secs_f64() * at(row))
                        .sum();
                    sum / (to - from).as_secs_f64()
                }
            }
        })
        .sum()
}

/// Probability that a full datagram on link `c` arrives usable, at base BER `ber` and random
/// loss `loss` (the configured ones, or a trace row's): see [`ceiling_bps_over`].
fn survival(c: &LinkConfig, ber: f64, loss: f64, mtu: usize, parity: u8) -> f64 {
    let at = |loss: f64, ber: f64| {
        let header = (1.0 - ber).powi(8 * IP_UDP_OVERHEAD as i32);
        let body = 1.0 - aerotp_fec::auto::tpdu_failure_probability(ber, mtu, parity);
        (1.0 - loss) * header * body
    };
    let mut p = match &c.burst {
        None => at(0.0, ber),
        Some(ge) => {
            let bad = ge.bad_share();
            (1.0 - bad) * at(ge.loss_good, ge.ber_good.unwrap_or(ber))
                + bad * at(ge.loss_bad, ge.ber_bad.unwrap_or(ber))
        }
    };
    p *= 1.0 - loss;
    if let Some(o) = &c.periodic_outage {
        p *= 1.0 - o.duration.as_secs_f64() / o.period.as_secs_f64();
    }
    if let Some(o) = &c.random_outage {
        let up = o.mean_up.as_secs_f64();
        let down = (o.down_min.as_secs_f64() + o.down_max.as_secs_f64()) / 2.0;
        p *= up / (up + down);
    }
    p
}
