//! Systematic Reed–Solomon over blocks of consecutive source symbols, with `reed-solomon-simd`
//! (Leopard-style GF(2^16) FFT code: any `k` of the `k + m` shards rebuild the block, up to
//! 32768 + 32768 shards, O(n log n)). The encoder closes a block each time it is asked for
//! repairs; a recovered symbol waits at most for the rest of its block and its repairs.

use std::collections::HashMap;

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use crate::window::{Place, SeqWindow};
use crate::{
    check_payload, frame_into, padded_len, unframe, CodeKind, CodecConfig, ErasureDecoder,
    ErasureEncoder, Error, Recovered, RepairHeader, RepairSymbol,
};

fn rs_err(e: reed_solomon_simd::Error) -> Error {
    Error::Rs(e.to_string())
}

/// Reed–Solomon block encoder.
pub struct RsEncoder {
    cfg: CodecConfig,
    next_seq: Option<u32>,
    /// Framed sources of the open block (bounded by `cfg.window` entries).
    block: Vec<Vec<u8>>,
    first_seq: u32,
    rs: Option<ReedSolomonEncoder>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for RsEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsEncoder")
            .field("cfg", &self.cfg)
            .field("open_block", &self.block.len())
            .finish()
    }
}

impl RsEncoder {
    /// Worst-case state: a full block of padded symbols, the library's work space (about
    /// twice the shards rounded up to powers of two) and a scratch shard.
    pub fn worst_case_bytes(cfg: &CodecConfig) -> usize {
        let shard = padded_len(cfg.max_payload);
        let shard64 = shard.div_ceil(64) * 64;
        cfg.window * shard + 4 * cfg.window.next_power_of_two() * shard64 + shard
    }

    /// A new encoder; fails if `cfg` is out of range or `max_bytes` below the worst case.
    pub fn new(cfg: CodecConfig) -> Result<RsEncoder, Error> {
        cfg.validate()?;
        cfg.check_bytes(Self::worst_case_bytes(&cfg))?;
        Ok(RsEncoder {
            cfg,
            next_seq: None,
            block: Vec::new(),
            first_seq: 0,
            rs: None,
            scratch: Vec::new(),
        })
    }

    /// Sources in the open block.
    pub fn open_block_len(&self) -> usize {
        self.block.len()
    }
}

impl ErasureEncoder for RsEncoder {
    fn push_source(&mut self, seq: u32, payload: &[u8]) -> Result<(), Error> {
        check_payload(payload, self.cfg.max_payload)?;
        if let Some(expected) = self.next_seq {
            if seq != expected {
                return Err(Error::Sequence { expected, got: seq });
            }
        }
        if self.block.len() >= self.cfg.window {
            return Err(Error::Param {
                what: "block length",
                value: self.block.len() as u64 + 1,
                accepted: format!(
                    "at most window = {} sources; call repair() to close the block",
                    self.cfg.window
                ),
            });
        }
        if self.block.is_empty() {
            self.first_seq = seq;
        }
        let mut framed = Vec::with_capacity(payload.len() + 2);
        frame_into(&mut framed, payload);
        self.block.push(framed);
        self.next_seq = Some(seq.wrapping_add(1));
        Ok(())
    }

    fn repair(&mut self, count: usize) -> Result<Vec<RepairSymbol>, Error> {
        let k = self.block.len();
        if k == 0 {
            return Ok(Vec::new());
        }
        if count == 0 {
            self.block.clear();
            return Ok(Vec::new());
        }
        if count > u16::MAX as usize || !ReedSolomonEncoder::supports(k, count) {
            return Err(Error::Param {
                what: "repair count",
                value: count as u64,
                accepted: format!("1..=32768 with block length {k} (reed-solomon-simd's limits)"),
            });
        }
        let longest = self.block.iter().map(Vec::len).max().unwrap_or(2);
        let shard = (longest + 1) & !1;
        let enc = match self.rs.as_mut() {
            Some(e) => {
                e.reset(k, count, shard).map_err(rs_err)?;
                e
            }
            None => self
                .rs
                .insert(ReedSolomonEncoder::new(k, count, shard).map_err(rs_err)?),
        };
        for s in &self.block {
            self.scratch.clear();
            self.scratch.extend_from_slice(s);
            self.scratch.resize(shard, 0);
            enc.add_original_shard(&self.scratch).map_err(rs_err)?;
        }
        let result = enc.encode().map_err(rs_err)?;
        let out = result
            .recovery_iter()
            .enumerate()
            .map(|(i, data)| RepairSymbol {
                header: RepairHeader {
                    code: CodeKind::ReedSolomon,
                    first_seq: self.first_seq,
                    span: k as u16,
                    repair_index: i as u16,
                    repair_total: count as u16,
                    seed: 0,
                    symbol_bytes: shard as u16,
                },
                data: data.to_vec(),
            })
            .collect();
        drop(result);
        self.block.clear();
        Ok(out)
    }

    fn memory_bytes(&self) -> usize {
        // The library's work space is not visible; it is counted at its documented worst case
        // in `worst_case_bytes`, and here as what our own buffers hold.
        self.block.iter().map(Vec::capacity).sum::<usize>() + self.scratch.capacity()
    }
}

struct Block {
    k: u16,
    total: u16,
    shard: u16,
    repairs: Vec<(u16, Vec<u8>)>,
    done: bool,
}

/// Reed–Solomon block decoder.
pub struct RsDecoder {
    cfg: CodecConfig,
    sources: SeqWindow,
    blocks: HashMap<u32, Block>,
    /// Bytes of repair payload held, bounded by `repair_budget`.
    repair_bytes: usize,
    repair_budget: usize,
    rs: Option<ReedSolomonDecoder>,
    scratch: Vec<u8>,
    /// Repairs dropped because the repair budget was full.
    pub dropped_for_memory: u64,
    /// Symbols that arrived older than the window.
    pub stale: u64,
}

impl std::fmt::Debug for RsDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsDecoder")
            .field("cfg", &self.cfg)
            .field("blocks", &self.blocks.len())
            .field("repair_bytes", &self.repair_bytes)
            .finish()
    }
}

impl RsDecoder {
    /// Worst case: the source window, repairs up to `window` padded shards, the block table
    /// and the library's work space.
    pub fn worst_case_bytes(cfg: &CodecConfig) -> usize {
        let shard = padded_len(cfg.max_payload);
        let cap = cfg.window.next_power_of_two();
        cap * (shard + 24) + cfg.window * (shard + 64) + RsEncoder::worst_case_bytes(cfg)
    }

    /// A new decoder; fails if `cfg` is out of range or `max_bytes` below the worst case.
    pub fn new(cfg: CodecConfig) -> Result<RsDecoder, Error> {
        cfg.validate()?;
        cfg.check_bytes(Self::worst_case_bytes(&cfg))?;
        Ok(RsDecoder {
            cfg,
            sources: SeqWindow::new(cfg.window),
            blocks: HashMap::new(),
            repair_bytes: 0,
            repair_budget: cfg.window * padded_len(cfg.max_payload),
            rs: None,
            scratch: Vec::new(),
            dropped_for_memory: 0,
            stale: 0,
        })
    }

    fn advance(&mut self, seq: u32) {
        if self.sources.place(seq) != Place::Ahead {
            return;
        }
        self.sources.advance(seq);
        // Forget blocks that begin before the window: their symbols are gone.
        let src = &self.sources;
        let mut freed = 0;
        self.blocks.retain(|first, b| {
            let keep = src.place(*first) == Place::In;
            if !keep {
                freed += b.repairs.iter().map(|(_, d)| d.len()).sum::<usize>();
            }
            keep
        });
        self.repair_bytes -= freed;
    }

    fn try_decode(&mut self, first: u32, out: &mut Vec<Recovered>) -> Result<(), Error> {
        let Some(b) = self.blocks.get_mut(&first) else {
            return Ok(());
        };
        if b.done {
            return Ok(());
        }
        let k = b.k as usize;
        let missing: Vec<usize> = (0..k)
            .filter(|&i| !self.sources.has(first.wrapping_add(i as u32)))
            .collect();
        if missing.is_empty() || b.repairs.len() >= missing.len() {
            let freed: usize = b.repairs.iter().map(|(_, d)| d.len()).sum();
            let repairs = std::mem::take(&mut b.repairs);
            b.done = true;
            let (total, shard) = (b.total as usize, b.shard as usize);
            self.repair_bytes -= freed;
            if missing.is_empty() {
                return Ok(());
            }
            let inconsistent = |why| Error::Inconsistent {
                first_seq: first,
                span: k as u16,
                why,
            };
            let dec = match self.rs.as_mut() {
                Some(d) => {
                    d.reset(k, total, shard).map_err(rs_err)?;
                    d
                }
                None => self
                    .rs
                    .insert(ReedSolomonDecoder::new(k, total, shard).map_err(rs_err)?),
            };
            for i in 0..k {
                if let Some(s) = self.sources.get(first.wrapping_add(i as u32)) {
                    if s.len() > shard {
                        return Err(inconsistent("a covered source is longer than the shard"));
                    }
                    self.scratch.clear();
                    self.scratch.extend_from_slice(s);
                    self.scratch.resize(shard, 0);
                    dec.add_original_shard(i, &self.scratch).map_err(rs_err)?;
                }
            }
            for (idx, data) in &repairs {
                dec.add_recovery_shard(*idx as usize, data)
                    .map_err(rs_err)?;
            }
            let result = dec.decode().map_err(rs_err)?;
            let mut rebuilt = Vec::with_capacity(missing.len());
            for &i in &missing {
                let shard_bytes = result.restored_original(i).ok_or(inconsistent(
                    "the library restored no shard for a lost index",
                ))?;
                let payload = unframe(shard_bytes, self.cfg.max_payload).ok_or(inconsistent(
                    "a rebuilt symbol's length or padding is wrong",
                ))?;
                rebuilt.push((i, payload.to_vec()));
            }
            drop(result);
            for (i, payload) in rebuilt {
                let seq = first.wrapping_add(i as u32);
                self.scratch.clear();
                crate::frame_into(&mut self.scratch, &payload);
                self.sources.put(seq, &self.scratch);
                out.push(Recovered { seq, payload });
            }
        }
        Ok(())
    }
}

impl ErasureDecoder for RsDecoder {
    fn on_source(&mut self, seq: u32, payload: &[u8]) -> Result<Vec<Recovered>, Error> {
        check_payload(payload, self.cfg.max_payload)?;
        self.advance(seq);
        if self.sources.place(seq) != Place::In {
            self.stale += 1;
            return Ok(Vec::new());
        }
        if self.sources.has(seq) {
            return Ok(Vec::new());
        }
        self.scratch.clear();
        frame_into(&mut self.scratch, payload);
        let framed = std::mem::take(&mut self.scratch);
        self.sources.put(seq, &framed);
        self.scratch = framed;
        // A late source can complete a block that waits with repairs.
        let firsts: Vec<u32> = self
            .blocks
            .iter()
            .filter(|(f, b)| !b.done && !b.repairs.is_empty() && seq.wrapping_sub(**f) < b.k as u32)
            .map(|(f, _)| *f)
            .collect();
        let mut out = Vec::new();
        for f in firsts {
            self.try_decode(f, &mut out)?;
        }
        Ok(out)
    }

    fn on_repair(&mut self, h: &RepairHeader, data: &[u8]) -> Result<Vec<Recovered>, Error> {
        if h.code != CodeKind::ReedSolomon {
            return Err(Error::Header {
                field: "code",
                value: 2,
                accepted: "1 (Reed-Solomon) for this decoder",
            });
        }
        if data.len() != h.symbol_bytes as usize
            || data.len() > padded_len(self.cfg.max_payload)
            || !data.len().is_multiple_of(2)
        {
            return Err(Error::Param {
                what: "repair payload length",
                value: data.len() as u64,
                accepted: format!(
                    "the header's symbol_bytes ({}), even, at most {}",
                    h.symbol_bytes,
                    padded_len(self.cfg.max_payload)
                ),
            });
        }
        if h.span == 0 || h.span as usize > self.cfg.window {
            return Err(Error::Param {
                what: "repair span",
                value: h.span as u64,
                accepted: format!("1..={} (the decoder's window)", self.cfg.window),
            });
        }
        if !ReedSolomonDecoder::supports(h.span as usize, h.repair_total as usize) {
            return Err(Error::Param {
                what: "repair_total",
                value: h.repair_total as u64,
                accepted: format!("what reed-solomon-simd supports with span {}", h.span),
            });
        }
        let last = h.first_seq.wrapping_add(h.span as u32 - 1);
        self.advance(last);
        if self.sources.place(h.first_seq) != Place::In {
            self.stale += 1;
            return Ok(Vec::new());
        }
        let b = self.blocks.entry(h.first_seq).or_insert(Block {
            k: h.span,
            total: h.repair_total,
            shard: h.symbol_bytes,
            repairs: Vec::new(),
            done: false,
        });
        if (b.k, b.total, b.shard) != (h.span, h.repair_total, h.symbol_bytes) {
            return Err(Error::Inconsistent {
                first_seq: h.first_seq,
                span: h.span,
                why: "the block was announced with another span, repair_total or symbol_bytes",
            });
        }
        if b.done || b.repairs.iter().any(|(i, _)| *i == h.repair_index) {
            return Ok(Vec::new());
        }
        if b.repairs.len() >= b.k as usize {
            return Ok(Vec::new());
        }
        if self.repair_bytes + data.len() > self.repair_budget {
            self.dropped_for_memory += 1;
            return Ok(Vec::new());
        }
        b.repairs.push((h.repair_index, data.to_vec()));
        self.repair_bytes += data.len();
        let mut out = Vec::new();
        self.try_decode(h.first_seq, &mut out)?;
        Ok(out)
    }

    fn memory_bytes(&self) -> usize {
        self.sources.memory_bytes()
            + self.repair_bytes
            + self.blocks.capacity() * (std::mem::size_of::<Block>() + 8)
            + self.scratch.capacity()
    }
}
