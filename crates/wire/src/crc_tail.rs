//! CRC-32C of a TPDU body on x86-64: the `crc-fast` crate's vector code for the whole
//! 384-byte blocks, and three interleaved chains of the `crc32` instruction for what is left.
//!
//! Written by hand because no crate does the second part: `crc-fast` (the fastest measured,
//! see `checks::crc32c`) finishes everything after its last 384-byte block one 8-byte word
//! at a time, a chain of dependent `crc32` instructions (3 cycles each). A 1476-byte body
//! leaves it up to 383 such bytes: a third of the body took over half its time
//! (`perf annotate` of `aerotp bench loopback`). Here those bytes go through three chains at
//! once, and the chains are joined as `crc-fast`'s own SSE code joins its three (Mark Adler's
//! method: each earlier chain's value, multiplied by x^(8·distance) with one carry-less
//! multiplication, is folded into the last word the third chain reads). Measured by
//! `cargo run --release -p aerotp-wire --example crc_speed` (docs/results/loopback.md).
//!
//! Tested equal to the table-driven CRC-32C on every length to 2,100 bytes at nine
//! alignments (`checks::tests`).

use std::arch::x86_64::{
    _mm_clmulepi64_si128, _mm_crc32_u64, _mm_crc32_u8, _mm_cvtsi128_si64, _mm_cvtsi32_si128,
};

/// CRC-32C's polynomial, bit-reflected (the `crc32` instruction's order).
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// The vector code's block: it leaves the rest of a body past whole blocks to one chain.
const BLOCK: usize = 384;

/// Below this many bytes three chains cost more than they save: one chain takes them all.
const THREE_CHAINS_FROM: usize = 56;

/// x^n mod P, bit-reflected (bit 31 is x^0), by n multiplications by x: only at compile time.
const fn x_pow_mod_p(n: u32) -> u32 {
    let mut acc = 0x8000_0000u32;
    let mut i = 0;
    while i < n {
        acc = if acc & 1 == 1 {
            (acc >> 1) ^ POLY_REFLECTED
        } else {
            acc >> 1
        };
        i += 1;
    }
    acc
}

/// Longest shift the joins need, 8-byte words: chains of at most (447 − 8) / 24 words of
/// 8 bytes (what is left is under `BLOCK` + 64 bytes, the vector code's alignment), the
/// first chain shifted past two chains and one word.
const SHIFT_WORDS: usize = 48;

/// `SHIFT[w]`: x^(64·w − 33) mod P, the constant that carries a chain's value `w` words
/// further (the 33 undoes the multiplication's and the reduction's own shifts).
static SHIFT: [u32; SHIFT_WORDS] = {
    let mut t = [0u32; SHIFT_WORDS];
    let mut w = 1;
    while w < SHIFT_WORDS {
        t[w] = x_pow_mod_p(w as u32 * 64 - 33);
        w += 1;
    }
    t
};

/// Whether [`crc32c`] is worth calling for `len` bytes on this CPU: it has what it needs
/// (cached by the standard library), and the body holds a whole block. Shorter ones the
/// crate takes at least as fast by itself (25 ns for 300 bytes either way, 7 against 9 ns
/// for 40).
pub(crate) fn worth_it(len: usize) -> bool {
    len >= BLOCK && is_x86_feature_detected!("sse4.2") && is_x86_feature_detected!("pclmulqdq")
}

/// CRC-32C of `body`. Call only where [`worth_it`] says so.
pub(crate) fn crc32c(body: &[u8]) -> u32 {
    debug_assert!(worth_it(body.len()));
    // `crc-fast` first brings the pointer to a 64-byte boundary, then takes whole blocks.
    let align = body.as_ptr().align_offset(64).min(body.len());
    let whole = if body.len() - align >= BLOCK {
        align + (body.len() - align) / BLOCK * BLOCK
    } else {
        0
    };
    // The register after the blocks: the crate's CRC undone of its final inversion.
    let state =
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &body[..whole]) as u32 ^ 0xFFFF_FFFF;
    // SAFETY: the CPU has SSE4.2 and PCLMULQDQ (the caller checked `worth_it`).
    let state = unsafe { rest(state, &body[whole..]) };
    state ^ 0xFFFF_FFFF
}

/// The register after `rest`, from `state`.
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn rest(state: u32, rest: &[u8]) -> u32 {
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&rest[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let mut c0 = u64::from(state);
    let mut done = 0;
    if rest.len() >= THREE_CHAINS_FROM {
        // Three chains of `len` bytes each, then one word the third chain finishes with.
        let len = (rest.len() - 8) / 24 * 8;
        let (mut c1, mut c2) = (0u64, 0u64);
        for at in (0..len).step_by(8) {
            c0 = _mm_crc32_u64(c0, word(at));
            c1 = _mm_crc32_u64(c1, word(len + at));
            c2 = _mm_crc32_u64(c2, word(2 * len + at));
        }
        let carry = carried(c0 as u32, (2 * len + 8) / 8) ^ carried(c1 as u32, (len + 8) / 8);
        c0 = _mm_crc32_u64(c2, word(3 * len) ^ carry);
        done = 3 * len + 8;
    }
    while done + 8 <= rest.len() {
        c0 = _mm_crc32_u64(c0, word(done));
        done += 8;
    }
    let mut c = c0 as u32;
    for &b in &rest[done..] {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// A chain's value `c` carried `words` 8-byte words further, as 64 bits to fold into the
/// data word the next `crc32` instruction reads (which reduces it).
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn carried(c: u32, words: usize) -> u64 {
    let product = _mm_clmulepi64_si128(
        _mm_cvtsi32_si128(c as i32),
        _mm_cvtsi32_si128(SHIFT[words] as i32),
        0,
    );
    _mm_cvtsi128_si64(product) as u64
}
