//! CRC-32C speed on TPDU-sized bodies: `cargo run --release -p aerotp-wire --example crc_speed`.
//! Also encoding's copy: the body appended to a datagram and then checksummed, against
//! `crc32c_append` doing both in one pass.

use std::time::Instant;

fn main() {
    let body: Vec<u8> = (0..1480u32).map(|i| (i * 13 % 251) as u8).collect();
    let rounds = 1_000_000u32;
    for (name, f) in [
        ("crc32c", aerotp_wire::crc32c as fn(&[u8]) -> u32),
        ("table", aerotp_wire::crc32c_table),
    ] {
        let t = Instant::now();
        let mut acc = 0u32;
        for i in 0..rounds {
            acc = acc.wrapping_add(f(std::hint::black_box(&body[(i % 8) as usize..])));
        }
        let s = t.elapsed().as_secs_f64();
        let bytes = f64::from(rounds) * 1476.0;
        println!(
            "{name:8} {:6.2} GB/s, {:5.1} ns per 1476-byte body (check {acc:08x})",
            bytes / s / 1e9,
            s * 1e9 / f64::from(rounds)
        );
    }
    // The copy encoding makes: from a 4 MiB source (the sender's buffers, written earlier)
    // into a 64 KB buffer reused as a send train is.
    let source: Vec<u8> = (0..4u32 << 20).map(|i| (i * 13 % 251) as u8).collect();
    let slots = source.len() / 1476;
    for fused in [false, true] {
        let t = Instant::now();
        let mut acc = 0u32;
        let mut train = Vec::with_capacity(65_536);
        for i in 0..rounds {
            if train.len() + 1476 > 65_000 {
                train.clear();
            }
            let at = (i as usize % slots) * 1476;
            let body = std::hint::black_box(&source[at..at + 1476]);
            let crc = if fused {
                aerotp_wire::crc32c_append(body, &mut train)
            } else {
                train.extend_from_slice(body);
                aerotp_wire::crc32c(body)
            };
            acc = acc.wrapping_add(crc);
        }
        let s = t.elapsed().as_secs_f64();
        let name = if fused { "append" } else { "copy+crc" };
        println!(
            "{name:8} {:5.1} ns per 1476-byte body into a send train (check {acc:08x})",
            s * 1e9 / f64::from(rounds)
        );
    }
}
