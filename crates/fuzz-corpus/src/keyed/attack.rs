//! The attacker's datagrams of the keyed target: forgeries from recordings or from nothing,
//! high-parity datagrams, and the check of what a keyed endpoint sends.

use super::datagram::emit_any;
use super::{World, HIGH_PARITY_MAX, KEY_ID, PORT};
use crate::endpoint::check_body;
use crate::packet::addr;
use crate::script::Script;
use aerotp_fec as fec;
use aerotp_proto::{ConnectionHandle, Endpoint, Mode};
use aerotp_wire::{
    crc32c, parse_tpdu_any, Envelope, Flags, Header, AUTH_OVERHEAD, HEADER_LEN, OVERHEAD,
};
use std::net::SocketAddr;

/// Checks a datagram a keyed endpoint sent: an authenticated TPDU within `mtu`, CRC-32C and
/// parity trailer exact, an envelope sealed with [`KEY_ID`], encrypted as configured, and
/// (in clear) a body that parses as its flags say.
pub fn check_sealed(dg: &[u8], mtu: usize, encrypt: bool) {
    assert!(
        dg.len() <= mtu,
        "sent {} bytes over the MTU {mtu}",
        dg.len()
    );
    let (t, auth) = parse_tpdu_any(dg).expect("the engine sent a TPDU that does not parse");
    assert!(auth, "a keyed endpoint sent a TPDU without the AUTH bit");
    let n = t.body.len();
    let crc = &dg[HEADER_LEN + n..HEADER_LEN + n + 4];
    assert_eq!(
        crc,
        crc32c(t.body).to_be_bytes(),
        "the engine sent a sealed TPDU with a bad CRC"
    );
    let protected = OVERHEAD + n;
    if t.header.fec == 0 {
        assert_eq!(dg.len(), protected, "bytes after the CRC without FEC");
    } else {
        let l = fec::Layout::for_datagram(dg.len(), t.header.fec)
            .expect("parity trailer does not match the announced FEC");
        assert_eq!(
            l.protected_len, protected,
            "parity trailer of the wrong length"
        );
    }
    let env = Envelope::parse(t.body).expect("a sealed TPDU without a whole envelope");
    assert_eq!(
        env.key_id, KEY_ID,
        "sealed with a key id the endpoint lacks"
    );
    assert_eq!(env.encrypted, encrypt, "encryption other than configured");
    assert_eq!(env.body.len(), n - AUTH_OVERHEAD);
    if !encrypt {
        check_body(t.header.flags, env.body);
    }
}

impl World {
    /// An address the attacker spoofs (or owns).
    pub(super) fn attacker_addr(sel: u8) -> SocketAddr {
        addr(3 + sel % 2, 9000 + u16::from(sel >> 1))
    }

    /// Replays a run of recorded datagrams into their destination, from their own source or
    /// an address of the attacker's, one by one or as trains.
    pub(super) fn replay(&mut self, s: &mut Script) {
        let start = usize::from(s.u16());
        let how = s.u8();
        let spoof = s.u8();
        if self.recorded.is_empty() {
            return;
        }
        let n = usize::from(how % 16) + 1;
        let as_train = how & 0x80 != 0;
        let elsewhere = how & 0x40 != 0;
        let mut to_b = Vec::new();
        let mut to_a = Vec::new();
        for i in 0..n {
            let r = self.recorded[(start + i) % self.recorded.len()].clone();
            let from = if elsewhere {
                Self::attacker_addr(spoof)
            } else {
                r.from
            };
            self.sum.replayed += 1;
            if r.by_a {
                to_b.push((from, r));
            } else {
                to_a.push((from, r));
            }
        }
        self.arrive(true, to_b, as_train);
        self.arrive(false, to_a, as_train);
    }

    /// The `pick`-th (modulo their number) recorded datagram sent by A (`by_a`) or by B.
    pub(super) fn pick_recorded(&self, by_a: bool, pick: usize) -> Option<Vec<u8>> {
        let n = self.recorded.iter().filter(|r| r.by_a == by_a).count();
        (n > 0).then(|| {
            self.recorded
                .iter()
                .filter(|r| r.by_a == by_a)
                .nth(pick % n)
                .map(|r| r.dg.clone())
                .expect("n of them")
        })
    }

    /// The ports, tag and mode of one of `ep`'s connections, as its peer would send them.
    pub(super) fn conn_header(
        ep: &Endpoint,
        hs: &[ConnectionHandle],
        sel: u8,
    ) -> Option<(u16, u16, u8, Mode)> {
        Self::handle(hs, sel)
            .and_then(|h| ep.peer(h))
            .map(|p| (p.remote_port, p.local_port, p.tag, p.mode))
    }

    /// A datagram with parity up to 254 from A's address into B: a recorded one of A's
    /// re-encoded (the header's FEC byte is authenticated, so it no longer verifies) or a
    /// forged one, optionally damaged within what the parity corrects.
    pub(super) fn high_parity(&mut self, s: &mut Script) -> Vec<u8> {
        let mut p = 1 + s.u8() % 254;
        let pick = usize::from(s.u16());
        let damage = s.u8();
        let base = self.pick_recorded(true, pick).and_then(|r| {
            parse_tpdu_any(&r)
                .ok()
                .map(|(t, auth)| (t.header, t.body.to_vec(), auth))
        });
        let (mut h, body, auth) = base.unwrap_or_else(|| {
            let h = Header {
                mode: self.cfg.mode,
                flags: Flags::ASYN,
                src_port: s.u16(),
                dst_port: PORT,
                seq: 0,
                timestamp: 0,
                fec: 0,
                tag: s.u8(),
                len: 0,
            };
            let mut body = vec![Envelope::key_byte(KEY_ID, true)];
            body.extend_from_slice(s.bytes(64));
            body.resize(body.len().max(AUTH_OVERHEAD), 0);
            (h, body, self.keyed.is_some())
        });
        let protected = OVERHEAD + body.len();
        while p > 1
            && fec::Layout::for_protected(protected, p)
                .map_or(true, |l| l.datagram_len() > HIGH_PARITY_MAX)
        {
            p /= 2;
        }
        h.fec = p;
        let mut dg = emit_any(h, auth, &body);
        // Damage the parity can correct: up to p/2 bytes, so decoding runs in full.
        for i in 0..usize::from(damage % 8).min(usize::from(p / 2)) {
            if dg.is_empty() {
                break;
            }
            let pos = (usize::from(damage) * 131 + i * 977) % dg.len();
            dg[pos] ^= 0xA5;
        }
        dg
    }
}
