//! The two integrity checks of a TPDU: HEC (CRC-16 over the header) and CRC-32C over the body.

use crc::{Crc, Table, CRC_16_IBM_3740, CRC_32_ISCSI};

const HEC: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_3740);
/// Slice-by-16 tables: the portable CRC-32C, used where the CPU has no CRC-32C instruction.
const CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// Header error check: CRC-16/IBM-3740 (CCITT-FALSE) over the first 18 header bytes.
pub fn hec(header_without_hec: &[u8]) -> u16 {
    HEC.checksum(header_without_hec)
}

/// CRC-32C (Castagnoli) of a TPDU body.
///
/// Runs on every TPDU at both ends: on x86-64 with SSE4.2 and on AArch64 with the CRC
/// extension it uses the CPU's CRC-32C instruction (detected at run time), elsewhere the
/// slice-by-16 table. Both give the same value (tests below).
pub fn crc32c(body: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2 (checked just above).
            return unsafe { hw::crc32c_sse42(body) };
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("crc") {
            // SAFETY: the CPU has the CRC extension (checked just above).
            return unsafe { hw::crc32c_arm(body) };
        }
    }
    crc32c_table(body)
}

/// The portable (table-driven) CRC-32C.
pub fn crc32c_table(body: &[u8]) -> u32 {
    CRC32C.checksum(body)
}

mod hw {
    /// CRC-32C with SSE4.2's `crc32` instruction: the instruction is the reflected CRC-32C
    /// step without the initial value and final inversion, which are applied here.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn crc32c_sse42(data: &[u8]) -> u32 {
        use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
        let mut crc: u64 = 0xFFFF_FFFF;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            crc = _mm_crc32_u64(crc, u64::from_le_bytes(b));
        }
        let mut crc = crc as u32;
        for &b in words.remainder() {
            crc = _mm_crc32_u8(crc, b);
        }
        !crc
    }

    /// CRC-32C with the ARMv8 CRC extension's `crc32c` instructions.
    ///
    /// # Safety
    /// The CPU must have the CRC extension.
    #[cfg(target_arch = "aarch64")]
    #[target_feature(enable = "crc")]
    pub(super) unsafe fn crc32c_arm(data: &[u8]) -> u32 {
        use std::arch::aarch64::{__crc32cb, __crc32cd};
        let mut crc: u32 = 0xFFFF_FFFF;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            crc = __crc32cd(crc, u64::from_le_bytes(b));
        }
        for &b in words.remainder() {
            crc = __crc32cb(crc, b);
        }
        !crc
    }
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
    fn instruction_and_table_agree_on_every_length_and_alignment() {
        let mut x: u32 = 0x1234_5678;
        let data: Vec<u8> = (0..2100)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for start in 0..9 {
            for len in (0..300).chain([1479, 1480, 1481, 2000]) {
                let s = &data[start..start + len];
                assert_eq!(crc32c(s), crc32c_table(s), "start {start} len {len}");
            }
        }
        assert_eq!(crc32c(&[]), 0);
    }
}
