//! The applications' side of a run: the bytes they send and the check of what they read.

use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::result::RunResult;

/// The file content of a run: reproducible pseudo-random bytes.
pub(super) fn payload(size: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; size];
    Pcg64Mcg::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// An application read `chunk`: counts it as delivered and moves `got` (bytes read so far)
/// past it. True when it is exactly the bytes of `expected` at that offset; false for wrong
/// bytes or bytes beyond the end.
pub(super) fn take_chunk(
    chunk: &[u8],
    expected: &[u8],
    got: &mut usize,
    r: &mut RunResult,
) -> bool {
    let intact = expected.get(*got..*got + chunk.len()) == Some(chunk);
    *got += chunk.len();
    r.delivered_bytes += chunk.len() as u64;
    intact
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::result::result_base;

    #[test]
    fn take_chunk_checks_each_read_at_its_offset() {
        let expected = b"abcdef";
        let mut r = result_base(1);
        let mut got = 0;
        assert!(take_chunk(b"ab", expected, &mut got, &mut r));
        assert!(!take_chunk(b"xd", expected, &mut got, &mut r));
        assert!(take_chunk(b"ef", expected, &mut got, &mut r));
        // Past the end: counted, but not intact.
        assert!(!take_chunk(b"g", expected, &mut got, &mut r));
        assert_eq!((got, r.delivered_bytes), (7, 7));
    }
}
