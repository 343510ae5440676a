//! A peer's new address, in virtual time (docs/spec.md §9, "A peer's new address"): either
//! end changes its address mid-transfer — what is sent to the old one is lost from then on —
//! and the connection carries on with no reset, no byte lost, and a stall of at most a round
//! trip plus a second; a stranger who copies the connection's TPDUs from another address gets
//! challenges and nothing else.

mod harness;

use aerotp_proto::{
    AuthConfig, AuthKey, CloseOutcome, ConnectionConfig, Endpoint, EndpointConfig, Event, KeySet,
    Mode, KEY_LEN,
};
use harness::{addr_a, addr_b, pattern, Impair, Net};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mover {
    Initiator,
    Listener,
    /// Nobody moves; a copy of one of the initiator's TPDUs arrives from a third address.
    Spoofer,
    /// The initiator moves while copies of its TPDUs keep arriving from a third address.
    InitiatorAmidSpoofs,
}

fn spoof_addr() -> SocketAddr {
    "10.6.6.6:666".parse().unwrap()
}

fn new_addr() -> SocketAddr {
    "10.9.9.9:4242".parse().unwrap()
}

struct Run {
    received: Vec<u8>,
    sender_close: Option<CloseOutcome>,
    receiver_close: Option<CloseOutcome>,
    /// Longest time between two reads that returned data, after the move.
    stall: Duration,
    net: Net,
}

fn run(mode: Mode, mover: Mover, data: &[u8]) -> Run {
    run_with(mode, mover, data, None)
}

fn keyed(seed: u8) -> EndpointConfig {
    EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: AuthKey::new(3, [0x11; KEY_LEN]).unwrap(),
                previous: None,
            },
            encrypt: true,
            nonce_seed: [seed; 12],
        }),
        ..EndpointConfig::default()
    }
}

fn run_with(mode: Mode, mover: Mover, data: &[u8], auth: Option<()>) -> Run {
    let imp = Impair {
        delay: Duration::from_millis(10),
        ..Impair::default()
    };
    let mut net = Net::new(3, imp);
    if auth.is_some() {
        net.pair.a = Endpoint::new(keyed(1), 1);
        net.pair.b = Endpoint::new(keyed(2), 2);
    }
    net.pair.drop_misaddressed = true;
    let cfg = ConnectionConfig {
        rate_bps: 5_000_000,
        ..ConnectionConfig::with_mode(mode)
    };
    net.b.listen(7, cfg.clone()).unwrap();
    let ch = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    let move_at = Duration::from_millis(800);
    let (mut moved, mut written, mut closed, mut rx_closed) = (false, 0, false, false);
    let (mut rx, mut sender_close, mut receiver_close) = (None, None, None);
    let mut received = Vec::new();
    let mut last_read = Duration::ZERO;
    let mut stall = Duration::ZERO;
    let mut buf = vec![0u8; 65536];
    let mut steps = 0u64;
    while net.now < Duration::from_secs(60) && steps < 2_000_000 {
        steps += 1;
        if !moved && net.now >= move_at {
            moved = true;
            match mover {
                Mover::Initiator | Mover::InitiatorAmidSpoofs => net.pair.addr_a = new_addr(),
                Mover::Listener => net.pair.addr_b = new_addr(),
                Mover::Spoofer => {
                    // A copy of a TPDU the initiator sends, from elsewhere: it names the
                    // connection's ports and tag. Taken from the next datagram a sends (none
                    // may be due at this instant: then at the next step).
                    let mut copy = Vec::new();
                    let now = net.now;
                    if net.a.poll_transmit(now, &mut copy).is_some() {
                        net.b.handle_datagram(now, addr_a(), &copy);
                        net.b.handle_datagram(now, new_addr(), &copy);
                    } else {
                        moved = false;
                    }
                }
            }
            last_read = net.now;
        }
        if moved && mover == Mover::InitiatorAmidSpoofs && steps.is_multiple_of(7) {
            // Every 7th step, the initiator's next datagram arrives from where it now is and a
            // copy of it from the spoofer, each copy replacing the address being validated.
            let mut copy = Vec::new();
            let now = net.now;
            if net.a.poll_transmit(now, &mut copy).is_some() {
                net.b.handle_datagram(now, spoof_addr(), &copy);
                net.b.handle_datagram(now, new_addr(), &copy);
                net.b.handle_datagram(now, spoof_addr(), &copy);
            }
        }
        if written < data.len() {
            written += net.a.write(ch, &data[written..]).unwrap_or(0);
        }
        if written == data.len() && !closed {
            net.a.close(ch).unwrap();
            closed = true;
        }
        while let Some(e) = net.a.poll_event() {
            if let Event::Closed(h, o) = e {
                if h == ch {
                    sender_close = Some(o);
                }
            }
        }
        while let Some(e) = net.b.poll_event() {
            match e {
                Event::Accepted(h) => rx = Some(h),
                Event::Closed(_, o) => receiver_close = Some(o),
                _ => {}
            }
        }
        if let Some(h) = rx {
            while let Ok(n) = net.b.read(h, &mut buf) {
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
                if moved {
                    stall = stall.max(net.now - last_read);
                }
                last_read = net.now;
            }
            if !rx_closed && net.b.at_eof(h) {
                let _ = net.b.close(h);
                rx_closed = true;
            }
        }
        if sender_close.is_some() && receiver_close.is_some() {
            break;
        }
        if !net.step() {
            break;
        }
    }
    Run {
        received,
        sender_close,
        receiver_close,
        stall,
        net,
    }
}

fn check_survives(mode: Mode, mover: Mover) {
    check_survives_with(mode, mover, None);
}

fn check_survives_with(mode: Mode, mover: Mover, auth: Option<()>) {
    let data = pattern(2_000_000, 11);
    let r = run_with(mode, mover, &data, auth);
    eprintln!(
        "{mode} {mover:?} moves: {} of {} bytes, stall {:?}, closes {:?}/{:?}, misaddressed {}, \
         challenges a {} b {}",
        r.received.len(),
        data.len(),
        r.stall,
        r.sender_close,
        r.receiver_close,
        r.net.pair.misaddressed,
        r.net.a.stats.path_challenges,
        r.net.b.stats.path_challenges,
    );
    let (stays, moves) = match mover {
        Mover::Initiator | Mover::InitiatorAmidSpoofs => (&r.net.a, &r.net.b),
        _ => (&r.net.b, &r.net.a),
    };
    assert!(
        moves.stats.path_challenges >= 1,
        "{mode}: the new address was not challenged"
    );
    assert_eq!(r.received, data, "{mode}: bytes lost or altered");
    assert_eq!(
        r.sender_close,
        Some(CloseOutcome::Finished { confirmed: true }),
        "{mode}"
    );
    assert_eq!(
        r.receiver_close,
        Some(CloseOutcome::Finished { confirmed: true }),
        "{mode}"
    );
    // One round trip is 20 ms here: the stall is bounded by it plus a second.
    assert!(
        r.stall <= Duration::from_millis(1020),
        "{mode}: stall {:?}",
        r.stall
    );
    assert_eq!(
        moves.stats.migrations, 1,
        "{mode}: the peer of the mover switched once"
    );
    assert_eq!(stays.stats.migrations, 0);
    // The spoofer's address is still being challenged (it never answers); nothing else is.
    let spoofed = usize::from(mover == Mover::InitiatorAmidSpoofs);
    assert_eq!(moves.paths_pending(), spoofed);
}

#[test]
fn the_initiator_moves_mid_transfer() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        check_survives(mode, Mover::Initiator);
    }
}

#[test]
fn the_listener_moves_mid_transfer() {
    for mode in [Mode::Reliable, Mode::NearReliable, Mode::HybridNackMack] {
        check_survives(mode, Mover::Listener);
    }
}

#[test]
fn a_copy_from_another_address_draws_challenges_and_changes_nothing() {
    let data = pattern(500_000, 12);
    let r = run(Mode::Reliable, Mover::Spoofer, &data);
    assert_eq!(r.received, data);
    assert_eq!(
        r.sender_close,
        Some(CloseOutcome::Finished { confirmed: true })
    );
    assert_eq!(
        r.net.b.stats.migrations, 0,
        "the connection followed a copy"
    );
    assert!(
        r.net.b.stats.path_challenges >= 1,
        "no challenge to the new address"
    );
    // Its challenges went to the stranger's address, which never answers.
    assert!(r.net.pair.misaddressed >= 1);
}

#[test]
fn authenticated_connections_move_too() {
    check_survives_with(Mode::Reliable, Mover::Initiator, Some(()));
    check_survives_with(Mode::Reliable, Mover::Listener, Some(()));
}

#[test]
fn copies_from_a_spoofer_do_not_keep_a_real_move_from_proving_itself() {
    check_survives(Mode::Reliable, Mover::InitiatorAmidSpoofs);
}

/// An ECHO from a new address whose cookie the endpoint never made (or made for another
/// address) is refused and counted; the connection stays where it was.
#[test]
fn a_forged_echo_from_a_new_address_moves_nothing() {
    let mut net = Net::new(
        4,
        Impair {
            delay: Duration::from_millis(10),
            ..Impair::default()
        },
    );
    let cfg = ConnectionConfig::with_mode(Mode::Reliable);
    net.b.listen(7, cfg.clone()).unwrap();
    net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
    let mut accepted = None;
    for _ in 0..1000 {
        if let Some(Event::Accepted(h)) = net.b.poll_event() {
            accepted = Some(h);
        }
        if accepted.is_some_and(|h| net.b.is_proven(h)) {
            break;
        }
        net.step();
    }
    let h = accepted.expect("accepted");
    assert!(net.b.is_proven(h), "not proven in time");
    let p = net.b.peer(h).unwrap();
    let header = aerotp_wire::Header {
        mode: p.mode,
        flags: aerotp_wire::Flags::ECHO,
        src_port: p.remote_port,
        dst_port: p.local_port,
        seq: 0,
        timestamp: 0,
        fec: 0,
        tag: p.tag,
        len: 0,
    };
    let refused = net.b.stats.cookies_refused;
    for cookie in [[0u8; 16], [0xA5; 16]] {
        let mut echo = Vec::new();
        aerotp_wire::emit_tpdu(header, &cookie, &mut echo).unwrap();
        let now = net.now;
        net.b.handle_datagram(now, new_addr(), &echo);
    }
    assert_eq!(net.b.stats.cookies_refused, refused + 2);
    assert_eq!(net.b.stats.migrations, 0);
    assert_eq!(
        net.b.peer(h).unwrap().remote,
        addr_a(),
        "the connection moved"
    );
}
