//! The two integrity checks of a TPDU: HEC (CRC-16 over the header) and CRC-32C over the body.

use crc::{Crc, Table, CRC_16_IBM_3740, CRC_32_ISCSI};

// `static`, not `const`: a `const` is a fresh table copied at every use. Slice-by-16: the HEC
// of a length other than 18 bytes (none in the protocol), and the reference the fixed-length
// `hec` is tested against.
static HEC: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_IBM_3740);
/// Slice-by-16 tables: the portable CRC-32C, kept as the independent reference the fast one is
/// tested against (and timed against, `examples/crc_speed.rs`).
const CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// Bytes the HEC covers: the header before the HEC itself.
const HEC_COVERS: usize = 18;

/// CRC-16/IBM-3740 (polynomial 0x1021, not reflected) of `bytes` from state `crc`, bit by bit:
/// only for building [`HEC_BY_POSITION`] at compile time.
const fn crc16_bits(mut crc: u16, bytes: &[u8]) -> u16 {
    let mut i = 0;
    while i < bytes.len() {
        crc ^= (bytes[i] as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        i += 1;
    }
    crc
}

/// The HEC of 18 bytes is linear in them: the CRC of 18 zero bytes from the initial state
/// 0xFFFF, XORed with what each byte contributes at its position. So it is 18 independent
/// lookups in 18 tables of 256 entries (9 kB, resident in L1), where slice-by-16 chains two
/// bytes after its 16 lookups. Written by hand because no crate offers a CRC for one fixed
/// length; 6.1 against 11.8 ns a header for the `crc` crate's slice-by-16, 28 ns for its
/// byte-wise table and 36 ns for `crc-fast`, whose vector code pays off on long inputs only
/// (`cargo run --release -p aerotp-wire --example crc_speed`, one run); the HEC runs twice
/// per TPDU (docs/results/loopback.md). Tested equal to the `crc` crate.
static HEC_BY_POSITION: [[u16; 256]; HEC_COVERS] = {
    let mut t = [[0u16; 256]; HEC_COVERS];
    let mut pos = 0;
    while pos < HEC_COVERS {
        let mut b = 0;
        while b < 256 {
            let mut msg = [0u8; HEC_COVERS];
            msg[pos] = b as u8;
            t[pos][b] = crc16_bits(0, &msg);
            b += 1;
        }
        pos += 1;
    }
    t
};
/// The HEC of 18 zero bytes.
const HEC_OF_ZEROS: u16 = crc16_bits(0xFFFF, &[0u8; HEC_COVERS]);

/// Header error check: CRC-16/IBM-3740 (CCITT-FALSE) over the first 18 header bytes.
pub fn hec(header_without_hec: &[u8]) -> u16 {
    match <&[u8; HEC_COVERS]>::try_from(header_without_hec) {
        Ok(h) => h
            .iter()
            .zip(HEC_BY_POSITION.iter())
            .fold(HEC_OF_ZEROS, |c, (&b, t)| c ^ t[usize::from(b)]),
        Err(_) => HEC.checksum(header_without_hec),
    }
}

/// The HEC through the `crc` crate's slice-by-16 tables, any length: the reference the
/// fixed-length one is tested (and timed) against.
pub fn hec_table(bytes: &[u8]) -> u16 {
    HEC.checksum(bytes)
}

/// CRC-32C (Castagnoli) of a TPDU body.
///
/// Runs on every TPDU at both ends, so it is the `crc-fast` crate's: carry-less
/// multiplication folding (PCLMULQDQ / VPCLMULQDQ on x86-64, PMULL on AArch64), chosen at run
/// time, with a table where the CPU has neither. Measured against the alternatives on
/// 1476-byte bodies (`cargo run --release -p aerotp-wire --example crc_speed`,
/// docs/results/loopback.md): about 55 ns a body against 88–90 ns for the three interleaved
/// chains of the SSE4.2 `crc32` instruction this project used before, 109 ns for the `crc32c`
/// crate and 380 ns for slice-by-16 tables; the same within a nanosecond on bodies up to 300
/// bytes (control TPDUs).
///
/// On x86-64 the bytes of a body of 384 bytes or more past the crate's last 384-byte block
/// go through three interleaved chains instead of its one (`crate::crc_tail`): 46 against
/// 56–59 ns for a 1476-byte body.
pub fn crc32c(body: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if crate::crc_tail::worth_it(body.len()) {
        return crate::crc_tail::crc32c(body);
    }
    crc32c_crate(body)
}

/// CRC-32C as the `crc-fast` crate computes it whole: what [`crc32c`] runs on a CPU without
/// SSE4.2 and carry-less multiplication, and what it is timed against.
pub fn crc32c_crate(body: &[u8]) -> u32 {
    // CRC-32/ISCSI is CRC-32C; the crate computes 32-bit CRCs in a u64.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, body) as u32
}

/// The portable (table-driven) CRC-32C.
pub fn crc32c_table(body: &[u8]) -> u32 {
    CRC32C.checksum(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_length_hec_is_the_catalogue_crc() {
        let mut x: u32 = 0x9E37_79B9;
        for round in 0..20_000u32 {
            let h: [u8; 18] = std::array::from_fn(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            });
            assert_eq!(hec(&h), hec_table(&h), "round {round}: {h:02x?}");
        }
        for h in [[0u8; 18], [0xFF; 18]] {
            assert_eq!(hec(&h), hec_table(&h));
        }
        // Other lengths take the general tables.
        assert_eq!(hec(b"123456789"), 0x29B1);
    }

    #[test]
    fn check_values_match_the_catalogue() {
        // Standard check values for "123456789" from the CRC catalogue.
        assert_eq!(hec(b"123456789"), 0x29B1);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_table(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn fast_and_table_agree_on_every_length_and_alignment() {
        let mut x: u32 = 0x1234_5678;
        let data: Vec<u8> = (0..2200)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        // Every length to 2,100 bytes (three chains or one, before and after one to five
        // whole 384-byte blocks) at nine alignments, and a sample of lengths at all 64
        // alignments the vector code tells apart.
        for start in 0..9 {
            for len in 0..2100 {
                let s = &data[start..start + len];
                assert_eq!(crc32c(s), crc32c_table(s), "start {start} len {len}");
            }
        }
        for start in 0..64 {
            for len in [
                0, 1, 7, 8, 55, 56, 57, 383, 384, 447, 448, 1476, 1500, 2084, 2100,
            ] {
                let s = &data[start..start + len];
                assert_eq!(crc32c(s), crc32c_table(s), "start {start} len {len}");
                assert_eq!(crc32c_crate(s), crc32c_table(s), "start {start} len {len}");
            }
        }
        assert_eq!(crc32c(&[]), 0);
    }
}
