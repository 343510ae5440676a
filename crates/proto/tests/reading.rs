//! A read moves a connection's deadline only when it reopens a nearly full window (the
//! feedback that tells the sender is then due at once), and the endpoint's timer table
//! follows exactly that: `Endpoint::read_chunk` touches the connection only then. A read
//! that moved nothing leaves the deadline the endpoint reports where it was; one that moved
//! it is reported due, and the window update goes out. (In debug builds the table also
//! checks every untouched connection's deadline against the connection's own.)

mod harness;

use aerotp_proto::{ConnectionConfig, Endpoint, EndpointConfig, Mode};
use harness::by_hand::{connect, drain};
use harness::{addr_a, addr_b, pattern};
use std::time::Duration;

const PORT: u16 = 7;
/// The receiver's window, TPDUs: the smallest allowed, so the sender fills it quickly.
const WINDOW: u32 = 16;

#[test]
fn a_read_moves_the_deadline_only_when_it_reopens_a_nearly_full_window() {
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    let sender = ConnectionConfig {
        rate_bps: 1_000_000_000,
        ..ConnectionConfig::with_mode(Mode::Reliable)
    };
    let receiver = ConnectionConfig {
        recv_window: WINDOW,
        ..sender.clone()
    };
    let mut now = Duration::ZERO;
    let (ha, hb) = connect(&mut a, &mut b, PORT, (sender, receiver), 1, &mut now);
    let (ha, hb) = (ha[0], hb[0]);

    // A writes more than B will take before it reads; datagrams move both ways until A has
    // nothing more it may send (the advertised window is closed), B reading nothing.
    let data = pattern(300_000, 9);
    let mut written = 0;
    let mut quiet_rounds = 0;
    for _ in 0..10_000 {
        written += a.write(ha, &data[written..]).unwrap();
        now += Duration::from_micros(100);
        a.handle_timeout(now);
        b.handle_timeout(now);
        let sent = drain(&mut a, now);
        quiet_rounds = if sent.is_empty() { quiet_rounds + 1 } else { 0 };
        for d in sent {
            b.handle_datagram(now, addr_a(), &d);
        }
        for d in drain(&mut b, now) {
            a.handle_datagram(now, addr_b(), &d);
        }
        if quiet_rounds == 50 {
            break;
        }
    }
    assert_eq!(quiet_rounds, 50, "the sender never stopped at the window");
    assert!(
        written < data.len(),
        "the window did not hold the sender back"
    );

    // B reads one chunk at a time; what it sends after each read is dropped, so nothing
    // refills its window and each read leaves one TPDU fewer waiting.
    let mut reads = Vec::new();
    let mut got = Vec::new();
    loop {
        let before = b.poll_timeout();
        let Some(chunk) = b.read_chunk(hb).unwrap() else {
            break;
        };
        got.extend_from_slice(&chunk.data);
        let after = b.poll_timeout();
        let sent = drain(&mut b, now).len();
        reads.push((before, after, sent));
    }
    assert_eq!(
        got,
        data[..got.len()],
        "the chunks read are the bytes written, in order"
    );
    let waiting = reads.len();
    assert!(waiting > WINDOW as usize / 2, "only {waiting} TPDUs waited");
    let (mut moved, mut unmoved) = (0, 0);
    for (i, &(before, after, sent)) in reads.iter().enumerate() {
        // After read i (from 0) the window has WINDOW - (waiting - i - 1) TPDUs free; below a
        // quarter of it, the receiver asks for feedback at once (`Receiver::consume`).
        let left = WINDOW.saturating_sub((waiting - i - 1) as u32);
        let read = i + 1;
        if left < WINDOW / 4 {
            moved += 1;
            assert!(
                after.is_some_and(|d| d <= now),
                "read {read} ({left} TPDUs free) reopened the window, yet B reports {after:?} at {now:?}"
            );
            assert!(sent > 0, "read {read}: the window update did not go out");
        } else {
            unmoved += 1;
            assert_eq!(
                after, before,
                "read {read} ({left} TPDUs free) moved nothing, yet B's deadline moved"
            );
            assert_eq!(sent, 0, "read {read}: B sent with nothing due");
        }
    }
    assert!(
        moved > 0 && unmoved > 0,
        "{moved} reads moved it, {unmoved} did not"
    );
}
