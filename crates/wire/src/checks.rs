//! The two integrity checks of a TPDU: HEC (CRC-16 over the header) and CRC-32C over the body.

use crc::{Crc, Table, CRC_16_IBM_3740, CRC_32_ISCSI};

// `static`, not `const`: a `const` is a fresh table copied at every use. Slice-by-16: the
// 18 header bytes are 16 independent lookups and two more, instead of a chain of 18 (the HEC
// runs twice per TPDU, and the chain was 3 % of a loopback transfer's CPU).
static HEC: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_IBM_3740);
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

/// Appends `body` to `out` and returns its CRC-32C, reading `body` once: with the CRC-32C
/// instruction the copy rides in the checksum's loop (each word loaded for the CRC is stored
/// to `out` too), which makes the copy nearly free beside the CRC's own latency-bound chains.
/// Encoding a TPDU is this copy plus this checksum; done apart they were 7 % and 6 % of the
/// CPU of a loopback transfer (docs/results/loopback.md). Written by hand because the CRC
/// crates checksum a slice but do not copy it.
pub fn crc32c_append(body: &[u8], out: &mut Vec<u8>) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            out.reserve(body.len());
            let spare = &mut out.spare_capacity_mut()[..body.len()];
            // SAFETY: the CPU supports SSE4.2 (checked just above).
            let crc = unsafe { hw::crc32c_copy_sse42(body, spare) };
            // SAFETY: `crc32c_copy_sse42` initialised all `body.len()` bytes of `spare`, the
            // first spare bytes of `out`'s capacity (reserved above).
            unsafe { out.set_len(out.len() + body.len()) };
            return crc;
        }
    }
    out.extend_from_slice(body);
    crc32c(body)
}

/// The portable (table-driven) CRC-32C.
pub fn crc32c_table(body: &[u8]) -> u32 {
    CRC32C.checksum(body)
}

/// Bytes each of the three interleaved CRC-32C streams takes per round (see `hw`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const STREAM: usize = 128;

/// Reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// The raw CRC-32C state after `STREAM` zero bytes, as four byte-indexed tables: a linear map,
/// so `shift(s) = T0[s₀] ^ T1[s₁] ^ T2[s₂] ^ T3[s₃]` for the bytes sᵢ of the state. Computed bit
/// by bit at compile time, independently of the CRC instruction.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
static SHIFT: [[u32; 256]; 4] = shift_tables();

const fn shift_tables() -> [[u32; 256]; 4] {
    // The image of each state bit.
    let mut basis = [0u32; 32];
    let mut i = 0;
    while i < 32 {
        let mut v: u32 = 1 << i;
        let mut step = 0;
        while step < STREAM * 8 {
            v = if v & 1 == 1 { (v >> 1) ^ POLY } else { v >> 1 };
            step += 1;
        }
        basis[i] = v;
        i += 1;
    }
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            let mut v = 0;
            let mut bit = 0;
            while bit < 8 {
                if b & (1 << bit) != 0 {
                    v ^= basis[k * 8 + bit];
                }
                bit += 1;
            }
            t[k][b] = v;
            b += 1;
        }
        k += 1;
    }
    t
}

/// The raw state `s` advanced over `STREAM` zero bytes.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn shift(s: u32) -> u32 {
    let [a, b, c, d] = s.to_le_bytes();
    SHIFT[0][usize::from(a)]
        ^ SHIFT[1][usize::from(b)]
        ^ SHIFT[2][usize::from(c)]
        ^ SHIFT[3][usize::from(d)]
}

mod hw {
    /// CRC-32C with SSE4.2's `crc32` instruction: the instruction is the reflected CRC-32C
    /// step without the initial value and final inversion, which are applied here.
    ///
    /// The instruction's latency is three times its throughput, so one chain of it runs at a
    /// third of the speed the CPU can give. While at least `3 × STREAM` bytes remain, three
    /// consecutive blocks run as three independent chains and are joined: the CRC state over
    /// `A‖B` is `shift(state over A) ^ (state over B from 0)`, `shift` being linear.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    #[allow(unused_unsafe)] // the intrinsics are safe here from Rust 1.87 on, unsafe before
    pub(super) unsafe fn crc32c_sse42(data: &[u8]) -> u32 {
        use super::{shift, STREAM};
        use std::arch::x86_64::_mm_crc32_u64;
        let word = |w: &[u8]| {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            u64::from_le_bytes(b)
        };
        let mut crc: u32 = 0xFFFF_FFFF;
        let mut rounds = data.chunks_exact(3 * STREAM);
        for r in &mut rounds {
            let (a, bc) = r.split_at(STREAM);
            let (b, c) = bc.split_at(STREAM);
            let (mut x, mut y, mut z) = (u64::from(crc), 0u64, 0u64);
            for ((wa, wb), wc) in a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8))
            {
                // SAFETY: SSE4.2 is enabled for this function.
                unsafe {
                    x = _mm_crc32_u64(x, word(wa));
                    y = _mm_crc32_u64(y, word(wb));
                    z = _mm_crc32_u64(z, word(wc));
                }
            }
            crc = shift(shift(x as u32) ^ y as u32) ^ z as u32;
        }
        // SAFETY: as for this function.
        !unsafe { raw_sse42(crc, rounds.remainder()) }
    }

    /// As [`crc32c_sse42`], storing each word it loads into `dst` as well: on return the
    /// first `data.len()` elements of `dst` hold `data`.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    #[allow(unused_unsafe)]
    pub(super) unsafe fn crc32c_copy_sse42(
        data: &[u8],
        dst: &mut [std::mem::MaybeUninit<u8>],
    ) -> u32 {
        use super::{shift, STREAM};
        use std::arch::x86_64::_mm_crc32_u64;
        let dst = &mut dst[..data.len()];
        let word = |w: &[u8]| {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            u64::from_le_bytes(b)
        };
        let store = |d: &mut [std::mem::MaybeUninit<u8>], w: u64| {
            for (d, b) in d.iter_mut().zip(w.to_le_bytes()) {
                d.write(b);
            }
        };
        let mut crc: u32 = 0xFFFF_FFFF;
        let mut rounds = data.chunks_exact(3 * STREAM);
        let mut out = dst.chunks_exact_mut(3 * STREAM);
        for (r, o) in (&mut rounds).zip(&mut out) {
            let (a, bc) = r.split_at(STREAM);
            let (b, c) = bc.split_at(STREAM);
            let (oa, obc) = o.split_at_mut(STREAM);
            let (ob, oc) = obc.split_at_mut(STREAM);
            let (mut x, mut y, mut z) = (u64::from(crc), 0u64, 0u64);
            let words = a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8));
            let slots = oa
                .chunks_exact_mut(8)
                .zip(ob.chunks_exact_mut(8))
                .zip(oc.chunks_exact_mut(8));
            for (((wa, wb), wc), ((da, db), dc)) in words.zip(slots) {
                let (va, vb, vc) = (word(wa), word(wb), word(wc));
                store(da, va);
                store(db, vb);
                store(dc, vc);
                // SAFETY: SSE4.2 is enabled for this function.
                unsafe {
                    x = _mm_crc32_u64(x, va);
                    y = _mm_crc32_u64(y, vb);
                    z = _mm_crc32_u64(z, vc);
                }
            }
            crc = shift(shift(x as u32) ^ y as u32) ^ z as u32;
        }
        let tail = rounds.remainder();
        let rest = out.into_remainder();
        debug_assert_eq!(rest.len(), tail.len());
        // SAFETY: `rest` and `tail` have the same length (`dst` was cut to `data.len()` and
        // both were chunked alike) and do not overlap (`dst` is uninitialised spare room);
        // `MaybeUninit<u8>` has the layout of `u8`.
        unsafe {
            std::ptr::copy_nonoverlapping(tail.as_ptr(), rest.as_mut_ptr().cast::<u8>(), tail.len())
        };
        // SAFETY: as for this function.
        !unsafe { raw_sse42(crc, tail) }
    }

    /// One chain of the instruction over `data` from raw state `crc`.
    ///
    /// # Safety
    /// The CPU must support SSE4.2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    #[allow(unused_unsafe)]
    unsafe fn raw_sse42(crc: u32, data: &[u8]) -> u32 {
        use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
        let mut crc = u64::from(crc);
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            // SAFETY: SSE4.2 is enabled for this function.
            crc = unsafe { _mm_crc32_u64(crc, u64::from_le_bytes(b)) };
        }
        let mut crc = crc as u32;
        for &b in words.remainder() {
            // SAFETY: as above.
            crc = unsafe { _mm_crc32_u8(crc, b) };
        }
        crc
    }

    /// CRC-32C with the ARMv8 CRC extension's `crc32c` instructions.
    ///
    /// # Safety
    /// The CPU must have the CRC extension.
    #[cfg(target_arch = "aarch64")]
    #[target_feature(enable = "crc")]
    #[allow(unused_unsafe)]
    pub(super) unsafe fn crc32c_arm(data: &[u8]) -> u32 {
        use std::arch::aarch64::{__crc32cb, __crc32cd};
        let mut crc: u32 = 0xFFFF_FFFF;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            // SAFETY: the CRC extension is enabled for this function.
            crc = unsafe { __crc32cd(crc, u64::from_le_bytes(b)) };
        }
        for &b in words.remainder() {
            // SAFETY: as above.
            crc = unsafe { __crc32cb(crc, b) };
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

    #[test]
    fn appending_copies_the_body_and_gives_its_crc_on_every_length_and_alignment() {
        let data: Vec<u8> = (0..2100u32).map(|i| (i * 7919 % 251) as u8).collect();
        for start in 0..9 {
            for len in (0..300).chain(370..1200).chain([1479, 1480, 1481, 2084]) {
                let s = &data[start..start + len];
                let mut out = vec![0xAB; start];
                assert_eq!(crc32c_append(s, &mut out), crc32c_table(s), "len {len}");
                assert_eq!(&out[..start], &vec![0xAB; start][..]);
                assert_eq!(&out[start..], s, "start {start} len {len}");
            }
        }
    }

    #[test]
    fn shift_is_the_state_after_stream_zero_bytes() {
        // Raw state over STREAM zero bytes, byte by byte, against the tables.
        for s in [1u32, 0x8000_0000, 0xFFFF_FFFF, 0x1234_5678, 0xDEAD_BEEF] {
            let mut v = s;
            for _ in 0..STREAM * 8 {
                v = if v & 1 == 1 { (v >> 1) ^ POLY } else { v >> 1 };
            }
            assert_eq!(shift(s), v);
        }
    }
}
