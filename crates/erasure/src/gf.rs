//! GF(2^8) arithmetic for the random linear code: the field of RFC 8681 (primitive polynomial
//! `x^8 + x^4 + x^3 + x^2 + 1`, 0x11D — the same field as the per-TPDU Reed–Solomon code in
//! `aerotp-fec`), with slice multiply-add as the only hot operation.
//!
//! Written here because the slice kernels of the crates that have them are private
//! (`reed-solomon-simd` works in its own GF(2^16) FFT basis and exports no multiply-add) and the
//! one RFC 8681 crate found (`cu-fec` 1.3) multiplies bit by bit, one byte at a time (measured
//! in `docs/results/erasure-codecs.md`). The kernel is the usual split-nibble one: `c*x =
//! c*(x & 15) ^ c*(x >> 4 << 4)`, two 16-entry tables looked up 32 bytes at a time with the
//! AVX2 byte shuffle, or one 256-entry row of a product table elsewhere.

use std::sync::OnceLock;

const POLY: u16 = 0x11D;

struct Tables {
    exp: [u8; 512],
    log: [u8; 256],
    /// `mul[a][b] = a*b`: 64 KiB, built once.
    mul: Vec<[u8; 256]>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut exp = [0u8; 512];
        let mut log = [0u8; 256];
        let mut x: u16 = 1;
        for (i, e) in exp.iter_mut().enumerate().take(255) {
            *e = x as u8;
            log[x as usize] = i as u8;
            x <<= 1;
            if x & 0x100 != 0 {
                x ^= POLY;
            }
        }
        for i in 255..512 {
            exp[i] = exp[i - 255];
        }
        let mut mul = vec![[0u8; 256]; 256];
        for a in 1..256usize {
            for b in 1..256usize {
                mul[a][b] = exp[log[a] as usize + log[b] as usize];
            }
        }
        Tables { exp, log, mul }
    })
}

/// `a * b` in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    tables().mul[a as usize][b as usize]
}

/// Multiplicative inverse; `None` for 0, which has none.
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        return None;
    }
    let t = tables();
    Some(t.exp[255 - t.log[a as usize] as usize])
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
    let row = &tables().mul[c as usize];
    buf.iter_mut().for_each(|b| *b = row[*b as usize]);
}

/// The portable kernel: one row of the product table.
pub fn mul_add_table(dst: &mut [u8], src: &[u8], c: u8) {
    let row = &tables().mul[c as usize];
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
                a ^= (POLY & 0xff) as u8;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn tables_match_bitwise_product_and_inverse() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a).unwrap()), 1, "inverse of {a}");
            }
        }
        assert_eq!(inv(0), None);
        // RFC 8681's field: 0x80 * 2 wraps through 0x11D.
        assert_eq!(mul(0x80, 2), 0x1d);
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
