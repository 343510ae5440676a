use super::*;
use crate::codec::{decode, encode, Quality};
use aerotp_wire::{hec, Flags, Mode, AUTH_BIT};

fn peer() -> SocketAddr {
    "192.0.2.1:9000".parse().unwrap()
}

fn key(id: u8, fill: u8) -> AuthKey {
    AuthKey::new(id, [fill; KEY_LEN]).unwrap()
}

fn cfg(current: AuthKey, previous: Option<AuthKey>, encrypt: bool, seed: u8) -> AuthConfig {
    AuthConfig {
        keys: KeySet { current, previous },
        encrypt,
        nonce_seed: [seed; NONCE_LEN],
    }
}

fn header(flags: Flags, fec: u8) -> Header {
    Header {
        mode: Mode::Reliable,
        flags,
        src_port: 10,
        dst_port: 20,
        seq: 5,
        timestamp: 99,
        fec,
        tag: 33,
        len: 0,
    }
}

fn sealed(a: &mut Auth, h: Header, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(h, body, &mut out).unwrap();
    assert!(a.seal(&mut out, 0, 1500, peer()));
    out
}

fn open(b: &mut Auth, d: &[u8]) -> Result<Received, Option<Refusal>> {
    let mut r = decode(d, None, &mut Vec::new()).map_err(|_| None)?;
    b.open(&mut r, peer()).map_err(Some)?;
    Ok(r)
}

fn body() -> Vec<u8> {
    (0..1200u32).map(|i| (i * 13) as u8).collect()
}

#[test]
fn seal_open_round_trip_clear_and_encrypted_with_and_without_fec() {
    for encrypt in [false, true] {
        for p in [0u8, 8] {
            let mut a = Auth::new(&cfg(key(1, 7), None, encrypt, 1));
            let mut b = Auth::new(&cfg(key(1, 7), None, false, 2));
            let d = sealed(&mut a, header(Flags::ASYN, p), &body());
            assert_eq!(d[0] & AUTH_BIT, AUTH_BIT);
            assert_eq!(
                d.len(),
                codec::datagram_len(body().len() + AUTH_OVERHEAD, p).unwrap()
            );
            // Clear bodies are visible on the wire, encrypted ones are not.
            let at = HEADER_LEN + 1 + NONCE_LEN;
            assert_eq!(d[at..at + 1200] == body()[..], !encrypt);
            let r = open(&mut b, &d).unwrap();
            assert_eq!(r.body, body());
            assert_eq!(r.header.len, 1200);
            assert_eq!(r.header.flags, Flags::ASYN);
            assert_eq!(r.header.fec, p);
        }
    }
}

#[test]
fn control_rst_and_empty_bodies_round_trip() {
    let mut a = Auth::new(&cfg(key(3, 1), None, true, 1));
    let mut b = Auth::new(&cfg(key(3, 1), None, true, 2));
    for (flags, body) in [(Flags::RST, &b"gone"[..]), (Flags::AFIN, &[][..])] {
        let mut out = Vec::new();
        assert!(a.seal_new(header(flags, 0), body, &mut out, peer()));
        let r = open(&mut b, &out).unwrap();
        assert_eq!((r.header.flags, &r.body[..]), (flags, body));
    }
}

/// Rewrites the HEC and the envelope CRC after a change, as a forger who knows the format
/// (but not the key) would, so only the AEAD stands between the forgery and the engine.
fn fix_checks(d: &mut [u8], n_env: usize) {
    let c = hec(&d[..18]);
    d[18..20].copy_from_slice(&c.to_be_bytes());
    let end = HEADER_LEN + n_env;
    let crc = crc32c(&d[HEADER_LEN..end]);
    d[end..end + 4].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn tampering_with_any_byte_is_refused_even_with_checks_recomputed() {
    for encrypt in [false, true] {
        let mut a = Auth::new(&cfg(key(1, 7), None, encrypt, 1));
        let mut b = Auth::new(&cfg(key(1, 7), None, encrypt, 2));
        let body = &body()[..300];
        let d = sealed(&mut a, header(Flags::empty(), 0), body);
        let n_env = body.len() + AUTH_OVERHEAD;
        // The HEC and CRC fields themselves are recomputed, so they cannot be "tampered".
        let fields = (0..d.len()).filter(|&i| !(18..20).contains(&i) && i < HEADER_LEN + n_env);
        for i in fields {
            for bit in [0x01u8, 0x80] {
                let mut t = d.clone();
                t[i] ^= bit;
                fix_checks(&mut t, n_env);
                let got = open(&mut b, &t);
                assert!(got.is_err(), "flip {bit:#x} of byte {i} was accepted");
            }
        }
        // Damage on a noisy link without FEC: the CRC is not even computed, the tag refuses it.
        let mut t = d.clone();
        t[HEADER_LEN + 5] ^= 1;
        assert_eq!(open(&mut b, &t).unwrap_err(), Some(Refusal::Failed));
        // With FEC, damage beyond correction fails the CRC-32C and is refused unverified.
        let f = sealed(&mut a, header(Flags::empty(), 2), body);
        let mut t = f.clone();
        for b in &mut t[HEADER_LEN + 2..HEADER_LEN + 40] {
            *b ^= 0xFF;
        }
        assert_eq!(open(&mut b, &t).unwrap_err(), Some(Refusal::Corrupted));
        assert!(open(&mut b, &f).is_ok());
        // The untouched original still opens: refusals changed nothing.
        assert!(open(&mut b, &d).is_ok());
    }
}

#[test]
fn replays_are_refused_and_reordering_within_the_window_is_not() {
    let mut a = Auth::new(&cfg(key(1, 7), None, false, 1));
    let mut b = Auth::new(&cfg(key(1, 7), None, false, 2));
    let ds: Vec<Vec<u8>> = (0..10)
        .map(|_| sealed(&mut a, header(Flags::empty(), 0), b"x"))
        .collect();
    assert!(open(&mut b, &ds[5]).is_ok());
    assert_eq!(open(&mut b, &ds[5]).unwrap_err(), Some(Refusal::Replayed));
    // Older, not yet seen: reordering, accepted once.
    assert!(open(&mut b, &ds[2]).is_ok());
    assert_eq!(open(&mut b, &ds[2]).unwrap_err(), Some(Refusal::Replayed));
    assert!(open(&mut b, &ds[9]).is_ok());
    // Push the window past ds[3]: it is now too old to tell, so refused.
    let mut last = Vec::new();
    for _ in 0..REPLAY_WINDOW + 1 {
        last = sealed(&mut a, header(Flags::empty(), 0), b"y");
    }
    assert!(open(&mut b, &last).is_ok());
    assert_eq!(open(&mut b, &ds[3]).unwrap_err(), Some(Refusal::Replayed));
}

#[test]
fn wrong_key_and_unknown_key_id_are_refused() {
    let mut a = Auth::new(&cfg(key(1, 7), None, true, 1));
    let d = sealed(&mut a, header(Flags::empty(), 0), b"secret telemetry");
    let mut same_id = Auth::new(&cfg(key(1, 8), None, true, 2));
    assert_eq!(open(&mut same_id, &d).unwrap_err(), Some(Refusal::Failed));
    let mut other_id = Auth::new(&cfg(key(2, 7), None, true, 2));
    assert_eq!(
        open(&mut other_id, &d).unwrap_err(),
        Some(Refusal::UnknownKey)
    );
    // Without a key the receiver cannot take the envelope for a plain TPDU.
    assert!(Header::parse(&d).is_err());
}

#[test]
fn rotation_keeps_the_previous_key_until_it_is_retired() {
    let old = key(1, 7);
    let new = key(2, 9);
    let mut old_sender = Auth::new(&cfg(old.clone(), None, false, 1));
    let mut new_sender = Auth::new(&cfg(new.clone(), Some(old.clone()), false, 3));
    let mut rx = Auth::new(&cfg(new.clone(), Some(old.clone()), false, 2));
    let d_old = sealed(&mut old_sender, header(Flags::empty(), 0), b"old");
    let d_new = sealed(&mut new_sender, header(Flags::empty(), 0), b"new");
    assert_eq!(
        d_new[HEADER_LEN] & MAX_KEY_ID,
        2,
        "sealed with the current key"
    );
    assert!(open(&mut rx, &d_old).is_ok());
    // A peer still on the old key is answered in the old key; others in the new one.
    let mut reply = Vec::new();
    assert!(rx.seal_new(header(Flags::MACK, 0), b"", &mut reply, peer()));
    assert_eq!(reply[HEADER_LEN] & MAX_KEY_ID, 1);
    assert!(rx.seal_new(
        header(Flags::MACK, 0),
        b"",
        &mut reply,
        "192.0.2.9:1".parse().unwrap()
    ));
    assert_eq!(reply[HEADER_LEN] & MAX_KEY_ID, 2);
    assert!(open(&mut rx, &d_new).is_ok());
    assert!(rx.seal_new(header(Flags::MACK, 0), b"", &mut reply, peer()));
    assert_eq!(
        reply[HEADER_LEN] & MAX_KEY_ID,
        2,
        "the peer moved to the new key"
    );
    // Retire the old key.
    rx.set_keys(&KeySet {
        current: new,
        previous: None,
    });
    let d_old2 = sealed(&mut old_sender, header(Flags::empty(), 0), b"old");
    assert_eq!(
        open(&mut rx, &d_old2).unwrap_err(),
        Some(Refusal::UnknownKey)
    );
    assert!(KeySet {
        current: key(4, 1),
        previous: Some(key(4, 2))
    }
    .validate()
    .is_err());
    assert!(AuthKey::new(128, [0; KEY_LEN]).is_err());
}

#[test]
fn bit_errors_are_corrected_before_verification() {
    let mut a = Auth::new(&cfg(key(1, 7), None, true, 1));
    let mut b = Auth::new(&cfg(key(1, 7), None, true, 2));
    let d = sealed(&mut a, header(Flags::empty(), 16), &body());
    let mut t = d.clone();
    // Errors in the header, the nonce, the ciphertext and the tag: all within the code.
    for i in [1usize, 15, 25, 700, d.len() - 40 - 16 * 6] {
        t[i] ^= 0x5A;
    }
    let mut r = decode(&t, None, &mut Vec::new()).unwrap();
    assert!(matches!(r.quality, Quality::Corrected { .. }));
    b.open(&mut r, peer()).unwrap();
    assert_eq!(r.body, body());
}

#[test]
fn a_plain_tpdu_is_refused_and_a_sealed_one_is_not_mistaken_for_plain() {
    let mut b = Auth::new(&cfg(key(1, 7), None, false, 2));
    let mut plain = Vec::new();
    encode(header(Flags::RST, 0), b"", &mut plain).unwrap();
    assert_eq!(open(&mut b, &plain).unwrap_err(), Some(Refusal::Missing));
    let mut tiny = Vec::new();
    encode(header(Flags::RST, 0), b"", &mut tiny).unwrap();
    tiny[0] |= AUTH_BIT;
    fix_checks(&mut tiny, 0);
    // An AUTH TPDU too short to hold an envelope.
    assert_eq!(open(&mut b, &tiny).unwrap_err(), Some(Refusal::Failed));
}

#[test]
fn debug_never_shows_the_secret() {
    let k = key(5, 0xAB);
    let s = format!("{k:?} {:?}", cfg(k.clone(), None, false, 1));
    assert!(
        !s.to_lowercase().contains("ab, ab") && !s.contains("171"),
        "{s}"
    );
}
