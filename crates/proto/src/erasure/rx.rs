//! Receiving side of erasure coding: every data TPDU that arrives intact is a known source
//! symbol; every repair TPDU an equation; what the decoder rebuilds goes into the receiver as
//! if it had arrived (counted apart).

use super::{source_payload, REPAIR_OVERHEAD};
use aerotp_erasure::rlc::RlcDecoder;
use aerotp_erasure::{CodecConfig, ErasureDecoder, RepairHeader, HEADER_LEN};
use aerotp_wire::Flags;

/// A data TPDU rebuilt from repairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// Low 32 bits of its TPDU number.
    pub seq: u32,
    pub flags: Flags,
    pub body: Vec<u8>,
}

/// Receiver statistics of erasure coding (docs/stats.md).
#[derive(Debug, Clone, Default)]
pub struct ErasureRxStats {
    /// Repair TPDUs that arrived intact.
    pub repairs_received: u64,
    /// Of those, the ones that added an equation (not redundant, not older than the window).
    pub repairs_used: u64,
    /// Repair TPDUs refused: a header that does not parse or contradicts what is known.
    pub repairs_refused: u64,
    /// Bytes the decoder holds now (bounded by the window: docs/fec.md).
    pub decoder_bytes: u64,
}

#[derive(Debug)]
pub struct ErasureRx {
    decoder: Option<RlcDecoder>,
    codec: CodecConfig,
    scratch: Vec<u8>,
    pub stats: ErasureRxStats,
}

impl ErasureRx {
    /// `eager`: record sources from the first TPDU (the modes that repair from the start); a
    /// lazy receiver starts at the first repair, and the first window after it may not decode.
    pub fn new(mtu: usize, max_window: usize, eager: bool) -> ErasureRx {
        let max_payload = 1 + crate::codec::max_body(mtu, 0).saturating_sub(REPAIR_OVERHEAD);
        let codec = CodecConfig::sized(max_payload.max(1), max_window.clamp(1, 32768));
        let mut rx = ErasureRx {
            decoder: None,
            codec,
            scratch: Vec::new(),
            stats: ErasureRxStats::default(),
        };
        if eager {
            rx.decoder = RlcDecoder::new(codec).ok();
        }
        rx
    }

    /// The most bytes a receiver made with these sizes can ever hold.
    pub fn worst_case_bytes(mtu: usize, max_window: usize) -> usize {
        let max_payload = 1 + crate::codec::max_body(mtu, 0).saturating_sub(REPAIR_OVERHEAD);
        let codec = CodecConfig::sized(max_payload.max(1), max_window.clamp(1, 32768));
        RlcDecoder::worst_case_bytes(&codec)
    }

    /// Bytes of decoder state held now.
    pub fn memory_bytes(&self) -> usize {
        self.decoder.as_ref().map_or(0, |d| d.memory_bytes())
    }

    /// Whether source `seq` is known (arrived or rebuilt, still in the window).
    pub fn knows(&self, seq: u32) -> bool {
        self.decoder.as_ref().is_some_and(|d| d.knows(seq))
    }

    /// Whether source `seq` is older than the decoder's window.
    pub fn behind(&self, seq: u32) -> bool {
        self.decoder.as_ref().is_some_and(|d| d.behind(seq))
    }

    /// An intact data TPDU arrived; returns what it made decodable.
    pub fn on_source(&mut self, seq: u32, flags: Flags, body: &[u8]) -> Vec<Rebuilt> {
        let Some(d) = self.decoder.as_mut() else {
            return Vec::new();
        };
        source_payload(&mut self.scratch, flags, body);
        // A body too long for the code was not protected: nothing to record.
        d.on_source(seq, &self.scratch)
            .map(rebuilt)
            .unwrap_or_default()
    }

    /// A repair TPDU's body arrived intact; returns the TPDUs it rebuilt.
    pub fn on_repair(&mut self, body: &[u8]) -> Vec<Rebuilt> {
        self.stats.repairs_received += 1;
        let header = match RepairHeader::parse(body) {
            Ok(h) if body.len() == HEADER_LEN + usize::from(h.symbol_bytes) => h,
            _ => {
                self.stats.repairs_refused += 1;
                return Vec::new();
            }
        };
        if self.decoder.is_none() {
            self.decoder = RlcDecoder::new(self.codec).ok();
        }
        let Some(d) = self.decoder.as_mut() else {
            return Vec::new();
        };
        let before = d.redundant + d.stale;
        match d.on_repair(&header, &body[HEADER_LEN..]) {
            Ok(r) => {
                if d.redundant + d.stale == before {
                    self.stats.repairs_used += 1;
                }
                rebuilt(r)
            }
            Err(_) => {
                self.stats.repairs_refused += 1;
                Vec::new()
            }
        }
    }
}

fn rebuilt(r: Vec<aerotp_erasure::Recovered>) -> Vec<Rebuilt> {
    r.into_iter()
        .filter_map(|x| {
            let (&f, body) = x.payload.split_first()?;
            Some(Rebuilt {
                seq: x.seq,
                flags: Flags(f & (Flags::ASYN.0 | Flags::AFIN.0)),
                body: body.to_vec(),
            })
        })
        .collect()
}
