//! FEC setting → parity symbols per codeword: the engine's one rule, public so drivers that
//! send datagrams without feedback (the simulator's datagram runs, the gateway's UDP flows)
//! pick exactly the strength a connection would start with.

use crate::config::{ConnectionConfig, FecSetting};
use crate::fec_control::FecControl;
use aerotp_fec as fec;
use aerotp_wire::{Mode, OVERHEAD};

/// Parity per codeword chosen automatically for a bit-error rate `ber`.
///
/// Modes that nothing repairs after FEC (quasi-reliable, unreliable, datagram) hold the
/// residual TPDU loss under `target`; modes with retransmission maximise goodput, counting
/// the header and `per_packet_overhead` (IP/UDP) per datagram. No errors: no parity.
pub fn auto_parity(
    mode: Mode,
    ber: f64,
    mtu: usize,
    per_packet_overhead: usize,
    target: f64,
) -> u8 {
    if ber <= 0.0 {
        return 0;
    }
    match mode {
        Mode::QuasiReliable | Mode::Unreliable | Mode::Datagram => {
            fec::auto::parity_for_target(ber, mtu, target)
        }
        _ => fec::auto::parity_for_goodput(ber, mtu, OVERHEAD + per_packet_overhead),
    }
}

/// Parity for a datagram sent with `setting` over datagrams of `mtu` bytes. Datagrams get no
/// feedback, so `Auto` stays at the strength for `cfg`'s initial BER assumption and target
/// residual loss (`fec_initial_ber`, `fec_target_loss`): the parity a datagram-mode
/// connection's [`FecControl`] starts with, before any receiver report.
pub fn datagram_parity(setting: FecSetting, mtu: usize, cfg: &ConnectionConfig) -> u8 {
    FecControl::new(
        setting,
        Mode::Datagram,
        mtu,
        cfg.per_packet_overhead,
        cfg.fec_target_loss,
        cfg.fec_initial_ber,
    )
    .parity()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_settings() {
        let cfg = ConnectionConfig::default();
        assert_eq!(datagram_parity(FecSetting::Off, 1500, &cfg), 0);
        assert_eq!(datagram_parity(FecSetting::Parity(6), 1500, &cfg), 6);
        assert_eq!(
            datagram_parity(FecSetting::Words(12), 1500, &cfg),
            fec::parity_for_words(12, 1500)
        );
    }

    #[test]
    fn auto_datagram_follows_the_initial_ber_and_target() {
        let mut cfg = ConnectionConfig {
            fec_initial_ber: 1e-4,
            ..ConnectionConfig::default()
        };
        let p = datagram_parity(FecSetting::Auto, 1500, &cfg);
        assert_eq!(
            p,
            fec::auto::parity_for_target(1e-4, 1500, cfg.fec_target_loss)
        );
        // Not the old gateway's bare 8: the engine's rule gives a BER-dependent strength.
        cfg.fec_initial_ber = 1e-3;
        let stronger = datagram_parity(FecSetting::Auto, 1500, &cfg);
        assert!(stronger > p, "{stronger} vs {p}");
        cfg.fec_initial_ber = 0.0;
        assert_eq!(datagram_parity(FecSetting::Auto, 1500, &cfg), 0);
    }

    #[test]
    fn retransmitting_modes_maximise_goodput() {
        assert_eq!(
            auto_parity(Mode::Reliable, 1e-4, 1500, 28, 1e-4),
            fec::auto::parity_for_goodput(1e-4, 1500, OVERHEAD + 28)
        );
        assert_eq!(auto_parity(Mode::Reliable, 0.0, 1500, 28, 1e-4), 0);
    }
}
