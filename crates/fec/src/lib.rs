//! AeroTP forward error correction: Reed–Solomon over the TPDU, auto strength.
//!
//! Implements `docs/spec.md` section 3: the protected region of `L` bytes (header, body,
//! CRC-32C) is split over `m` interleaved, shortened RS(<=255) codewords over GF(2^8), each with
//! `p` parity bytes appended after the protected region. The code definition (field polynomial,
//! generator roots, symbol order) is in `docs/fec.md`, section "Code definition".
//!
//! ```
//! let mut tpdu = b"header, body and CRC".to_vec();
//! let layout = aerotp_fec::encode(8, &mut tpdu).unwrap();
//! assert_eq!(tpdu.len(), layout.datagram_len());
//! tpdu[3] ^= 0x10;
//! let fixed = aerotp_fec::decode(8, &mut tpdu).unwrap();
//! assert_eq!((fixed.symbols, fixed.bits), (1, 1));
//! assert_eq!(&tpdu[..layout.protected_len], b"header, body and CRC");
//! ```

pub mod auto;
pub mod gf;
mod rs;

pub use gf::FIELD_POLY;

/// Longest RS codeword over GF(2^8), data plus parity symbols.
pub const MAX_CODEWORD: usize = 255;

/// Errors of layout computation and decoding. Each says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FecError {
    /// `p` = 255 leaves no data symbol in a 255-symbol codeword.
    #[error("parity {parity} per codeword leaves no room for data (at most {max} allowed)", max = MAX_CODEWORD - 1)]
    ParityTooLarge { parity: u8 },
    /// The protected region must hold at least one byte (the header is always there).
    #[error("protected region is empty")]
    EmptyProtected,
    /// The datagram is too short to hold one parity block plus a data byte.
    #[error("datagram of {len} bytes is too short for parity {parity} ({codewords} codeword(s) need {need} bytes)")]
    DatagramTooShort {
        len: usize,
        parity: u8,
        codewords: usize,
        need: usize,
    },
    /// No protected length produces this datagram length with this parity (a sender would
    /// have used fewer codewords), so the datagram was not built with this `p`.
    #[error("datagram of {len} bytes cannot carry parity {parity}: its {protected_len} protected bytes would fit in {fewer} codeword(s), not {codewords}")]
    InconsistentLength {
        len: usize,
        parity: u8,
        codewords: usize,
        protected_len: usize,
        fewer: usize,
    },
    /// At least one codeword had more symbol errors than the code can correct
    /// (more than floor(p/2)); the datagram was left unchanged.
    #[error("uncorrectable: {failed} of {codewords} codeword(s) exceed floor({parity}/2) symbol errors (first: codeword {first})")]
    Uncorrectable {
        parity: u8,
        codewords: usize,
        failed: usize,
        first: usize,
    },
}

/// Placement of the protected region and parity in a datagram (spec section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `p`: parity symbols per codeword.
    pub parity: u8,
    /// `m`: number of interleaved codewords.
    pub codewords: usize,
    /// `L`: header + body + CRC-32C bytes.
    pub protected_len: usize,
}

fn check_parity(parity: u8) -> Result<usize, FecError> {
    let p = parity as usize;
    if p >= MAX_CODEWORD {
        return Err(FecError::ParityTooLarge { parity });
    }
    Ok(p)
}

impl Layout {
    /// Sender side: the layout for `protected_len` bytes, with the smallest `m >= 1` such that
    /// `L <= m * (255 - p)`.
    pub fn for_protected(protected_len: usize, parity: u8) -> Result<Layout, FecError> {
        let p = check_parity(parity)?;
        if protected_len == 0 {
            return Err(FecError::EmptyProtected);
        }
        let room = MAX_CODEWORD - p;
        Ok(Layout {
            parity,
            codewords: protected_len.div_ceil(room),
            protected_len,
        })
    }

    /// Receiver side: the layout of a datagram of `datagram_len` bytes (`m = ceil(T/255)`,
    /// `L = T - m*p`). Rejects lengths that no protected length produces with this `p`.
    pub fn for_datagram(datagram_len: usize, parity: u8) -> Result<Layout, FecError> {
        let p = check_parity(parity)?;
        if datagram_len == 0 {
            return Err(FecError::EmptyProtected);
        }
        let m = datagram_len.div_ceil(MAX_CODEWORD);
        let need = m * p + 1;
        if datagram_len < need {
            return Err(FecError::DatagramTooShort {
                len: datagram_len,
                parity,
                codewords: m,
                need,
            });
        }
        let protected_len = datagram_len - m * p;
        let room = MAX_CODEWORD - p;
        let fewer = protected_len.div_ceil(room);
        if fewer != m {
            return Err(FecError::InconsistentLength {
                len: datagram_len,
                parity,
                codewords: m,
                protected_len,
                fewer,
            });
        }
        Ok(Layout {
            parity,
            codewords: m,
            protected_len,
        })
    }

    /// `T = L + m*p`.
    pub fn datagram_len(&self) -> usize {
        self.protected_len + self.codewords * self.parity as usize
    }

    /// Data symbols of codeword `j`: `ceil((L - j) / m)` (0 if `j >= m`).
    pub fn data_symbols(&self, j: usize) -> usize {
        if j >= self.codewords || j >= self.protected_len {
            0
        } else {
            (self.protected_len - j).div_ceil(self.codewords)
        }
    }

    /// Bytes of parity after the protected region, `m*p`.
    pub fn parity_len(&self) -> usize {
        self.codewords * self.parity as usize
    }
}

/// Appends the parity for `buf[..]` (the whole protected region) to `buf`.
/// With `parity == 0` nothing is appended.
pub fn encode(parity: u8, buf: &mut Vec<u8>) -> Result<Layout, FecError> {
    encode_from(parity, buf, 0)
}

/// Appends the parity for `buf[start..]` (the protected region, after whatever `buf` held
/// before it: a datagram encoded in place at the end of a train) to `buf`. On error `buf` is
/// unchanged. Panics only if `start > buf.len()` (a caller's bug).
pub fn encode_from(parity: u8, buf: &mut Vec<u8>, start: usize) -> Result<Layout, FecError> {
    let l = buf.len();
    let layout = Layout::for_protected(l - start, parity)?;
    buf.resize(start + layout.datagram_len(), 0);
    let (data, par) = buf.split_at_mut(l);
    rs::encode_interleaved(&data[start..], par, layout.codewords, parity as usize);
    Ok(layout)
}

/// Result of a successful decode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Correction {
    /// Symbols (bytes) corrected, in the protected region and the parity.
    pub symbols: usize,
    /// Bits flipped back.
    pub bits: usize,
}

/// Corrects `datagram` in place (protected region and parity). `Ok(Correction)` if every
/// codeword decoded (it may still be wrong if errors exceeded capacity: callers re-check CRCs).
/// `Err(FecError::Uncorrectable{..})` otherwise, and then the datagram is left unchanged.
/// Length errors (see [`Layout::for_datagram`]) are reported as such. Never panics.
pub fn decode(parity: u8, datagram: &mut [u8]) -> Result<Correction, FecError> {
    let layout = Layout::for_datagram(datagram.len(), parity)?;
    let p = parity as usize;
    if p == 0 {
        return Ok(Correction::default());
    }
    let m = layout.codewords;
    let l = layout.protected_len;
    // Remainders c_j(x) mod g(x) of all codewords at once: re-encode the received protected
    // region (fast, interleaved) and add the received parity. Zero means codeword j is intact.
    let (data, parity_rx) = datagram.split_at(l);
    let mut rem = vec![0u8; m * p];
    rs::encode_interleaved(data, &mut rem, m, p);
    let mut fixes: Vec<(usize, u8)> = Vec::new();
    let mut local = Vec::new();
    let mut failed = 0usize;
    let mut first = usize::MAX;
    for (j, (r, rx)) in rem
        .chunks_exact_mut(p)
        .zip(parity_rx.chunks_exact(p))
        .enumerate()
    {
        let mut dirty = 0u8;
        for (a, &b) in r.iter_mut().zip(rx) {
            *a ^= b;
            dirty |= *a;
        }
        if dirty == 0 {
            continue;
        }
        let k = layout.data_symbols(j);
        local.clear();
        match rs::decode_remainder(k + p, r, &mut local) {
            Ok(_) => {
                for f in &local {
                    let idx = if f.index < k {
                        j + f.index * m
                    } else {
                        l + j * p + (f.index - k)
                    };
                    fixes.push((idx, f.value));
                }
            }
            Err(()) => {
                failed += 1;
                first = first.min(j);
            }
        }
    }
    if failed > 0 {
        return Err(FecError::Uncorrectable {
            parity,
            codewords: m,
            failed,
            first,
        });
    }
    let mut c = Correction::default();
    for (idx, v) in fixes {
        datagram[idx] ^= v;
        c.symbols += 1;
        c.bits += v.count_ones() as usize;
    }
    Ok(c)
}

/// Largest protected_len whose datagram fits in `mtu` with `parity` (0 if none does).
pub fn max_protected_len(mtu: usize, parity: u8) -> usize {
    if parity == 0 {
        // No parity: the whole MTU (the loop below gives the same; this runs for every TPDU).
        return mtu;
    }
    let Ok(p) = check_parity(parity) else {
        return 0;
    };
    let room = MAX_CODEWORD - p;
    let mut best = 0;
    for m in 1..=mtu.div_ceil(MAX_CODEWORD).max(1) {
        let l = (m * room).min(mtu.saturating_sub(m * p));
        // m must be the smallest codeword count for l, else the sender would use fewer.
        if l > (m - 1) * room {
            best = best.max(l);
        }
    }
    best
}

/// Codewords in an MTU-sized datagram: `ceil(mtu/255)`, at least 1.
fn codewords_at_mtu(mtu: usize) -> usize {
    mtu.div_ceil(MAX_CODEWORD).max(1)
}

/// Papers' scale: `N` 32-bit FEC words per MTU-sized TPDU -> `p = ceil(4N / ceil(mtu/255))`,
/// saturating at 254.
pub fn parity_for_words(words: u16, mtu: usize) -> u8 {
    let p = (4 * words as usize).div_ceil(codewords_at_mtu(mtu));
    p.min(MAX_CODEWORD - 1) as u8
}

/// Inverse of [`parity_for_words`]: parity bytes of an MTU-sized TPDU in 32-bit words,
/// `p * ceil(mtu/255) / 4`.
pub fn words_for_parity(parity: u8, mtu: usize) -> f64 {
    (parity as usize * codewords_at_mtu(mtu)) as f64 / 4.0
}
