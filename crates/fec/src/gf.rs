//! Arithmetic in GF(2^8) with field polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D, RFC 8681's
//! field), primitive element alpha = 2: the one copy used by the per-TPDU Reed–Solomon code here
//! and by the random linear code of `aerotp-erasure`. Tables are built at compile time, so a
//! scalar product is one load with no lazy-init check (twice the rate of a `OnceLock` table,
//! `docs/fec.md`); slices are multiplied-and-added 32 bytes at a time with AVX2 where present.
//!
//! The slice kernel is written here because the kernels of the crates that have one are private
//! (`reed-solomon-simd` works in its own GF(2^16) FFT basis and exports no multiply-add) and the
//! one RFC 8681 crate found (`cu-fec` 1.3) multiplies bit by bit, one byte at a time (measured
//! in `docs/results/erasure-codecs.md`). It is the usual split-nibble one: `c*x =
//! c*(x & 15) ^ c*(x >> 4 << 4)`, two 16-entry tables looked up with the AVX2 byte shuffle, or
//! one 256-entry row of the product table elsewhere.

/// Field polynomial x^8 + x^4 + x^3 + x^2 + 1.
pub const FIELD_POLY: u16 = 0x11D;

const fn build_exp() -> [u8; 512] {
    let mut exp = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= FIELD_POLY;
        }
        i += 1;
    }
    // exp[510], exp[511] are only reached by log sums of at most 254 + 254 = 508.
    exp
}

const fn build_log(exp: &[u8; 512]) -> [u8; 256] {
    let mut log = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        log[exp[i] as usize] = i as u8;
        i += 1;
    }
    log
}

/// alpha^i for i in 0..510 (doubled so that sums of two logs need no reduction).
pub static EXP: [u8; 512] = build_exp();
/// Discrete logarithm base alpha; LOG[0] is unused (0 has no logarithm).
pub static LOG: [u8; 256] = build_log(&EXP);

const fn build_mul() -> [[u8; 256]; 256] {
    let exp = build_exp();
    let log = build_log(&exp);
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// Full multiplication table (64 KiB): MUL[a][b] = a * b. Row access makes the encoder's inner
/// loop one load per parity symbol.
pub static MUL: [[u8; 256]; 256] = build_mul();

/// `a * b`.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// alpha^e for any non-negative exponent.
#[inline]
pub fn pow_alpha(e: usize) -> u8 {
    EXP[e % 255]
}

/// Multiplicative inverse; `None` for 0, which has none.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        return None;
    }
    Some(EXP[255 - LOG[a as usize] as usize])
}

/// `a / b`; `b` must be non-zero (the decoder divides only by values it checked).
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + 255 - LOG[b as usize] as usize]
    }
}

/// `dst[i] ^= c * src[i]` for `i < min(dst.len(), src.len())`.
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    match c {
        0 => {}
        1 => dst.iter_mut().zip(src).for_each(|(d, s)| *d ^= s),
        _ => {
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: the CPU reports AVX2 (checked at run time just above).
                unsafe { x86::mul_add_avx2(dst, src, c) };
                return;
            }
            mul_add_table(dst, src, c);
        }
    }
}

/// `buf[i] = c * buf[i]`.
pub fn scale(buf: &mut [u8], c: u8) {
    if c == 1 {
        return;
    }
    let row = &MUL[c as usize];
    buf.iter_mut().for_each(|b| *b = row[*b as usize]);
}

/// The portable kernel: one row of the product table.
pub fn mul_add_table(dst: &mut [u8], src: &[u8], c: u8) {
    let row = &MUL[c as usize];
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, s)| *d ^= row[*s as usize]);
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0 = not probed yet, 1 = no, 2 = yes: the probe is cheap but not free on every call.
    static AVX2: AtomicU8 = AtomicU8::new(0);
    match AVX2.load(Ordering::Relaxed) {
        0 => {
            let yes = std::is_x86_feature_detected!("avx2");
            AVX2.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The caller checks that the CPU has AVX2; `dst` and `src` have the same length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mul_add_avx2(dst: &mut [u8], src: &[u8], c: u8) {
        let mut lo = [0u8; 16];
        let mut hi = [0u8; 16];
        for i in 0..16u8 {
            lo[i as usize] = crate::gf::mul(c, i);
            hi[i as usize] = crate::gf::mul(c, i << 4);
        }
        let n = dst.len();
        let chunks = n / 32;
        // SAFETY: every load and store below is at offset i*32 with i < n/32, inside both
        // slices; the unaligned load/store intrinsics accept any alignment.
        unsafe {
            let lo128 = _mm_loadu_si128(lo.as_ptr() as *const __m128i);
            let hi128 = _mm_loadu_si128(hi.as_ptr() as *const __m128i);
            let lo_t = _mm256_broadcastsi128_si256(lo128);
            let hi_t = _mm256_broadcastsi128_si256(hi128);
            let mask = _mm256_set1_epi8(0x0f);
            for i in 0..chunks {
                let sp = src.as_ptr().add(i * 32) as *const __m256i;
                let dp = dst.as_mut_ptr().add(i * 32) as *mut __m256i;
                let s = _mm256_loadu_si256(sp);
                let l = _mm256_and_si256(s, mask);
                let h = _mm256_and_si256(_mm256_srli_epi64(s, 4), mask);
                let p =
                    _mm256_xor_si256(_mm256_shuffle_epi8(lo_t, l), _mm256_shuffle_epi8(hi_t, h));
                let d = _mm256_loadu_si256(dp);
                _mm256_storeu_si256(dp, _mm256_xor_si256(d, p));
            }
        }
        let done = chunks * 32;
        crate::gf::mul_add_table(&mut dst[done..], &src[done..], c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_is_primitive_and_tables_agree() {
        let mut seen = [false; 256];
        for (i, &v) in EXP.iter().enumerate().take(255) {
            assert!(!seen[v as usize], "alpha^{i} repeats");
            seen[v as usize] = true;
            assert_eq!(LOG[v as usize] as usize, i);
        }
        assert!(!seen[0]);
    }

    #[test]
    fn mul_matches_carryless_multiplication() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a).unwrap()), 1, "inverse of {a}");
                assert_eq!(div(mul(a, 7), 7), a);
            }
        }
    }

    #[test]
    fn zero_has_no_inverse_and_the_field_wraps_through_0x11d() {
        assert_eq!(inv(0), None);
        // RFC 8681's field: 0x80 * 2 wraps through 0x11D.
        assert_eq!(mul(0x80, 2), 0x1d);
    }

    /// Bit-by-bit product, independent of the tables.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= (FIELD_POLY & 0xff) as u8;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn simd_and_table_kernels_agree_at_every_length_and_coefficient() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 37 + 11) as u8).collect();
        for c in 0..=255u8 {
            for len in [0usize, 1, 31, 32, 33, 64, 95, 300] {
                let mut a: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut b = a.clone();
                mul_add(&mut a, &src[..len], c);
                for (i, d) in b.iter_mut().enumerate() {
                    *d ^= slow_mul(c, src[i]);
                }
                assert_eq!(a, b, "c={c} len={len}");
            }
        }
    }
}
