//! Admission of new connections: what keeps a flood of spoofed ASYNs from taking a listener's
//! connection slots (docs/security.md, "Half-open connections"; docs/spec.md §9).
//!
//! A connection a listener accepts is *half-open* until the initiator proves that it receives
//! what is sent to its address: the listener sends a CHALLENGE with a cookie and the initiator
//! echoes it. Only then does the application hear of the connection (`Event::Accepted`), so
//! nothing outside the engine — an output file, a gateway's TCP connection — is made for a
//! peer that may be spoofed. A half-open connection that is not proven within the set-up
//! timeout is dropped. When `max_half_open` connections are half-open, the listener answers
//! a new peer's TPDUs with a RETRY instead (the same TPDU, marked as keeping no state) and
//! admits the peer, proven, when its echo of that cookie comes back — QUIC's Retry, in
//! AeroTP's terms. With a pre-shared key every TPDU is authenticated and connections are
//! proven from their first TPDU.
//!
//! The cookie is stateless: 4 bytes of the listener's clock in seconds, then the first 12
//! bytes of HMAC-SHA-256 (ring) under a per-endpoint secret over that time, the peer's
//! address and port, the local port, the connection's tag and mode. It is valid for the
//! set-up timeout.

use aerotp_wire::{Mode, COOKIE_LEN};
use ring::hmac;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// A header as the connection's peer would send it: what a re-challenge answers (a CHALLENGE
/// always answers a TPDU from the peer; this stands in for one).
pub(crate) fn from_peer(c: &crate::connection::Connection) -> aerotp_wire::Header {
    aerotp_wire::Header {
        mode: c.mode(),
        flags: aerotp_wire::Flags::empty(),
        src_port: c.remote_port,
        dst_port: c.local_port,
        seq: 0,
        timestamp: 0,
        fec: 0,
        tag: c.tag,
        len: 0,
    }
}

/// (peer address, local port, peer port): a connection's identity without its tag.
pub(crate) type Key = (SocketAddr, u16, u16);

/// Peers that echoed a RETRY's cookie and may open a connection, remembered at most this many
/// (oldest forgotten first); about 64 bytes each.
const VALIDATED_LIMIT: usize = 4096;
/// First re-challenge of a half-open connection (the CHALLENGE or the ECHO may be lost);
/// the interval doubles up to `MAX_RECHALLENGE`, so a slot costs about 17 CHALLENGEs of 45
/// bytes over a 30 s set-up timeout.
const FIRST_RECHALLENGE: Duration = Duration::from_millis(250);
const MAX_RECHALLENGE: Duration = Duration::from_secs(2);
/// A half-open connection that has taken a second TPDU (new data, or a copy of its opening
/// one) is kept this many set-up timeouts from its start (`Admission::heard`).
const MAX_SETUP_TIMEOUTS: u32 = 4;
const MAC_LEN: usize = COOKIE_LEN - 4;

#[derive(Debug, Clone, Copy)]
struct HalfOpen {
    /// When it was opened.
    opened: Duration,
    /// Dropped at this time unless proven.
    expires: Duration,
    /// A TPDU from the peer at or after this time draws another CHALLENGE.
    next_challenge: Duration,
    wait: Duration,
}

/// The admission state of one endpoint. Connections are named by their endpoint handle's
/// number (`ConnectionHandle.0`).
#[derive(Debug)]
pub(crate) struct Admission {
    secret: hmac::Key,
    setup_timeout: Duration,
    max_half_open: usize,
    half_open: HashMap<u64, HalfOpen>,
    validated: HashMap<(Key, u8), Duration>,
    validated_order: VecDeque<(Key, u8)>,
}

impl Admission {
    /// `secret` comes from the endpoint's seeded generator: the same seed gives the same
    /// cookies.
    pub(crate) fn new(secret: [u8; 32], setup_timeout: Duration, max_half_open: usize) -> Self {
        Admission {
            secret: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            setup_timeout,
            max_half_open,
            half_open: HashMap::new(),
            validated: HashMap::new(),
            validated_order: VecDeque::new(),
        }
    }

    pub(crate) fn half_open_count(&self) -> usize {
        self.half_open.len()
    }

    /// Whether a new unproven connection may take a slot (otherwise: answer with a RETRY).
    pub(crate) fn has_room(&self) -> bool {
        self.half_open.len() < self.max_half_open
    }

    pub(crate) fn is_half_open(&self, conn: u64) -> bool {
        self.half_open.contains_key(&conn)
    }

    /// Records a new half-open connection (its first CHALLENGE goes now).
    pub(crate) fn open(&mut self, conn: u64, now: Duration) {
        self.half_open.insert(
            conn,
            HalfOpen {
                opened: now,
                expires: now + self.setup_timeout,
                next_challenge: now + FIRST_RECHALLENGE,
                wait: FIRST_RECHALLENGE,
            },
        );
    }

    /// The peer of the half-open connection `conn` sent it new data (a TPDU it did not have,
    /// not a resend) or its opening TPDU again (a copy: initiators send three, and resend it
    /// until answered): the slot is kept to its bound, `MAX_SETUP_TIMEOUTS` set-up timeouts
    /// from its opening. Its data has been acknowledged, and the peer has freed it: dropping
    /// the slot loses that data for good, so the peer's next TPDU opens a new connection that
    /// the peer must take for a restart, and reset. On a slow link the ECHO waits in the
    /// bottleneck's queue behind the first flight (ten 1500-byte TPDUs are 50 s at 2.4 kb/s),
    /// and an Iridium call drop (45-50 s) between two of its TPDUs outlasted the 30 s set-up
    /// time that each new TPDU used to restart: the ECHO arrived at 72 s, the slot had gone at
    /// 47 s; and a call drop just after the ASYN and its copies arrived left the slot only
    /// those, so it went at 30 s and the sender reset after the drop (2 of 20 seeds). A
    /// spoofer holds a slot this way two minutes at most with two TPDUs, where one costs it
    /// 30 s; the slots are bounded (`max_half_open`, then RETRYs that keep no state).
    pub(crate) fn heard(&mut self, conn: u64) {
        let timeout = self.setup_timeout;
        if let Some(h) = self.half_open.get_mut(&conn) {
            h.expires = h.expires.max(h.opened + timeout * MAX_SETUP_TIMEOUTS);
        }
    }

    /// The connection proved itself (or went away): it is no longer half-open.
    pub(crate) fn settle(&mut self, conn: u64) -> bool {
        self.half_open.remove(&conn).is_some()
    }

    /// The half-open connections to challenge again at `now` (each then waits twice as long
    /// for the next, up to `MAX_RECHALLENGE`).
    pub(crate) fn rechallenges_due(&mut self, now: Duration) -> Vec<u64> {
        let mut due = Vec::new();
        for (&c, h) in &mut self.half_open {
            if h.next_challenge <= now && now < h.expires {
                h.wait = (h.wait * 2).min(MAX_RECHALLENGE);
                h.next_challenge = now + h.wait;
                due.push(c);
            }
        }
        due.sort_unstable();
        due
    }

    /// The earliest time a half-open connection is to be challenged again or dropped.
    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        self.half_open
            .values()
            .map(|h| h.next_challenge.min(h.expires))
            .min()
    }

    /// Takes out the half-open connections whose set-up time is up at `now`.
    pub(crate) fn expired(&mut self, now: Duration) -> Vec<u64> {
        let gone: Vec<u64> = self
            .half_open
            .iter()
            .filter(|(_, h)| h.expires <= now)
            .map(|(&c, _)| c)
            .collect();
        for c in &gone {
            self.half_open.remove(c);
        }
        gone
    }

    /// A peer echoed a RETRY's cookie: its next TPDU may open a connection, proven.
    pub(crate) fn validate(&mut self, key: Key, tag: u8, now: Duration) {
        if self.validated.len() >= VALIDATED_LIMIT && !self.validated.contains_key(&(key, tag)) {
            if let Some(old) = self.validated_order.pop_front() {
                self.validated.remove(&old);
            }
        }
        if self
            .validated
            .insert((key, tag), now + self.setup_timeout)
            .is_none()
        {
            self.validated_order.push_back((key, tag));
        }
    }

    /// Whether the peer echoed a RETRY's cookie within the set-up timeout (consumed).
    pub(crate) fn take_validated(&mut self, key: Key, tag: u8, now: Duration) -> bool {
        match self.validated.remove(&(key, tag)) {
            Some(until) => {
                self.validated_order.retain(|k| *k != (key, tag));
                until >= now
            }
            None => false,
        }
    }

    /// The cookie for this peer and connection at `now`.
    pub(crate) fn cookie(&self, now: Duration, key: Key, tag: u8, mode: Mode) -> [u8; COOKIE_LEN] {
        let t = cookie_clock(now);
        let mut c = [0u8; COOKIE_LEN];
        c[..4].copy_from_slice(&t.to_be_bytes());
        c[4..].copy_from_slice(&self.mac(t, key, tag, mode).as_ref()[..MAC_LEN]);
        c
    }

    /// Whether `cookie` proves the half-open connection `conn`: made for this peer and
    /// connection since the connection opened, however long ago, as the slot itself is
    /// bounded (`heard`: at most `MAX_SETUP_TIMEOUTS` set-up timeouts). On a slow link the
    /// ECHO waits in the bottleneck's queue behind the first flight: at 2.4 kb/s ten
    /// 1500-byte TPDUs are 50 s, and a cookie good for the 30 s set-up timeout expired on
    /// the way every time, so the connection was never proven.
    pub(crate) fn check_half_open(
        &self,
        conn: u64,
        now: Duration,
        key: Key,
        tag: u8,
        mode: Mode,
        cookie: &[u8; COOKIE_LEN],
    ) -> bool {
        let Some(h) = self.half_open.get(&conn) else {
            return false;
        };
        let (t, opened) = (minted(cookie), cookie_clock(h.opened));
        // Minted in the opening's second or later, and not in the future.
        t.wrapping_sub(opened) <= cookie_clock(now).wrapping_sub(opened)
            && self.mac_matches(t, key, tag, mode, cookie)
    }

    /// Whether `cookie` is one this endpoint made for this peer and connection, no older than
    /// the set-up timeout.
    pub(crate) fn check(
        &self,
        now: Duration,
        key: Key,
        tag: u8,
        mode: Mode,
        cookie: &[u8; COOKIE_LEN],
    ) -> bool {
        let t = minted(cookie);
        // The clock wraps after 136 years; an age "from the future" is as bad as a stale one.
        let age = cookie_clock(now).wrapping_sub(t);
        if u64::from(age) > self.setup_timeout.as_secs() + 1 {
            return false;
        }
        self.mac_matches(t, key, tag, mode, cookie)
    }

    /// Whether `cookie`'s MAC is this endpoint's for time `t`, this peer and connection.
    fn mac_matches(
        &self,
        t: u32,
        key: Key,
        tag: u8,
        mode: Mode,
        cookie: &[u8; COOKIE_LEN],
    ) -> bool {
        let mac = self.mac(t, key, tag, mode);
        // Constant time: a forger learns nothing from how long the comparison took.
        let diff = mac.as_ref()[..MAC_LEN]
            .iter()
            .zip(&cookie[4..])
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        diff == 0
    }

    fn mac(&self, t: u32, key: Key, tag: u8, mode: Mode) -> hmac::Tag {
        let (addr, local, remote) = key;
        let mut ctx = hmac::Context::with_key(&self.secret);
        ctx.update(&t.to_be_bytes());
        match addr.ip() {
            std::net::IpAddr::V4(a) => {
                ctx.update(&[4]);
                ctx.update(&a.octets());
            }
            std::net::IpAddr::V6(a) => {
                ctx.update(&[6]);
                ctx.update(&a.octets());
            }
        }
        ctx.update(&addr.port().to_be_bytes());
        ctx.update(&local.to_be_bytes());
        ctx.update(&remote.to_be_bytes());
        ctx.update(&[tag, mode as u8]);
        ctx.sign()
    }
}

/// The cookies' clock: the listener's seconds, in 32 bits (wrapping after 136 years).
fn cookie_clock(t: Duration) -> u32 {
    (t.as_secs() & 0xFFFF_FFFF) as u32
}

/// When `cookie` says it was minted, on the cookies' clock.
fn minted(cookie: &[u8; COOKIE_LEN]) -> u32 {
    u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> Key {
        (SocketAddr::from(([127, 0, 0, 1], port)), 5000, 49152)
    }

    fn admission() -> Admission {
        Admission::new([3; 32], Duration::from_secs(30), 2)
    }

    #[test]
    fn a_cookie_checks_only_for_its_peer_connection_and_lifetime() {
        let a = admission();
        let now = Duration::from_secs(100);
        let c = a.cookie(now, key(1), 7, Mode::Reliable);
        assert!(a.check(now, key(1), 7, Mode::Reliable, &c));
        assert!(a.check(now + Duration::from_secs(31), key(1), 7, Mode::Reliable, &c));
        assert!(!a.check(now + Duration::from_secs(33), key(1), 7, Mode::Reliable, &c));
        assert!(!a.check(now - Duration::from_secs(2), key(1), 7, Mode::Reliable, &c));
        assert!(!a.check(now, key(2), 7, Mode::Reliable, &c));
        assert!(!a.check(now, key(1), 8, Mode::Reliable, &c));
        assert!(!a.check(now, key(1), 7, Mode::QuasiReliable, &c));
        for i in 0..COOKIE_LEN {
            let mut bad = c;
            bad[i] ^= 1;
            assert!(!a.check(now, key(1), 7, Mode::Reliable, &bad), "byte {i}");
        }
        // Another endpoint's secret makes other cookies.
        let b = Admission::new([4; 32], Duration::from_secs(30), 2);
        assert!(!b.check(now, key(1), 7, Mode::Reliable, &c));
    }

    #[test]
    fn a_half_open_connection_takes_its_cookies_from_its_opening_on_however_late() {
        let mut a = admission();
        let opened = Duration::from_millis(2_900);
        a.open(5, opened);
        let first = a.cookie(opened, key(1), 7, Mode::Reliable);
        // The ECHO waited 55 s behind a first flight at 2.4 kb/s: past the set-up timeout,
        // still the slot's own cookie.
        let late = opened + Duration::from_secs(55);
        assert!(!a.check(late, key(1), 7, Mode::Reliable, &first));
        assert!(a.check_half_open(5, late, key(1), 7, Mode::Reliable, &first));
        // The same second as the opening, a later re-challenge's cookie, and nothing else.
        let next = a.cookie(
            opened + Duration::from_millis(200),
            key(1),
            7,
            Mode::Reliable,
        );
        assert!(a.check_half_open(
            5,
            opened + Duration::from_millis(300),
            key(1),
            7,
            Mode::Reliable,
            &next
        ));
        let before = a.cookie(opened - Duration::from_secs(2), key(1), 7, Mode::Reliable);
        assert!(!a.check_half_open(5, late, key(1), 7, Mode::Reliable, &before));
        let future = a.cookie(late + Duration::from_secs(5), key(1), 7, Mode::Reliable);
        assert!(!a.check_half_open(5, late, key(1), 7, Mode::Reliable, &future));
        assert!(!a.check_half_open(5, late, key(2), 7, Mode::Reliable, &first));
        assert!(!a.check_half_open(6, late, key(1), 7, Mode::Reliable, &first));
        let mut bad = first;
        bad[5] ^= 1;
        assert!(!a.check_half_open(5, late, key(1), 7, Mode::Reliable, &bad));
        // A settled or expired slot proves nothing more.
        a.settle(5);
        assert!(!a.check_half_open(5, late, key(1), 7, Mode::Reliable, &first));
    }

    #[test]
    fn half_open_slots_expire_and_rechallenges_back_off() {
        let mut a = admission();
        let t0 = Duration::from_secs(1);
        a.open(1, t0);
        assert!(a.has_room());
        a.open(2, t0 + Duration::from_secs(1));
        assert!(!a.has_room());
        assert_eq!(a.next_deadline(), Some(t0 + Duration::from_millis(250)));
        assert!(a
            .rechallenges_due(t0 + Duration::from_millis(100))
            .is_empty());
        assert_eq!(a.rechallenges_due(t0 + Duration::from_millis(250)), vec![1]);
        assert!(a
            .rechallenges_due(t0 + Duration::from_millis(600))
            .is_empty());
        assert_eq!(a.rechallenges_due(t0 + Duration::from_millis(750)), vec![1]);
        let mut n = 2;
        while let Some(t) = a
            .next_deadline()
            .filter(|d| *d < t0 + Duration::from_secs(30))
        {
            n += a.rechallenges_due(t).iter().filter(|c| **c == 1).count();
            assert!(a.expired(t).is_empty());
        }
        assert!(n <= 17, "{n} challenges in the set-up timeout");
        assert!(a.expired(t0 + Duration::from_secs(29)).is_empty());
        assert_eq!(a.expired(t0 + Duration::from_secs(30)), vec![1]);
        assert!(a.is_half_open(2) && !a.is_half_open(1));
        assert!(a.settle(2));
        assert_eq!(a.half_open_count(), 0);
        assert_eq!(a.next_deadline(), None);
    }

    #[test]
    fn validated_peers_are_bounded_and_used_once() {
        let mut a = admission();
        let now = Duration::from_secs(5);
        for p in 0..(VALIDATED_LIMIT as u16 + 10) {
            a.validate(key(p), 1, now);
        }
        assert_eq!(a.validated.len(), VALIDATED_LIMIT);
        assert!(
            !a.take_validated(key(0), 1, now),
            "the oldest was forgotten"
        );
        let last = key(VALIDATED_LIMIT as u16 + 9);
        assert!(
            !a.take_validated(last, 1, now + Duration::from_secs(31)),
            "stale"
        );
        a.validate(last, 1, now);
        assert!(a.take_validated(last, 1, now));
        assert!(!a.take_validated(last, 1, now), "used once");
    }
}
