//! Checks that the targets can fail and that the seeds reach what they are meant to reach:
//! a target whose checks never fire, or a seed script that never gets a connection up,
//! would make a campaign look better than it is.

use aerotp_fuzz_corpus::endpoint::check_emitted;
use aerotp_fuzz_corpus::{
    build_datagram, heap_live_bytes, run_endpoint_script, seeds, CountingAlloc,
};
use aerotp_proto::{FecSetting, Mode};
use aerotp_wire::{parse_tpdu, Flags, Header};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn header(fec: u8) -> Header {
    Header {
        mode: Mode::Reliable,
        flags: Flags::empty(),
        src_port: 1,
        dst_port: 7000,
        seq: 5,
        timestamp: 0,
        fec,
        tag: 3,
        len: 0,
    }
}

#[test]
fn the_heap_counter_sees_this_threads_allocations() {
    let before = heap_live_bytes().expect("CountingAlloc is installed in this test binary");
    let v = vec![1u8; 1 << 20];
    let during = heap_live_bytes().unwrap();
    assert!(during - before >= 1 << 20, "{before} -> {during}");
    drop(v);
    assert!(heap_live_bytes().unwrap() - before < 1 << 20);
}

#[test]
fn check_emitted_accepts_engine_datagrams_and_refuses_damage() {
    let good = build_datagram(header(8), b"telemetry");
    check_emitted(&good, 1500);
    let mut bad_crc = build_datagram(header(0), b"telemetry");
    bad_crc[21] ^= 1;
    assert!(std::panic::catch_unwind(|| check_emitted(&bad_crc, 1500)).is_err());
    assert!(std::panic::catch_unwind(|| check_emitted(&good, good.len() - 1)).is_err());
    let mut trailer = build_datagram(header(0), b"telemetry");
    trailer.push(0);
    assert!(std::panic::catch_unwind(|| check_emitted(&trailer, 1500)).is_err());
    let mut h = header(0);
    h.flags = Flags::MACK;
    let bad_body = build_datagram(h, b"too short for a MACK");
    assert!(std::panic::catch_unwind(|| check_emitted(&bad_body, 1500)).is_err());
}

#[test]
fn build_datagram_encodes_like_the_engine() {
    let d = build_datagram(header(16), &[7u8; 1000]);
    let t = parse_tpdu(&d).unwrap();
    assert!(t.body_ok);
    assert_eq!(t.body, &[7u8; 1000][..]);
    assert_eq!(Some(d.len()), aerotp_proto::datagram_len(1000, 16));
}

#[test]
fn seed_transfers_run_to_their_close() {
    for (mode, fec) in [
        (Mode::Reliable, FecSetting::Off),
        (Mode::HybridNackMack, FecSetting::Parity(8)),
    ] {
        let dgs = seeds::transfer_datagrams(mode, fec, 12_000);
        let flags: Vec<Flags> = dgs
            .iter()
            .map(|d| parse_tpdu(d).expect("engine datagrams parse").header.flags)
            .collect();
        // 12 kB in TPDUs of at most 1476 bytes, the ASYN, its answer and the close.
        assert!(dgs.len() >= 12, "{mode:?}: only {} datagrams", dgs.len());
        assert!(
            flags.iter().any(|f| f.contains(Flags::ASYN | Flags::MACK)),
            "{mode:?}: no ASYNACK"
        );
        assert!(
            flags.iter().any(|f| f.contains(Flags::AFIN | Flags::ACK)),
            "{mode:?}: no AFINACK"
        );
    }
}

#[test]
fn seed_scripts_carry_data_both_ways_and_the_forgery_arrives() {
    let scripts = seeds::all()
        .into_iter()
        .find(|(n, _)| *n == "proto_endpoint")
        .unwrap()
        .1;
    assert_eq!(scripts.len(), 18);
    for s in &scripts {
        let r = run_endpoint_script(s);
        assert!(r.a_connections >= 1, "{r:?}");
        assert!(r.a_datagrams_in >= 20 && r.b_datagrams_in >= 3, "{r:?}");
    }
    // The scripts with an acknowledged mode deliver what B wrote (36,000 bytes) to A.
    let reliable = run_endpoint_script(&scripts[0]);
    assert!(reliable.a_read >= 30_000, "{reliable:?}");
}

#[test]
fn endpoint_target_catches_an_oversized_delivery() {
    // A script that forges, on B's live connection to A and from B's address, an in-order
    // data TPDU with a 30,000-byte body (far above the 1500-byte MTU), then reads on A.
    let mut s = vec![0u8, 2, 0]; // reliable, MTU 1500, FEC off
                                 // deliver B's ASYN copies and data to A first, so the connection exists
    s.push(5);
    s.extend_from_slice(&[3, 15]);
    s.extend_from_slice(&[0x0F; 16]);
    // forge: from B, B's connection 0, its mode and tag, data, seq 1, body 2 × 15000
    s.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0xBA, 0x98, 0]);
    s.extend_from_slice(&[8, 1, 0]); // A reads, chunked, on the connection B opened
    let r = std::panic::catch_unwind(|| run_endpoint_script(&s));
    // Either the engine refuses bodies over its MTU (then the script runs through and A
    // reads no oversized chunk) or the target reports it: it must not pass silently.
    match r {
        Ok(summary) => {
            println!("engine refused the body: {summary:?}");
            assert!(summary.a_read < 30_000, "{summary:?}")
        }
        Err(e) => {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            println!("target caught it: {msg}");
            assert!(msg.contains("chunk"), "{msg}");
        }
    }
}

#[test]
fn keyed_seed_scripts_transfer_and_a_replay_to_a_restarted_receiver_stays_unproven() {
    use aerotp_fuzz_corpus::run_keyed_script;
    let scripts = seeds::keyed_scripts();
    assert_eq!(scripts.len(), 30);
    for (kind, s) in &scripts {
        let r = run_keyed_script(s);
        println!("{kind}: {r:?}");
        // Every script carries its transfer to B over a proven connection first.
        assert!(r.b_proven >= 1, "{kind}: {r:?}");
        assert!(r.b_read_proven >= 3000, "{kind}: {r:?}");
        match *kind {
            "replay" => {
                // The new B took the recording as new (its windows are gone), opened a
                // connection for it and never proved it (the target asserts that).
                assert_eq!(r.restarts, 1, "{r:?}");
                assert!(r.b_accepted_after_cut >= 1, "{kind}: {r:?}");
                assert_eq!(r.b_proven, 1, "{kind}: {r:?}");
                assert!(r.replayed >= 256, "{r:?}");
            }
            "live" => assert!(r.restarts == 1 && r.replayed >= 40, "{r:?}"),
            // Without a key the forged in-window RSTs are challenged (`reset_guard`), with
            // one they never verify.
            "forged" if r.b_auth_verified == 0 => assert!(r.resets_challenged >= 1, "{r:?}"),
            _ => {}
        }
    }
    // At MTU 1500 (mode 2) the 36,000 bytes arrive nearly whole before A closes; a few
    // hundred bytes of the first flight are read before the proof (counted unproven).
    let big = run_keyed_script(&scripts[2].1);
    assert!(big.b_read_proven >= 30_000, "{big:?}");
    assert!(big.b_read_proven + big.b_read_unproven >= 36_000, "{big:?}");
}

#[test]
fn keyed_target_checks_sealed_datagrams() {
    use aerotp_fuzz_corpus::keyed::check_sealed;
    // An unauthenticated TPDU from a keyed endpoint is refused.
    let plain = build_datagram(header(0), b"data");
    assert!(std::panic::catch_unwind(|| check_sealed(&plain, 1500, true)).is_err());
}
