//! What each mode's error control does, decided once from the mode (docs/design.md, "Error
//! control by mode"). The sender, the receiver, the connection's timers and the FEC and
//! erasure defaults read this value; no other module compares modes. To change what a mode
//! does, change its row in [`ErrorControl::for_mode`]; to add a behaviour, add a field here
//! and read it where it acts.

use crate::erasure::{ErasureMode, ErasureSetting};
use aerotp_wire::Mode;
use std::time::Duration;

/// The positive feedback a receiver sends (NACKs of corrupted TPDUs are separate:
/// [`ErrorControl::nacks_corrupted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// None: the sender learns nothing of what arrived (quasi-reliable, hybrid-nack,
    /// unreliable, datagram). Only the AFIN is acknowledged, by the AFINACK.
    None,
    /// Sparse cumulative ACKs — every `ack_every` TPDUs, or at least `min_period` after the
    /// first unacknowledged arrival — and SNACK ranges for the holes (near-reliable: the
    /// custody mode, whose retransmissions are driven by the receiver).
    CumulativeWithHoles { min_period: Duration },
    /// MACKs: a cumulative acknowledgement with selective entries and ranges, aggregated over
    /// `mack_count` TPDUs or the acknowledgement delay, sent at once on a new gap (reliable,
    /// hybrid-nack-mack). The sender detects losses by time and reordering from them.
    Selective,
}

/// How long the sender keeps a TPDU it has sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Not at all (only the AFIN, until its AFINACK).
    Nothing,
    /// For the configured retention (`ConnectionConfig::retention`): no positive
    /// acknowledgement frees it, a NACK may still ask for it.
    ForRetention,
    /// Until it is acknowledged.
    UntilAcknowledged,
}

/// What the receiver does at a hole in the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hole {
    /// Wait for the retransmission: every byte is delivered, in order.
    Wait,
    /// Deliver what is behind the hole after the hole timeout (the minimum hole wait, the
    /// erasure repair wait, and `nack_repair_rtts` NACK repair round trips, whichever is
    /// longest); the missing TPDU is counted lost.
    SkipAfterTimeout { nack_repair_rtts: u32 },
}

/// What the automatic FEC choice optimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoFec {
    /// Nothing repairs after FEC: hold the residual TPDU loss under the target.
    ResidualLoss,
    /// Retransmission repairs the rest: maximise goodput, counting headers.
    Goodput,
}

/// One mode's error control: what feedback the receiver sends, what the sender keeps and for
/// how long, what triggers a retransmission, what happens at a hole, and the FEC and erasure
/// defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorControl {
    /// The mode this was built from (carried for the header and for messages, not for
    /// decisions).
    pub mode: Mode,
    /// Whether the mode keeps connection state (every mode but datagram).
    pub connected: bool,
    pub feedback: Feedback,
    /// Whether the receiver NACKs a TPDU that arrived but failed its CRC.
    pub nacks_corrupted: bool,
    pub keep: Keep,
    /// Whether the sender declares data lost on its own, by timeout and by time and
    /// reordering (RACK), rather than only when the receiver asks.
    pub loss_by_time: bool,
    pub hole: Hole,
    /// Whether a corrupted TPDU may be delivered as it is when the application turned the
    /// payload CRC check off (`ConnectionConfig::crc_check`).
    pub may_deliver_corrupted: bool,
    /// Outage floor: silence shorter than this is never taken for an outage (near-reliable's
    /// periodic ACK may wait 200 ms, so its floor is higher).
    pub min_silence: Duration,
    /// Whether `ConnectionConfig::with_mode` turns FEC to auto: every mode that retransmits
    /// or relies on FEC. Measured never worse than `off` in the fully reliable modes (10 MB,
    /// 5 Mb/s, 10 ms: equal at BER 0, 4.77 against 4.26 Mb/s at 1e-5, 4.61 against 1.39 at
    /// 1e-4; docs/results/dynamic.md). `unreliable` and `datagram` carry what the application
    /// gives them as it is, so their parity stays a choice.
    pub fec_auto_by_default: bool,
    pub auto_fec: AutoFec,
    /// The erasure coding a connection sends with unless configured (docs/fec.md, "Erasure
    /// coding in the engine").
    pub erasure: ErasureSetting,
    /// Whether the receiver expects repairs from the first TPDU (so a hole waits for them
    /// from the start), rather than only once the first repair shows the peer sends them.
    pub repairs_from_start: bool,
}

/// Erasure coding chosen automatically, otherwise as off: what the modes' defaults start from.
const AUTO_ERASURE: ErasureSetting = ErasureSetting {
    mode: ErasureMode::Auto,
    ..ErasureSetting::OFF
};

/// The retransmitting modes' erasure default: retransmission recovers the rest, so repair
/// aims at a residual of 1e-3 and only on paths with a round trip of 200 ms or more.
const RETRANSMITTING_ERASURE: ErasureSetting = ErasureSetting {
    target_residual: 1e-3,
    min_rtt: Duration::from_millis(200),
    max_ratio: 1.25,
    ..AUTO_ERASURE
};

impl ErrorControl {
    /// The error control of `mode`: the one table of what each mode does.
    pub fn for_mode(mode: Mode) -> ErrorControl {
        *Self::of(mode)
    }

    /// `mode`'s row of the table, without building it: the receive path asks for each
    /// datagram (building the whole row there, to read one field, was 6 % of it).
    pub fn of(mode: Mode) -> &'static ErrorControl {
        const ROWS: [ErrorControl; 7] = [
            ErrorControl::row(Mode::Reliable),
            ErrorControl::row(Mode::NearReliable),
            ErrorControl::row(Mode::QuasiReliable),
            ErrorControl::row(Mode::HybridNack),
            ErrorControl::row(Mode::HybridNackMack),
            ErrorControl::row(Mode::Unreliable),
            ErrorControl::row(Mode::Datagram),
        ];
        &ROWS[mode as usize]
    }

    /// `mode`'s row: the reliable row or the FEC-only one, changed where `mode` differs.
    const fn row(mode: Mode) -> ErrorControl {
        let reliable = Self::reliable_row(mode);
        let fec_only = Self::fec_only_row(reliable);
        let auto = AUTO_ERASURE;
        match mode {
            Mode::Reliable => reliable,
            Mode::HybridNackMack => ErrorControl {
                nacks_corrupted: true,
                ..reliable
            },
            Mode::NearReliable => ErrorControl {
                feedback: Feedback::CumulativeWithHoles {
                    min_period: Duration::from_millis(200),
                },
                nacks_corrupted: true,
                loss_by_time: false,
                min_silence: Duration::from_millis(600),
                ..reliable
            },
            Mode::HybridNack => ErrorControl {
                feedback: Feedback::None,
                nacks_corrupted: true,
                keep: Keep::ForRetention,
                loss_by_time: false,
                hole: Hole::SkipAfterTimeout {
                    nack_repair_rtts: 2,
                },
                ..reliable
            },
            // A whole file with no feedback: repair aims at a residual of 1e-5, assuming 1 %
            // loss until the first report.
            Mode::QuasiReliable => ErrorControl {
                erasure: ErasureSetting {
                    target_residual: 1e-5,
                    initial_loss: 0.01,
                    ..auto
                },
                ..fec_only
            },
            Mode::Unreliable => ErrorControl {
                may_deliver_corrupted: true,
                fec_auto_by_default: false,
                erasure: ErasureSetting {
                    target_residual: 1e-3,
                    ..auto
                },
                ..fec_only
            },
            // No connection; the gateway sets erasure per route.
            Mode::Datagram => ErrorControl {
                connected: false,
                fec_auto_by_default: false,
                erasure: ErasureSetting::OFF,
                repairs_from_start: false,
                ..fec_only
            },
        }
    }

    /// The reliable mode's row, which the others change: every byte delivered in order,
    /// selective acknowledgements, losses found by time, erasure on long round trips only.
    const fn reliable_row(mode: Mode) -> ErrorControl {
        ErrorControl {
            mode,
            connected: true,
            feedback: Feedback::Selective,
            nacks_corrupted: false,
            keep: Keep::UntilAcknowledged,
            loss_by_time: true,
            hole: Hole::Wait,
            may_deliver_corrupted: false,
            min_silence: Duration::from_millis(100),
            fec_auto_by_default: true,
            auto_fec: AutoFec::Goodput,
            erasure: RETRANSMITTING_ERASURE,
            repairs_from_start: false,
        }
    }

    /// The row the modes without positive feedback start from: nothing kept, a hole skipped
    /// after its timeout, FEC chosen for the residual loss, repairs expected from the start.
    const fn fec_only_row(reliable: ErrorControl) -> ErrorControl {
        ErrorControl {
            feedback: Feedback::None,
            keep: Keep::Nothing,
            loss_by_time: false,
            hole: Hole::SkipAfterTimeout {
                nack_repair_rtts: 0,
            },
            auto_fec: AutoFec::ResidualLoss,
            repairs_from_start: true,
            ..reliable
        }
    }

    /// Whether every byte written is delivered, in order, given time: the receiver waits at a
    /// hole, and a close is confirmed only once everything is acknowledged.
    pub fn delivers_everything(&self) -> bool {
        self.hole == Hole::Wait
    }

    /// Whether the sender can discover the link's rate (`RateControl::Discover`): only
    /// selective acknowledgements say what each TPDU delivered (docs/rate.md).
    pub fn discovers_rate(&self) -> bool {
        self.feedback == Feedback::Selective
    }

    /// Whether the receiver sends positive acknowledgements (ACK or MACK): the sender then
    /// keeps to the receiver's window, watches for outages and is answered when it probes.
    pub fn acknowledges(&self) -> bool {
        self.feedback != Feedback::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_mode() -> impl Iterator<Item = Mode> {
        Mode::ALL.into_iter()
    }

    #[test]
    fn each_modes_row_is_its_own() {
        for m in every_mode() {
            assert_eq!(ErrorControl::of(m).mode, m);
        }
        assert_eq!(
            Mode::ALL.len(),
            7,
            "a new mode needs its row in `ErrorControl::of`"
        );
    }

    /// The papers' promises (seed 001 §III, seed 002 Table I), checked against the table.
    #[test]
    fn the_table_keeps_the_papers_promises() {
        for mode in every_mode() {
            let ec = ErrorControl::for_mode(mode);
            let promised = matches!(
                mode,
                Mode::Reliable | Mode::NearReliable | Mode::HybridNackMack
            );
            assert_eq!(ec.delivers_everything(), promised, "{mode}");
            // Whatever is delivered in full must be kept until acknowledged, and the
            // acknowledgement must exist.
            if ec.delivers_everything() {
                assert_eq!(ec.keep, Keep::UntilAcknowledged, "{mode}");
                assert!(ec.acknowledges(), "{mode}");
            }
            // NACKs make sense only where the sender still holds what they ask for.
            if ec.nacks_corrupted {
                assert_ne!(ec.keep, Keep::Nothing, "{mode}");
            }
            // Loss detection by time needs per-TPDU acknowledgements.
            if ec.loss_by_time {
                assert_eq!(ec.feedback, Feedback::Selective, "{mode}");
            }
            ec.erasure
                .validate()
                .expect("every default erasure setting is valid");
            assert_eq!(ec.connected, mode != Mode::Datagram, "{mode}");
        }
    }

    #[test]
    fn each_mode_gets_its_papers_feedback() {
        let fb = |m| ErrorControl::for_mode(m).feedback;
        assert_eq!(fb(Mode::Reliable), Feedback::Selective);
        assert_eq!(fb(Mode::HybridNackMack), Feedback::Selective);
        assert!(matches!(
            fb(Mode::NearReliable),
            Feedback::CumulativeWithHoles { .. }
        ));
        for m in [Mode::QuasiReliable, Mode::HybridNack, Mode::Unreliable] {
            assert_eq!(fb(m), Feedback::None, "{m}");
        }
        let nacks: Vec<Mode> = every_mode()
            .filter(|&m| ErrorControl::for_mode(m).nacks_corrupted)
            .collect();
        assert_eq!(
            nacks,
            [Mode::NearReliable, Mode::HybridNack, Mode::HybridNackMack]
        );
    }

    #[test]
    fn fec_and_erasure_defaults_follow_what_repairs_the_rest() {
        for mode in every_mode() {
            let ec = ErrorControl::for_mode(mode);
            let expected = if ec.keep == Keep::Nothing {
                AutoFec::ResidualLoss
            } else {
                AutoFec::Goodput
            };
            assert_eq!(ec.auto_fec, expected, "{mode}");
        }
        let q = ErrorControl::for_mode(Mode::QuasiReliable);
        assert!(q.repairs_from_start && q.fec_auto_by_default);
        assert_eq!(q.erasure.target_residual, 1e-5);
        let r = ErrorControl::for_mode(Mode::Reliable);
        assert_eq!(r.erasure.min_rtt, Duration::from_millis(200));
        assert!(ErrorControl::for_mode(Mode::Datagram).erasure.is_off());
        assert!(!ErrorControl::for_mode(Mode::Unreliable).fec_auto_by_default);
    }
}
