//! Sliding-window random linear code over GF(2^8), in the spirit of RFC 8681: sources are sent
//! as they are (systematic); a repair is `sum c_i * s_i` over the last `window` framed sources,
//! the `c_i` drawn (non-zero) from a PCG32 generator seeded by the header's `seed`. The decoder
//! keeps its equations in reduced row-echelon form over the unknown (lost) symbols of its
//! window and hands back each lost symbol the moment its row has no other unknown.
//!
//! Written by hand: the one crate found that implements RFC 8681 (`cu-fec` 1.3, checked on
//! crates.io along with `raptorq`, `reed-solomon-simd`, `reed-solomon-erasure`, `gf256`) uses
//! fixed const-generic symbol and window sizes (every symbol padded to the compile-time maximum,
//! arrays of `MAX_SYMBOL_SIZE * MAX_WINDOW` bytes inline) and a bit-by-bit field multiply;
//! its repair encoding measured 3-4x slower than this code's
//! (`docs/results/erasure-codecs.md`).

use aerotp_fec::gf;
use rand_pcg::Pcg32;

use crate::window::{Place, SeqWindow};
use crate::{
    check_payload, frame_into, padded_len, unframe, CodeKind, CodecConfig, ErasureDecoder,
    ErasureEncoder, Error, Recovered, RepairHeader, RepairSymbol,
};

/// The `span` coefficients of a repair with this seed: PCG32 (rand_pcg's `Pcg32`, seeded with
/// `seed_from_u64(seed)`), each 32-bit output split into 4 bytes, low byte first, zeros skipped
/// (a zero would leave that source out of the combination). Fixed here, not left to a
/// library's range sampling, because both ends of a link must draw the same bytes.
pub fn coefficients(seed: u32, span: usize, out: &mut Vec<u8>) {
    use rand::{RngCore, SeedableRng};
    let mut rng = Pcg32::seed_from_u64(seed as u64);
    out.clear();
    while out.len() < span {
        for b in rng.next_u32().to_le_bytes() {
            if b != 0 && out.len() < span {
                out.push(b);
            }
        }
    }
}

/// SplitMix64 step: spreads (key, counter) into a seed, so two encoders with different keys
/// draw different coefficients.
fn mix(key: u64, counter: u64) -> u64 {
    let mut z = key.wrapping_add(counter.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// RLC encoder.
#[derive(Debug)]
pub struct RlcEncoder {
    cfg: CodecConfig,
    key: u64,
    counter: u64,
    window: usize,
    next_seq: Option<u32>,
    /// The last `cfg.window` framed sources, oldest first, in a ring.
    ring: Vec<Vec<u8>>,
    head: usize,
    len: usize,
    coefs: Vec<u8>,
}

impl RlcEncoder {
    /// Worst case: `window` framed symbols and a coefficient buffer.
    pub fn worst_case_bytes(cfg: &CodecConfig) -> usize {
        cfg.window * (padded_len(cfg.max_payload) + std::mem::size_of::<Vec<u8>>() + 1)
    }

    /// A new encoder drawing its seeds from `key` (the engine gives e.g. a connection id, so
    /// no global RNG is read); the window starts at `cfg.window`.
    pub fn new(cfg: CodecConfig, key: u64) -> Result<RlcEncoder, Error> {
        cfg.validate()?;
        cfg.check_bytes(Self::worst_case_bytes(&cfg))?;
        Ok(RlcEncoder {
            cfg,
            key,
            counter: 0,
            window: cfg.window,
            next_seq: None,
            ring: vec![Vec::new(); cfg.window],
            head: 0,
            len: 0,
            coefs: Vec::new(),
        })
    }

    /// Sets how many of the last sources the next repairs cover (1..=`cfg.window`); the
    /// strength controller's choice, changeable at any time.
    pub fn set_window(&mut self, window: usize) -> Result<(), Error> {
        if window == 0 || window > self.cfg.window {
            return Err(Error::Param {
                what: "encoding window",
                value: window as u64,
                accepted: format!("1..={} (the configured window)", self.cfg.window),
            });
        }
        self.window = window;
        Ok(())
    }

    /// The current encoding window.
    pub fn window(&self) -> usize {
        self.window
    }

    /// How many sources the next repair covers: the window, or fewer while fewer were sent.
    pub fn span(&self) -> usize {
        self.window.min(self.len)
    }
}

impl ErasureEncoder for RlcEncoder {
    fn push_source(&mut self, seq: u32, payload: &[u8]) -> Result<(), Error> {
        check_payload(payload, self.cfg.max_payload)?;
        if let Some(expected) = self.next_seq {
            if seq != expected {
                return Err(Error::Sequence { expected, got: seq });
            }
        }
        let cap = self.ring.len();
        let slot = (self.head + self.len) % cap;
        frame_into(&mut self.ring[slot], payload);
        if self.len == cap {
            self.head = (self.head + 1) % cap;
        } else {
            self.len += 1;
        }
        self.next_seq = Some(seq.wrapping_add(1));
        Ok(())
    }

    fn repair(&mut self, count: usize) -> Result<Vec<RepairSymbol>, Error> {
        let Some(next) = self.next_seq else {
            return Ok(Vec::new());
        };
        let span = self.window.min(self.len);
        let cap = self.ring.len();
        let first_slot = (self.head + self.len - span) % cap;
        let first_seq = next.wrapping_sub(span as u32);
        let longest = (0..span)
            .map(|i| self.ring[(first_slot + i) % cap].len())
            .max()
            .unwrap_or(2);
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let seed = mix(self.key, self.counter) as u32;
            let index = self.counter as u16;
            self.counter += 1;
            coefficients(seed, span, &mut self.coefs);
            let mut data = vec![0u8; longest];
            for (i, &c) in self.coefs.iter().enumerate() {
                gf::mul_add(&mut data, &self.ring[(first_slot + i) % cap], c);
            }
            out.push(RepairSymbol {
                header: RepairHeader {
                    code: CodeKind::Rlc,
                    first_seq,
                    span: span as u16,
                    repair_index: index,
                    repair_total: 0,
                    seed,
                    symbol_bytes: longest as u16,
                },
                data,
            });
        }
        Ok(out)
    }

    fn memory_bytes(&self) -> usize {
        self.ring.iter().map(Vec::capacity).sum::<usize>()
            + self.ring.len() * std::mem::size_of::<Vec<u8>>()
            + self.coefs.capacity()
    }
}

/// One equation: `sum coef[col(s)] * s = data[..len]` over unknown seqs, with coefficient 1 at
/// `pivot` and 0 at every other row's pivot (reduced row-echelon form).
struct Row {
    pivot: u32,
    coef: Vec<u8>,
    data: Vec<u8>,
    len: usize,
    /// Unknowns with a non-zero coefficient (the pivot included).
    nonzero: usize,
}

/// RLC decoder.
pub struct RlcDecoder {
    cfg: CodecConfig,
    sources: SeqWindow,
    rows: Vec<Row>,
    /// Spare rows, so steady state does not allocate; counted in the memory bound.
    spare: Vec<Row>,
    coefs: Vec<u8>,
    scratch: Vec<u8>,
    /// Repairs whose window began before the decoder's window.
    pub stale: u64,
    /// Repairs that brought no new information (all covered sources known, or a combination of
    /// the rows already held).
    pub redundant: u64,
}

impl std::fmt::Debug for RlcDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RlcDecoder")
            .field("cfg", &self.cfg)
            .field("rows", &self.rows.len())
            .finish()
    }
}

impl RlcDecoder {
    /// Worst case: the source ring, and one row per unknown of the window (a coefficient per
    /// ring slot and a padded symbol each), plus scratch.
    pub fn worst_case_bytes(cfg: &CodecConfig) -> usize {
        let cap = cfg.window.next_power_of_two();
        let framed = padded_len(cfg.max_payload);
        cap * (framed + 24)
            + (cfg.window + 1) * (cap + framed + std::mem::size_of::<Row>())
            + cap
            + framed
    }

    /// A new decoder; fails if `cfg` is out of range or `max_bytes` below the worst case.
    pub fn new(cfg: CodecConfig) -> Result<RlcDecoder, Error> {
        cfg.validate()?;
        cfg.check_bytes(Self::worst_case_bytes(&cfg))?;
        Ok(RlcDecoder {
            cfg,
            sources: SeqWindow::new(cfg.window),
            rows: Vec::new(),
            spare: Vec::new(),
            coefs: Vec::new(),
            scratch: Vec::new(),
            stale: 0,
            redundant: 0,
        })
    }

    /// Whether source `seq` is known: received or rebuilt, and still inside the window. A
    /// receiver that delivers sources itself uses it to drop a late copy of one it rebuilt.
    pub fn knows(&self, seq: u32) -> bool {
        self.sources.has(seq)
    }

    /// Whether source `seq` is older than the window: forgotten, or (when it is far behind
    /// the newest) a sender that started its numbering again.
    pub fn behind(&self, seq: u32) -> bool {
        self.sources.place(seq) == Place::Stale
    }

    /// Equations held (each has a distinct lost symbol as pivot, so at most `window`).
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    fn new_row(&mut self) -> Row {
        let framed = padded_len(self.cfg.max_payload);
        let mut r = self.spare.pop().unwrap_or_else(|| Row {
            pivot: 0,
            coef: vec![0; self.sources.cap()],
            data: vec![0; framed],
            len: 0,
            nonzero: 0,
        });
        r.coef.iter_mut().for_each(|c| *c = 0);
        r.data.iter_mut().for_each(|d| *d = 0);
        r.len = 0;
        r.nonzero = 0;
        r
    }

    fn recycle(&mut self, r: Row) {
        // Spares plus rows never exceed window + 1, the bound counted in worst_case_bytes.
        if self.spare.len() + self.rows.len() <= self.cfg.window {
            self.spare.push(r);
        }
    }

    fn advance(&mut self, seq: u32) {
        if self.sources.place(seq) != Place::Ahead {
            return;
        }
        let dropped = self.sources.advance(seq);
        if self.rows.is_empty() {
            return;
        }
        // A row that involves a forgotten symbol can never be solved: drop it.
        let cols: Vec<usize> = dropped.iter().map(|&s| self.sources.col(s)).collect();
        let mut i = 0;
        while i < self.rows.len() {
            if cols.iter().any(|&c| self.rows[i].coef[c] != 0) {
                let r = self.rows.swap_remove(i);
                self.recycle(r);
            } else {
                i += 1;
            }
        }
    }

    /// Reduces `eq` against the rows, makes it a row if it adds information, and returns the
    /// symbols that became known.
    fn insert(&mut self, mut eq: Row, out: &mut Vec<Recovered>) -> Result<(), Error> {
        for r in &self.rows {
            let c = eq.coef[self.sources.col(r.pivot)];
            if c != 0 {
                row_mul_add(&mut eq, r, c);
            }
        }
        // New pivot: the oldest unknown left, so old symbols resolve first.
        let base = self.newest_base();
        let mut pivot = None;
        for i in 0..self.cfg.window as u32 {
            let s = base.wrapping_add(i);
            if eq.coef[self.sources.col(s)] != 0 {
                pivot = Some(s);
                break;
            }
        }
        let Some(p) = pivot else {
            self.redundant += 1;
            self.recycle(eq);
            return Ok(());
        };
        let pc = self.sources.col(p);
        // The pivot was chosen non-zero, so the inverse exists; the else arm only keeps the
        // decoder free of panics.
        let Some(inv) = gf::inv(eq.coef[pc]) else {
            self.recycle(eq);
            return Ok(());
        };
        gf::scale(&mut eq.coef, inv);
        gf::scale(&mut eq.data[..eq.len], inv);
        eq.pivot = p;
        eq.nonzero = eq.coef.iter().filter(|&&c| c != 0).count();
        for r in &mut self.rows {
            let c = r.coef[pc];
            if c != 0 {
                row_mul_add(r, &eq, c);
            }
        }
        self.rows.push(eq);
        self.collect_solved(out)
    }

    /// The oldest seq of the window (only called once a repair has set a newest seq).
    fn newest_base(&self) -> u32 {
        self.sources
            .newest()
            .unwrap_or(0)
            .wrapping_sub(self.cfg.window as u32 - 1)
    }

    fn collect_solved(&mut self, out: &mut Vec<Recovered>) -> Result<(), Error> {
        let mut i = 0;
        while i < self.rows.len() {
            if self.rows[i].nonzero != 1 {
                i += 1;
                continue;
            }
            let r = self.rows.swap_remove(i);
            let Some(payload) = unframe(&r.data[..r.len], self.cfg.max_payload) else {
                let p = r.pivot;
                self.recycle(r);
                return Err(Error::Inconsistent {
                    first_seq: p,
                    span: 1,
                    why: "a rebuilt symbol's length or padding is wrong",
                });
            };
            let payload = payload.to_vec();
            let seq = r.pivot;
            self.recycle(r);
            self.scratch.clear();
            frame_into(&mut self.scratch, &payload);
            let framed = std::mem::take(&mut self.scratch);
            self.sources.put(seq, &framed);
            self.scratch = framed;
            out.push(Recovered { seq, payload });
            // In reduced row-echelon form no other row has this column: nothing to substitute.
        }
        Ok(())
    }
}

/// `dst += c * src` on coefficients and data (both through the SIMD kernel: the coefficient
/// rows are as long as the window, comparable to a small symbol).
fn row_mul_add(dst: &mut Row, src: &Row, c: u8) {
    gf::mul_add(&mut dst.coef, &src.coef, c);
    dst.nonzero = dst.coef.iter().filter(|&&x| x != 0).count();
    gf::mul_add(
        &mut dst.data[..src.len.max(dst.len)],
        &src.data[..src.len],
        c,
    );
    dst.len = dst.len.max(src.len);
}

impl ErasureDecoder for RlcDecoder {
    fn on_source(&mut self, seq: u32, payload: &[u8]) -> Result<Vec<Recovered>, Error> {
        check_payload(payload, self.cfg.max_payload)?;
        self.advance(seq);
        if self.sources.place(seq) != Place::In || self.sources.has(seq) {
            return Ok(Vec::new());
        }
        self.scratch.clear();
        frame_into(&mut self.scratch, payload);
        let framed = std::mem::take(&mut self.scratch);
        self.sources.put(seq, &framed);
        let col = self.sources.col(seq);
        let mut out = Vec::new();
        // Substitute the now-known symbol into every row that has it; a row whose pivot it
        // was loses its pivot and goes back through insert().
        let mut reinsert = None;
        let mut i = 0;
        while i < self.rows.len() {
            let c = self.rows[i].coef[col];
            if c == 0 {
                i += 1;
                continue;
            }
            if framed.len() > self.rows[i].len {
                // The repair's padding was shorter than this source: inconsistent input, and
                // the row cannot be used.
                let r = self.rows.swap_remove(i);
                self.recycle(r);
                continue;
            }
            let r = &mut self.rows[i];
            r.coef[col] = 0;
            r.nonzero -= 1;
            gf::mul_add(&mut r.data[..r.len], &framed, c);
            if r.pivot == seq {
                reinsert = Some(self.rows.swap_remove(i));
                continue;
            }
            i += 1;
        }
        self.scratch = framed;
        if let Some(r) = reinsert {
            if r.nonzero == 0 {
                self.recycle(r);
            } else {
                self.insert(r, &mut out)?;
            }
        }
        self.collect_solved(&mut out)?;
        Ok(out)
    }

    fn on_repair(&mut self, h: &RepairHeader, data: &[u8]) -> Result<Vec<Recovered>, Error> {
        if h.code != CodeKind::Rlc {
            return Err(Error::Header {
                field: "code",
                value: 1,
                accepted: "2 (RLC) for this decoder",
            });
        }
        let framed_max = padded_len(self.cfg.max_payload);
        if data.len() != h.symbol_bytes as usize || data.len() > framed_max {
            return Err(Error::Param {
                what: "repair payload length",
                value: data.len() as u64,
                accepted: format!(
                    "the header's symbol_bytes ({}), at most {framed_max}",
                    h.symbol_bytes
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
        let span = h.span as u32;
        self.advance(h.first_seq.wrapping_add(span - 1));
        if self.sources.place(h.first_seq) != Place::In {
            self.stale += 1;
            return Ok(Vec::new());
        }
        // Cheap test first: a repair over sources all held costs nothing more.
        let unknown = (0..span)
            .filter(|&i| !self.sources.has(h.first_seq.wrapping_add(i)))
            .count();
        if unknown == 0 {
            self.redundant += 1;
            return Ok(Vec::new());
        }
        let mut coefs = std::mem::take(&mut self.coefs);
        coefficients(h.seed, span as usize, &mut coefs);
        let mut eq = self.new_row();
        eq.data[..data.len()].copy_from_slice(data);
        eq.len = data.len();
        let mut result = Ok(());
        for (i, &c) in coefs.iter().enumerate() {
            let s = h.first_seq.wrapping_add(i as u32);
            match self.sources.get(s) {
                Some(sym) => {
                    if sym.len() > eq.len {
                        result = Err(Error::Inconsistent {
                            first_seq: h.first_seq,
                            span: h.span,
                            why: "a covered source is longer than the repair",
                        });
                        break;
                    }
                    gf::mul_add(&mut eq.data[..eq.len], sym, c);
                }
                None => {
                    eq.coef[self.sources.col(s)] = c;
                    eq.nonzero += 1;
                }
            }
        }
        self.coefs = coefs;
        if let Err(e) = result {
            self.recycle(eq);
            return Err(e);
        }
        let mut out = Vec::new();
        self.insert(eq, &mut out)?;
        Ok(out)
    }

    fn memory_bytes(&self) -> usize {
        let row = |r: &Row| r.coef.capacity() + r.data.capacity() + std::mem::size_of::<Row>();
        self.sources.memory_bytes()
            + self.rows.iter().map(row).sum::<usize>()
            + self.spare.iter().map(row).sum::<usize>()
            + self.coefs.capacity()
            + self.scratch.capacity()
    }
}
