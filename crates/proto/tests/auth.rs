//! Authenticated endpoints in virtual time: transfers complete, the first data still rides on
//! the first TPDU, and forged, replayed or wrong-key TPDUs — data, ASYN, RST — are dropped,
//! counted and change nothing (docs/security.md).

mod harness;

use aerotp_proto::{
    AuthConfig, AuthKey, ConnectionConfig, ConnectionHandle, Endpoint, EndpointConfig, Event,
    FecSetting, KeySet, Mode, KEY_LEN,
};
use aerotp_wire::{crc32c, emit_tpdu, hec, Flags, Header, AUTH_BIT, HEADER_LEN};
use harness::{addr_a, addr_b, Impair, Net};
use std::net::SocketAddr;
use std::time::Duration;

fn ecfg(key: AuthKey, seed: u8, encrypt: bool) -> EndpointConfig {
    EndpointConfig {
        auth: Some(AuthConfig {
            keys: KeySet {
                current: key,
                previous: None,
            },
            encrypt,
            nonce_seed: [seed; 12],
        }),
        ..EndpointConfig::default()
    }
}

fn key() -> AuthKey {
    AuthKey::new(3, [0x11; KEY_LEN]).unwrap()
}

fn net(imp: Impair, encrypt: bool) -> Net {
    let mut n = Net::new(5, imp);
    n.a = Endpoint::new(ecfg(key(), 1, encrypt), 1);
    n.b = Endpoint::new(ecfg(key(), 2, encrypt), 2);
    n
}

fn data(len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

struct Run {
    net: Net,
    tx: ConnectionHandle,
    rx: Option<ConnectionHandle>,
    written: usize,
    received: Vec<u8>,
    data: Vec<u8>,
}

impl Run {
    fn new(mut net: Net, cfg: ConnectionConfig, len: usize) -> Run {
        net.b.listen(7, cfg.clone()).unwrap();
        let tx = net.a.connect(Duration::ZERO, addr_b(), 7, cfg).unwrap();
        Run {
            net,
            tx,
            rx: None,
            written: 0,
            received: Vec::new(),
            data: data(len),
        }
    }

    /// Application work on both sides, no time passing.
    fn apps(&mut self) {
        if self.written < self.data.len() {
            self.written += self
                .net
                .a
                .write(self.tx, &self.data[self.written..])
                .unwrap_or(0);
            if self.written == self.data.len() {
                self.net.a.close(self.tx).unwrap();
            }
        }
        while self.net.a.poll_event().is_some() {}
        while let Some(e) = self.net.b.poll_event() {
            if let Event::Accepted(h) = e {
                self.rx = Some(h);
            }
        }
        if let Some(h) = self.rx {
            let mut buf = vec![0u8; 65536];
            while let Ok(n @ 1..) = self.net.b.read(h, &mut buf) {
                self.received.extend_from_slice(&buf[..n]);
            }
            if self.net.b.at_eof(h) {
                let _ = self.net.b.close(h);
            }
        }
    }

    /// Runs until both sides closed or `limit`; true if the data arrived intact.
    fn finish(&mut self, limit: Duration) -> bool {
        for _ in 0..5_000_000 {
            self.apps();
            let done = self.rx.is_some_and(|h| self.net.b.at_eof(h))
                && matches!(self.net.a.state(self.tx), Some(aerotp_proto::State::Closed));
            if done || self.net.now > limit || !self.net.step() {
                break;
            }
        }
        self.received == self.data
    }
}

fn cfg(mode: Mode, fec: FecSetting) -> ConnectionConfig {
    ConnectionConfig {
        mode,
        fec,
        rate_bps: 20_000_000,
        ..ConnectionConfig::default()
    }
}

#[test]
fn authenticated_transfers_complete_on_lossy_noisy_links_clear_and_encrypted() {
    for encrypt in [false, true] {
        let imp = Impair {
            delay: Duration::from_millis(10),
            loss: 0.02,
            ber: 1e-5,
            ..Impair::default()
        };
        let mut run = Run::new(
            net(imp, encrypt),
            cfg(Mode::HybridNackMack, FecSetting::Parity(8)),
            300_000,
        );
        assert!(run.finish(Duration::from_secs(60)), "encrypt={encrypt}");
        let s = &run.net.b.stats;
        assert_eq!(s.auth_failed + s.auth_replayed + s.auth_unknown_key, 0);
        // Bit errors FEC could not repair are unverifiable, dropped as losses, not NACKed.
        assert_eq!(s.auth_missing + s.auth_unexpected, 0);
    }
}

#[test]
fn data_rides_on_the_first_tpdu_zero_rtt() {
    let mut run = Run::new(
        net(Impair::default(), true),
        cfg(Mode::Reliable, FecSetting::Off),
        100,
    );
    run.apps();
    let mut buf = Vec::new();
    let t = run.net.a.poll_transmit(Duration::ZERO, &mut buf).unwrap();
    assert_eq!(t.remote, addr_b());
    assert_eq!(buf[0] & AUTH_BIT, AUTH_BIT);
    run.net.b.handle_datagram(Duration::ZERO, addr_a(), &buf);
    run.apps();
    assert!(run.rx.is_some(), "the first TPDU opened the connection");
    assert_eq!(
        run.received, run.data,
        "and carried the data, before any reply"
    );
}

/// `poll_transmit` appends to what the buffer already holds (a runtime's send train): the
/// bytes before are left alone, the datagram is the last `len` bytes, and it is the same
/// datagram the peer accepts, sealed or plain; with nothing to send the buffer is unchanged.
#[test]
fn a_datagram_is_appended_after_what_the_buffer_holds() {
    for auth in [false, true] {
        // Sealed (authenticated, clear) or an endpoint without a key.
        let n = if auth {
            net(Impair::default(), false)
        } else {
            Net::new(5, Impair::default())
        };
        let mut run = Run::new(n, cfg(Mode::Reliable, FecSetting::Off), 100);
        run.apps();
        let mut train = b"earlier datagrams".to_vec();
        let t = run.net.a.poll_transmit(Duration::ZERO, &mut train).unwrap();
        assert_eq!(&train[..17], b"earlier datagrams", "auth {auth}");
        assert_eq!(train.len(), 17 + t.len, "auth {auth}");
        let datagram = train[17..].to_vec();
        assert_eq!(datagram[0] & AUTH_BIT != 0, auth);
        run.net
            .b
            .handle_datagram(Duration::ZERO, addr_a(), &datagram);
        run.apps();
        assert_eq!(
            run.received, run.data,
            "auth {auth}: the appended datagram delivered"
        );
        // Drain what A has now; then nothing more: the buffer stays as it was.
        let mut guard = 0;
        loop {
            let before = train.len();
            match run.net.a.poll_transmit(Duration::ZERO, &mut train) {
                Some(t) => assert_eq!(train.len(), before + t.len),
                None => {
                    assert_eq!(train.len(), before, "auth {auth}: None wrote nothing");
                    break;
                }
            }
            guard += 1;
            assert!(guard < 64, "auth {auth}: sends without end");
        }
        assert_eq!(&train[..17], b"earlier datagrams");
    }
}

/// A plain TPDU with valid HEC and CRC-32C, as an attacker who saw one TPDU builds it.
fn forge_plain(h: Header, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    emit_tpdu(h, body, &mut out).unwrap();
    out
}

/// An authenticated-looking TPDU with a made-up envelope; HEC and CRC valid.
fn forge_sealed(h: Header, key_byte: u8, body: &[u8], salt: u8) -> Vec<u8> {
    let mut env = vec![key_byte];
    env.extend_from_slice(&[salt; 12]);
    env.extend_from_slice(body);
    env.extend_from_slice(&[salt ^ 0x5A; 16]);
    let mut out = forge_plain(h, &env);
    out[0] |= AUTH_BIT;
    let c = hec(&out[..18]);
    out[18..20].copy_from_slice(&c.to_be_bytes());
    let end = HEADER_LEN + env.len();
    let crc = crc32c(&out[HEADER_LEN..end]);
    out[end..end + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

fn snapshot(net: &Net, rx: ConnectionHandle) -> String {
    format!(
        "{:?} {:?} {:?} {}",
        net.b.stats(rx),
        net.b.state(rx),
        net.b.poll_timeout(),
        net.b.connection_count()
    )
}

#[test]
fn forged_replayed_and_wrong_key_tpdus_change_nothing() {
    let mut run = Run::new(
        net(Impair::default(), false),
        cfg(Mode::Reliable, FecSetting::Off),
        400_000,
    );
    // Run until the transfer is well under way, keeping one genuine TPDU the receiver has
    // already taken (to replay it) and its header (what an eavesdropper learns).
    let mut genuine = Vec::new();
    for _ in 0..200_000 {
        run.apps();
        if run.received.len() > 100_000 && genuine.is_empty() {
            let mut buf = Vec::new();
            let now = run.net.now;
            if run.net.a.poll_transmit(now, &mut buf).is_some() {
                run.net.b.handle_datagram(now, addr_a(), &buf);
                genuine = buf;
                break;
            }
        }
        assert!(run.net.step());
    }
    assert!(!genuine.is_empty());
    run.apps();
    let rx = run.rx.unwrap();
    let (seen, authed) = Header::parse_any(&genuine).unwrap();
    assert!(authed);
    let before = snapshot(&run.net, rx);
    let stats0 = run.net.b.stats.clone();
    let now = run.net.now;
    let mut plain = seen;
    plain.len = 0;
    let forged_data = |seq_ahead: u32| Header {
        seq: plain.seq.wrapping_add(seq_ahead),
        flags: Flags::empty(),
        ..plain
    };
    let mut sent = 0u64;
    let mut deliver = |net: &mut Net, d: &[u8], from: SocketAddr| {
        net.b.handle_datagram(now, from, d);
        sent += 1;
    };
    for i in 1..=300u32 {
        // Data 300 TPDUs ahead (issue 14's attack), plain and with a fake envelope.
        deliver(
            &mut run.net,
            &forge_plain(forged_data(i), &[0xEE; 1400]),
            addr_a(),
        );
        deliver(
            &mut run.net,
            &forge_sealed(forged_data(i), 3, &[0xEE; 1000], i as u8),
            addr_a(),
        );
    }
    // RST, plain and sealed-looking, for the live connection.
    let rst = Header {
        flags: Flags::RST,
        ..plain
    };
    deliver(&mut run.net, &forge_plain(rst, b"forged"), addr_a());
    deliver(&mut run.net, &forge_sealed(rst, 3, b"forged", 1), addr_a());
    // An unknown key id, and an ASYN for a new connection from another port.
    deliver(
        &mut run.net,
        &forge_sealed(forged_data(5), 77, b"x", 2),
        addr_a(),
    );
    let asyn = Header {
        flags: Flags::ASYN,
        src_port: plain.src_port.wrapping_add(1),
        tag: 9,
        seq: 0,
        ..plain
    };
    deliver(&mut run.net, &forge_plain(asyn, b"hi"), addr_a());
    deliver(&mut run.net, &forge_sealed(asyn, 3, b"hi", 3), addr_a());
    // The genuine TPDU again, from its address and from another one.
    deliver(&mut run.net, &genuine, addr_a());
    let other: SocketAddr = "10.0.0.66:4000".parse().unwrap();
    deliver(&mut run.net, &genuine, other);
    // And a datagram-mode message without a key.
    let dg = Header {
        mode: Mode::Datagram,
        tag: 0,
        ..forged_data(0)
    };
    deliver(&mut run.net, &forge_plain(dg, b"dgram"), other);

    assert_eq!(
        snapshot(&run.net, rx),
        before,
        "a forged TPDU changed the connection"
    );
    assert!(
        run.net.b.poll_event().is_none(),
        "a forged TPDU raised an event"
    );
    assert!(run.net.b.take_datagram().is_none());
    let s = &run.net.b.stats;
    assert_eq!(s.auth_dropped() - stats0.auth_dropped(), sent);
    assert_eq!(s.auth_missing - stats0.auth_missing, 300 + 1 + 1 + 1);
    assert_eq!(s.auth_failed - stats0.auth_failed, 300 + 1 + 1);
    assert_eq!(s.auth_unknown_key - stats0.auth_unknown_key, 1);
    assert_eq!(s.auth_replayed - stats0.auth_replayed, 2);
    let mut out = Vec::new();
    // Nothing was answered: no RST to the forger, no ASYNACK.
    let mut answers = 0;
    loop {
        out.clear();
        let Some(t) = run.net.b.poll_transmit(now, &mut out) else {
            break;
        };
        assert_eq!(t.remote, addr_a(), "the receiver answered a forger");
        answers += 1;
        assert!(answers < 10_000);
    }
    // The transfer carries on to an intact file.
    assert!(run.finish(Duration::from_secs(60)));
}

#[test]
fn wrong_key_peers_cannot_connect_and_rotation_lets_both_keys_in() {
    let old = AuthKey::new(1, [0x33; KEY_LEN]).unwrap();
    let new = AuthKey::new(2, [0x44; KEY_LEN]).unwrap();
    // Receiver holds new + old; a sender still on the old key gets through.
    let mut n = Net::new(7, Impair::default());
    n.a = Endpoint::new(ecfg(old.clone(), 1, true), 1);
    let mut rcfg = ecfg(new.clone(), 2, true);
    rcfg.auth.as_mut().unwrap().keys.previous = Some(old.clone());
    n.b = Endpoint::new(rcfg, 2);
    let mut run = Run::new(n, cfg(Mode::Reliable, FecSetting::Off), 50_000);
    assert!(run.finish(Duration::from_secs(30)));
    // After retiring the old key, a sender still on it is refused and the receiver opens nothing.
    let mut n = Net::new(8, Impair::default());
    n.a = Endpoint::new(ecfg(old.clone(), 1, true), 1);
    n.b = Endpoint::new(ecfg(new.clone(), 2, true), 2);
    let mut run = Run::new(n, cfg(Mode::Reliable, FecSetting::Off), 50_000);
    assert!(!run.finish(Duration::from_secs(5)));
    assert!(run.rx.is_none());
    assert!(run.net.b.stats.auth_unknown_key > 0);
    assert_eq!(run.net.b.connection_count(), 0);
    // Rotation on a live endpoint: set_keys.
    run.net
        .b
        .set_keys(&KeySet {
            current: new,
            previous: Some(old),
        })
        .unwrap();
    let mut plain = Endpoint::new(EndpointConfig::default(), 3);
    assert!(plain
        .set_keys(&KeySet {
            current: key(),
            previous: None
        })
        .is_err());
}

#[test]
fn a_keyless_endpoint_refuses_sealed_tpdus_and_a_keyed_one_refuses_plain() {
    let mut n = Net::new(9, Impair::default());
    n.a = Endpoint::new(ecfg(key(), 1, false), 1);
    let mut run = Run::new(n, cfg(Mode::Reliable, FecSetting::Off), 10_000);
    assert!(!run.finish(Duration::from_secs(3)));
    assert!(run.net.b.stats.auth_unexpected > 0);
    assert_eq!(run.net.b.connection_count(), 0);
    let mut n = Net::new(10, Impair::default());
    n.b = Endpoint::new(ecfg(key(), 2, false), 2);
    let mut run = Run::new(n, cfg(Mode::Reliable, FecSetting::Off), 10_000);
    assert!(!run.finish(Duration::from_secs(3)));
    assert!(run.net.b.stats.auth_missing > 0);
    assert_eq!(run.net.b.connection_count(), 0);
}
