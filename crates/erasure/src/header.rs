//! The repair symbol header: what a repair covers and how it was made, 18 bytes, big-endian.
//!
//! ```text
//!  0      1      2..6        6..8   8..10         10..12        12..16  16..18
//! +------+------+-----------+------+-------------+-------------+-------+-------------+
//! | code | 0    | first_seq | span | repair_index| repair_total| seed  | symbol_bytes|
//! +------+------+-----------+------+-------------+-------------+-------+-------------+
//! ```
//!
//! * `code`: 1 = Reed–Solomon block, 2 = sliding-window random linear code (RLC).
//! * byte 1 is reserved and must be 0, so a later version can use it.
//! * `first_seq`, `span`: the source symbols covered, `first_seq .. first_seq + span`
//!   (sequence numbers wrap at 2^32): the block (RS) or the encoding window (RLC).
//! * `repair_index`: RS: the recovery shard's index in the block, `< repair_total`;
//!   RLC: a counter, informative only.
//! * `repair_total`: RS: how many recovery shards the encoder made for the block (the RS
//!   decoder needs it); RLC: 0.
//! * `seed`: RLC: the seed of the coefficient generator; RS: 0.
//! * `symbol_bytes`: the length of the repair payload that follows, = the padded length of the
//!   framed source symbols it covers.

use crate::{Error, FRAME_PREFIX};

/// Header length on the wire.
pub const HEADER_LEN: usize = 18;

/// Which code made a repair symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// Systematic Reed–Solomon over blocks (`reed-solomon-simd`).
    ReedSolomon,
    /// Sliding-window random linear code over GF(2^8) (RFC 8681 style).
    Rlc,
}

impl CodeKind {
    fn to_byte(self) -> u8 {
        match self {
            CodeKind::ReedSolomon => 1,
            CodeKind::Rlc => 2,
        }
    }
}

/// What a repair symbol covers; see the module documentation for the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RepairHeader {
    /// The code.
    pub code: CodeKind,
    /// First source sequence number covered.
    pub first_seq: u32,
    /// Number of source symbols covered (>= 1).
    pub span: u16,
    /// RS: recovery shard index; RLC: repair counter.
    pub repair_index: u16,
    /// RS: recovery shards made for the block; RLC: 0.
    pub repair_total: u16,
    /// RLC: coefficient generator seed; RS: 0.
    pub seed: u32,
    /// Length in bytes of the repair payload.
    pub symbol_bytes: u16,
}

impl RepairHeader {
    /// The header's 18 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.code.to_byte();
        b[2..6].copy_from_slice(&self.first_seq.to_be_bytes());
        b[6..8].copy_from_slice(&self.span.to_be_bytes());
        b[8..10].copy_from_slice(&self.repair_index.to_be_bytes());
        b[10..12].copy_from_slice(&self.repair_total.to_be_bytes());
        b[12..16].copy_from_slice(&self.seed.to_be_bytes());
        b[16..18].copy_from_slice(&self.symbol_bytes.to_be_bytes());
        b
    }

    /// Parses a header from the start of `bytes`; never panics. Checks each field against what
    /// its code allows, so a decoder can trust a parsed header's shape.
    pub fn parse(bytes: &[u8]) -> Result<RepairHeader, Error> {
        let b: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(Error::Header {
                field: "length",
                value: bytes.len() as u64,
                accepted: "at least 18 bytes",
            })?;
        let code = match b[0] {
            1 => CodeKind::ReedSolomon,
            2 => CodeKind::Rlc,
            v => {
                return Err(Error::Header {
                    field: "code",
                    value: v as u64,
                    accepted: "1 (Reed-Solomon) or 2 (RLC)",
                })
            }
        };
        if b[1] != 0 {
            return Err(Error::Header {
                field: "reserved",
                value: b[1] as u64,
                accepted: "0",
            });
        }
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let h = RepairHeader {
            code,
            first_seq: u32_at(2),
            span: u16_at(6),
            repair_index: u16_at(8),
            repair_total: u16_at(10),
            seed: u32_at(12),
            symbol_bytes: u16_at(16),
        };
        h.check()?;
        Ok(h)
    }

    /// The fields' rules, once read: a span of at least one symbol, symbols holding the length
    /// prefix, and each code's own (Reed-Solomon: an index below a non-zero total, even
    /// symbols, no seed; RLC: no total).
    fn check(&self) -> Result<(), Error> {
        let h = self;
        if h.span == 0 {
            return Err(Error::Header {
                field: "span",
                value: 0,
                accepted: "1..=65535 source symbols",
            });
        }
        if (h.symbol_bytes as usize) < FRAME_PREFIX {
            return Err(Error::Header {
                field: "symbol_bytes",
                value: h.symbol_bytes as u64,
                accepted: "at least the 2-byte length prefix",
            });
        }
        match h.code {
            CodeKind::ReedSolomon => {
                if h.repair_total == 0 || h.repair_index >= h.repair_total {
                    return Err(Error::Header {
                        field: "repair_index",
                        value: h.repair_index as u64,
                        accepted: "below repair_total, which must be >= 1 for Reed-Solomon",
                    });
                }
                if !h.symbol_bytes.is_multiple_of(2) {
                    return Err(Error::Header {
                        field: "symbol_bytes",
                        value: h.symbol_bytes as u64,
                        accepted: "an even length for Reed-Solomon",
                    });
                }
                if h.seed != 0 {
                    return Err(Error::Header {
                        field: "seed",
                        value: h.seed as u64,
                        accepted: "0 for Reed-Solomon",
                    });
                }
            }
            CodeKind::Rlc => {
                if h.repair_total != 0 {
                    return Err(Error::Header {
                        field: "repair_total",
                        value: h.repair_total as u64,
                        accepted: "0 for RLC",
                    });
                }
            }
        }
        Ok(())
    }
}

/// A repair symbol: header and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairSymbol {
    /// What it covers.
    pub header: RepairHeader,
    /// `header.symbol_bytes` bytes.
    pub data: Vec<u8>,
}

impl RepairSymbol {
    /// Header then payload, as carried in a repair TPDU.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + self.data.len());
        v.extend_from_slice(&self.header.to_bytes());
        v.extend_from_slice(&self.data);
        v
    }

    /// Parses header and payload; the payload must be exactly `symbol_bytes` long.
    pub fn parse(bytes: &[u8]) -> Result<RepairSymbol, Error> {
        let header = RepairHeader::parse(bytes)?;
        let data = &bytes[HEADER_LEN..];
        if data.len() != header.symbol_bytes as usize {
            return Err(Error::Header {
                field: "payload length",
                value: data.len() as u64,
                accepted: "exactly the header's symbol_bytes",
            });
        }
        Ok(RepairSymbol {
            header,
            data: data.to_vec(),
        })
    }
}
