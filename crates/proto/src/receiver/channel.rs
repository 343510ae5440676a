//! The receiver's channel estimate: the bit error rate every datagram's outcome shows (clean,
//! corrected, corrupted) and the loss on the link before any repair, which the receiver
//! reports (RPT) for the sender's FEC and erasure choices and for the statistics.

use crate::codec::Quality;
use crate::erasure::{Arrival, WireLoss};
use aerotp_fec::auto::BerEstimator;
use aerotp_wire::Report;

/// The bit error rate and link loss as this end saw them.
#[derive(Debug)]
pub(super) struct ChannelEstimate {
    ber: BerEstimator,
    wire: WireLoss,
}

impl ChannelEstimate {
    pub(super) fn new() -> ChannelEstimate {
        ChannelEstimate {
            ber: BerEstimator::new(),
            wire: WireLoss::default(),
        }
    }

    /// A datagram of `bits` came with `quality` (`parity`: its FEC parity bytes).
    pub(super) fn on_quality(&mut self, bits: usize, quality: Quality, parity: u8) {
        match quality {
            Quality::Clean => self.ber.record_clean(bits),
            Quality::Corrected { bits: b, symbols } => self.ber.record_corrected(bits, b, symbols),
            Quality::Corrupted => self.ber.record_failed(bits, parity),
        }
    }

    /// Data TPDU `seq` with the sender's timestamp `ts` arrived (`intact`: its body checked).
    pub(super) fn on_arrival(&mut self, seq: u64, ts: u32, intact: bool) -> Arrival {
        self.wire.on_arrival(seq, ts, intact)
    }

    /// Data TPDU `seq` was rebuilt by erasure decoding.
    pub(super) fn on_rebuilt(&mut self, seq: u64) {
        self.wire.on_rebuilt(seq);
    }

    /// Datagrams measured so far.
    pub(super) fn samples(&self) -> u64 {
        self.ber.samples()
    }

    /// The bit error rate measured, zero before any datagram.
    pub(super) fn ber(&self) -> f64 {
        self.ber.estimate().unwrap_or(0.0)
    }

    /// Loss on the link so far: (TPDUs lost before repair, runs of losses).
    pub(super) fn wire_loss(&self) -> (u64, u64) {
        (self.wire.lost(), self.wire.bursts())
    }

    /// A receiver report, with `lost` TPDUs lost for good or corrupted.
    pub(super) fn report(&self, lost: u64) -> Report {
        Report {
            ber_ppb: (self.ber() * 1e9).round().clamp(0.0, f64::from(u32::MAX)) as u32,
            tpdus: u32::try_from(self.samples()).unwrap_or(u32::MAX),
            lost: u32::try_from(lost).unwrap_or(u32::MAX),
            // Cumulative counters, wrapping: the sender takes differences between reports.
            seen: self.wire.seen() as u32,
            wire_lost: self.wire.lost() as u32,
            bursts: self.wire.bursts() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_carries_the_measured_ber_and_the_link_loss() {
        let mut c = ChannelEstimate::new();
        assert_eq!(c.report(0).tpdus, 0);
        for _ in 0..100 {
            c.on_quality(8000, Quality::Clean, 0);
        }
        c.on_quality(
            8000,
            Quality::Corrected {
                bits: 8,
                symbols: 8,
            },
            16,
        );
        assert_eq!(c.samples(), 101);
        assert!(c.ber() > 0.0);
        // 0, 1 arrive; 2, 3 are lost; 4 arrives; 5 arrives corrupted.
        for s in [0, 1, 4] {
            assert_eq!(c.on_arrival(s, s as u32, true), Arrival::First);
        }
        c.on_arrival(5, 5, false);
        assert_eq!(c.wire_loss(), (3, 2));
        let r = c.report(7);
        assert_eq!(
            (r.tpdus, r.lost, r.seen, r.wire_lost, r.bursts),
            (101, 7, 6, 3, 2)
        );
        assert_eq!(r.ber_ppb, (c.ber() * 1e9).round() as u32);
        // A TPDU rebuilt was lost on the link all the same (6 missing, 7 rebuilt).
        c.on_rebuilt(7);
        assert_eq!(c.wire_loss(), (5, 2));
        assert_eq!(c.report(0).seen, 8);
    }
}
