//! Which AEAD seals AeroTP's TPDUs: MB/s on one core at 1400-byte bodies, for each candidate,
//! both ways the engine uses it — authentication only (the body is associated data, the
//! plaintext empty) and encryption (the body is the plaintext). The 20-byte header plus key
//! byte is associated data in both. Prints medians of `--rounds` rounds (default 7).
//!
//! `cargo run --release -p aerotp-proto --example aead_speed` (docs/results/security.md).

use std::time::{Duration, Instant};

const BODY: usize = 1400;
const AAD: usize = 21;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs `f` over fresh nonces for about `budget`, returns MB/s of body bytes.
fn measure(budget: Duration, mut f: impl FnMut(u64)) -> f64 {
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < budget {
        for _ in 0..256 {
            f(n);
            n += 1;
        }
    }
    (n as f64 * BODY as f64) / t0.elapsed().as_secs_f64() / 1e6
}

fn nonce12(n: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[4..].copy_from_slice(&n.to_be_bytes());
    b
}

type Case = (&'static str, Box<dyn FnMut(u64, bool)>);

fn cases() -> Vec<Case> {
    use aes_gcm::aead::{AeadInPlace, KeyInit};
    let key = [0x42u8; 32];
    let aad = [7u8; AAD];
    let mut v: Vec<Case> = Vec::new();
    for (name, alg) in [
        ("ring AES-256-GCM", &ring::aead::AES_256_GCM),
        ("ring ChaCha20-Poly1305", &ring::aead::CHACHA20_POLY1305),
    ] {
        let k = ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(alg, &key).unwrap());
        let mut buf = vec![0x5Au8; BODY];
        let mut big_aad = vec![7u8; AAD + BODY];
        v.push((
            name,
            Box::new(move |n, encrypt| {
                let nonce = ring::aead::Nonce::assume_unique_for_key(nonce12(n));
                let tag = if encrypt {
                    k.seal_in_place_separate_tag(nonce, ring::aead::Aad::from(&aad), &mut buf)
                } else {
                    big_aad[0] = n as u8;
                    k.seal_in_place_separate_tag(
                        nonce,
                        ring::aead::Aad::from(&big_aad[..]),
                        &mut [],
                    )
                };
                let _ = std::hint::black_box(tag.unwrap());
            }),
        ));
    }
    {
        let c = aes_gcm::Aes256Gcm::new_from_slice(&key).unwrap();
        let mut buf = vec![0x5Au8; BODY];
        let mut big_aad = vec![7u8; AAD + BODY];
        v.push((
            "RustCrypto aes-gcm (AES-256)",
            Box::new(move |n, encrypt| {
                let nonce = nonce12(n);
                let tag = if encrypt {
                    c.encrypt_in_place_detached(&nonce.into(), &aad, &mut buf)
                } else {
                    big_aad[0] = n as u8;
                    c.encrypt_in_place_detached(&nonce.into(), &big_aad, &mut [])
                };
                let _ = std::hint::black_box(tag.unwrap());
            }),
        ));
    }
    {
        let c = chacha20poly1305::ChaCha20Poly1305::new_from_slice(&key).unwrap();
        let mut buf = vec![0x5Au8; BODY];
        let mut big_aad = vec![7u8; AAD + BODY];
        v.push((
            "RustCrypto chacha20poly1305",
            Box::new(move |n, encrypt| {
                let nonce = nonce12(n);
                let tag = if encrypt {
                    c.encrypt_in_place_detached(&nonce.into(), &aad, &mut buf)
                } else {
                    big_aad[0] = n as u8;
                    c.encrypt_in_place_detached(&nonce.into(), &big_aad, &mut [])
                };
                let _ = std::hint::black_box(tag.unwrap());
            }),
        ));
    }
    v
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map(|s| s.parse().expect("--rounds takes a whole number, e.g. 7"))
        .unwrap_or(7);
    let budget = Duration::from_millis(150);
    println!("AEAD at {BODY}-byte bodies, one core, median of {rounds} rounds of {budget:?}");
    println!("{:<30} {:>14} {:>14}", "AEAD", "auth MB/s", "encrypt MB/s");
    for (name, mut f) in cases() {
        let mut auth = Vec::new();
        let mut enc = Vec::new();
        for _ in 0..rounds {
            auth.push(measure(budget, |n| f(n, false)));
            enc.push(measure(budget, |n| f(n, true)));
        }
        println!("{name:<30} {:>14.0} {:>14.0}", median(auth), median(enc));
    }
}
