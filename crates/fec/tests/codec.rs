//! Codec and layout tests: round trips, correction up to capacity, behaviour beyond it, arbitrary
//! input, layout consistency, compatibility with an independent RS implementation.

use aerotp_fec::{decode, encode, encode_from, max_protected_len, Correction, FecError, Layout};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const PARITIES: [u8; 14] = [0, 1, 2, 3, 4, 6, 8, 12, 16, 33, 100, 170, 200, 254];

fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

/// Datagram index of symbol `k` of codeword `j`.
fn symbol_index(lay: &Layout, j: usize, k: usize) -> usize {
    let d = lay.data_symbols(j);
    if k < d {
        j + k * lay.codewords
    } else {
        lay.protected_len + j * lay.parity as usize + (k - d)
    }
}

#[test]
fn known_answer_matches_reference_vector() {
    // Vector from the reed-solomon crate's own test-suite (0x11D, first root alpha^0).
    let mut buf: Vec<u8> = (0..30).collect();
    let lay = encode(8, &mut buf).unwrap();
    assert_eq!(lay.codewords, 1);
    assert_eq!(&buf[30..], &[99, 26, 219, 193, 9, 94, 186, 143]);
}

#[test]
fn single_codeword_parity_equals_reed_solomon_crate() {
    // The crate panics for large p (fixed 256-entry polynomials), so compare where it works.
    for p in [1u8, 2, 3, 5, 8, 16, 31, 64, 100] {
        for len in [1usize, 7, 100, 255 - p as usize] {
            let data = payload(len, p as u64 * 1000 + len as u64);
            let mut buf = data.clone();
            encode(p, &mut buf).unwrap();
            let reference = reed_solomon::Encoder::new(p as usize).encode(&data);
            assert_eq!(&buf[len..], reference.ecc(), "p={p} len={len}");
        }
    }
}

#[test]
fn interleaved_parity_equals_reed_solomon_crate_per_codeword() {
    // Checks the multi-codeword encoder paths (several codewords advance together) against
    // the crate applied codeword by codeword.
    for p in [1u8, 2, 7, 8, 9, 16, 24, 32, 33, 64] {
        for l in [1usize, 5, 254, 300, 1000, 1452, 1500, 2999] {
            let data = payload(l, l as u64 + p as u64);
            let mut buf = data.clone();
            let lay = encode(p, &mut buf).unwrap();
            let m = lay.codewords;
            let enc = reed_solomon::Encoder::new(p as usize);
            for j in 0..m {
                let cw: Vec<u8> = data[j..].iter().step_by(m).copied().collect();
                let at = l + j * p as usize;
                assert_eq!(
                    &buf[at..at + p as usize],
                    enc.encode(&cw).ecc(),
                    "p={p} L={l} j={j}"
                );
            }
        }
    }
}

#[test]
fn round_trip_many_lengths_and_parities() {
    let lens = [
        1usize, 2, 3, 20, 24, 100, 230, 231, 232, 254, 255, 256, 500, 511, 1476, 1500, 3000,
    ];
    for &p in &PARITIES {
        for &l in &lens {
            let data = payload(l, l as u64 ^ (p as u64) << 20);
            let mut buf = data.clone();
            let lay = encode(p, &mut buf).unwrap();
            assert_eq!(lay, Layout::for_protected(l, p).unwrap());
            assert_eq!(buf.len(), lay.datagram_len());
            assert_eq!(&buf[..l], &data[..]);
            assert_eq!(Layout::for_datagram(buf.len(), p).unwrap(), lay);
            let sent = buf.clone();
            assert_eq!(decode(p, &mut buf).unwrap(), Correction::default());
            assert_eq!(buf, sent);
        }
    }
}

#[test]
fn single_error_anywhere_is_corrected() {
    for &p in &[1u8, 2, 8, 170] {
        let data = payload(700, p as u64);
        let mut sent = data.clone();
        let lay = encode(p, &mut sent).unwrap();
        let step = if p == 1 { 1 } else { 13 };
        for pos in (0..sent.len()).step_by(step) {
            let mut rx = sent.clone();
            rx[pos] ^= 0x81;
            let r = decode(p, &mut rx);
            if p == 1 {
                // t = 0: detection only.
                assert!(
                    matches!(r, Err(FecError::Uncorrectable { .. })),
                    "p=1 pos={pos}"
                );
                continue;
            }
            assert_eq!(
                r.unwrap(),
                Correction {
                    symbols: 1,
                    bits: 2
                },
                "p={p} pos={pos}"
            );
            assert_eq!(rx, sent);
        }
        assert!(lay.codewords >= 3);
    }
}

#[test]
fn rejects_bad_parity_and_lengths() {
    assert_eq!(
        Layout::for_protected(10, 255),
        Err(FecError::ParityTooLarge { parity: 255 })
    );
    assert_eq!(Layout::for_protected(0, 8), Err(FecError::EmptyProtected));
    assert!(matches!(
        Layout::for_datagram(8, 8),
        Err(FecError::DatagramTooShort { .. })
    ));
    // p=10: T=260 would mean m=2, L=240, but 240 bytes fit one codeword.
    assert!(matches!(
        Layout::for_datagram(260, 10),
        Err(FecError::InconsistentLength { .. })
    ));
    let mut v = vec![1u8; 3];
    assert!(encode(255, &mut v).is_err());
    assert_eq!(v.len(), 3);
    let mut empty: Vec<u8> = Vec::new();
    assert_eq!(encode(4, &mut empty), Err(FecError::EmptyProtected));
}

#[test]
fn layout_consistency_for_all_lengths() {
    for &p in &PARITIES {
        let room = 255 - p as usize;
        for l in 1..3000 {
            let lay = Layout::for_protected(l, p).unwrap();
            let m = lay.codewords;
            assert!(
                l <= m * room && (m == 1 || l > (m - 1) * room),
                "L={l} p={p}"
            );
            let t = lay.datagram_len();
            assert_eq!(t, l + m * p as usize);
            assert_eq!(m, t.div_ceil(255), "m = ceil(T/255) for L={l} p={p}");
            assert_eq!(Layout::for_datagram(t, p).unwrap(), lay, "L={l} p={p}");
            let total: usize = (0..m).map(|j| lay.data_symbols(j)).sum();
            assert_eq!(total, l);
            assert!((0..m).all(|j| lay.data_symbols(j) + p as usize <= 255));
        }
        // Every datagram length is either rejected or maps back to itself.
        for t in 0..3500 {
            if let Ok(lay) = Layout::for_datagram(t, p) {
                assert_eq!(lay.datagram_len(), t);
                assert_eq!(Layout::for_protected(lay.protected_len, p).unwrap(), lay);
            }
        }
    }
}

#[test]
fn max_protected_len_is_the_largest_fitting() {
    for &p in &PARITIES {
        for mtu in (0..1600).step_by(7).chain([1500, 9000]) {
            let got = max_protected_len(mtu, p);
            let brute = (1..=mtu)
                .rev()
                .find(|&l| Layout::for_protected(l, p).unwrap().datagram_len() <= mtu)
                .unwrap_or(0);
            assert_eq!(got, brute, "mtu={mtu} p={p}");
        }
    }
    assert_eq!(max_protected_len(1500, 0), 1500);
    assert_eq!(max_protected_len(1500, 8), 1500 - 6 * 8);
    assert_eq!(max_protected_len(1500, 255), 0);
}

#[test]
fn beyond_capacity_fails_or_miscorrects_but_never_panics() {
    let mut rng = Pcg64::seed_from_u64(7);
    for &p in &[2u8, 3, 8, 16, 170] {
        let t = p as usize / 2;
        let data = payload(600, p as u64);
        let mut sent = data.clone();
        let lay = encode(p, &mut sent).unwrap();
        let mut errs = 0;
        let trials = 200;
        for _ in 0..trials {
            let mut rx = sent.clone();
            let j = rng.gen_range(0..lay.codewords);
            let n = lay.data_symbols(j) + p as usize;
            let nerr = rng.gen_range(t + 1..=(t + 4).min(n));
            let mut picked = Vec::new();
            while picked.len() < nerr {
                let k = rng.gen_range(0..n);
                if !picked.contains(&k) {
                    picked.push(k);
                }
            }
            for &k in &picked {
                rx[symbol_index(&lay, j, k)] ^= rng.gen_range(1..=255u8);
            }
            let before = rx.clone();
            match decode(p, &mut rx) {
                Err(FecError::Uncorrectable { failed, first, .. }) => {
                    errs += 1;
                    assert_eq!((failed, first), (1, j));
                    assert_eq!(rx, before, "failed decode must not modify");
                }
                Err(e) => panic!("unexpected error {e}"),
                Ok(c) => {
                    // Miscorrection: the output is some other codeword.
                    assert_ne!(rx, sent);
                    assert!(c.symbols <= t);
                    let mut again = rx.clone();
                    assert_eq!(decode(p, &mut again).unwrap(), Correction::default());
                }
            }
        }
        // A random word lies within distance t of some codeword with probability about
        // V(n,t)/256^p: ~0.79 for p=2 (n~202), ~0.003 for p=3, negligible above.
        let min = if p == 2 { trials / 10 } else { trials * 9 / 10 };
        assert!(errs >= min, "p={p}: only {errs}/{trials} detected");
    }
}

fn arb_case() -> impl Strategy<Value = (usize, u8, u64)> {
    (
        1usize..1700,
        prop::sample::select(&PARITIES[1..]),
        any::<u64>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Up to floor(p/2) random symbol errors per codeword, anywhere (parity included), are
    /// always corrected and counted exactly.
    #[test]
    fn corrects_up_to_capacity((l, p, seed) in arb_case()) {
        let data = payload(l, seed);
        let mut sent = data.clone();
        let lay = encode(p, &mut sent).unwrap();
        let mut rng = Pcg64::seed_from_u64(seed ^ 0x5eed);
        let mut rx = sent.clone();
        let mut want = Correction::default();
        for j in 0..lay.codewords {
            let n = lay.data_symbols(j) + p as usize;
            let nerr = rng.gen_range(0..=(p as usize / 2));
            let mut picked = Vec::new();
            while picked.len() < nerr {
                let k = rng.gen_range(0..n);
                if !picked.contains(&k) {
                    picked.push(k);
                }
            }
            for k in picked {
                let v = rng.gen_range(1..=255u8);
                rx[symbol_index(&lay, j, k)] ^= v;
                want.symbols += 1;
                want.bits += v.count_ones() as usize;
            }
        }
        let got = decode(p, &mut rx).unwrap();
        prop_assert_eq!(got, want);
        prop_assert_eq!(rx, sent);
    }

    /// Arbitrary bytes with an arbitrary p: a typed result, never a panic; a success leaves
    /// a datagram that decodes cleanly.
    #[test]
    fn arbitrary_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2000), p in any::<u8>()) {
        let mut rx = bytes.clone();
        match decode(p, &mut rx) {
            Ok(_) => {
                let mut again = rx.clone();
                prop_assert_eq!(decode(p, &mut again).unwrap(), Correction::default());
            }
            Err(_) => prop_assert_eq!(rx, bytes),
        }
    }
}

proptest! {
    /// Encoding a region after bytes `buf` already holds gives the same datagram as encoding
    /// it alone, and leaves those bytes alone; a refused encoding changes nothing.
    #[test]
    fn encoding_in_place_after_a_prefix_equals_encoding_alone(
        prefix in proptest::collection::vec(any::<u8>(), 0..300),
        len in 0usize..1600,
        pi in 0usize..PARITIES.len(),
        seed in any::<u64>(),
    ) {
        let p = PARITIES[pi];
        let data = payload(len, seed);
        let mut alone = data.clone();
        let alone_result = encode(p, &mut alone);
        let mut joined = prefix.clone();
        joined.extend_from_slice(&data);
        let joined_result = encode_from(p, &mut joined, prefix.len());
        prop_assert_eq!(alone_result.is_ok(), joined_result.is_ok());
        prop_assert_eq!(&joined[..prefix.len()], &prefix[..]);
        if alone_result.is_ok() {
            prop_assert_eq!(&joined[prefix.len()..], &alone[..]);
        } else {
            prop_assert_eq!(&joined[prefix.len()..], &data[..]);
        }
    }
}
