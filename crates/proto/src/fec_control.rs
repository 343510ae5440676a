//! The sender's choice of FEC strength: fixed, on the papers' scale, or automatic from the
//! bit-error rate the receiver reports.

use crate::config::{ConnectionConfig, FecSetting};
use crate::error_control::{AutoFec, ErrorControl};
use crate::fec_parity;
use aerotp_fec as fec;
use aerotp_wire::{Mode, Report};

#[derive(Debug, Clone)]
pub struct FecControl {
    setting: FecSetting,
    aim: AutoFec,
    mtu: usize,
    per_packet_overhead: usize,
    target: f64,
    current: u8,
    /// The bit-error rate the current choice is based on.
    pub ber: f64,
}

impl FecControl {
    /// The choice a sender aiming at `aim` (its mode's `ErrorControl::auto_fec`) starts with, before any receiver report: `Off` → 0,
    /// `Parity(p)` → p, `Words(w)` → the parity that gives `w` codewords per `mtu`, `Auto` →
    /// [`fec_parity::auto_parity`] at `initial_ber`.
    pub fn new(
        setting: FecSetting,
        aim: AutoFec,
        mtu: usize,
        per_packet_overhead: usize,
        target: f64,
        initial_ber: f64,
    ) -> Self {
        let mut c = FecControl {
            setting,
            aim,
            mtu,
            per_packet_overhead,
            target,
            current: 0,
            ber: initial_ber,
        };
        c.current = match setting {
            FecSetting::Off => 0,
            FecSetting::Parity(p) => p,
            FecSetting::Words(w) => fec::parity_for_words(w, mtu),
            FecSetting::Auto => c.choose(initial_ber),
        };
        c
    }

    fn choose(&self, ber: f64) -> u8 {
        fec_parity::auto_parity(
            self.aim,
            ber,
            self.mtu,
            self.per_packet_overhead,
            self.target,
        )
    }

    /// Parity for the next TPDU.
    pub fn parity(&self) -> u8 {
        self.current
    }

    pub fn is_auto(&self) -> bool {
        self.setting == FecSetting::Auto
    }

    /// A receiver report arrived: re-choose if automatic.
    pub fn on_report(&mut self, r: &Report) {
        if !self.is_auto() || r.tpdus < 16 {
            return;
        }
        self.ber = f64::from(r.ber_ppb) * 1e-9;
        self.current = self.choose(self.ber);
    }
}

/// Parity for a datagram sent with `setting` over datagrams of `mtu` bytes. Datagrams get no
/// feedback, so `Auto` stays at the strength for `cfg`'s initial BER assumption and target
/// residual loss (`fec_initial_ber`, `fec_target_loss`): the parity a datagram-mode
/// connection's [`FecControl`] starts with, before any receiver report.
pub fn datagram_parity(setting: FecSetting, mtu: usize, cfg: &ConnectionConfig) -> u8 {
    FecControl::new(
        setting,
        ErrorControl::for_mode(Mode::Datagram).auto_fec,
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
    fn fixed_settings_map_to_parity() {
        assert_eq!(
            FecControl::new(FecSetting::Off, AutoFec::Goodput, 1500, 28, 1e-4, 0.0).parity(),
            0
        );
        assert_eq!(
            FecControl::new(FecSetting::Parity(6), AutoFec::Goodput, 1500, 28, 1e-4, 0.0).parity(),
            6
        );
        assert_eq!(
            FecControl::new(FecSetting::Words(12), AutoFec::Goodput, 1500, 28, 1e-4, 0.0).parity(),
            8
        );
    }

    #[test]
    fn auto_follows_reports() {
        let mut c = FecControl::new(FecSetting::Auto, AutoFec::Goodput, 1500, 28, 1e-4, 1e-4);
        let high = c.parity();
        assert!(high > 0);
        c.on_report(&Report {
            ber_ppb: 0,
            tpdus: 100,
            lost: 0,
            ..Default::default()
        });
        assert_eq!(c.parity(), 0);
        c.on_report(&Report {
            ber_ppb: 100_000,
            tpdus: 100,
            lost: 0,
            ..Default::default()
        });
        assert_eq!(c.parity(), high);
        // Too few samples: ignored.
        c.on_report(&Report {
            ber_ppb: 0,
            tpdus: 3,
            lost: 0,
            ..Default::default()
        });
        assert_eq!(c.parity(), high);
    }
}
