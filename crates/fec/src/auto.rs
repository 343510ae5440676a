//! Automatic FEC strength: predicted TPDU failure, parity choice, and a receiver-side
//! bit-error-rate estimator (for the RPT `ber_ppb` field and `--fec auto`).
//!
//! The channel model is independent bit errors at rate `ber` (binary symmetric channel), so a
//! byte (RS symbol) is wrong with probability `1 - (1 - ber)^8` and the number of wrong symbols in
//! a codeword of `n` symbols is binomial. A codeword fails if more than `floor(p/2)` symbols are
//! wrong; a TPDU fails if any of its codewords fails.

use crate::{max_protected_len, MAX_CODEWORD};

/// Symbol (byte) error probability at bit-error rate `ber`.
fn symbol_error_probability(ber: f64) -> f64 {
    -(8.0 * (-ber).ln_1p()).exp_m1()
}

/// P(X > t) for X ~ Binomial(n, q), 0 < q < 1, computed in log space so that tiny tails
/// (1e-30 and below) keep their relative precision.
fn binomial_tail(n: usize, q: f64, t: usize) -> f64 {
    if t >= n {
        return 0.0;
    }
    let lq = q.ln();
    let l1q = (-q).ln_1p();
    let mut ln_choose = 0.0f64; // ln C(n, k)
    let mut upper = 0.0f64;
    let mut lower = 0.0f64;
    for k in 0..=n {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        let pk = (ln_choose + k as f64 * lq + (n - k) as f64 * l1q).exp();
        if k > t {
            upper += pk;
        } else {
            lower += pk;
        }
    }
    if upper < 0.5 {
        upper
    } else {
        (1.0 - lower).max(0.0)
    }
}

/// Probability that a TPDU of datagram length `datagram_len` with parity `p` fails to decode at
/// bit-error rate `ber` (binomial per codeword on symbol errors, symbol error probability
/// `1-(1-ber)^8`). With `p = 0` this is the probability of any bit error. A length that cannot
/// hold the parity (or `p = 255`) fails with probability 1.
pub fn tpdu_failure_probability(ber: f64, datagram_len: usize, parity: u8) -> f64 {
    if datagram_len == 0 || ber.is_nan() || ber <= 0.0 {
        return 0.0;
    }
    let p = parity as usize;
    let m = datagram_len.div_ceil(MAX_CODEWORD);
    if p >= MAX_CODEWORD || datagram_len <= m * p {
        return 1.0;
    }
    if ber >= 1.0 {
        return 1.0;
    }
    let q = symbol_error_probability(ber);
    let l = datagram_len - m * p;
    let t = p / 2;
    // Codewords have ceil(L/m) or floor(L/m) data symbols: `long` of them the former.
    let long = l % m;
    let short = m - long;
    let n_short = l / m + p;
    let mut log_ok = 0.0f64; // ln P(all codewords decode)
    if short > 0 && n_short > 0 {
        log_ok += short as f64 * (-binomial_tail(n_short, q, t)).ln_1p();
    }
    if long > 0 {
        log_ok += long as f64 * (-binomial_tail(n_short + 1, q, t)).ln_1p();
    }
    (-log_ok.exp_m1()).clamp(0.0, 1.0)
}

/// Datagram length of the largest TPDU that fits `mtu` with `parity`, or None.
fn mtu_datagram(mtu: usize, parity: u8) -> Option<usize> {
    let l = max_protected_len(mtu, parity);
    if l == 0 {
        return None;
    }
    crate::Layout::for_protected(l, parity)
        .ok()
        .map(|lay| lay.datagram_len())
}

/// For FEC-only modes: least parity whose predicted failure of an MTU-sized TPDU is below
/// `target` at `ber`. Returns 0 at `ber = 0`. If no parity reaches the target, returns the
/// parity with the lowest predicted failure (the largest such on ties).
pub fn parity_for_target(ber: f64, mtu: usize, target: f64) -> u8 {
    let mut best = (f64::INFINITY, 0u8);
    for p in 0..=(MAX_CODEWORD - 1) as u8 {
        let Some(t) = mtu_datagram(mtu, p) else {
            continue;
        };
        let f = tpdu_failure_probability(ber, t, p);
        if f < target {
            return p;
        }
        if f <= best.0 {
            best = (f, p);
        }
    }
    best.1
}

/// For ARQ/hybrid modes: parity maximising the expected goodput fraction
/// `(L - header_overhead) / T * (1 - failure)` of an MTU-sized TPDU, where `L` is the protected
/// length and `T` the datagram length. The smallest such parity on ties (0 at `ber = 0`).
pub fn parity_for_goodput(ber: f64, mtu: usize, header_overhead: usize) -> u8 {
    let mut best = (0.0f64, 0u8);
    for p in 0..=(MAX_CODEWORD - 1) as u8 {
        let l = max_protected_len(mtu, p);
        if l <= header_overhead {
            continue;
        }
        let Some(t) = mtu_datagram(mtu, p) else {
            continue;
        };
        let g =
            (l - header_overhead) as f64 / t as f64 * (1.0 - tpdu_failure_probability(ber, t, p));
        if g > best.0 {
            best = (g, p);
        }
    }
    best.1
}

/// Receiver-side bit-error-rate estimator with bounded state: exponentially weighted sums over
/// the last ~`window` TPDUs.
///
/// It combines two kinds of evidence in one likelihood-style equation:
/// * TPDUs with FEC give counts: bits corrected (exact) and, for a failed decode, at least
///   `floor(p/2) + 1` symbol errors (counted as that many times the observed bits per corrected
///   symbol, 1 if none observed yet);
/// * TPDUs without FEC only say clean or corrupted. A corrupted one carries on average
///   `lambda / (1 - e^-lambda)` bit errors with `lambda = ber * bits` (Poisson given at least
///   one), so with p = 0 alone the estimate is `-ln(f_clean) / bits`.
///
/// `ber` solves `ber * total_bits = counted_errors + sum_corrupted lambda/(1 - e^-lambda)`.
/// `bits` should be the datagram's length in bits (errors in parity are corrected too).
#[derive(Debug, Clone)]
pub struct BerEstimator {
    decay: f64,
    samples: u64,
    total_bits: f64,
    corrected_bits: f64,
    corrected_symbols: f64,
    failed_symbols: f64,
    corrupted: f64,
    corrupted_bits: f64,
}

impl Default for BerEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl BerEstimator {
    /// Default memory: about 1024 TPDUs (enough for ~10 % precision at 1e-5 with 1500-byte
    /// TPDUs).
    pub const DEFAULT_WINDOW: u32 = 1024;

    pub fn new() -> Self {
        Self::with_window(Self::DEFAULT_WINDOW)
    }

    /// Estimator whose evidence decays by `1 - 1/window` per recorded TPDU.
    pub fn with_window(window: u32) -> Self {
        BerEstimator {
            decay: 1.0 - 1.0 / window.max(1) as f64,
            samples: 0,
            total_bits: 0.0,
            corrected_bits: 0.0,
            corrected_symbols: 0.0,
            failed_symbols: 0.0,
            corrupted: 0.0,
            corrupted_bits: 0.0,
        }
    }

    fn age(&mut self, bits: usize) {
        let a = self.decay;
        self.total_bits = self.total_bits * a + bits as f64;
        self.corrected_bits *= a;
        self.corrected_symbols *= a;
        self.failed_symbols *= a;
        self.corrupted *= a;
        self.corrupted_bits *= a;
        self.samples += 1;
    }

    /// A TPDU of `bits` bits arrived without any error (checks passed without decoding).
    pub fn record_clean(&mut self, bits: usize) {
        self.age(bits);
    }

    /// FEC decoding corrected `corrected_bits` bits in `corrected_symbols` symbols of a TPDU of
    /// `bits` bits (and the checks passed afterwards).
    pub fn record_corrected(
        &mut self,
        bits: usize,
        corrected_bits: usize,
        corrected_symbols: usize,
    ) {
        self.age(bits);
        self.corrected_bits += corrected_bits as f64;
        self.corrected_symbols += corrected_symbols as f64;
    }

    /// A TPDU of `bits` bits was corrupted and could not be corrected: with `parity = 0` it
    /// simply failed its checks; with FEC it had more than `floor(p/2)` symbol errors in some
    /// codeword.
    pub fn record_failed(&mut self, bits: usize, parity: u8) {
        self.age(bits);
        if parity == 0 {
            self.corrupted += 1.0;
            self.corrupted_bits += bits as f64;
        } else {
            self.failed_symbols += (parity as usize / 2 + 1) as f64;
        }
    }

    /// TPDUs recorded so far (all of them, not only those still weighing in the estimate).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Current estimate of the bit-error rate, None before any TPDU was recorded.
    pub fn estimate(&self) -> Option<f64> {
        if self.samples == 0 || self.total_bits <= 0.0 {
            return None;
        }
        let bits_per_symbol = if self.corrected_symbols > 0.0 {
            (self.corrected_bits / self.corrected_symbols).max(1.0)
        } else {
            1.0
        };
        let counted = self.corrected_bits + self.failed_symbols * bits_per_symbol;
        let u = self.corrupted;
        if u <= 1e-12 {
            return Some((counted / self.total_bits).min(0.5));
        }
        let b_u = self.corrupted_bits / u;
        // Expected bit errors in a TPDU known to have at least one: lambda / (1 - e^-lambda).
        let g = |lambda: f64| {
            if lambda < 1e-9 {
                1.0 + lambda / 2.0
            } else {
                lambda / -(-lambda).exp_m1()
            }
        };
        let solve = |n: f64| {
            let h = |ber: f64| ber * n - counted - u * g(ber * b_u);
            let hi = 0.5;
            if h(hi) <= 0.0 {
                return None;
            }
            // h is increasing (n >= u * b_u and g' < 1): bisect on a log scale below hi.
            let (mut lo, mut hi) = (1e-15f64, hi);
            if h(lo) >= 0.0 {
                return Some(lo);
            }
            for _ in 0..100 {
                let mid = (lo * hi).sqrt();
                if h(mid) > 0.0 {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            Some((lo * hi).sqrt())
        };
        // If every TPDU without FEC was corrupted there is no finite solution: count half a clean
        // TPDU more (a standard half-sample correction) to get a bounded estimate.
        solve(self.total_bits)
            .or_else(|| solve(self.total_bits + 0.5 * b_u))
            .or(Some(0.5))
    }
}
