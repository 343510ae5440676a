//! Erasure coding across TPDUs in the engine (docs/fec.md, "Erasure coding in the engine";
//! wire format docs/spec.md §7): the setting, the sending side (repair scheduling and
//! strength), the receiving side (decoding), and the loss counters both ends use.
//!
//! A source symbol is a data TPDU's first transmission: one byte of its flags (`ASYN`,
//! `AFIN`) then its body, numbered by its TPDU number. A repair TPDU (flags exactly `RST|RPT`)
//! carries an `aerotp_erasure` repair header and symbol as its body, under the per-TPDU FEC
//! like any TPDU: bit errors are corrected first, lost TPDUs then erased.

mod loss;
mod rx;
mod setting;
mod tx;

pub use loss::{Arrival, WireLoss};
pub use rx::{ErasureRx, ErasureRxStats, Rebuilt};
pub use setting::{ErasureChoice, ErasureMode, ErasureSetting};
pub use tx::{ErasureTx, ErasureTxStats};

use aerotp_wire::Flags;

/// Bytes a repair body needs beyond the data body it covers: the repair header (18), the
/// source framing's length prefix (2), the flags byte (1) and even padding (1). A data TPDU
/// leaves them free while its connection repairs, so a repair fits the same MTU.
pub const REPAIR_OVERHEAD: usize = aerotp_erasure::HEADER_LEN + aerotp_erasure::FRAME_PREFIX + 2;

/// Writes the source symbol of a data TPDU: its `ASYN`/`AFIN` flags, then its body.
pub(crate) fn source_payload(out: &mut Vec<u8>, flags: Flags, body: &[u8]) {
    out.clear();
    out.push(flags.0 & (Flags::ASYN.0 | Flags::AFIN.0));
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests;
