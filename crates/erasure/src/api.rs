//! The API both codes share: parameters and their bounds, errors, the encoder and decoder
//! traits, and the framing of source symbols.

/// Bytes of the length prefix framing each source symbol.
pub const FRAME_PREFIX: usize = 2;

/// Largest source payload: the framed, even-padded symbol must fit the header's u16 length.
pub const MAX_PAYLOAD_LIMIT: usize = 65532;

/// Everything that can go wrong; each variant says what, the value, and what is accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A parameter (config or call argument) out of range.
    #[error("{what} = {value}: accepted {accepted}")]
    Param {
        /// The parameter.
        what: &'static str,
        /// Its value.
        value: u64,
        /// What would be accepted.
        accepted: String,
    },
    /// A repair header that does not parse.
    #[error("repair header {field} = {value}: accepted {accepted}")]
    Header {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What would be accepted.
        accepted: &'static str,
    },
    /// A source symbol pushed out of order into an encoder.
    #[error("source seq = {got}: accepted only {expected}, the next consecutive number")]
    Sequence {
        /// The next number the encoder accepts.
        expected: u32,
        /// The number given.
        got: u32,
    },
    /// A repair that contradicts what the decoder knows (a different block shape under the
    /// same first seq, a covered source longer than the repair, a rebuilt symbol with bad
    /// framing). The repair (or block) is dropped; nothing wrong is returned.
    #[error("repair covering {first_seq}+{span} inconsistent: {why}")]
    Inconsistent {
        /// First seq the repair covers.
        first_seq: u32,
        /// Its span.
        span: u16,
        /// What did not hold.
        why: &'static str,
    },
    /// The Reed–Solomon library refused.
    #[error("reed-solomon-simd: {0}")]
    Rs(String),
}

/// Sizes and bounds common to both codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodecConfig {
    /// Largest source payload in bytes (1..=65532).
    pub max_payload: usize,
    /// RS: the largest block (source symbols); RLC: the largest encoding window. Decoders
    /// remember this many source symbols behind the newest seq they have seen, and forget
    /// anything older (1..=32768).
    pub window: usize,
    /// Bound on the encoder's or decoder's state in bytes; construction fails if the worst
    /// case for `max_payload` and `window` exceeds it.
    pub max_bytes: usize,
}

impl CodecConfig {
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.max_payload == 0 || self.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(Error::Param {
                what: "max_payload",
                value: self.max_payload as u64,
                accepted: format!("1..={MAX_PAYLOAD_LIMIT} bytes"),
            });
        }
        if self.window == 0 || self.window > 32768 {
            return Err(Error::Param {
                what: "window",
                value: self.window as u64,
                accepted: "1..=32768 source symbols".into(),
            });
        }
        Ok(())
    }

    pub(crate) fn check_bytes(&self, worst: usize) -> Result<(), Error> {
        if worst > self.max_bytes {
            return Err(Error::Param {
                what: "max_bytes",
                value: self.max_bytes as u64,
                accepted: format!(
                    "at least {worst} for window {} and max_payload {}",
                    self.window, self.max_payload
                ),
            });
        }
        Ok(())
    }
}

/// Framed length of a payload of `max_payload` bytes, rounded up to even (the RS library
/// needs even shards; the RLC shares the bound for simplicity).
pub(crate) fn padded_len(max_payload: usize) -> usize {
    (max_payload + FRAME_PREFIX + 1) & !1
}

/// Writes the framing of `payload` into `out` (cleared first).
pub(crate) fn frame_into(out: &mut Vec<u8>, payload: &[u8]) {
    out.clear();
    out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Reads back a framed, padded symbol: the length must fit and the padding must be zero
/// (a check that catches rebuilt garbage without a checksum).
pub(crate) fn unframe(sym: &[u8], max_payload: usize) -> Option<&[u8]> {
    if sym.len() < FRAME_PREFIX {
        return None;
    }
    let len = u16::from_be_bytes([sym[0], sym[1]]) as usize;
    if len > max_payload || FRAME_PREFIX + len > sym.len() {
        return None;
    }
    if sym[FRAME_PREFIX + len..].iter().any(|&b| b != 0) {
        return None;
    }
    Some(&sym[FRAME_PREFIX..FRAME_PREFIX + len])
}

pub(crate) fn check_payload(payload: &[u8], max_payload: usize) -> Result<(), Error> {
    if payload.len() > max_payload {
        return Err(Error::Param {
            what: "payload length",
            value: payload.len() as u64,
            accepted: format!("0..={max_payload} bytes (max_payload)"),
        });
    }
    Ok(())
}
