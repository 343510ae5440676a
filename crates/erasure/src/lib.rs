//! Erasure coding across TPDUs: lost TPDUs rebuilt from repair symbols, without a round trip.
//!
//! Two codes behind one small API ([`ErasureEncoder`], [`ErasureDecoder`]):
//!
//! * [`block::RsEncoder`] / [`block::RsDecoder`]: systematic Reed–Solomon over blocks of
//!   consecutive source symbols (`reed-solomon-simd`, GF(2^16) FFT, O(n log n));
//! * [`rlc::RlcEncoder`] / [`rlc::RlcDecoder`]: a sliding-window random linear code over
//!   GF(2^8) in the spirit of RFC 8681: each repair is a random combination of the last
//!   `window` source symbols, the decoder an incremental Gauss–Jordan elimination.
//!
//! and [`control::StrengthController`], which turns a residual-loss target, a delay bound and the
//! receiver's loss reports into a repair ratio and a block length / window.
//!
//! Engine-friendly: nothing here reads a clock, opens a socket or draws from a global RNG (the
//! RLC coefficients come from a seed carried in each repair header; the encoder's seeds from a
//! key the caller gives). Every buffer has a bound in bytes that the caller sets
//! ([`CodecConfig::max_bytes`]) and that construction checks against the worst case.
//!
//! **Source symbols** are TPDU payloads of 0..=`max_payload` bytes, numbered consecutively
//! (`seq`, wrapping at 2^32; the engine keeps a counter of protected TPDUs for it, as RFC 8681's
//! encoding symbol id). Each is framed as a 2-byte big-endian length then the payload, and
//! zero-padded to the longest framed symbol a repair covers, so the receiver gets back the
//! exact bytes. Integrity of what arrives is the engine's business (the per-TPDU FEC and
//! CRC run first): a decoder fed corrupted repair bytes can rebuild wrong symbols, though it
//! rejects any whose framing (length, zero padding) does not hold.

mod api;
pub mod block;
pub mod channel;
pub mod control;
pub mod header;
pub mod rlc;
mod traits;
mod window;

pub(crate) use api::{check_payload, frame_into, padded_len, unframe};
pub use api::{CodecConfig, Error, FRAME_PREFIX, MAX_PAYLOAD_LIMIT};
pub use header::{CodeKind, RepairHeader, RepairSymbol, HEADER_LEN};
pub use traits::{ErasureDecoder, ErasureEncoder, Recovered};

impl CodecConfig {
    /// A config with `max_bytes` set to the largest worst case of the four coders, for callers
    /// that only want the bound computed.
    pub fn sized(max_payload: usize, window: usize) -> CodecConfig {
        let mut c = CodecConfig {
            max_payload,
            window,
            max_bytes: 0,
        };
        c.max_bytes = [
            block::RsEncoder::worst_case_bytes(&c),
            block::RsDecoder::worst_case_bytes(&c),
            rlc::RlcEncoder::worst_case_bytes(&c),
            rlc::RlcDecoder::worst_case_bytes(&c),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        c
    }
}
