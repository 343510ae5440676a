//! 64-bit TPDU numbers carried as their low 32 bits.

/// Expands the 32 low bits `wire` to the 64-bit TPDU number closest to `expected`.
pub fn expand_seq(expected: u64, wire: u32) -> u64 {
    const WIN: i128 = 1 << 32;
    let exp = i128::from(expected);
    let base = (exp & !(WIN - 1)) | i128::from(wire);
    // The closest of the three candidates that is a valid 64-bit number.
    [base - WIN, base, base + WIN]
        .into_iter()
        .filter(|c| (0..=i128::from(u64::MAX)).contains(c))
        .min_by_key(|c| (c - exp).abs())
        .and_then(|c| u64::try_from(c).ok())
        .unwrap_or(expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_near_expected_across_wraps() {
        assert_eq!(expand_seq(0, 5), 5);
        assert_eq!(expand_seq(10, 3), 3);
        assert_eq!(expand_seq(0xFFFF_FFF0, 0x10), 0x1_0000_0010);
        assert_eq!(expand_seq(0x1_0000_0010, 0xFFFF_FFF0), 0xFFFF_FFF0);
        assert_eq!(expand_seq(0x5_0000_0000, 0), 0x5_0000_0000);
        assert_eq!(expand_seq(u64::MAX - 3, 0xFFFF_FFFF), u64::MAX);
    }
}
