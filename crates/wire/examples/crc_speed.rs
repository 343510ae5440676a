//! CRC-32C speed on TPDU-sized bodies: `cargo run --release -p aerotp-wire --example crc_speed`.

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
}
