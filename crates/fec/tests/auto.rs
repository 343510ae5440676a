//! Auto-strength and BER-estimator tests, and the papers' word scale.

use aerotp_fec::auto::{
    parity_for_goodput, parity_for_target, tpdu_failure_probability, BerEstimator,
};
use aerotp_fec::{decode, encode, max_protected_len, parity_for_words, words_for_parity, Layout};
use aerotp_testkit::flip_bits;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

#[test]
fn words_parity_mapping_at_1500() {
    assert_eq!(parity_for_words(12, 1500), 8);
    assert_eq!(parity_for_words(0, 1500), 0);
    assert_eq!(parity_for_words(1, 1500), 1);
    assert_eq!(parity_for_words(96, 1500), 64);
    assert_eq!(parity_for_words(256, 1500), 171);
    assert_eq!(parity_for_words(u16::MAX, 1500), 254);
    assert_eq!(words_for_parity(8, 1500), 12.0);
    for n in (0..=300u16).step_by(3) {
        assert_eq!(words_for_parity(parity_for_words(n, 1500), 1500), n as f64);
    }
    for n in 0..=300u16 {
        // Never less parity than the papers' N words.
        assert!(words_for_parity(parity_for_words(n, 1500), 1500) >= n as f64);
    }
}

#[test]
fn failure_probability_limits_and_order() {
    assert_eq!(tpdu_failure_probability(0.0, 1500, 0), 0.0);
    assert_eq!(tpdu_failure_probability(0.0, 1500, 8), 0.0);
    // p = 0: any bit error.
    let f = tpdu_failure_probability(1e-5, 1500, 0);
    let exact = 1.0 - (1.0f64 - 1e-5).powi(12000);
    assert!((f - exact).abs() < 1e-12, "{f} vs {exact}");
    // More parity, fewer failures; more errors, more failures.
    let mut last = 1.0;
    for p in [0u8, 2, 4, 8, 16, 32] {
        let t = Layout::for_protected(max_protected_len(1500, p), p)
            .unwrap()
            .datagram_len();
        let f = tpdu_failure_probability(1e-4, t, p);
        assert!(f < last, "p={p}: {f} !< {last}");
        last = f;
    }
    assert!(tpdu_failure_probability(3e-4, 1500, 8) > tpdu_failure_probability(1e-4, 1500, 8));
    // Tiny tails keep precision (no 1 - (1 - tiny) cancellation).
    let tiny = tpdu_failure_probability(1e-6, 1500, 16);
    assert!(tiny > 0.0 && tiny < 1e-20, "{tiny}");
    assert_eq!(tpdu_failure_probability(1e-4, 8, 8), 1.0); // no room for data
}

/// The analytic failure probability agrees with actual encode / bit flips / decode.
#[test]
fn failure_probability_matches_monte_carlo() {
    let mut rng = Pcg64::seed_from_u64(11);
    let (ber, p) = (1e-3, 8u8);
    let l = max_protected_len(1500, p);
    let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
    let mut sent = data.clone();
    encode(p, &mut sent).unwrap();
    let trials = 1500;
    let mut failed = 0;
    for _ in 0..trials {
        let mut rx = sent.clone();
        flip_bits(&mut rx, ber, &mut rng);
        match decode(p, &mut rx) {
            Ok(_) if rx[..l] == data[..] => {}
            _ => failed += 1,
        }
    }
    let measured = failed as f64 / trials as f64;
    let predicted = tpdu_failure_probability(ber, sent.len(), p);
    let se = (predicted * (1.0 - predicted) / trials as f64).sqrt();
    assert!(
        (measured - predicted).abs() < 4.0 * se + 0.005,
        "measured {measured}, predicted {predicted}"
    );
}

#[test]
fn parity_for_target_is_zero_without_errors_and_monotone() {
    assert_eq!(parity_for_target(0.0, 1500, 1e-6), 0);
    let mut last = 0;
    for i in 0..60 {
        let ber = 1e-8 * 10f64.powf(i as f64 / 10.0); // 1e-8 .. ~1e-2
        let p = parity_for_target(ber, 1500, 1e-4);
        assert!(p >= last, "ber={ber}: p={p} < {last}");
        // It is the least such parity.
        let t = |p: u8| {
            Layout::for_protected(max_protected_len(1500, p), p)
                .unwrap()
                .datagram_len()
        };
        if p > 0 && tpdu_failure_probability(ber, t(p), p) < 1e-4 {
            assert!(tpdu_failure_probability(ber, t(p - 1), p - 1) >= 1e-4);
        }
        last = p;
    }
    assert!(parity_for_target(1e-4, 1500, 1e-4) > 0);
    assert!(parity_for_target(1e-4, 1500, 1e-6) > parity_for_target(1e-4, 1500, 1e-2));
}

#[test]
fn parity_for_goodput_balances_overhead_and_failures() {
    assert_eq!(parity_for_goodput(0.0, 1500, 24), 0);
    let p = parity_for_goodput(1e-4, 1500, 24);
    assert!(p > 0 && p < 40, "p={p}");
    let goodput = |p: u8| {
        let l = max_protected_len(1500, p);
        let t = Layout::for_protected(l, p).unwrap().datagram_len();
        (l - 24) as f64 / t as f64 * (1.0 - tpdu_failure_probability(1e-4, t, p))
    };
    for q in [0u8, 2, 4, 8, 16, 32, 64] {
        assert!(goodput(p) >= goodput(q), "p={p} q={q}");
    }
    assert!(parity_for_goodput(3e-4, 1500, 24) >= p);
}

fn run_estimator(ber: f64, parity: u8, tpdus: usize, seed: u64) -> (f64, u64) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut est = BerEstimator::new();
    let l = max_protected_len(1500, parity);
    let data: Vec<u8> = (0..l).map(|_| rng.gen()).collect();
    let mut sent = data.clone();
    encode(parity, &mut sent).unwrap();
    let bits = sent.len() * 8;
    for _ in 0..tpdus {
        let mut rx = sent.clone();
        if flip_bits(&mut rx, ber, &mut rng) == 0 {
            est.record_clean(bits);
            continue;
        }
        if parity == 0 {
            est.record_failed(bits, 0);
            continue;
        }
        match decode(parity, &mut rx) {
            Ok(c) if rx[..l] == data[..] => est.record_corrected(bits, c.bits, c.symbols),
            _ => est.record_failed(bits, parity),
        }
    }
    (est.estimate().unwrap(), est.samples())
}

#[test]
fn ber_estimator_converges_without_fec() {
    for (ber, seed) in [(1e-5, 1u64), (1e-4, 2)] {
        let (e, n) = run_estimator(ber, 0, 4000, seed);
        assert_eq!(n, 4000);
        assert!((e / ber - 1.0).abs() < 0.2, "ber {ber}: estimate {e}");
    }
}

#[test]
fn ber_estimator_converges_with_fec() {
    for (ber, seed) in [(1e-5, 3u64), (1e-4, 4)] {
        let (e, _) = run_estimator(ber, 8, 4000, seed);
        assert!((e / ber - 1.0).abs() < 0.2, "ber {ber}: estimate {e}");
    }
    // Weak FEC at a high rate: most TPDUs fail; failures count with their expected error
    // count given failure, not just floor(p/2)+1 symbols, so the estimate stays unbiased.
    for (ber, p) in [(1e-3, 2u8), (3e-4, 4)] {
        let (e, _) = run_estimator(ber, p, 2000, 5);
        assert!((e / ber - 1.0).abs() < 0.2, "ber {ber} p {p}: estimate {e}");
    }
}

#[test]
fn ber_estimator_mixes_fec_and_plain_tpdus() {
    // Half the TPDUs without FEC (only clean/corrupted known), half with p = 8.
    let mut rng = Pcg64::seed_from_u64(6);
    let ber = 1e-4;
    let mut est = BerEstimator::new();
    let mut sent = vec![0u8; max_protected_len(1500, 8)];
    rng.fill(&mut sent[..]);
    let data = sent.clone();
    encode(8, &mut sent).unwrap();
    for i in 0..4000 {
        if i % 2 == 0 {
            let mut rx = vec![0u8; 1500];
            match flip_bits(&mut rx, ber, &mut rng) {
                0 => est.record_clean(12000),
                _ => est.record_failed(12000, 0),
            }
        } else {
            let mut rx = sent.clone();
            let bits = rx.len() * 8;
            if flip_bits(&mut rx, ber, &mut rng) == 0 {
                est.record_clean(bits);
            } else {
                match decode(8, &mut rx) {
                    Ok(c) if rx[..data.len()] == data[..] => {
                        est.record_corrected(bits, c.bits, c.symbols)
                    }
                    _ => est.record_failed(bits, 8),
                }
            }
        }
    }
    let e = est.estimate().unwrap();
    assert!((e / ber - 1.0).abs() < 0.2, "estimate {e}");
}

#[test]
fn ber_estimator_edge_cases() {
    let mut est = BerEstimator::new();
    assert_eq!(est.estimate(), None);
    est.record_clean(12000);
    assert_eq!(est.estimate(), Some(0.0));
    // Everything corrupted without FEC: finite, large.
    let mut all_bad = BerEstimator::with_window(100);
    for _ in 0..300 {
        all_bad.record_failed(12000, 0);
    }
    let e = all_bad.estimate().unwrap();
    assert!(e.is_finite() && e > 1e-4 && e <= 0.5, "{e}");
    // Tracks a change: old evidence decays.
    let mut est = BerEstimator::with_window(200);
    for _ in 0..2000 {
        est.record_corrected(12000, 12, 12);
    }
    assert!((est.estimate().unwrap() / 1e-3 - 1.0).abs() < 1e-9);
    for _ in 0..2000 {
        est.record_clean(12000);
    }
    assert!(est.estimate().unwrap() < 1e-6);
}
