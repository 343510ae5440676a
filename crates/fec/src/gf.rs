//! Arithmetic in GF(2^8) with field polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), primitive
//! element alpha = 2. Tables are built at compile time.

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

#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// alpha^e for any non-negative exponent.
#[inline]
pub fn pow_alpha(e: usize) -> u8 {
    EXP[e % 255]
}

/// Multiplicative inverse; `a` must be non-zero.
#[cfg(test)]
pub fn inv(a: u8) -> u8 {
    debug_assert!(a != 0);
    EXP[(255 - LOG[a as usize] as usize) % 255]
}

#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + 255 - LOG[b as usize] as usize]
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
        fn slow(mut a: u8, mut b: u8) -> u8 {
            let mut r = 0u8;
            while b != 0 {
                if b & 1 != 0 {
                    r ^= a;
                }
                let carry = a & 0x80 != 0;
                a <<= 1;
                if carry {
                    a ^= (FIELD_POLY & 0xFF) as u8;
                }
                b >>= 1;
            }
            r
        }
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow(a, b), "{a} * {b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
                assert_eq!(div(mul(a, 7), 7), a);
            }
        }
    }
}
