//! Bit-error rate → parity symbols per codeword: the engine's one automatic rule (used by
//! `FecControl` and, through `datagram_parity`, by drivers that send without feedback).

use crate::error_control::AutoFec;
use aerotp_fec as fec;
use aerotp_wire::OVERHEAD;

/// Parity per codeword chosen automatically for a bit-error rate `ber`.
///
/// Where nothing repairs after FEC (`AutoFec::ResidualLoss`: quasi-reliable, unreliable,
/// datagram) the residual TPDU loss is held under `target`; where retransmission repairs the
/// rest (`AutoFec::Goodput`) goodput is maximised, counting the header and
/// `per_packet_overhead` (IP/UDP) per datagram. No errors: no parity.
pub fn auto_parity(
    aim: AutoFec,
    ber: f64,
    mtu: usize,
    per_packet_overhead: usize,
    target: f64,
) -> u8 {
    if ber <= 0.0 {
        return 0;
    }
    match aim {
        AutoFec::ResidualLoss => fec::auto::parity_for_target(ber, mtu, target),
        AutoFec::Goodput => fec::auto::parity_for_goodput(ber, mtu, OVERHEAD + per_packet_overhead),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmitting_modes_maximise_goodput() {
        assert_eq!(
            auto_parity(AutoFec::Goodput, 1e-4, 1500, 28, 1e-4),
            fec::auto::parity_for_goodput(1e-4, 1500, OVERHEAD + 28)
        );
        assert_eq!(auto_parity(AutoFec::Goodput, 0.0, 1500, 28, 1e-4), 0);
    }
}
