//! Reed–Solomon codec over GF(2^8) (hand-written; see `docs/fec.md` for why the `reed-solomon`
//! crate is not used on the data path: it panics for large `p`, copies 256-byte polynomials
//! by value on every step and measured slower than this table-driven code). The encoder is a
//! byte-wide LFSR whose register is packed in 64-bit words.
//!
//! Code: narrow-sense with first consecutive root alpha^0, generator
//! `g(x) = prod_{i=0}^{p-1} (x - alpha^i)`, systematic, data symbols first. The first symbol of a
//! codeword is the coefficient of the highest power of x. Shortened codewords simply omit leading
//! zero data symbols. Decoding: syndromes, Berlekamp–Massey, Chien search restricted to the
//! positions that exist in the shortened codeword, Forney, and a syndrome re-check of the
//! correction so that a result is only accepted if it is a codeword.

use std::sync::OnceLock;

use crate::gf::{self, EXP, LOG, MUL};

/// Generator polynomial and its product table, cached per parity length.
pub(crate) struct Generator {
    /// Coefficients highest degree first, length p + 1, monic.
    pub poly: Box<[u8]>,
    /// 64-bit words per remainder register: ceil(p / 8).
    words: usize,
    /// Row c (`words` words at c*words) = c * (g_1 .. g_p), packed big-endian from the most
    /// significant byte of the first word, zero-padded. One LFSR step is then a shift of the
    /// register by one byte and an XOR with a row: no byte loops, no store-forwarding stalls.
    table: Box<[u64]>,
}

static GENERATORS: [OnceLock<Generator>; 255] = [const { OnceLock::new() }; 255];

/// Generator for `p` parity symbols (1 <= p <= 254).
pub(crate) fn generator(p: usize) -> &'static Generator {
    GENERATORS[p].get_or_init(|| {
        let mut g = vec![0u8; p + 1];
        g[0] = 1;
        for i in 0..p {
            // Multiply by (x + alpha^i); g has degree i before this step.
            let root = gf::pow_alpha(i);
            for k in (1..=i + 1).rev() {
                g[k] ^= gf::mul(g[k - 1], root);
            }
        }
        let words = p.div_ceil(8);
        let mut table = vec![0u64; 256 * words];
        for c in 1..256 {
            let row = &mut table[c * words..(c + 1) * words];
            for (b, &gk) in g[1..].iter().enumerate() {
                row[b / 8] |= (gf::mul(c as u8, gk) as u64) << (56 - 8 * (b % 8));
            }
        }
        Generator {
            poly: g.into_boxed_slice(),
            words,
            table: table.into_boxed_slice(),
        }
    })
}

/// One byte into an LFSR register of exactly W words: shift by a byte, add the table row of the
/// feedback byte. The one step of both fixed-width encoders (inlined, so W stays a constant).
#[inline(always)]
fn lfsr_step<const W: usize>(table: &[u64], r: &mut [u64; W], d: u8) {
    let fb = (d ^ (r[0] >> 56) as u8) as usize;
    for k in 0..W - 1 {
        r[k] = (r[k] << 8) | (r[k + 1] >> 56);
    }
    r[W - 1] <<= 8;
    let row = &table[fb * W..fb * W + W];
    for k in 0..W {
        r[k] ^= row[k];
    }
}

/// LFSR division with a register of exactly W words (W known at compile time).
#[inline(always)]
fn lfsr_fixed<const W: usize>(table: &[u64], data: impl Iterator<Item = u8>, out: &mut [u64]) {
    let mut r = [0u64; W];
    for d in data {
        lfsr_step(table, &mut r, d);
    }
    out[..W].copy_from_slice(&r);
}

/// Same for any register length up to 32 words.
fn lfsr_dyn(table: &[u64], w: usize, data: impl Iterator<Item = u8>, out: &mut [u64]) {
    let r = &mut out[..w];
    r.fill(0);
    for d in data {
        let fb = (d ^ (r[0] >> 56) as u8) as usize;
        for k in 0..w - 1 {
            r[k] = (r[k] << 8) | (r[k + 1] >> 56);
        }
        r[w - 1] <<= 8;
        for (x, &t) in r.iter_mut().zip(&table[fb * w..fb * w + w]) {
            *x ^= t;
        }
    }
}

impl Generator {
    /// Remainder of `d(x) * x^p` divided by g(x), for the data symbols `data` (highest degree
    /// first), written to `out[..p]` highest degree first.
    fn remainder(&self, data: impl Iterator<Item = u8>, out: &mut [u8]) {
        let p = self.poly.len() - 1;
        let mut r = [0u64; 32];
        match self.words {
            1 => lfsr_fixed::<1>(&self.table, data, &mut r),
            2 => lfsr_fixed::<2>(&self.table, data, &mut r),
            3 => lfsr_fixed::<3>(&self.table, data, &mut r),
            4 => lfsr_fixed::<4>(&self.table, data, &mut r),
            w => lfsr_dyn(&self.table, w, data, &mut r),
        }
        for (b, o) in out[..p].iter_mut().enumerate() {
            *o = (r[b / 8] >> (56 - 8 * (b % 8))) as u8;
        }
    }
}

/// Computes the parity of `m` interleaved codewords: codeword j takes `data[j], data[j+m], ...`;
/// its `p` parity symbols go to `parity[j*p..(j+1)*p]`.
pub(crate) fn encode_interleaved(data: &[u8], parity: &mut [u8], m: usize, p: usize) {
    debug_assert_eq!(parity.len(), m * p);
    if p == 0 {
        return;
    }
    let gen = generator(p);
    if gen.words <= 4 && data.len() >= m {
        // Common case (p <= 32): up to 4 codewords advance together so that their
        // independent LFSR chains overlap in the CPU.
        let mut j0 = 0;
        while j0 < m {
            let g = (m - j0).min(4);
            match (gen.words, g) {
                (1, 1) => lanes::<1, 1>(gen, data, parity, m, j0),
                (1, 2) => lanes::<1, 2>(gen, data, parity, m, j0),
                (1, 3) => lanes::<1, 3>(gen, data, parity, m, j0),
                (1, _) => lanes::<1, 4>(gen, data, parity, m, j0),
                (2, 1) => lanes::<2, 1>(gen, data, parity, m, j0),
                (2, 2) => lanes::<2, 2>(gen, data, parity, m, j0),
                (2, 3) => lanes::<2, 3>(gen, data, parity, m, j0),
                (2, _) => lanes::<2, 4>(gen, data, parity, m, j0),
                (3, 1) => lanes::<3, 1>(gen, data, parity, m, j0),
                (3, 2) => lanes::<3, 2>(gen, data, parity, m, j0),
                (3, 3) => lanes::<3, 3>(gen, data, parity, m, j0),
                (3, _) => lanes::<3, 4>(gen, data, parity, m, j0),
                (_, 1) => lanes::<4, 1>(gen, data, parity, m, j0),
                (_, 2) => lanes::<4, 2>(gen, data, parity, m, j0),
                (_, 3) => lanes::<4, 3>(gen, data, parity, m, j0),
                (_, _) => lanes::<4, 4>(gen, data, parity, m, j0),
            }
            j0 += g;
        }
        return;
    }
    for (j, par) in parity.chunks_exact_mut(p).enumerate() {
        let symbols = data.get(j..).unwrap_or(&[]).iter().step_by(m).copied();
        // d(x) x^p mod g(x) is the parity (minus = plus in GF(2^8)).
        gen.remainder(symbols, par);
    }
}

/// Encodes codewords `j0 .. j0+G` together (registers of W words). Requires `data.len() >= m`.
fn lanes<const W: usize, const G: usize>(
    gen: &Generator,
    data: &[u8],
    parity: &mut [u8],
    m: usize,
    j0: usize,
) {
    let p = gen.poly.len() - 1;
    let table = &gen.table[..256 * W];
    let full = data.len() / m; // symbols of every codeword
    let extra = data.len() % m; // codewords j < extra have one more
    let mut r = [[0u64; W]; G];
    for chunk in data[j0..].chunks(m).take(full) {
        let chunk: &[u8; G] = chunk[..G].try_into().expect("G <= m");
        for lane in 0..G {
            lfsr_step(table, &mut r[lane], chunk[lane]);
        }
    }
    for (lane, reg) in r.iter_mut().enumerate() {
        let j = j0 + lane;
        if j < extra {
            lfsr_step(table, reg, data[full * m + j]);
        }
        let out = &mut parity[j * p..(j + 1) * p];
        for (b, o) in out.iter_mut().enumerate() {
            *o = (reg[b / 8] >> (56 - 8 * (b % 8))) as u8;
        }
    }
}

/// One symbol correction: index in the codeword (0 = first transmitted symbol) and the value
/// to XOR into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fix {
    pub index: usize,
    pub value: u8,
}

/// Computes the `p` syndromes S_i = r(alpha^i) from the remainder `rem` = c(x) mod g(x)
/// (highest degree first); since g(alpha^i) = 0 they equal c(alpha^i). Returns true if all are
/// zero.
fn syndromes(rem: &[u8], s: &mut [u8; 256]) -> bool {
    if rem.iter().all(|&r| r == 0) {
        return true;
    }
    // S_0 = sum of the remainder's coefficients.
    s[0] = rem.iter().fold(0u8, |a, &c| a ^ c);
    for (i, si) in s.iter_mut().enumerate().take(rem.len()).skip(1) {
        let row = &MUL[EXP[i] as usize];
        *si = rem.iter().fold(0u8, |acc, &c| row[acc as usize] ^ c);
    }
    false
}

/// Decodes one codeword of `cw.len() <= 255` symbols with `p` parity symbols. Pushes the
/// corrections to `fixes` (without applying them) and returns Ok(number of corrections), or
/// Err(()) if the word is not within distance floor(p/2) of a codeword.
#[cfg(test)]
pub(crate) fn decode_codeword(cw: &[u8], p: usize, fixes: &mut Vec<Fix>) -> Result<usize, ()> {
    let n = cw.len();
    if p == 0 || n > 255 || n <= p {
        return if p == 0 { Ok(0) } else { Err(()) };
    }
    // c(x) mod g(x) = (data part * x^p mod g(x)) + received parity.
    let mut rem = [0u8; 256];
    generator(p).remainder(cw[..n - p].iter().copied(), &mut rem);
    for (r, &c) in rem.iter_mut().zip(&cw[n - p..]) {
        *r ^= c;
    }
    decode_remainder(n, &rem[..p], fixes)
}

/// Decodes a codeword of `n <= 255` symbols given only its remainder `rem` = c(x) mod g(x)
/// (`p = rem.len()` symbols, highest degree first): the syndromes follow from it, and the
/// corrections are positions in the codeword (0 = first symbol sent) and values to XOR.
pub(crate) fn decode_remainder(n: usize, rem: &[u8], fixes: &mut Vec<Fix>) -> Result<usize, ()> {
    let p = rem.len();
    if p == 0 || n > 255 || n <= p {
        return if p == 0 { Ok(0) } else { Err(()) };
    }
    let mut s = [0u8; 256];
    if syndromes(rem, &mut s) {
        return Ok(0);
    }
    // The classic three steps: where the errors may be (the locator's degree is their
    // count), which positions they are at, and their values, checked against the syndromes.
    let (lambda, l) = error_locator(&s, p).ok_or(())?;
    let (roots, nroots) = error_positions(&lambda, l, n).ok_or(())?;
    let start = fixes.len();
    if error_values(&lambda, l, &roots[..nroots], n, p, &mut s, fixes).is_none() {
        // Nothing of a failed decode is applied.
        fixes.truncate(start);
        return Err(());
    }
    Ok(nroots)
}

/// Berlekamp–Massey over the `p` syndromes `s`: the error locator Lambda(x) (ascending
/// coefficients) and its degree `l`, or `None` when more errors than the code corrects
/// (`2l > p`) or a malformed locator show the word cannot be decoded.
#[inline]
fn error_locator(s: &[u8; 256], p: usize) -> Option<([u8; 256], usize)> {
    let mut lambda = [0u8; 256];
    let mut prev = [0u8; 256];
    lambda[0] = 1;
    prev[0] = 1;
    let mut l = 0usize;
    let mut shift = 1usize;
    let mut b = 1u8;
    for r in 0..p {
        let mut d = s[r];
        for i in 1..=l {
            d ^= gf::mul(lambda[i], s[r - i]);
        }
        if d == 0 {
            shift += 1;
            continue;
        }
        let coef = gf::div(d, b);
        if 2 * l <= r {
            let saved = lambda;
            for i in 0..(p + 1).saturating_sub(shift) {
                if prev[i] != 0 {
                    lambda[i + shift] ^= gf::mul(coef, prev[i]);
                }
            }
            l = r + 1 - l;
            prev = saved;
            b = d;
            shift = 1;
        } else {
            for i in 0..(p + 1).saturating_sub(shift) {
                if prev[i] != 0 {
                    lambda[i + shift] ^= gf::mul(coef, prev[i]);
                }
            }
            shift += 1;
        }
    }
    if 2 * l > p || l == 0 || lambda[l] == 0 || lambda[l + 1..].iter().any(|&c| c != 0) {
        return None;
    }
    Some((lambda, l))
}

/// Chien search: the exponents `e` (position `n - 1 - e`) of the `l` roots of `lambda` among
/// the `n` positions of the word, or `None` when fewer than `l` are there (the errors are not
/// all inside the word: it cannot be decoded).
#[inline]
fn error_positions(lambda: &[u8; 256], l: usize, n: usize) -> Option<([usize; 128], usize)> {
    // Chien search over the n existing positions: position k has exponent e = n-1-k, locator
    // X = alpha^e; it is in error iff Lambda(X^-1) = 0. terms[i] = Lambda_i * alpha^(-e*i).
    // Terms kept as logarithms (LOG_ZERO for a zero coefficient); step i adds 255 - i.
    const LOG_ZERO: usize = usize::MAX;
    let mut lterms = [LOG_ZERO; 128];
    let mut steps = [0usize; 128];
    for i in 1..=l {
        if lambda[i] != 0 {
            lterms[i] = LOG[lambda[i] as usize] as usize;
        }
        steps[i] = (255 - i % 255) % 255;
    }
    let mut roots = [0usize; 128];
    let mut nroots = 0usize;
    for e in 0..n {
        let mut v = lambda[0];
        for i in 1..=l {
            let lt = lterms[i];
            if lt != LOG_ZERO {
                v ^= EXP[lt];
                let nt = lt + steps[i];
                lterms[i] = if nt >= 255 { nt - 255 } else { nt };
            }
        }
        if v == 0 {
            roots[nroots] = e;
            nroots += 1;
            if nroots == l {
                // A polynomial of degree l has no further roots.
                break;
            }
        }
    }
    (nroots == l).then_some((roots, nroots))
}

/// Forney: the value of the error at each of `roots`, pushed to `fixes`, each removed from
/// the syndromes `s` as it is found; `None` (fixes partly pushed) when a value comes out zero
/// or undefined, or when the syndromes are not all cleared at the end: the word was not
/// within the code's reach after all.
#[inline]
fn error_values(
    lambda: &[u8; 256],
    l: usize,
    roots: &[usize],
    n: usize,
    p: usize,
    s: &mut [u8; 256],
    fixes: &mut Vec<Fix>,
) -> Option<()> {
    // Forney (first consecutive root 0): Y = X * Omega(X^-1) / Lambda'(X^-1),
    // Omega = S(x) Lambda(x) mod x^p.
    let mut omega = [0u8; 256];
    for (i, om) in omega.iter_mut().enumerate().take(p) {
        let mut acc = 0u8;
        for j in 0..=l.min(i) {
            acc ^= gf::mul(lambda[j], s[i - j]);
        }
        *om = acc;
    }
    for &e in roots {
        let x_inv_log = (255 - e % 255) % 255; // log of X^-1
        let x_inv = EXP[x_inv_log];
        let eval = |poly: &[u8]| poly.iter().rev().fold(0u8, |a, &c| gf::mul(a, x_inv) ^ c);
        let om = eval(&omega[..p]);
        // Formal derivative: odd-degree terms only, Lambda'(x) = sum_{i odd} Lambda_i x^(i-1).
        let mut der = 0u8;
        let mut i = 1;
        while i <= l {
            if lambda[i] != 0 {
                der ^= gf::mul(lambda[i], EXP[(x_inv_log * (i - 1)) % 255]);
            }
            i += 2;
        }
        if der == 0 {
            return None;
        }
        let y = gf::mul(gf::pow_alpha(e), gf::div(om, der));
        if y == 0 {
            return None;
        }
        // Re-check: remove this error's contribution from every syndrome.
        let ly = LOG[y as usize] as usize;
        for (i, si) in s.iter_mut().enumerate().take(p) {
            *si ^= EXP[(ly + e * i) % 255];
        }
        fixes.push(Fix {
            index: n - 1 - e,
            value: y,
        });
    }
    if s[..p].iter().any(|&v| v != 0) {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_one(data: &[u8], p: usize) -> Vec<u8> {
        let mut par = vec![0u8; p];
        encode_interleaved(data, &mut par, 1, p);
        let mut cw = data.to_vec();
        cw.extend_from_slice(&par);
        cw
    }

    #[test]
    fn generator_has_consecutive_roots_from_alpha0() {
        for p in [1usize, 2, 7, 32, 254] {
            let g = &generator(p).poly;
            assert_eq!(g.len(), p + 1);
            assert_eq!(g[0], 1);
            for i in 0..p {
                let x = gf::pow_alpha(i);
                let v = g.iter().fold(0u8, |a, &c| gf::mul(a, x) ^ c);
                assert_eq!(v, 0, "alpha^{i} is not a root for p={p}");
            }
            // and alpha^p is not a root
            let x = gf::pow_alpha(p);
            assert_ne!(g.iter().fold(0u8, |a, &c| gf::mul(a, x) ^ c), 0);
        }
    }

    #[test]
    fn codewords_have_zero_syndromes() {
        let data: Vec<u8> = (0..100u8).map(|x| x.wrapping_mul(37)).collect();
        for p in [1usize, 2, 3, 16, 155] {
            let mut cw = encode_one(&data, p);
            // c(alpha^i) = 0 by direct evaluation, independent of the LFSR.
            for i in 0..p {
                let x = gf::pow_alpha(i);
                assert_eq!(
                    cw.iter().fold(0u8, |a, &c| gf::mul(a, x) ^ c),
                    0,
                    "p={p} i={i}"
                );
            }
            // Remainder-based syndromes agree with direct evaluation on a corrupted word.
            cw[7] ^= 0x42;
            let n = cw.len();
            let mut rem = vec![0u8; p];
            generator(p).remainder(cw[..n - p].iter().copied(), &mut rem);
            for (r, &c) in rem.iter_mut().zip(&cw[n - p..]) {
                *r ^= c;
            }
            let mut s = [0u8; 256];
            assert!(!syndromes(&rem, &mut s));
            for (i, &si) in s.iter().enumerate().take(p) {
                let x = gf::pow_alpha(i);
                assert_eq!(
                    si,
                    cw.iter().fold(0u8, |a, &c| gf::mul(a, x) ^ c),
                    "p={p} S_{i}"
                );
            }
        }
    }

    #[test]
    fn corrects_up_to_t_in_data_and_parity() {
        let data: Vec<u8> = (0..200u8).collect();
        for p in [2usize, 3, 8, 17, 55] {
            let cw = encode_one(&data, p);
            let t = p / 2;
            let mut bad = cw.clone();
            // spread errors over data and parity, including first and last symbol
            let n = bad.len();
            for k in 0..t {
                let pos = if k == 0 {
                    0
                } else if k == 1 {
                    n - 1
                } else {
                    (k * 97) % n
                };
                bad[pos] ^= (k as u8).wrapping_mul(29) | 1;
            }
            let mut fixes = Vec::new();
            let r = decode_codeword(&bad, p, &mut fixes);
            assert!(r.is_ok(), "p={p}");
            for f in &fixes {
                bad[f.index] ^= f.value;
            }
            assert_eq!(bad, cw, "p={p}");
        }
    }
}
