//! CRC-32C speed on TPDU-sized bodies (this crate's, the `crc-fast` crate's alone and
//! slice-by-16 tables), and the header's HEC against a byte-wise table:
//! `cargo run --release -p aerotp-wire --example crc_speed`.
//! The bodies are taken from a 4 MiB buffer in turn (as the sender's queue is, written earlier
//! by the application), not one body kept in cache.

use std::time::Instant;

fn main() {
    let source: Vec<u8> = (0..4u32 << 20).map(|i| (i * 13 % 251) as u8).collect();
    for len in [40usize, 300, 1476] {
        let slots = source.len() / len;
        let rounds = if len > 1000 { 1_000_000u32 } else { 3_000_000 };
        for (name, f) in [
            ("crc32c", aerotp_wire::crc32c as fn(&[u8]) -> u32),
            ("crc-fast", aerotp_wire::crc32c_crate),
            ("table", aerotp_wire::crc32c_table),
        ] {
            let t = Instant::now();
            let mut acc = 0u32;
            for i in 0..rounds {
                let at = (i as usize % slots) * len;
                acc = acc.wrapping_add(f(std::hint::black_box(&source[at..at + len])));
            }
            let s = t.elapsed().as_secs_f64();
            let bytes = f64::from(rounds) * len as f64;
            println!(
                "{name:8} {len:5}-byte bodies: {:6.2} GB/s, {:6.1} ns a body (check {acc:08x})",
                bytes / s / 1e9,
                s * 1e9 / f64::from(rounds)
            );
        }
    }
    // The HEC (CRC-16 over 18 header bytes): 18 position tables, as `hec` runs it, against
    // the slice-by-16 and byte-wise tables it replaced and the `crc-fast` crate's
    // CRC-16/IBM-3740.
    static BYTEWISE: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);
    let headers: Vec<[u8; 18]> = (0..4096u32)
        .map(|i| std::array::from_fn(|j| (i.wrapping_mul(31) as u8).wrapping_add(j as u8 * 7)))
        .collect();
    for (name, f) in [
        ("hec", aerotp_wire::hec as fn(&[u8]) -> u16),
        ("slice16", |h: &[u8]| aerotp_wire::hec_table(h)),
        ("bytewise", |h: &[u8]| BYTEWISE.checksum(h)),
        ("crc-fast", |h: &[u8]| {
            crc_fast::checksum(crc_fast::CrcAlgorithm::Crc16Ibm3740, h) as u16
        }),
    ] {
        let n = 20_000_000u32;
        let t = Instant::now();
        let mut acc = 0u16;
        for i in 0..n {
            acc = acc.wrapping_add(f(std::hint::black_box(&headers[i as usize & 4095])));
        }
        println!(
            "{name:8} {:6.2} ns a header (check {acc:04x})",
            t.elapsed().as_secs_f64() * 1e9 / f64::from(n)
        );
    }
}
