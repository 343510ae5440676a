//! How big a new TPDU is cut: the body size that maximises the expected goodput of one
//! datagram on the path, never above what the MTU allows (docs/rate.md, "The TPDU size").
//!
//! A datagram of `wire` bytes (body, AeroTP header and CRC, FEC parity, IP and UDP) on a path
//! of rate `r` is `air = 8 · wire / r` on the air. What it delivers, per byte of the path's
//! capacity it takes, is
//!
//! ```text
//! g(body) = body / wire                          header share
//!         × (1 − P_fail(BER, datagram, parity))  it decodes (after the per-TPDU FEC)
//!         × exp(−air / U)                        no outage begins while it is on the air
//! ```
//!
//! with `U` the mean time the link stays up between outages (outages as a Poisson process,
//! which is how the simulator draws random outages: `docs/link-model.md`). Random loss per
//! datagram is the same factor at every size in the link model, so it does not move the
//! choice and is left out. Larger bodies win on the header share; the BER and outage terms
//! pull towards smaller ones once a datagram is long on the air or likely to be hit.
//!
//! The size is a connection's: it is cut before the path is chosen, so the slowest path with
//! a known rate decides the air time. Nothing here reads a clock: the connection passes the
//! time and what it has observed.

use crate::codec;
use aerotp_fec::auto::tpdu_failure_probability;
use std::time::Duration;

/// Smallest datagram the policy cuts, in bytes (UDP payload). At 256 the 52 bytes of headers
/// per datagram (AeroTP 24, IP and UDP 28) already take 18 % of the link; the floor keeps an
/// estimate gone wrong (gaps taken for outages, a BER report out of date) from cutting
/// TPDUs that are mostly headers. A smaller MTU is respected as it is.
pub const FLOOR_DATAGRAM: usize = 256;

/// A smaller body is chosen only when its expected goodput beats the largest body's by more
/// than this: near the optimum the curve is flat, and staying at the largest size keeps
/// fewer TPDUs (headers, acknowledgement entries) and stops noise in the estimates from
/// moving the size back and forth.
pub const PREFER_LARGER: f64 = 0.01;

/// A gap between TPDUs heard this many times the usual one is taken for an outage.
pub const SILENCE_BEATS: u32 = 3;

/// A silence shorter than this is never taken for an outage, however short the usual gap.
/// On a fast link the usual gap is microseconds, or zero when a receive batch hands in
/// several TPDUs at one instant; then the receiver's feedback aggregation (up to 25 ms) and
/// the host's scheduling made "outages" by the thousand: on loopback, discovering at about
/// 1.2 Gb/s, 24,700 of them in 6 s, a mean up time of 940 ns, and every TPDU cut at the
/// 256-byte floor (`aerotp bench loopback --size 1GB --rate auto`: 3.2 million TPDUs,
/// 1.30 Gb/s, where the fixed rate cuts 677,513 and carries 5-7 Gb/s). A shorter outage
/// than this could not move the size anyway: the size changes only when the chance of an
/// outage on the air costs more than `PREFER_LARGER`, a mean up time under 100 air times,
/// and a link whose usual gap is under a third of this sends a datagram in under 33 ms.
pub const MIN_OUTAGE: Duration = Duration::from_millis(100);

/// Gaps measured before the usual one is trusted.
const BEAT_SAMPLES: u32 = 8;

/// Steps between candidate sizes: each is this fraction smaller than the one before
/// (about 60 candidates from 1500 bytes down to the floor).
const STEP: f64 = 0.03;

/// What the connection knows of the link when it cuts a TPDU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFacts {
    /// The path's rate on the link (b/s, IP and UDP headers counted), if the engine knows it
    /// from discovery or from the radio. `None`: the largest body (the first flight, and a
    /// fixed rate without a radio, whose TPDU is the MTU as in the papers).
    pub rate_bps: Option<u64>,
    /// The raw bit-error rate the peer measures (before the FEC corrects it).
    pub ber: f64,
    /// The per-TPDU FEC parity in force.
    pub parity: u8,
    /// Mean time the link stays up between outages, if one has been seen.
    pub mean_up: Option<Duration>,
    /// Bytes per datagram below AeroTP (IP and UDP).
    pub per_packet_overhead: usize,
    /// Bytes the erasure coder adds to every data body.
    pub body_reserve: usize,
}

impl LinkFacts {
    /// Expected goodput fraction of a TPDU with a `body`-byte body (see the module comment).
    pub fn goodput(&self, body: usize) -> f64 {
        let Some(datagram) = codec::datagram_len(body + self.body_reserve, self.parity) else {
            return 0.0;
        };
        let wire = (datagram + self.per_packet_overhead) as f64;
        let mut g =
            body as f64 / wire * (1.0 - tpdu_failure_probability(self.ber, datagram, self.parity));
        if let (Some(rate), Some(up)) = (self.rate_bps, self.mean_up) {
            let air = wire * 8.0 / rate.max(1) as f64;
            g *= (-air / up.as_secs_f64().max(1e-6)).exp();
        }
        g
    }

    /// The body to cut: the size in `[floor, max_body]` with the best expected goodput,
    /// `max_body` unless a smaller one is better by more than `PREFER_LARGER`.
    /// `floor` is the body of a `FLOOR_DATAGRAM`-byte datagram (or `max_body` if smaller).
    pub fn best_body(&self, floor: usize, max_body: usize) -> usize {
        let floor = floor.min(max_body);
        // Nothing pulls the size down: no rate known, or neither bit errors nor outages.
        if self.rate_bps.is_none() || (self.ber <= 0.0 && self.mean_up.is_none()) {
            return max_body;
        }
        let top = self.goodput(max_body);
        let (mut best, mut best_g) = (max_body, top);
        let mut s = max_body as f64;
        loop {
            s *= 1.0 - STEP;
            let body = (s as usize).max(floor);
            let g = self.goodput(body);
            if g > best_g {
                (best, best_g) = (body, g);
            }
            if body == floor {
                break;
            }
        }
        if best_g > top * (1.0 + PREFER_LARGER) {
            best
        } else {
            max_body
        }
    }
}

/// `x` rounded to an eighth of an octave: the estimates move a little with every sample,
/// and the choice is not worth recomputing for less.
fn eighth_octave(x: f64) -> i32 {
    (x.max(1.0).log2() * 8.0).round() as i32
}

/// The body of the smallest datagram the policy cuts, at `parity`.
pub fn floor_body(parity: u8) -> usize {
    codec::max_body(FLOOR_DATAGRAM, parity)
}

/// What a connection has seen of its outages, and the size it chose last (recomputed only
/// when what it depends on moves).
#[derive(Debug, Clone, Default)]
pub(crate) struct TpduSizer {
    /// When the connection began (the first up period starts then).
    since: Duration,
    /// Silences taken for outages (`on_gap`).
    outages: u32,
    /// Their total length beyond the usual gap.
    down: Duration,
    /// The usual gap between TPDUs heard while data is unacknowledged (a moving average of
    /// the gaps not taken for outages), and how many it has seen.
    beat: Duration,
    beats: u32,
    /// The inputs of the last choice (rate and mean up time rounded to an eighth of an
    /// octave) and the choice.
    cached: Option<(CacheKey, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct CacheKey {
    rate_step: Option<i32>,
    up_step: Option<i32>,
    ber: u64,
    parity: u8,
    outages: u32,
    max_body: usize,
    reserve: usize,
}

impl TpduSizer {
    pub(crate) fn new(now: Duration) -> TpduSizer {
        TpduSizer {
            since: now,
            ..TpduSizer::default()
        }
    }

    /// The peer was heard after `gap` of silence while data was unacknowledged. A gap over
    /// `SILENCE_BEATS` times the usual one, and over `MIN_OUTAGE`, is an outage, down for
    /// what exceeds the usual gap.
    /// This is what the engine can see of an outage: on a slow link with a standing queue
    /// the round trip and the timeouts are long (at 2.4 kb/s, 18 s and 25-60 s measured in
    /// the simulator), so an 11-second call drop neither pauses the sender nor is declared
    /// an outage, but it shows as a 20-27 s gap where the usual one is 5 s.
    pub(crate) fn on_gap(&mut self, gap: Duration) {
        if self.beats >= BEAT_SAMPLES && gap > (self.beat * SILENCE_BEATS).max(MIN_OUTAGE) {
            self.outages = self.outages.saturating_add(1);
            self.down += gap - self.beat;
            return;
        }
        self.beat = if self.beats == 0 {
            gap
        } else {
            (self.beat * 7 + gap) / 8
        };
        self.beats = self.beats.saturating_add(1);
    }

    /// Mean up time between outages: the time the link was up over the outages seen (the
    /// exponential's estimate; the up period running now counts, so a link that stays up
    /// longer moves it up). `None` before the first outage.
    pub(crate) fn mean_up(&self, now: Duration) -> Option<Duration> {
        if self.outages == 0 {
            return None;
        }
        let up = now.saturating_sub(self.since).saturating_sub(self.down);
        Some(up / self.outages)
    }

    /// The body for the next new TPDU, at most `max_body`.
    pub(crate) fn body(&mut self, facts: &LinkFacts, max_body: usize) -> usize {
        let key = CacheKey {
            rate_step: facts.rate_bps.map(|r| eighth_octave(r as f64)),
            up_step: facts.mean_up.map(|u| eighth_octave(u.as_secs_f64() * 1e3)),
            ber: facts.ber.to_bits(),
            parity: facts.parity,
            outages: self.outages,
            max_body,
            reserve: facts.body_reserve,
        };
        if let Some((k, body)) = self.cached {
            if k == key {
                return body;
            }
        }
        let body = facts.best_body(floor_body(facts.parity), max_body);
        self.cached = Some((key, body));
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(rate_bps: u64, ber: f64, parity: u8, mean_up_s: Option<u64>) -> LinkFacts {
        LinkFacts {
            rate_bps: Some(rate_bps),
            ber,
            parity,
            mean_up: mean_up_s.map(Duration::from_secs),
            per_packet_overhead: 28,
            body_reserve: 0,
        }
    }

    const MAX: usize = 1500 - 24;

    #[test]
    fn a_clean_fast_link_keeps_the_mtu() {
        for rate in [1_000_000, 5_000_000, 1_000_000_000] {
            assert_eq!(facts(rate, 0.0, 0, None).best_body(floor_body(0), MAX), MAX);
            // An outage a second is still nothing to a datagram 12 ms on the air.
            assert_eq!(
                facts(rate, 0.0, 0, Some(1)).best_body(floor_body(0), MAX),
                MAX
            );
            // BER 1e-5 under the parity FEC auto picks for it (`fec_parity::auto_parity`).
            let p = crate::fec_parity::auto_parity(crate::AutoFec::Goodput, 1e-5, 1500, 28, 1e-3);
            let max = codec::max_body(1500, p);
            assert_eq!(
                facts(rate, 1e-5, p, Some(30)).best_body(floor_body(p), max),
                max
            );
        }
    }

    #[test]
    fn no_rate_known_keeps_the_mtu() {
        let f = LinkFacts {
            rate_bps: None,
            ..facts(2400, 1e-4, 0, Some(10))
        };
        assert_eq!(f.best_body(floor_body(0), MAX), MAX);
    }

    #[test]
    fn frequent_outages_on_a_slow_link_shrink_it() {
        // 2.4 kb/s: a 1500-byte datagram is 5.1 s on the air. An outage every 30 s: the
        // optimum of (1 - 52/x)·exp(-8x/(2400·30)) is x = sqrt(52·9000) ≈ 684 bytes.
        let b = facts(2400, 0.0, 0, Some(30)).best_body(floor_body(0), MAX);
        assert!((550..=800).contains(&b), "{b}");
        // One Iridium channel, up 180 s on average: the optimum (≈ 1676 bytes) is above the
        // MTU, so the MTU stays.
        assert_eq!(
            facts(2400, 0.0, 0, Some(180)).best_body(floor_body(0), MAX),
            MAX
        );
        // Every 5 s: x = sqrt(52·1500) ≈ 280 bytes on the wire, a body of about 230-260.
        let b = facts(2400, 0.0, 0, Some(5)).best_body(floor_body(0), MAX);
        assert!((floor_body(0)..=270).contains(&b), "{b}");
        // Every 2 s: the optimum (177 bytes) is under the floor, which holds.
        assert_eq!(
            facts(2400, 0.0, 0, Some(2)).best_body(floor_body(0), MAX),
            floor_body(0)
        );
    }

    #[test]
    fn bit_errors_without_fec_shrink_it() {
        // BER 1e-4 and no FEC: a 1528-byte datagram survives with (1-1e-4)^12224 ≈ 0.29; the
        // optimum of (1 - 52/x)·exp(-8e-4·x) is x = sqrt(52/8e-4) ≈ 255, at the floor.
        let b = facts(5_000_000, 1e-4, 0, None).best_body(floor_body(0), MAX);
        assert_eq!(b, floor_body(0));
        // 1e-5: x ≈ 806.
        let b = facts(5_000_000, 1e-5, 0, None).best_body(floor_body(0), MAX);
        assert!((650..=950).contains(&b), "{b}");
    }

    #[test]
    fn the_choice_beats_the_mtu_where_it_differs() {
        for f in [
            facts(2400, 0.0, 0, Some(30)),
            facts(9600, 2e-5, 0, Some(20)),
        ] {
            let b = f.best_body(floor_body(0), MAX);
            assert!(b < MAX);
            assert!(f.goodput(b) > f.goodput(MAX) * (1.0 + PREFER_LARGER));
        }
    }

    #[test]
    fn long_gaps_are_outages() {
        let s = Duration::from_secs;
        let mut t = TpduSizer::new(s(0));
        // Gaps of 5 s: the beat. A 20 s gap before eight were seen proves nothing yet.
        t.on_gap(s(20));
        assert_eq!(t.mean_up(s(20)), None);
        for _ in 0..16 {
            t.on_gap(s(5));
        }
        t.on_gap(s(14));
        assert_eq!(t.mean_up(s(120)), None, "under three beats: jitter");
        t.on_gap(s(25));
        // Down 25 s less the beat, about 7.7 s (the early 20 s gap and the 14 s one decay in
        // it): 182.7 s up.
        let up = t.mean_up(s(200)).unwrap().as_secs_f64();
        assert!((178.0..=184.0).contains(&up), "{up}");
        t.on_gap(s(45));
        let up = t.mean_up(s(400)).unwrap().as_secs_f64();
        // Down 17.3 + 37.3 s of 400: 172.7 s up per outage.
        assert!((170.0..=175.0).contains(&up), "{up}");
        // The outages did not move the beat.
        assert!(t.beat < s(8));
    }

    #[test]
    fn a_fast_links_short_silences_are_no_outages() {
        let us = Duration::from_micros;
        let mut t = TpduSizer::new(Duration::ZERO);
        // A receive batch: several TPDUs at one instant, so the usual gap goes to zero.
        for _ in 0..64 {
            t.on_gap(Duration::ZERO);
        }
        // Feedback aggregated for 25 ms and a host that ran late: silences, not outages.
        for gap in [us(40), us(25_000), us(3_000), us(99_000), us(100_000)] {
            t.on_gap(gap);
            assert_eq!(t.mean_up(Duration::from_secs(1)), None, "{gap:?}");
        }
        let f = LinkFacts {
            mean_up: t.mean_up(Duration::from_secs(1)),
            ..facts(1_200_000_000, 0.0, 0, None)
        };
        assert_eq!(t.body(&f, MAX), MAX);
        // A real dropout still counts.
        t.on_gap(Duration::from_millis(400));
        assert!(t.mean_up(Duration::from_secs(2)).is_some());
    }

    #[test]
    fn the_choice_is_recomputed_when_outages_are_seen() {
        let s = Duration::from_secs;
        let mut t = TpduSizer::new(s(0));
        let mut f = facts(2400, 0.0, 0, None);
        assert_eq!(t.body(&f, MAX), MAX);
        for _ in 0..8 {
            t.on_gap(s(5));
        }
        t.on_gap(s(40));
        f.mean_up = t.mean_up(s(60));
        assert!(t.body(&f, MAX) < MAX);
    }
}
