//! The encoder and decoder interface both codes implement.

use crate::api::Error;
use crate::header::{RepairHeader, RepairSymbol};

/// A source symbol rebuilt by a decoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// Its sequence number.
    pub seq: u32,
    /// Its exact payload.
    pub payload: Vec<u8>,
}

/// Sender side of an erasure code.
pub trait ErasureEncoder {
    /// Feeds the next source symbol; `seq` must follow the previous one (any value first).
    fn push_source(&mut self, seq: u32, payload: &[u8]) -> Result<(), Error>;
    /// Makes `count` repair symbols. RS: they cover the block of sources pushed since the last
    /// call, which closes that block (`count = 0` closes it unprotected); RLC: they cover the
    /// current window of the last sources pushed. No sources yet: no repairs.
    fn repair(&mut self, count: usize) -> Result<Vec<RepairSymbol>, Error>;
    /// Bytes of state held now (buffers' capacities), always within `max_bytes`.
    fn memory_bytes(&self) -> usize;
}

/// Receiver side of an erasure code. Both calls return the source symbols that became
/// decodable, at once, each exactly once, never one that was itself received.
pub trait ErasureDecoder {
    /// A source symbol arrived.
    fn on_source(&mut self, seq: u32, payload: &[u8]) -> Result<Vec<Recovered>, Error>;
    /// A repair symbol arrived (header parsed, payload `header.symbol_bytes` long).
    fn on_repair(&mut self, header: &RepairHeader, data: &[u8]) -> Result<Vec<Recovered>, Error>;
    /// Bytes of state held now (buffers' capacities), always within `max_bytes`.
    fn memory_bytes(&self) -> usize;
}
