//! The two integrity checks of a TPDU: HEC (CRC-16 over the header) and CRC-32C over the body.

use crc::{Crc, Table, CRC_16_IBM_3740, CRC_32_ISCSI};

// `static`, not `const`: a `const` is a fresh table copied at every use. Slice-by-16: the
// 18 header bytes are 16 independent lookups and two more, instead of a chain of 18; the HEC
// runs twice per TPDU. 10 against 20–21 ns a header for the byte-wise table
// (`examples/crc_speed.rs`); the `crc-fast` crate's CRC-16/IBM-3740, vector code that pays off
// on long inputs only, takes 34 ns on these 18 bytes against 15 ns in the same run.
static HEC: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_IBM_3740);
/// Slice-by-16 tables: the portable CRC-32C, kept as the independent reference the fast one is
/// tested against (and timed against, `examples/crc_speed.rs`).
const CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// Header error check: CRC-16/IBM-3740 (CCITT-FALSE) over the first 18 header bytes.
pub fn hec(header_without_hec: &[u8]) -> u16 {
    HEC.checksum(header_without_hec)
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
pub fn crc32c(body: &[u8]) -> u32 {
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
    fn check_values_match_the_catalogue() {
        // Standard check values for "123456789" from the CRC catalogue.
        assert_eq!(hec(b"123456789"), 0x29B1);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_table(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn fast_and_table_agree_on_every_length_and_alignment() {
        let mut x: u32 = 0x1234_5678;
        let data: Vec<u8> = (0..2100)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for start in 0..9 {
            for len in (0..300)
                .chain(370..1200)
                .chain([1479, 1480, 1481, 2000, 2084])
            {
                let s = &data[start..start + len];
                assert_eq!(crc32c(s), crc32c_table(s), "start {start} len {len}");
            }
        }
        assert_eq!(crc32c(&[]), 0);
    }
}
