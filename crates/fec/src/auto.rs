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

/// Summary of X ~ Binomial(n, q) around the threshold t.
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// P(X > t).
    p_over: f64,
    /// E[X; X > t].
    mean_over: f64,
    /// E[X; X <= t].
    mean_under: f64,
}

/// Binomial tail summary for 0 < q < 1. The upper tail is summed term by term (never as
/// `1 - lower`) while it is below 0.5, so tiny tails (1e-30 and below) keep their relative
/// precision.
fn binomial_tail(n: usize, q: f64, t: usize) -> Tail {
    if t >= n {
        return Tail {
            p_over: 0.0,
            mean_over: 0.0,
            mean_under: n as f64 * q,
        };
    }
    let l1q = (-q).ln_1p();
    let (mut upper, mut lower, mut mean_over, mut mean_under) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let log_p0 = n as f64 * l1q;
    if log_p0 > -700.0 {
        // P(0) is representable: walk the pmf by its ratio (one multiplication per term) and
        // stop once the upper tail's terms no longer matter.
        let ratio = q / (1.0 - q);
        let mean = n as f64 * q;
        let mut pk = log_p0.exp();
        for k in 0..=n {
            if k > 0 {
                pk *= (n - k + 1) as f64 / k as f64 * ratio;
            }
            if k > t {
                upper += pk;
                mean_over += k as f64 * pk;
                if k as f64 > mean && pk <= upper * 1e-18 {
                    break;
                }
            } else {
                lower += pk;
                mean_under += k as f64 * pk;
            }
        }
    } else {
        // Large n*q: terms in log space.
        let lq = q.ln();
        let mut ln_choose = 0.0f64; // ln C(n, k)
        for k in 0..=n {
            if k > 0 {
                ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
            }
            let pk = (ln_choose + k as f64 * lq + (n - k) as f64 * l1q).exp();
            if k > t {
                upper += pk;
                mean_over += k as f64 * pk;
            } else {
                lower += pk;
                mean_under += k as f64 * pk;
            }
        }
    }
    Tail {
        p_over: if upper < 0.5 {
            upper
        } else {
            (1.0 - lower).max(0.0)
        },
        mean_over,
        mean_under,
    }
}

/// The codeword population of a datagram: (count, symbols) for the two codeword lengths.
/// None if the length cannot hold the parity (or p = 255).
fn codeword_groups(datagram_len: usize, p: usize) -> Option<[(usize, usize); 2]> {
    let m = datagram_len.div_ceil(MAX_CODEWORD);
    if p >= MAX_CODEWORD || datagram_len <= m * p {
        return None;
    }
    let l = datagram_len - m * p;
    // Codewords have ceil(L/m) or floor(L/m) data symbols: `long` of them the former.
    let long = l % m;
    let n_short = l / m + p;
    Some([(m - long, n_short), (long, n_short + 1)])
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
    let Some(groups) = codeword_groups(datagram_len, p) else {
        return 1.0;
    };
    if ber >= 1.0 {
        return 1.0;
    }
    let q = symbol_error_probability(ber);
    let mut log_ok = 0.0f64; // ln P(all codewords decode)
    for (count, n) in groups {
        if count > 0 {
            log_ok += count as f64 * (-binomial_tail(n, q, p / 2).p_over).ln_1p();
        }
    }
    (-log_ok.exp_m1()).clamp(0.0, 1.0)
}

/// Expected number of wrong symbols in a TPDU that failed to decode, at `ber`: at least
/// `floor(p/2) + 1`. Computed without cancellation as
/// `sum_j (E[X_j; X_j > t] + E[X_j; X_j <= t] * P(another codeword fails)) / P(fail)`.
fn symbol_errors_given_failure(ber: f64, datagram_len: usize, p: usize) -> f64 {
    let floor = (p / 2 + 1) as f64;
    let Some(groups) = codeword_groups(datagram_len, p) else {
        return floor;
    };
    if !(ber > 0.0 && ber < 1.0) {
        return floor;
    }
    let q = symbol_error_probability(ber);
    let tails = groups.map(|(count, n)| (count, binomial_tail(n, q, p / 2)));
    let log_ok_all: f64 = tails
        .iter()
        .filter(|(c, _)| *c > 0)
        .map(|&(c, t)| c as f64 * (-t.p_over).ln_1p())
        .sum();
    let p_fail = -log_ok_all.exp_m1();
    if p_fail.is_nan() || p_fail <= 0.0 {
        return floor;
    }
    let mut num = 0.0;
    for &(count, tail) in &tails {
        if count == 0 {
            continue;
        }
        // P(some other codeword fails) = 1 - P(all ok) / P(this ok).
        let others_fail = -(log_ok_all - (-tail.p_over).ln_1p()).exp_m1();
        num += count as f64 * (tail.mean_over + tail.mean_under * others_fail);
    }
    (num / p_fail).max(floor)
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
/// Evidence, all in one moment equation `ber * total_bits = expected bit errors`:
/// * clean TPDUs add bits and no errors;
/// * TPDUs corrected by FEC add their exact count of corrected bits;
/// * a failed FEC decode adds the expected number of bit errors of a TPDU of that size and
///   parity *given that it failed* at the current `ber`, which is at least `floor(p/2) + 1`
///   symbol errors (so weak FEC at a high BER is not underestimated);
/// * a corrupted TPDU without FEC (p = 0) adds `lambda / (1 - e^-lambda)` with
///   `lambda = ber * bits` (Poisson, given at least one error); with p = 0 alone the solution is
///   `ber = -ln(f_clean) / bits`.
///
/// `estimate` solves the equation by bisection on a log scale. `bits` should be the datagram's
/// length in bits (errors in the parity are corrected and counted too). The state is a few
/// numbers whatever the history: the failed FEC TPDUs are summarised by their average length
/// and average parity.
#[derive(Debug, Clone)]
pub struct BerEstimator {
    decay: f64,
    samples: u64,
    total_bits: f64,
    corrected_bits: f64,
    /// Failed FEC decodes: weight, sum of bits, sum of parity.
    failed: f64,
    failed_bits: f64,
    failed_parity: f64,
    /// Corrupted TPDUs without FEC: weight and sum of bits.
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
            failed: 0.0,
            failed_bits: 0.0,
            failed_parity: 0.0,
            corrupted: 0.0,
            corrupted_bits: 0.0,
        }
    }

    fn age(&mut self, bits: usize) {
        let a = self.decay;
        self.total_bits = self.total_bits * a + bits as f64;
        self.corrected_bits *= a;
        self.failed *= a;
        self.failed_bits *= a;
        self.failed_parity *= a;
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
        // Every corrected symbol has at least one wrong bit.
        self.corrected_bits += corrected_bits.max(corrected_symbols) as f64;
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
            self.failed += 1.0;
            self.failed_bits += bits as f64;
            self.failed_parity += parity as f64;
        }
    }

    /// TPDUs recorded so far (all of them, not only those still weighing in the estimate).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Current estimate of the bit-error rate, None before any TPDU was recorded. Costs
    /// about a microsecond, ~15 µs with failed FEC decodes in the window (each bisection step
    /// then evaluates binomial tails): call it per report rather than per TPDU.
    pub fn estimate(&self) -> Option<f64> {
        if self.samples == 0 || self.total_bits <= 0.0 {
            return None;
        }
        const TINY: f64 = 1e-12;
        let (u0, uf) = (self.corrupted, self.failed);
        if u0 <= TINY && uf <= TINY {
            return Some((self.corrected_bits / self.total_bits).min(0.5));
        }
        let b0 = if u0 > TINY {
            self.corrupted_bits / u0
        } else {
            0.0
        };
        // Average failed FEC TPDU: datagram bytes and parity.
        let (tf, pf) = if uf > TINY {
            (
                (self.failed_bits / uf / 8.0).round().max(1.0) as usize,
                ((self.failed_parity / uf).round() as usize).min(MAX_CODEWORD - 1),
            )
        } else {
            (0, 0)
        };
        // Expected bit errors of a TPDU known to have at least one, without FEC.
        let g0 = |lambda: f64| {
            if lambda < 1e-9 {
                1.0 + lambda / 2.0
            } else {
                lambda / -(-lambda).exp_m1()
            }
        };
        // Expected bit errors of a failed FEC TPDU: symbols times bits per wrong symbol.
        let gf = |ber: f64| {
            if uf <= TINY {
                return 0.0;
            }
            let bits_per_symbol = (8.0 * ber / symbol_error_probability(ber)).max(1.0);
            symbol_errors_given_failure(ber, tf, pf) * bits_per_symbol
        };
        let expected = |ber: f64| self.corrected_bits + u0 * g0(ber * b0) + uf * gf(ber);
        let solve = |n: f64| -> Option<f64> {
            let h = |ber: f64| ber * n - expected(ber);
            // Find the first sign change on a log grid (factor 4), then bisect inside it.
            let mut lo = 1e-10f64;
            if h(lo) >= 0.0 {
                return Some(lo);
            }
            let mut hi = lo;
            loop {
                hi = (hi * 4.0).min(0.5);
                if h(hi) > 0.0 {
                    break;
                }
                if hi >= 0.5 {
                    return None;
                }
                lo = hi;
            }
            for _ in 0..24 {
                let mid = (lo * hi).sqrt();
                if h(mid) > 0.0 {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            Some((lo * hi).sqrt())
        };
        // If every TPDU was corrupted there may be no finite solution: count half a clean TPDU
        // more (a standard half-sample correction) to get a bounded estimate.
        let avg_bad_bits = (self.corrupted_bits + self.failed_bits) / (u0 + uf);
        solve(self.total_bits)
            .or_else(|| solve(self.total_bits + 0.5 * avg_bad_bits))
            .or(Some(0.5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(n: usize, k: usize) -> f64 {
        (0..k).fold(1.0, |a, i| a * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn binomial_tail_matches_direct_sum() {
        for (n, q, t) in [
            (10usize, 0.1f64, 2usize),
            (40, 0.3, 10),
            (255, 0.002, 4),
            (5, 0.5, 5),
        ] {
            let pk = |k: usize| choose(n, k) * q.powi(k as i32) * (1.0 - q).powi((n - k) as i32);
            let over: f64 = (t + 1..=n).map(pk).sum();
            let mean_over: f64 = (t + 1..=n).map(|k| k as f64 * pk(k)).sum();
            let mean_under: f64 = (0..=t.min(n)).map(|k| k as f64 * pk(k)).sum();
            let got = binomial_tail(n, q, t);
            assert!(
                (got.p_over - over).abs() <= 1e-12 + 1e-9 * over,
                "{n} {q} {t}"
            );
            assert!((got.mean_over - mean_over).abs() <= 1e-9 * (1.0 + mean_over));
            assert!((got.mean_under - mean_under).abs() <= 1e-9 * (1.0 + mean_under));
        }
    }

    #[test]
    fn errors_given_failure_between_floor_and_mean() {
        // Rare failures: exactly t+1 symbols in one codeword, nearly nothing elsewhere.
        let e = symbol_errors_given_failure(1e-7, 1500, 8);
        assert!((e - 5.0).abs() < 0.01, "{e}");
        // Frequent failures: about the unconditional mean (1500 bytes * q).
        let q = symbol_error_probability(3e-3);
        let e = symbol_errors_given_failure(3e-3, 1500, 4);
        assert!((e / (1500.0 * q) - 1.0).abs() < 0.05, "{e}");
        assert_eq!(symbol_errors_given_failure(1e-4, 8, 8), 5.0);
    }
}
