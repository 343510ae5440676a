//! Unit tests of `sender`.

use super::*;
use aerotp_wire::Mode;

/// The timing of these tests: a 100 ms loss time (as a sender's was before any MACK) and
/// timeout, no round-trip sample, one path.
const NO_SAMPLE: LossTiming<'static> = LossTiming {
    loss_time: Duration::from_millis(100),
    min_rtt: None,
    rto: Duration::from_millis(100),
    path: &one_path,
};

/// With one lane the lanes run on the call's own figures, never a path's.
fn one_path(_: usize) -> crate::rtt::PathTiming {
    unreachable!("a path's own timing read with one lane")
}

fn sender(mode: Mode) -> Sender {
    Sender::new(
        ErrorControl::for_mode(mode),
        1 << 20,
        1024,
        Duration::from_secs(1),
    )
}

fn send_n(s: &mut Sender, n: usize) -> Vec<Outgoing> {
    s.write(&vec![7u8; n * 100]);
    (0..n)
        .map_while(|i| s.next_outgoing(Duration::from_millis(i as u64), 100, true, &mut |_| 0))
        .collect()
}

#[test]
fn asyn_copies_come_first_then_data_from_one() {
    let mut s = sender(Mode::Reliable);
    s.open(3);
    s.write(&[1u8; 150]);
    let seqs: Vec<(u64, usize, bool)> =
        std::iter::from_fn(|| s.next_outgoing(Duration::ZERO, 100, true, &mut |_| 0))
            .map(|o| (o.seq, o.len, o.flags.contains(Flags::ASYN)))
            .collect();
    // The copies carry the first bytes (up to the TPDU size), the rest follows from 1.
    let want = vec![
        (0, 100, true),
        (0, 100, true),
        (0, 100, true),
        (1, 50, false),
    ];
    assert_eq!(seqs, want);
    assert_eq!(s.stats.asyn_copies, 2);
    assert_eq!(s.stats.bytes_sent_payload, 150);
}

#[test]
fn asyn_copies_carry_at_most_asyn_data_max() {
    for mode in [Mode::Reliable, Mode::QuasiReliable] {
        let mut s = sender(mode);
        s.open(2);
        s.write(&[9u8; 3000]);
        let a = s
            .next_outgoing(Duration::ZERO, 1400, true, &mut |_| 0)
            .unwrap();
        let b = s
            .next_outgoing(Duration::ZERO, 1400, true, &mut |_| 0)
            .unwrap();
        assert_eq!((a.seq, a.len), (0, ASYN_DATA_MAX), "{mode:?}");
        assert_eq!((b.seq, s.body_of(&b)), (0, s.body_of(&a)), "{mode:?}");
        let c = s
            .next_outgoing(Duration::ZERO, 1400, true, &mut |_| 0)
            .unwrap();
        assert_eq!((c.seq, c.len), (1, 1400), "{mode:?}");
    }
}

#[test]
fn asyn_copies_stay_empty_when_nothing_is_queued() {
    let mut s = sender(Mode::Reliable);
    s.open(2);
    let a = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    s.write(&[1u8; 80]);
    let b = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    let c = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    assert_eq!((a.seq, a.len, b.seq, b.len), (0, 0, 0, 0));
    assert_eq!((c.seq, c.len), (1, 80));
}

#[test]
fn segments_with_asyn_first_and_afin_last() {
    let mut s = sender(Mode::Reliable);
    s.write(&[1u8; 250]);
    s.finish();
    let a = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    assert!(a.flags.contains(Flags::ASYN));
    let b = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    assert_eq!(b.flags, Flags::empty());
    let c = s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .unwrap();
    assert!(c.flags.contains(Flags::AFIN));
    assert_eq!(c.len, 50);
    assert!(s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .is_none());
    assert_eq!(s.write(b"more"), 0, "no writes after finish");
}

#[test]
fn mack_gap_triggers_retransmission_of_the_gap_only() {
    let mut s = sender(Mode::Reliable);
    send_n(&mut s, 10);
    s.on_ack(
        &Ack {
            cum: 2,
            delivered: 200,
            window: 1024,
        },
        Duration::ZERO,
        None,
    );
    s.on_mack_entries(&[3, 4, 5, 6, 7], &[], Duration::from_millis(20), &NO_SAMPLE);
    let r = s
        .next_outgoing(Duration::from_millis(20), 100, true, &mut |_| 0)
        .unwrap();
    assert!(r.retransmission);
    assert_eq!(r.seq, 2);
    assert!(s
        .next_outgoing(Duration::from_millis(20), 100, true, &mut |_| 0)
        .is_none());
}

#[test]
fn nack_and_snack_queue_each_once() {
    let mut s = sender(Mode::NearReliable);
    send_n(&mut s, 10);
    s.on_nack(&[4, 4], Duration::ZERO);
    s.on_snack(&[(6, 8)], Duration::from_millis(50), Duration::ZERO);
    let seqs: Vec<u64> =
        std::iter::from_fn(|| s.next_outgoing(Duration::ZERO, 100, true, &mut |_| 0))
            .map(|o| o.seq)
            .collect();
    assert_eq!(seqs, vec![4, 6, 7]);
}

/// A repeated SNACK for a hole already resent less than a round trip ago resends nothing;
/// before any round-trip sample the round trip assumed is the guess the connection gives.
#[test]
fn a_repeated_snack_waits_a_round_trip_even_without_a_sample() {
    let ms = Duration::from_millis;
    for (guess, resent_again) in [(ms(100), false), (Duration::ZERO, true)] {
        let mut s = sender(Mode::NearReliable);
        send_n(&mut s, 10);
        // TPDU 6 went at 6 ms; the SNACK at 200 ms is older news than any round trip.
        s.on_snack(&[(6, 7)], ms(200), guess);
        let first = s
            .next_outgoing(ms(200), 100, true, &mut |_| 0)
            .expect("the hole resent");
        assert_eq!((first.seq, first.retransmission), (6, true));
        // The receiver repeats its SNACK 30 ms later, before the repair can have arrived.
        s.on_snack(&[(6, 7)], ms(230), guess);
        let again = s.next_outgoing(ms(230), 100, true, &mut |_| 0);
        assert_eq!(again.is_some(), resent_again, "guess {guess:?}: {again:?}");
    }
}

#[test]
fn timeout_retransmits_old_unacked_only() {
    let mut s = sender(Mode::Reliable);
    send_n(&mut s, 4);
    s.on_ack(
        &Ack {
            cum: 2,
            delivered: 0,
            window: 1024,
        },
        Duration::ZERO,
        None,
    );
    let n = s.on_timeout(Duration::from_secs(5), &NO_SAMPLE);
    assert_eq!(n, 2);
    assert!(s.has_retransmission());
}

/// The probes of the timeouts before the first round-trip sample, `n` of them, one second
/// apart (timeout 100 ms): which TPDU each resent.
fn first_probes(lowest: bool, n: u64) -> Vec<u64> {
    let mut s = sender(Mode::Reliable);
    send_n(&mut s, 4);
    (1..=n)
        .map(|i| {
            let now = Duration::from_secs(i);
            assert_eq!(s.on_timeout_before_sample(now, &NO_SAMPLE, lowest), 1);
            let o = s.next_outgoing(now, 100, true, &mut |_| 0).unwrap();
            assert!(o.retransmission);
            o.seq
        })
        .collect()
}

#[test]
fn a_discovering_sender_probes_its_first_flight_with_the_lowest_tpdu_only() {
    // With a discovered rate the flight may only be queued: resend the first TPDU again
    // and again, as TCP resends its SYN, not the flight one TPDU per timeout.
    assert_eq!(first_probes(true, 4), vec![0, 0, 0, 0]);
    // A fixed rate resends the oldest transmission each time (docs/results/ measured so).
    assert_eq!(first_probes(false, 4), vec![0, 1, 2, 3]);
}

#[test]
fn window_limits_new_data() {
    let mut s = Sender::new(
        ErrorControl::for_mode(Mode::Reliable),
        1 << 20,
        3,
        Duration::from_secs(1),
    );
    assert_eq!(send_n(&mut s, 10).len(), 3);
    s.on_ack(
        &Ack {
            cum: 2,
            delivered: 0,
            window: 3,
        },
        Duration::ZERO,
        None,
    );
    assert!(s
        .next_outgoing(Duration::ZERO, 100, true, &mut |_| 0)
        .is_some());
}

#[test]
fn bodies_cut_from_writes_of_any_size_keep_the_bytes_in_order() {
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for max_body in [333usize, 1500, 3500] {
        let mut s = Sender::new(
            ErrorControl::for_mode(Mode::Reliable),
            4_000,
            1 << 16,
            Duration::from_secs(1),
        );
        let sizes = [1usize, 7, 333, 999, 3000, 5, 4096];
        let (mut written, mut got, mut step) = (0, Vec::new(), 0usize);
        while got.len() < data.len() {
            let n = sizes[step % sizes.len()].min(data.len() - written);
            let took = s.write(&data[written..written + n]);
            assert!(s.unsent() <= 4_000, "the queue limit holds");
            written += took;
            // Take a varying number of TPDUs, so bodies straddle what was written.
            for _ in 0..(step % 4) + usize::from(took < n) {
                match s.next_outgoing(Duration::ZERO, max_body, false, &mut |_| 0) {
                    Some(o) => {
                        let body = s.body_of(&o).expect("kept");
                        assert_eq!(body.len(), o.len);
                        assert!(!body.is_empty() && body.len() <= max_body);
                        got.extend_from_slice(body);
                    }
                    None => break,
                }
            }
            step += 1;
        }
        assert_eq!(got, data, "max_body {max_body}");
        assert_eq!(s.unsent(), 0);
        assert!(s
            .next_outgoing(Duration::ZERO, max_body, false, &mut |_| 0)
            .is_none());
    }
}

#[test]
fn quasi_reliable_keeps_nothing() {
    let mut s = sender(Mode::QuasiReliable);
    send_n(&mut s, 10);
    assert_eq!(s.outstanding(), 0);
    s.on_nack(&[3], Duration::ZERO);
    assert!(!s.has_retransmission());
}

#[test]
fn mack_ranges_acknowledge_blocks_and_forged_ones_change_nothing_beyond_what_was_sent() {
    let mut s = sender(Mode::Reliable);
    send_n(&mut s, 10);
    s.on_ack(
        &Ack {
            cum: 2,
            delivered: 200,
            window: 1024,
        },
        Duration::ZERO,
        None,
    );
    let before = s.outstanding();
    // A block far beyond what was sent, a reversed one, one that wraps the 32-bit space and
    // one that starts below `cum`: bounded work, nothing acknowledged that was not sent.
    s.on_mack_entries(
        &[],
        &[
            (1_000_000, 4_000_000_000),
            (9, 5),
            (u32::MAX - 3, 2),
            (0, 1),
        ],
        Duration::from_millis(20),
        &NO_SAMPLE,
    );
    assert_eq!(s.outstanding(), before, "nothing sent was in those ranges");
    // A real block [3, 8): five TPDUs acknowledged, the hole at 2 retransmitted.
    s.on_mack_entries(&[], &[(3, 8)], Duration::from_millis(20), &NO_SAMPLE);
    assert_eq!(s.outstanding(), before - 5);
    let r = s
        .next_outgoing(Duration::from_millis(20), 100, true, &mut |_| 0)
        .unwrap();
    assert!(r.retransmission);
    assert_eq!(r.seq, 2);
}

/// Losses found out of sequence order are resent lowest first: the receiver's next in-order
/// TPDU before those behind it (NACKs for 7, 5, 9, then 3, as the losses of resent TPDUs are
/// found after older transmissions of later ones).
#[test]
fn retransmissions_go_lowest_sequence_first() {
    let mut s = sender(Mode::NearReliable);
    send_n(&mut s, 10);
    s.on_nack(&[7, 5], Duration::ZERO);
    s.on_nack(&[9], Duration::ZERO);
    s.on_nack(&[3], Duration::ZERO);
    let seqs: Vec<u64> =
        std::iter::from_fn(|| s.next_outgoing(Duration::ZERO, 100, true, &mut |_| 0))
            .map(|o| o.seq)
            .take(4)
            .collect();
    assert_eq!(seqs, vec![3, 5, 7, 9]);
}
