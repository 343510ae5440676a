//! How the connection's TPDUs are cut and protected: the size new TPDUs are cut at, the
//! per-TPDU FEC parity, erasure coding across TPDUs (repairs for what this end sends, decoding
//! of what it receives), and the bit-error rate the peer reports, which all of them follow.

use crate::config::ConnectionConfig;
use crate::erasure::{ErasureRx, ErasureSetting, ErasureTx};
use crate::error_control::ErrorControl;
use crate::fec_control::FecControl;
use crate::tpdu_size::TpduSizer;
use aerotp_wire::Report;
use std::time::Duration;

#[derive(Debug)]
pub(super) struct Coding {
    pub(super) fec: FecControl,
    /// Erasure coding across TPDUs: repairs for what we send, decoding of what we receive.
    pub(super) etx: ErasureTx,
    pub(super) erx: ErasureRx,
    /// The outages seen and the size new TPDUs are cut at (`crate::tpdu_size`).
    pub(super) tpdu: TpduSizer,
    /// The bit-error rate the peer last reported (of what this end sends).
    pub(super) peer_ber: f64,
}

impl Coding {
    /// `key` seeds the erasure code's coefficients: the same inputs give the same repairs,
    /// different connections different ones.
    pub(super) fn new(ec: ErrorControl, cfg: &ConnectionConfig, key: u64, now: Duration) -> Coding {
        let erasure: ErasureSetting = cfg.erasure.unwrap_or(ec.erasure);
        // The modes that repair from their first TPDU record sources from the start; in the
        // others a hole waits for repairs (up to the delay bound) once the first repair shows
        // the peer sends them (a peer without repair must not delay every hole).
        let eager = ec.repairs_from_start && !erasure.is_off();
        Coding {
            fec: FecControl::new(
                cfg.fec,
                ec.auto_fec,
                cfg.mtu,
                cfg.per_packet_overhead,
                cfg.fec_target_loss,
                cfg.fec_initial_ber,
            ),
            etx: ErasureTx::new(erasure, cfg.mtu, key),
            erx: ErasureRx::new(cfg.mtu, erasure.max_window, eager),
            tpdu: TpduSizer::new(now),
            peer_ber: 0.0,
        }
    }

    /// The peer's receiver report: its bit-error rate and losses, for the FEC and the
    /// erasure strength.
    pub(super) fn on_report(&mut self, r: &Report) {
        self.peer_ber = f64::from(r.ber_ppb) * 1e-9;
        self.fec.on_report(r);
        self.etx.on_report(r);
    }
}
